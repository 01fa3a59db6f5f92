"""Scanned layer groups (`scan_layers`, the default) equal the unrolled layers.

Both layouts build the same weights from the same seed, so every check compares the
same model run two ways: logits, expert loads, gradients (with and without remat),
greedy tokens and cached decoding, a sharded forward, and released-format export and
load (the files are byte-identical, each layout loads the other's).
"""

from __future__ import annotations

import filecmp

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from jax.sharding import NamedSharding

from rcca_jax import sharding
from rcca_jax.models import Ling, LingConfig, from_pretrained, save_pretrained
from rcca_jax.models.config import FULL, LINEAR, SPARSE
from rcca_jax.models.decode import greedy
from rcca_jax.models.stack import LayerSplit, expert_bias_rows, layer_split, layer_view

# 8 layers, groups of 2 (KDA, MLA), one dense layer: a prefix of 2, then 3 scanned groups.
CFG = LingConfig(vocab_size=96, hidden_size=32, intermediate_size=48, moe_intermediate_size=16,
                 num_layers=8, num_heads=2, kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=16,
                 v_head_dim=16, linear_head_dim=16, num_experts=8, num_experts_per_tok=2, n_group=2,
                 topk_group=1, first_k_dense_replace=1, layer_group_size=2, kda_chunk_size=8,
                 attn_block=8, initializer_range=0.15)
UNROLLED = CFG.replace(scan_layers=False)
# float32, the same weights: the two programs differ only in XLA's fusion and order.
ATOL = 1e-5


def _tokens(shape, seed=0):
    return jnp.asarray(np.random.RandomState(seed).randint(0, CFG.vocab_size, shape).astype(np.int32))


@pytest.fixture(scope="module")
def models():
    return Ling(CFG, nnx.Rngs(0)), Ling(UNROLLED, nnx.Rngs(0))


def _by_layer(model: Ling) -> dict[tuple, np.ndarray]:
    """Every variable under its unrolled path, a stacked one row by row."""
    split = layer_split(model.cfg)
    return {p: np.asarray(v.get_value() if g is None else v.get_value()[g])
            for p, v, g in layer_view(nnx.state(model), split)}


def test_split_is_the_shortest_prefix_before_a_repeating_tail():
    assert layer_split(CFG) == LayerSplit(prefix=2, period=2, groups=3)
    assert layer_split(LingConfig()) == LayerSplit(prefix=6, period=6, groups=6)  # ling_flash
    assert layer_split(LingConfig(first_k_dense_replace=7)) == LayerSplit(12, 6, 5)
    assert layer_split(LingConfig(first_k_dense_replace=0)) == LayerSplit(0, 6, 7)
    assert layer_split(UNROLLED) == LayerSplit(8, 0, 0)
    # One repeat saves nothing (prefix + one group = every layer): unrolled.
    assert layer_split(CFG.replace(num_layers=4, layer_types=None, mlp_layer_types=None)) == LayerSplit(4, 0, 0)
    # A tail that does not repeat (two MLA layers out of pattern): unrolled.
    odd = CFG.replace(layer_types=(LINEAR, FULL) * 3 + (FULL, LINEAR))
    assert layer_split(odd) == LayerSplit(8, 0, 0)
    # The period comes from the kinds, not from layer_group_size (2 here).
    three = CFG.replace(num_layers=9, layer_types=(LINEAR, LINEAR, FULL) * 3, mlp_layer_types=(SPARSE,) * 9)
    assert layer_split(three) == LayerSplit(0, 3, 3)


def test_same_weights_and_logits_as_unrolled(models):
    scan, plain = models
    assert scan.layer_groups is not None and len(scan.layers) == 2 and plain.layer_groups is None
    got, want = _by_layer(scan), {p: np.asarray(v.get_value()) for p, v in nnx.to_flat_state(nnx.state(plain))}
    assert list(got) == list(want)  # the unrolled model's paths, in its order
    for p in want:
        np.testing.assert_array_equal(got[p], want[p], err_msg=str(p))
    toks = _tokens((3, 21))
    fwd = nnx.jit(lambda m, t: (m(t), m.hidden(t)[2]["expert_load"]))
    (logits_s, load_s), (logits_p, load_p) = fwd(scan, toks), fwd(plain, toks)
    assert np.abs(np.asarray(logits_p)).max() > 0.5
    np.testing.assert_allclose(np.asarray(logits_s), np.asarray(logits_p), atol=ATOL, rtol=0)
    assert load_s.shape == (7, CFG.num_experts)  # every MoE layer, in layer order
    np.testing.assert_array_equal(np.asarray(load_s), np.asarray(load_p))


@pytest.mark.parametrize("remat", [False, True])
def test_gradients_equal_unrolled(models, remat):
    toks = _tokens((2, 17), seed=1)

    def grads(model):
        graphdef, params, rest = nnx.split(model, nnx.Param, ...)

        def loss(p):
            logits = nnx.merge(graphdef, p, rest)(toks)
            return jnp.mean(jax.nn.logsumexp(logits, -1) - logits[..., 3])

        return jax.jit(jax.value_and_grad(loss))(params)

    scan, plain = models if not remat else (Ling(CFG.replace(remat=True), nnx.Rngs(0)),
                                            Ling(UNROLLED.replace(remat=True), nnx.Rngs(0)))
    (loss_s, g_s), (loss_p, g_p) = grads(scan), grads(plain)
    np.testing.assert_allclose(float(loss_s), float(loss_p), atol=1e-6, rtol=0)
    split = layer_split(CFG)
    got = {p: np.asarray(v.get_value() if g is None else v.get_value()[g])
           for p, v, g in layer_view(g_s, split)}
    want = {p: np.asarray(v.get_value()) for p, v in nnx.to_flat_state(g_p)}
    assert got.keys() == want.keys()
    for p in want:
        np.testing.assert_allclose(got[p], want[p], atol=2e-6, rtol=1e-4, err_msg=str(p))


def test_greedy_and_cached_decoding_equal_unrolled(models):
    scan, plain = models
    prompt = _tokens((2, 7), seed=2)
    np.testing.assert_array_equal(np.asarray(greedy(scan, prompt, 24)), np.asarray(greedy(plain, prompt, 24)))
    cache = scan.init_cache(2, 32)
    assert len(cache["layers"]) == 2 and len(cache["groups"]) == 2
    assert cache["groups"][1]["c"].shape == (3, 2, 32, CFG.kv_lora_rank)  # [N, B, S, L]
    toks = _tokens((2, 23), seed=3)
    step = nnx.jit(lambda m, t, c: m.step(t, c))
    caches = [scan.init_cache(2, 32), plain.init_cache(2, 32)]
    for a, b in ((0, 9), (9, 10), (10, 23)):
        (ls, caches[0]), (lp, caches[1]) = step(scan, toks[:, a:b], caches[0]), step(plain, toks[:, a:b], caches[1])
        np.testing.assert_allclose(np.asarray(ls), np.asarray(lp), atol=ATOL, rtol=0)
    # Group position j's cache row g is layer prefix + 2g + j's cache.
    for g in range(3):
        for j in range(2):
            mine = jax.tree.map(lambda a: np.asarray(a[g]), caches[0]["groups"][j])
            theirs = jax.tree.map(np.asarray, caches[1]["layers"][2 + 2 * g + j])
            jax.tree.map(lambda x, y: np.testing.assert_allclose(x, y, atol=ATOL, rtol=0), mine, theirs)


def test_sharded_scan_equals_sharded_unrolled():
    """On a mesh (expert-parallel dropless dispatch in shard_map, inside the scan)."""
    mesh = sharding.make_mesh({"data": 2, "fsdp": 2, "expert": 2})
    toks = jax.device_put(_tokens((8, 16), seed=4), NamedSharding(mesh, sharding.spec(("batch", None), mesh=mesh)))

    @nnx.jit
    def fwd(m, t):
        with sharding.use_mesh(mesh):
            return m(t)

    scan, plain = (sharding.shard_model(Ling(cfg, nnx.Rngs(0)), mesh) for cfg in (CFG, UNROLLED))
    w = scan.layer_groups[0].mlp.w_gate[...]  # [N, E, D, F]: the group axis is never sharded
    assert w.shape[0] == 3 and tuple(w.sharding.spec)[:3] == (None, "expert", "fsdp")
    np.testing.assert_allclose(np.asarray(fwd(scan, toks)), np.asarray(fwd(plain, toks)), atol=ATOL, rtol=0)


def test_expert_bias_rows_follow_layer_order(models):
    scan, plain = models
    rows = expert_bias_rows(nnx.state(scan))
    assert rows[("layers", 1, "mlp", "expert_bias")] == 0
    np.testing.assert_array_equal(rows[("layer_groups", 0, "mlp", "expert_bias")], [1, 3, 5])
    np.testing.assert_array_equal(rows[("layer_groups", 1, "mlp", "expert_bias")], [2, 4, 6])
    assert sorted(expert_bias_rows(nnx.state(plain)).values()) == list(range(7))


def test_export_is_the_same_files_and_loads_either_way(models, tmp_path):
    scan, plain = models
    save_pretrained(scan, tmp_path / "scan", max_shard_bytes=64 << 10)
    save_pretrained(plain, tmp_path / "plain", max_shard_bytes=64 << 10)
    files = sorted(p.name for p in (tmp_path / "scan").iterdir())
    assert len(files) > 3 and files == sorted(p.name for p in (tmp_path / "plain").iterdir())
    for f in files:
        assert filecmp.cmp(tmp_path / "scan" / f, tmp_path / "plain" / f, shallow=False), f
    want = _by_layer(plain)
    for layout in (True, False):
        back = from_pretrained(tmp_path / "plain", scan_layers=layout)
        assert (back.layer_groups is not None) == layout
        got = _by_layer(back)
        assert got.keys() == want.keys()
        for p in want:
            np.testing.assert_array_equal(got[p], want[p], err_msg=str(p))


def test_load_places_stacked_shards(models, tmp_path):
    scan, _ = models
    save_pretrained(scan, tmp_path / "ckpt")
    mesh = sharding.make_mesh({"fsdp": 2, "expert": 4})
    model = from_pretrained(tmp_path / "ckpt", mesh=mesh)
    w = model.layer_groups[0].mlp.w_gate[...]  # [N, E, D, F]
    assert tuple(w.sharding.spec)[:3] == (None, "expert", "fsdp") and len(w.addressable_shards) == 8
    assert w.addressable_shards[0].data.shape == (3, CFG.num_experts // 4, CFG.hidden_size // 2,
                                                  CFG.moe_intermediate_size)
    np.testing.assert_array_equal(np.asarray(w), np.asarray(scan.layer_groups[0].mlp.w_gate[...]))
