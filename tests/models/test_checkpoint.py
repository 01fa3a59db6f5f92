"""Checkpoint loading/export: names, streaming placement, round trips, errors."""

from __future__ import annotations

import json
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rcca_jax import sharding
from rcca_jax.models import CheckpointError, from_pretrained, save_pretrained
from rcca_jax.models.safetensors_io import SafetensorsFile, save_file
from tests.models import reference

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def ref_a(tmp_path_factory):
    return reference.save("a", tmp_path_factory.mktemp("hf"))


def test_export_loads_in_transformers_with_same_logits(ref_a, tmp_path):
    from transformers import BailingHybridForCausalLM

    ref, path = ref_a
    ours = from_pretrained(path)
    save_pretrained(ours, tmp_path / "out", max_shard_bytes=64 << 10)
    index = json.loads((tmp_path / "out" / "model.safetensors.index.json").read_text())
    assert len(set(index["weight_map"].values())) > 1, "expected a sharded export"
    back = BailingHybridForCausalLM.from_pretrained(tmp_path / "out").eval()
    toks = reference.tokens(ref.config.vocab_size, (2, 11))
    with torch.no_grad():
        want = ref(torch.tensor(toks.astype(np.int64))).logits.numpy()
        got = back(torch.tensor(toks.astype(np.int64))).logits.numpy()
    np.testing.assert_array_equal(got, want)
    again = from_pretrained(tmp_path / "out")
    np.testing.assert_array_equal(np.asarray(again(jnp.asarray(toks))), np.asarray(ours(jnp.asarray(toks))))


def test_load_places_shards_on_mesh(ref_a):
    ref, path = ref_a
    mesh = sharding.make_mesh({"fsdp": 2, "expert": 4})
    model = from_pretrained(path, mesh=mesh)
    w = model.layers[1].mlp.w_gate[...]
    assert w.sharding.spec[0] == "expert" and len(w.addressable_shards) == 8
    assert w.addressable_shards[0].data.shape[0] == ref.config.num_local_experts // 4
    plain = from_pretrained(path)
    np.testing.assert_array_equal(np.asarray(w), np.asarray(plain.layers[1].mlp.w_gate[...]))
    # A scanned group position's parameter [N, E, D, F]: the group axis is whole on every
    # device, and row g holds layer 2 + 2g + 1's released tensors (prefix 2, groups of 2).
    s = model.layer_groups[1].mlp.w_gate[...]
    assert tuple(s.sharding.spec)[:2] == (None, "expert") and len(s.addressable_shards) == 8
    assert s.addressable_shards[0].data.shape[:2] == (2, ref.config.num_local_experts // 4)
    released = {}
    for f in sorted(path.glob("*.safetensors")):
        st = SafetensorsFile(f)
        released.update({k: np.array(st.get(k)) for k in st.keys()})
    for g in range(2):
        for e in (0, 5):
            np.testing.assert_array_equal(
                np.asarray(s[g, e]), released[f"model.layers.{3 + 2 * g}.mlp.experts.{e}.gate_proj.weight"].T)


def test_bfloat16_load_keeps_fp32_gates(ref_a):
    _, path = ref_a
    model = from_pretrained(path, dtype=jnp.bfloat16)
    assert model.layers[0].attn.q_proj.kernel[...].dtype == jnp.bfloat16
    assert model.layers[0].attn.A_log[...].dtype == jnp.float32
    assert model.layers[1].mlp.expert_bias[...].dtype == jnp.float32
    group = model.layer_groups[0]  # stacked KDA + MoE layers 2 and 4
    assert group.attn.q_proj.kernel[...].dtype == jnp.bfloat16 and group.mlp.w_up[...].dtype == jnp.bfloat16
    assert group.attn.A_log[...].dtype == jnp.float32 and group.mlp.expert_bias[...].dtype == jnp.float32
    logits = model(jnp.asarray(reference.tokens(96, (1, 8))))
    assert bool(jnp.isfinite(logits).all())


def _single_file_copy(path, dst, edit):
    tensors = {}
    for f in sorted(path.glob("*.safetensors")):
        st = SafetensorsFile(f)
        tensors.update({k: np.array(st.get(k)) for k in st.keys()})
    edit(tensors)
    dst.mkdir()
    shutil.copy(path / "config.json", dst / "config.json")
    save_file(tensors, dst / "model.safetensors")
    return dst


def test_missing_and_unknown_names_are_listed(ref_a, tmp_path):
    _, path = ref_a

    def edit(t):
        t.pop("model.layers.1.mlp.experts.3.up_proj.weight")
        t["model.layers.0.attention.surprise.weight"] = np.zeros((2, 2), np.float32)

    bad = _single_file_copy(path, tmp_path / "bad", edit)
    with pytest.raises(CheckpointError) as e:
        from_pretrained(bad)
    msg = str(e.value)
    assert "model.layers.1.mlp.experts.3.up_proj.weight" in msg and "missing" in msg
    assert "model.layers.0.attention.surprise.weight" in msg and "unknown" in msg


def test_wrong_shape_names_tensor(ref_a, tmp_path):
    _, path = ref_a

    def edit(t):
        t["model.norm.weight"] = np.ones((7,), np.float32)

    bad = _single_file_copy(path, tmp_path / "bad", edit)
    with pytest.raises(CheckpointError, match="model.norm.weight"):
        from_pretrained(bad)


def test_mtp_tensors_are_skipped_only_when_declared(ref_a, tmp_path):
    _, path = ref_a

    def edit(t):
        t["model.layers.6.eh_proj.weight"] = np.zeros((2, 2), np.float32)

    extra = _single_file_copy(path, tmp_path / "mtp", edit)
    with pytest.raises(CheckpointError, match="layers.6.eh_proj"):
        from_pretrained(extra)
    cfg = json.loads((extra / "config.json").read_text())
    cfg["num_nextn_predict_layers"] = 1
    (extra / "config.json").write_text(json.dumps(cfg))
    from_pretrained(extra)  # no error
    assert jax.devices()
