"""Building blocks shared by the Ling layers: linear maps, norms, RoPE, MLP."""

from __future__ import annotations

from typing import Sequence

import jax
import jax.numpy as jnp
from flax import nnx

from rcca_jax.models.config import LingConfig
from rcca_jax.sharding import constrain


def dtype_of(name: str):
    return jnp.dtype(name)


def param(rngs: nnx.Rngs, shape: Sequence[int], axes: tuple, cfg: LingConfig,
          std: float | None = None) -> nnx.Param:
    """A normal(0, initializer_range) parameter with its logical axes."""
    std = cfg.initializer_range if std is None else std
    value = std * jax.random.normal(rngs.params(), tuple(shape), dtype_of(cfg.param_dtype))
    return nnx.Param(value, axes=axes)


def ones(shape: Sequence[int], axes: tuple, cfg: LingConfig) -> nnx.Param:
    return nnx.Param(jnp.ones(tuple(shape), dtype_of(cfg.param_dtype)), axes=axes)


class Linear(nnx.Module):
    """y = x @ W with W stored [in, out] (the transpose of torch's Linear)."""

    def __init__(self, d_in: int, d_out: int, axes: tuple, cfg: LingConfig, rngs: nnx.Rngs,
                 use_bias: bool = False):
        self.kernel = param(rngs, (d_in, d_out), axes, cfg)
        self.bias = nnx.Param(jnp.zeros((d_out,), dtype_of(cfg.param_dtype)), axes=axes[1:]) \
            if use_bias else None
        self.dtype = dtype_of(cfg.dtype)

    def __call__(self, x: jax.Array) -> jax.Array:
        y = jnp.einsum("...i,io->...o", x.astype(self.dtype), self.kernel[...].astype(self.dtype))
        if self.bias is not None:
            y = y + self.bias[...].astype(self.dtype)
        return y


def rms_normalize(x: jax.Array, eps: float) -> jax.Array:
    """x / rms(x) in float32 (the reference normalises in fp32)."""
    x32 = x.astype(jnp.float32)
    return x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + eps)


class RMSNorm(nnx.Module):
    """RMSNorm that casts back to the input dtype before the weight (as the reference)."""

    def __init__(self, dim: int, eps: float, cfg: LingConfig):
        self.weight = ones((dim,), ("norm",), cfg)
        self.eps = eps

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.weight[...].astype(x.dtype) * rms_normalize(x, self.eps).astype(x.dtype)


class GatedRMSNorm(nnx.Module):
    """RMSNorm(x) * sigmoid(gate), entirely in float32, then cast to x's dtype."""

    def __init__(self, dim: int, eps: float, cfg: LingConfig):
        self.weight = ones((dim,), ("norm",), cfg)
        self.eps = eps

    def __call__(self, x: jax.Array, gate: jax.Array) -> jax.Array:
        y = rms_normalize(x, self.eps) * self.weight[...].astype(jnp.float32)
        return (y * jax.nn.sigmoid(gate.astype(jnp.float32))).astype(x.dtype)


class MLP(nnx.Module):
    """SwiGLU feed-forward: down(silu(gate(x)) * up(x))."""

    def __init__(self, d: int, f: int, cfg: LingConfig, rngs: nnx.Rngs):
        self.gate_proj = Linear(d, f, ("embed", "mlp"), cfg, rngs)
        self.up_proj = Linear(d, f, ("embed", "mlp"), cfg, rngs)
        self.down_proj = Linear(f, d, ("mlp", "embed"), cfg, rngs)

    def __call__(self, x: jax.Array) -> jax.Array:  # [..., D]
        h = jax.nn.silu(self.gate_proj(x)) * self.up_proj(x)  # [..., F]
        return self.down_proj(h)


def rope_angles(positions: jax.Array, dim: int, theta: float) -> tuple[jax.Array, jax.Array]:
    """cos, sin [B, T, R/2] of the default RoPE at integer `positions` [B, T]."""
    inv_freq = 1.0 / (theta ** (jnp.arange(0, dim, 2, dtype=jnp.float32) / dim))  # [R/2]
    ang = positions.astype(jnp.float32)[..., None] * inv_freq  # [B, T, R/2]
    return jnp.cos(ang), jnp.sin(ang)


def apply_rope_interleaved(x: jax.Array, cos: jax.Array, sin: jax.Array) -> jax.Array:
    """Rotates interleaved pairs (x0, x1), (x2, x3), ... of x [B, T, H, R].

    The output lists the rotated even parts then the rotated odd parts, the
    layout the reference produces (and its checkpoints' kv_b/q weights expect).
    """
    cos, sin = cos[:, :, None, :].astype(x.dtype), sin[:, :, None, :].astype(x.dtype)  # [B, T, 1, R/2]
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return jnp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


def embed_lookup(table: jax.Array, tokens: jax.Array, dtype) -> jax.Array:
    """Rows of `table` [V, D] for int tokens [B, T] -> [B, T, D]."""
    x = jnp.take(table, tokens, axis=0).astype(dtype)
    return constrain(x, ("batch", "seq", "act_embed"))
