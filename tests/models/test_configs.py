"""Every config file loads, validates and builds abstractly; parameter counts."""

from __future__ import annotations

from pathlib import Path

import jax
import pytest
from flax import nnx

from rcca_jax import configs
from rcca_jax.models import Ling, LingConfig, param_counts

CONFIG_DIR = Path(__file__).resolve().parents[2] / "configs"
FILES = sorted(CONFIG_DIR.glob("*.py"))


def test_there_are_config_files():
    assert {"ling_flash.py", "ling_tiny.py"} <= {p.name for p in FILES}


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_config_loads_and_builds_abstractly(path):
    cd = configs.load(str(path))
    assert path.read_text().lstrip().startswith('"""'), "config files open with a docstring"
    cfg = configs.model_config(cd.model)
    abstract = nnx.eval_shape(lambda: Ling(cfg, nnx.Rngs(0)))
    n = sum(v.get_value().size for _, v in nnx.to_flat_state(nnx.state(abstract)))
    counts = param_counts(cfg)
    assert n == counts["total"]
    tokens = jax.ShapeDtypeStruct((2, 16), jax.numpy.int32)
    out = nnx.eval_shape(lambda m, t: m(t), abstract, tokens)
    assert out.shape == (2, 16, cfg.vocab_size)


def test_ling_flash_counts():
    counts = param_counts(configs.model_config(configs.load(str(CONFIG_DIR / "ling_flash.py")).model))
    assert 123.5e9 < counts["total"] < 125e9
    assert 5.0e9 < counts["active"] < 5.2e9
    assert LingConfig().layer_types.count("full_attention") == 7  # 5:1 KDA:MLA over 42 layers


def test_bad_config_fields_are_named():
    with pytest.raises(configs.ConfigError, match="hidden_sise"):
        configs.model_config({"hidden_sise": 3})
    with pytest.raises(configs.ConfigError, match="n_group"):
        configs.model_config({"num_experts": 10, "n_group": 4})
    with pytest.raises(configs.ConfigError, match="at most one axis"):
        configs.mesh_shape({"data": -1, "fsdp": -1}, 8)
    assert configs.mesh_shape({"data": 2, "fsdp": -1}, 8) == {"data": 2, "fsdp": 4}
