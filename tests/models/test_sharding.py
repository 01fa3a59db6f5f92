"""Sharded runs on 8 fake CPU devices equal the unsharded run, forward and gradients."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from jax.sharding import NamedSharding

from rcca_jax import sharding
from rcca_jax.models import Ling, LingConfig

# 6 layers: a prefix of 2 (one dense), then 2 scanned groups of (KDA, MLA).
CFG = LingConfig(vocab_size=96, hidden_size=32, intermediate_size=48, moe_intermediate_size=16,
                 num_layers=6, num_heads=2, kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=16,
                 v_head_dim=16, linear_head_dim=16, num_experts=8, num_experts_per_tok=2, n_group=2,
                 topk_group=1, first_k_dense_replace=1, layer_group_size=2, kda_chunk_size=8,
                 initializer_range=0.15)

_SLOW = pytest.mark.slow
LAYOUTS = [
    pytest.param({"data": 8}, marks=_SLOW),
    pytest.param({"fsdp": 8}, marks=_SLOW),
    {"expert": 8},
    pytest.param({"tensor": 2, "fsdp": 4}, marks=_SLOW),
    {"data": 2, "fsdp": 2, "expert": 2},
    {"expert": 4, "tensor": 2},
]


def _loss(model: Ling, tokens):
    logits = model(tokens)
    return jnp.mean(jax.nn.logsumexp(logits, -1) - logits[..., 0])


def _run(cfg: LingConfig, tokens: np.ndarray, mesh=None):
    model = Ling(cfg, nnx.Rngs(0))
    toks = jnp.asarray(tokens)
    if mesh is not None:
        sharding.shard_model(model, mesh)
        toks = jax.device_put(toks, NamedSharding(mesh, sharding.spec(("batch", None), mesh=mesh)))

    @nnx.jit
    def fwd_bwd(model, toks):
        with sharding.use_mesh(mesh):
            return nnx.value_and_grad(_loss)(model, toks), model(toks)

    with sharding.use_mesh(mesh):
        (loss, grads), logits = fwd_bwd(model, toks)
    flat = {p: np.asarray(v.get_value()) for p, v in nnx.to_flat_state(grads)}
    return float(loss), np.asarray(logits), flat


@pytest.fixture(scope="module")
def tokens():
    return np.random.RandomState(0).randint(0, CFG.vocab_size, size=(8, 16)).astype(np.int32)


@pytest.fixture(scope="module", params=["dropless", "capacity"])
def unsharded(request, tokens):
    cfg = CFG.replace(moe_dispatch=request.param, capacity_factor=4.0)
    return cfg, _run(cfg, tokens)


def test_eight_devices_are_there():
    assert len(jax.devices()) == 8, "tests/conftest.py must set 8 fake host devices"


def _id(d):
    return "-".join(f"{k}{v}" for k, v in d.items())


@pytest.mark.parametrize("layout", LAYOUTS, ids=_id)
def test_sharded_equals_unsharded(unsharded, tokens, layout):
    cfg, (loss0, logits0, grads0) = unsharded
    mesh = sharding.make_mesh(layout)
    loss, logits, grads = _run(cfg, tokens, mesh)
    np.testing.assert_allclose(logits, logits0, atol=2e-5, rtol=0)
    assert abs(loss - loss0) < 1e-5
    assert grads.keys() == grads0.keys()
    for p in grads0:
        np.testing.assert_allclose(grads[p], grads0[p], atol=2e-6, rtol=1e-4, err_msg=str(p))


def test_moe_paths_agree_when_nothing_dropped(tokens):
    _, logits_a, grads_a = _run(CFG, tokens)
    _, logits_b, grads_b = _run(CFG.replace(moe_dispatch="capacity", capacity_factor=4.0), tokens)
    np.testing.assert_allclose(logits_b, logits_a, atol=2e-5, rtol=0)
    for p in grads_a:
        np.testing.assert_allclose(grads_b[p], grads_a[p], atol=2e-6, rtol=1e-4, err_msg=str(p))


def test_capacity_path_drops_when_full(tokens):
    """A capacity below demand must change the output (the drop is real, not silent padding)."""
    _, logits_a, _ = _run(CFG, tokens)
    _, logits_b, _ = _run(CFG.replace(moe_dispatch="capacity", capacity_factor=0.25), tokens)
    assert np.abs(logits_b - logits_a).max() > 1e-3


def test_parameter_shardings_follow_rules():
    mesh = sharding.make_mesh({"fsdp": 2, "expert": 2, "tensor": 2})
    abstract = nnx.eval_shape(lambda: Ling(CFG, nnx.Rngs(0)))
    shard = dict(nnx.to_flat_state(sharding.state_shardings(nnx.state(abstract), mesh)))
    w_gate = shard[("layers", 1, "mlp", "w_gate")].get_value().spec
    assert tuple(w_gate) == ("expert", "fsdp", "tensor")
    q = shard[("layers", 0, "attn", "q_proj", "kernel")].get_value().spec
    assert tuple(q) == ("fsdp", "tensor")
    # Stacked group parameters: the leading group axis ("layers") is never sharded.
    stacked = shard[("layer_groups", 0, "mlp", "w_gate")].get_value().spec
    assert tuple(stacked) == (None, "expert", "fsdp", "tensor")
    kv = shard[("layer_groups", 1, "attn", "kv_b_proj", "kernel")].get_value().spec
    assert tuple(kv) == (None, None, "tensor")


def test_remat_changes_nothing_but_memory(tokens):
    _, logits_a, grads_a = _run(CFG, tokens)
    _, logits_b, grads_b = _run(CFG.replace(remat=True), tokens)
    np.testing.assert_allclose(logits_b, logits_a, atol=1e-6, rtol=0)
    # Recomputed activations are fused differently, so gradients differ at fp32 rounding that
    # grows with depth: 3e-6 on embed_tokens (largest gradient 0.48) at these 6 layers, the same
    # scanned or unrolled. A remat bug (wrong saved value, wrong state) is O(gradient) off.
    scale = max(float(np.abs(g).max()) for g in grads_a.values())
    for p in grads_a:
        np.testing.assert_allclose(grads_b[p], grads_a[p], atol=1e-5 * scale, rtol=1e-5, err_msg=str(p))
