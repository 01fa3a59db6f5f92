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
    assert n == counts["total"] + (counts["mtp"] if cfg.mtp else 0)
    tokens = jax.ShapeDtypeStruct((2, 16), jax.numpy.int32)
    out = nnx.eval_shape(lambda m, t: m(t), abstract, tokens)
    assert out.shape == (2, 16, cfg.vocab_size)


def test_ling_flash_counts():
    counts = param_counts(configs.model_config(configs.load(str(CONFIG_DIR / "ling_flash.py")).model))
    assert 123.5e9 < counts["total"] < 125e9
    assert 5.0e9 < counts["active"] < 5.2e9
    assert counts["mtp"] == counts["mtp_active"] == 0  # ling_flash builds no MTP module
    assert LingConfig().layer_types.count("full_attention") == 7  # 5:1 KDA:MLA over 42 layers


def test_mtp_counts_match_the_built_modules():
    cfg = LingConfig(vocab_size=64, hidden_size=32, intermediate_size=48, moe_intermediate_size=16,
                     num_layers=2, num_heads=2, kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=16,
                     v_head_dim=16, linear_head_dim=16, num_experts=8, num_experts_per_tok=2, n_group=2,
                     topk_group=1, first_k_dense_replace=1, layer_group_size=2, num_mtp_layers=2,
                     mtp=True, mtp_loss_scaling_factor=0.1)
    model = nnx.eval_shape(lambda: Ling(cfg, nnx.Rngs(0)))
    size = lambda st: sum(v.get_value().size for _, v in nnx.to_flat_state(st))  # noqa: E731
    counts = param_counts(cfg)
    assert size(nnx.state(model.mtp_layers)) == counts["mtp"]
    assert counts["total"] == param_counts(cfg.replace(mtp=False))["total"]
    assert counts["mtp"] - counts["mtp_active"] == 2 * (8 - 2) * counts["per_expert"]
    back = LingConfig.from_hf_dict(cfg.to_hf_dict())
    assert (back.num_mtp_layers, back.mtp_loss_scaling_factor, back.mtp) == (2, 0.1, False)
    assert back.replace(mtp=True) == cfg


def test_bad_config_fields_are_named():
    with pytest.raises(configs.ConfigError, match="hidden_sise"):
        configs.model_config({"hidden_sise": 3})
    with pytest.raises(configs.ConfigError, match="n_group"):
        configs.model_config({"num_experts": 10, "n_group": 4})
    with pytest.raises(configs.ConfigError, match="at most one axis"):
        configs.mesh_shape({"data": -1, "fsdp": -1}, 8)
    assert configs.mesh_shape({"data": 2, "fsdp": -1}, 8) == {"data": 2, "fsdp": 4}
