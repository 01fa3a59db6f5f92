"""Multi-token prediction: checkpoint names and round trips, an independent
re-computation of the depth-1 logits with transformers' own decoder layer, and
the SFT auxiliary loss.

The MTP checkpoint is built from two transformers references: the main model
(seed 0) and, as the MTP block, the MLA + MoE layer 3 of a second reference
(seed 1) saved under layer num_hidden_layers, plus random enorm, hnorm,
eh_proj and final_layernorm tensors.
"""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from rcca_jax.models import CheckpointError, Ling, LingConfig, from_pretrained, save_pretrained
from rcca_jax.models.safetensors_io import SafetensorsFile, save_file
from tests.models import reference

torch = pytest.importorskip("torch")

ATOL = 1e-4
MTP_OWN = ("enorm.weight", "hnorm.weight", "eh_proj.weight", "final_layernorm.weight")


def _tensors(path) -> dict[str, np.ndarray]:
    out = {}
    for f in sorted(path.glob("*.safetensors")):
        st = SafetensorsFile(f)
        out.update({k: np.array(st.get(k)) for k in st.keys()})
    return out


def _write(dst, tensors, config: dict):
    dst.mkdir()
    (dst / "config.json").write_text(json.dumps(config))
    save_file(tensors, dst / "model.safetensors")
    return dst


@pytest.fixture(scope="module")
def mtp_ckpt(tmp_path_factory):
    """(main reference, block reference, checkpoint path, its tensors, the block's names)."""
    root = tmp_path_factory.mktemp("mtp")
    ref, path = reference.save("a", root, seed=0)
    blk, blk_path = reference.save("a", root, seed=1)
    assert blk.config.layer_types[3] == "full_attention" and blk.config.mlp_layer_types[3] == "sparse"
    n, d = ref.config.num_hidden_layers, ref.config.hidden_size
    tensors = _tensors(path)
    block = {k.replace("model.layers.3.", f"model.layers.{n}."): v
             for k, v in _tensors(blk_path).items() if k.startswith("model.layers.3.")}
    rng = np.random.RandomState(7)
    own = {f"model.layers.{n}.{k}": (1 + 0.2 * rng.randn(d)).astype(np.float32)
           for k in MTP_OWN if k != "eh_proj.weight"}
    own[f"model.layers.{n}.eh_proj.weight"] = (0.15 * rng.randn(d, 2 * d)).astype(np.float32)
    tensors.update(block)
    tensors.update(own)
    config = json.loads((path / "config.json").read_text())
    config.update(num_nextn_predict_layers=1, num_mtp_layers=1)
    ckpt = _write(root / "with-mtp", tensors, config)
    return ref, blk, ckpt, tensors, sorted(block)


def _mtp_names(tensors: dict, layer: int) -> set[str]:
    return {k for k in tensors if k.startswith(f"model.layers.{layer}.")}


def test_round_trip_keeps_every_mtp_tensor(mtp_ckpt, tmp_path):
    ref, _, ckpt, tensors, block_names = mtp_ckpt
    n = ref.config.num_hidden_layers
    model = from_pretrained(ckpt, mtp=True)
    save_pretrained(model, tmp_path / "out", max_shard_bytes=64 << 10)
    saved = _tensors(tmp_path / "out")
    want = {f"model.layers.{n}.{k}" for k in MTP_OWN} | set(block_names)
    assert any(".attention.kv_b_proj." in k for k in want) and any(".mlp.experts.7." in k for k in want)
    assert _mtp_names(saved, n) == want
    assert set(saved) == set(tensors)
    for k in want:
        np.testing.assert_array_equal(saved[k], tensors[k], err_msg=k)
    again = from_pretrained(tmp_path / "out", mtp=True)
    assert again.cfg.num_mtp_layers == 1 and again.cfg.mtp
    for (p, a), (q, b) in zip(nnx.to_flat_state(nnx.state(model.mtp_layers)),
                              nnx.to_flat_state(nnx.state(again.mtp_layers))):
        assert p == q
        np.testing.assert_array_equal(np.asarray(a.get_value()), np.asarray(b.get_value()))


def test_mtp_tensors_are_skipped_without_mtp_and_used_with_it(mtp_ckpt):
    ref, _, ckpt, _, _ = mtp_ckpt
    plain = from_pretrained(ckpt)  # mtp=False: the MTP tensors are skipped
    assert plain.mtp_layers is None
    with_mtp = from_pretrained(ckpt, mtp=True)
    toks = jnp.asarray(reference.tokens(ref.config.vocab_size, (2, 9), seed=3))
    fwd = nnx.jit(lambda m, t: m(t))
    np.testing.assert_array_equal(np.asarray(fwd(plain, toks)), np.asarray(fwd(with_mtp, toks)))
    n = ref.config.num_hidden_layers
    want = _tensors(ckpt)[f"model.layers.{n}.eh_proj.weight"].T
    np.testing.assert_array_equal(np.asarray(with_mtp.mtp_layers[0].eh_proj.kernel[...]), want)


def test_missing_or_extra_mtp_tensor_is_named(mtp_ckpt, tmp_path):
    ref, _, ckpt, tensors, _ = mtp_ckpt
    n = ref.config.num_hidden_layers
    config = json.loads((ckpt / "config.json").read_text())
    gone = f"model.layers.{n}.mlp.experts.5.down_proj.weight"
    less = {k: v for k, v in tensors.items() if k not in (gone, f"model.layers.{n}.hnorm.weight")}
    bad = _write(tmp_path / "missing", less, config)
    with pytest.raises(CheckpointError) as e:
        from_pretrained(bad, mtp=True)
    assert gone in str(e.value) and f"model.layers.{n}.hnorm.weight" in str(e.value)
    from_pretrained(bad)  # without mtp the incomplete module is skipped
    extra = dict(tensors, **{f"model.layers.{n + 1}.enorm.weight": np.ones((4,), np.float32)})
    bad2 = _write(tmp_path / "extra", extra, config)
    with pytest.raises(CheckpointError, match=f"unknown.*model.layers.{n + 1}.enorm.weight"):
        from_pretrained(bad2, mtp=True)
    with pytest.raises(ValueError, match="num_mtp_layers"):
        LingConfig(mtp=True)


def _rms(x, w, eps):
    x = x.float()
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def _reference_mtp_logits(ref, blk, tensors, toks: np.ndarray, post_norm: bool) -> np.ndarray:
    """Depth-1 MTP logits from the raw tensors, the reference trunk and its MLA + MoE layer."""
    cfg = ref.config
    n, eps = cfg.num_hidden_layers, cfg.rms_norm_eps
    w = {k: torch.tensor(tensors[f"model.layers.{n}.{k}"]) for k in MTP_OWN}
    ids = torch.tensor(toks.astype(np.int64))
    t = ids.shape[1]
    captured = []
    hook = ref.model.layers[n - 1].register_forward_hook(lambda m, i, o: captured.append(o))
    with torch.no_grad():
        h0 = ref.model(ids).last_hidden_state  # final-norm main hidden states [B, T, D]
        hook.remove()
        if not post_norm:
            h0 = captured[0]  # the last layer's output, before model.norm
        emb = ref.model.embed_tokens(ids[:, 1:])  # token t + 1 for position t
        x = torch.cat([_rms(emb, w["enorm.weight"], eps), _rms(h0[:, :-1], w["hnorm.weight"], eps)], -1)
        x = x @ w["eh_proj.weight"].T  # [B, T-1, D]
        pos = torch.arange(t - 1)[None].expand(ids.shape[0], -1)
        causal = torch.full((t - 1, t - 1), torch.finfo(torch.float32).min).triu(1)
        y = blk.model.layers[3](x, attention_mask=causal[None, None].expand(ids.shape[0], 1, -1, -1),
                                position_ids=pos, position_embeddings=ref.model.rotary_emb(x, pos))
        h1 = _rms(y, w["final_layernorm.weight"], eps)
        return ref.lm_head(h1).numpy()


@pytest.mark.parametrize("post_norm", [True, False])
def test_depth1_logits_match_independent_computation(mtp_ckpt, post_norm):
    ref, blk, ckpt, tensors, _ = mtp_ckpt
    toks = reference.tokens(ref.config.vocab_size, (2, 13), seed=5)
    want = _reference_mtp_logits(ref, blk, tensors, toks, post_norm)
    model = from_pretrained(ckpt, mtp=True, mtp_input_norm=post_norm)
    logits, (depth1,) = nnx.jit(lambda m, t: m.mtp_logits(t))(model, jnp.asarray(toks))
    assert depth1.shape == (2, 12, ref.config.vocab_size) and logits.shape == (2, 13, ref.config.vocab_size)
    assert np.abs(want).max() > 0.5, "reference logits too small for an informative check"
    np.testing.assert_allclose(np.asarray(depth1), want, atol=ATOL, rtol=0)


_TINY = dict(vocab_size=64, hidden_size=32, intermediate_size=48, moe_intermediate_size=16, num_heads=2,
             kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=16, v_head_dim=16, linear_head_dim=16,
             num_experts=8, num_experts_per_tok=2, n_group=2, topk_group=1, first_k_dense_replace=1,
             kda_chunk_size=8, initializer_range=0.15)
# KDA + MLA trunk, two MTP depths.
TINY = LingConfig(**_TINY, num_layers=2, layer_group_size=2, num_mtp_layers=2)
# The smallest trunk (one MLA layer, dense MLP) and one depth: the SFT tests compile gradients.
TINY_SFT = LingConfig(**_TINY, num_layers=1, layer_group_size=1, num_mtp_layers=1)


def test_depth_k_sees_tokens_up_to_t_plus_k():
    model = Ling(TINY.replace(mtp=True), nnx.Rngs(0))
    fwd = nnx.jit(lambda m, t: m.mtp_logits(t)[1])
    toks = np.random.RandomState(0).randint(0, 64, size=(1, 10)).astype(np.int32)
    base = fwd(model, jnp.asarray(toks))
    assert [b.shape[1] for b in base] == [9, 8]
    changed = toks.copy()
    changed[0, 6] = (changed[0, 6] + 1) % 64
    after = fwd(model, jnp.asarray(changed))
    for k, (a, b) in enumerate(zip(base, after), start=1):
        diff = np.abs(np.asarray(a) - np.asarray(b)).max(-1)[0]  # [T-k]
        assert np.all(diff[:6 - k] == 0) and diff[6 - k] > 0, (k, diff)


def _sft_batch(seed=0):
    rs = np.random.RandomState(seed)
    mask = np.zeros((2, 12), bool)
    mask[:, 4:] = True
    return {"tokens": jnp.asarray(rs.randint(0, 64, size=(2, 12)).astype(np.int32)),
            "loss_mask": jnp.asarray(mask)}


def test_sft_mtp_loss_is_finite_and_trains_the_mtp_modules():
    from rcca_jax.train.sft import sft_loss

    model = Ling(TINY_SFT.replace(mtp=True, mtp_loss_scaling_factor=0.3), nnx.Rngs(0))
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    batch = _sft_batch()

    def f(p):
        return sft_loss(nnx.merge(graphdef, p, rest), batch, chunk=4)

    (obj, metrics), grads = jax.jit(jax.value_and_grad(f, has_aux=True))(params)
    assert np.isfinite(float(obj)) and float(metrics["sft/loss_mtp"]) > 0
    np.testing.assert_allclose(float(obj), float(metrics["sft/loss"]) + 0.3 * float(metrics["sft/loss_mtp"]),
                               rtol=1e-6)
    for j in range(TINY_SFT.num_mtp_layers):
        g = nnx.to_flat_state(grads["mtp_layers"][j])
        assert all(np.isfinite(np.asarray(v.get_value())).all() for _, v in g)
        for part in ("eh_proj", "block", "final_layernorm"):
            norm = sum(float(jnp.sum(v.get_value() ** 2)) for p, v in g if p[0] == part)
            assert norm > 0, (j, part)


def test_sft_step_with_zero_factor_equals_plain_sft():
    from rcca_jax.train.config import SFTConfig
    from rcca_jax.train.sft import init_sft_state, sft_step

    cfg = SFTConfig(learning_rate=1e-2, warmup_steps=1)
    batch = _sft_batch(1)
    out = {}
    for name, mcfg in (("plain", TINY_SFT), ("mtp", TINY_SFT.replace(mtp=True))):
        graphdef, state = init_sft_state(Ling(mcfg, nnx.Rngs(0)), cfg)
        step = jax.jit(lambda s, b, g=graphdef: sft_step(g, cfg, 4, s, b))
        for _ in range(2):
            state, metrics = step(state, batch)
        out[name] = (state, metrics)
    (plain, m0), (mtp, m1) = out["plain"], out["mtp"]
    assert set(m0) == {"sft/loss", "sft/grad_norm"} and "sft/loss_mtp" in m1
    np.testing.assert_allclose(float(m1["sft/loss"]), float(m0["sft/loss"]), rtol=1e-6)
    np.testing.assert_allclose(float(m1["sft/grad_norm"]), float(m0["sft/grad_norm"]), rtol=1e-5)
    main = {p: v for p, v in nnx.to_flat_state(mtp.params) if p[0] != "mtp_layers"}
    for p, v in nnx.to_flat_state(plain.params):
        np.testing.assert_allclose(np.asarray(main[p].get_value()), np.asarray(v.get_value()),
                                   atol=1e-6, rtol=0, err_msg=str(p))
