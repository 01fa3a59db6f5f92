"""Gated multi-head latent attention (MLA), the full-attention layers of Ling-3.0.

Keys and values are expanded from a shared, RMS-normalised latent c [B, S, L]
and one rotary key k_rot [B, S, R] shared by all heads; the cache stores only
(c, k_rot), which is what makes MLA's cache small. A head-wise sigmoid gate
from the layer input scales each head's output before the output projection.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from rcca_jax.models.config import LingConfig
from rcca_jax.models.layers import Linear, RMSNorm, apply_rope_interleaved, rope_angles
from rcca_jax.sharding import constrain


def _attend(q_nope, q_rot, k_nope, k_rot, v, slot_q, key_mask, scale):
    """Softmax attention of one block of queries over all S keys (fp32 softmax)."""
    s = k_nope.shape[1]
    scores = (jnp.einsum("bthk,bshk->bhts", q_nope, k_nope)
              + jnp.einsum("bthr,bsr->bhts", q_rot, k_rot)) * scale
    allowed = (jnp.arange(s)[None, :] <= slot_q[:, None])[None, None] & key_mask[:, None, None, :]
    scores = jnp.where(allowed, scores.astype(jnp.float32), jnp.finfo(jnp.float32).min)
    probs = jax.nn.softmax(scores, axis=-1).astype(v.dtype)
    return jnp.einsum("bhts,bshk->bthk", probs, v)


def blocked_attention(q_nope, q_rot, k_nope, k_rot, v, slot_q, key_mask, scale, block: int):
    """Causal attention in blocks of `block` queries: scores are [B, H, block, S], never
    [B, H, T, S], and each block is rematerialised in the backward pass.

    Args: q_nope [B, T, H, K], q_rot [B, T, H, R], k_nope [B, S, H, K], k_rot [B, S, R],
    v [B, S, H, Vd], slot_q [T] (cache slot of each query), key_mask [B, S].
    """
    t = q_nope.shape[1]
    if t <= block:
        return _attend(q_nope, q_rot, k_nope, k_rot, v, slot_q, key_mask, scale)
    pad = (-t) % block
    n = (t + pad) // block

    def split(a):  # [B, T, ...] -> [N, B, block, ...]
        a = jnp.pad(a, [(0, 0), (0, pad)] + [(0, 0)] * (a.ndim - 2))
        return jnp.moveaxis(a.reshape(a.shape[0], n, block, *a.shape[2:]), 1, 0)

    slots = jnp.pad(slot_q, (0, pad), constant_values=slot_q[-1]).reshape(n, block)
    one = jax.checkpoint(lambda qn, qr, sq: _attend(qn, qr, k_nope, k_rot, v, sq, key_mask, scale))
    out = jax.lax.map(lambda xs: one(*xs), (split(q_nope), split(q_rot), slots))  # [N, B, block, H, Vd]
    out = jnp.moveaxis(out, 0, 1).reshape(q_nope.shape[0], n * block, *out.shape[3:])
    return out[:, :t]


class MLA(nnx.Module):
    def __init__(self, cfg: LingConfig, rngs: nnx.Rngs):
        d, h = cfg.hidden_size, cfg.num_heads
        self.cfg = cfg
        self.q_proj = Linear(d, h * cfg.qk_head_dim, ("embed", "heads"), cfg, rngs)
        self.kv_a_proj_with_mqa = Linear(d, cfg.kv_lora_rank + cfg.qk_rope_head_dim,
                                         ("embed", "latent"), cfg, rngs, use_bias=cfg.attention_bias)
        self.kv_a_layernorm = RMSNorm(cfg.kv_lora_rank, cfg.rms_norm_eps, cfg)
        self.kv_b_proj = Linear(cfg.kv_lora_rank, h * (cfg.qk_nope_head_dim + cfg.v_head_dim),
                                ("latent", "heads"), cfg, rngs)
        self.o_proj = Linear(h * cfg.v_head_dim, d, ("heads", "embed"), cfg, rngs,
                             use_bias=cfg.attention_bias)
        self.g_proj = Linear(d, h, ("embed", "heads"), cfg, rngs)
        self.scale = cfg.qk_head_dim ** -0.5

    def latents(self, x: jax.Array, positions: jax.Array) -> tuple[jax.Array, jax.Array]:
        """Normalised latent c [B, T, L] and rotated shared key k_rot [B, T, R]."""
        cfg = self.cfg
        ckv = self.kv_a_proj_with_mqa(x)
        c, k_rot = ckv[..., :cfg.kv_lora_rank], ckv[..., cfg.kv_lora_rank:]
        cos, sin = rope_angles(positions, cfg.qk_rope_head_dim, cfg.rope_theta)
        k_rot = apply_rope_interleaved(k_rot[:, :, None, :], cos, sin)[:, :, 0]
        return self.kv_a_layernorm(c), k_rot

    def __call__(self, x: jax.Array, positions: jax.Array, key_mask: jax.Array | None,
                 cache: dict | None, index: jax.Array | None):
        """Attention of x [B, T, D] at `positions` [B, T].

        Without a cache, keys are x's own tokens (causal). With a cache
        ({"c": [B, S, L], "k_rot": [B, S, R]}), x's latents are written at slot
        `index` and queries attend to slots <= their own.
        key_mask [B, S] marks valid key slots (False = padding), or None.

        Returns (y [B, T, D], new cache or None).
        """
        cfg = self.cfg
        b, t, _ = x.shape
        h = cfg.num_heads
        q = self.q_proj(x).reshape(b, t, h, cfg.qk_head_dim)
        q = constrain(q, ("batch", "seq", "heads", "kv"))
        q_nope, q_rot = q[..., :cfg.qk_nope_head_dim], q[..., cfg.qk_nope_head_dim:]
        cos, sin = rope_angles(positions, cfg.qk_rope_head_dim, cfg.rope_theta)
        q_rot = apply_rope_interleaved(q_rot, cos, sin)
        c, k_rot = self.latents(x, positions)
        if cache is None:
            new_cache = None
            slot_q = jnp.arange(t)
        else:
            c = jax.lax.dynamic_update_slice_in_dim(cache["c"], c.astype(cache["c"].dtype), index, axis=1)
            k_rot = jax.lax.dynamic_update_slice_in_dim(
                cache["k_rot"], k_rot.astype(cache["k_rot"].dtype), index, axis=1)
            new_cache = {"c": c, "k_rot": k_rot}
            slot_q = index + jnp.arange(t)
            c, k_rot = c.astype(x.dtype), k_rot.astype(x.dtype)
        s = c.shape[1]
        kv = self.kv_b_proj(c).reshape(b, s, h, cfg.qk_nope_head_dim + cfg.v_head_dim)
        k_nope, v = kv[..., :cfg.qk_nope_head_dim], kv[..., cfg.qk_nope_head_dim:]
        k_nope = constrain(k_nope, ("batch", "seq", "heads", "kv"))
        if key_mask is None:
            key_mask = jnp.ones((b, s), bool)
        o = blocked_attention(q_nope, q_rot, k_nope, k_rot, v, slot_q, key_mask, self.scale,
                              cfg.attn_block)  # [B, T, H, Vd]
        gate = jax.nn.sigmoid(self.g_proj(x).astype(jnp.float32)).astype(x.dtype)  # [B, T, H]
        o = (o * gate[..., None]).reshape(b, t, h * cfg.v_head_dim)
        return self.o_proj(o), new_cache
