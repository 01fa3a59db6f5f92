"""Kimi Delta Attention (KDA): the linear-attention layers of Ling-3.0.

Per head, a state S [K, V] evolves per token t with a per-channel decay gate
g_t [K] (log space, <= 0) and a delta-rule write of strength beta_t:

    S <- diag(exp(g_t)) S
    S <- S + k_t (beta_t (v_t - S^T k_t))^T
    o_t = S^T q_t

with q, k L2-normalised and q scaled by 1/sqrt(K). Two forms with equal
results: `kda_chunked` (training and prefill; WY form inside chunks of C
tokens, a scan over chunks, fp32 state) and `kda_recurrent` (token by token,
for decoding).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from rcca_jax.models.config import LingConfig
from rcca_jax.models.layers import GatedRMSNorm, Linear, dtype_of
from rcca_jax.sharding import constrain


def l2_normalize(x: jax.Array, eps: float = 1e-6) -> jax.Array:
    """x / sqrt(sum(x^2) + eps), the form of the reference kernels (not max(., eps))."""
    return x / jnp.sqrt(jnp.sum(x * x, axis=-1, keepdims=True) + eps)


def _prepare(q, k, v, g, beta):
    f32 = jnp.float32
    q, k, v, g, beta = (a.astype(f32) for a in (q, k, v, g, beta))
    q = l2_normalize(q) * (q.shape[-1] ** -0.5)
    return q, l2_normalize(k), v, g, beta


def kda_recurrent(q, k, v, g, beta, state):
    """Token-by-token KDA.

    Args:
      q, k: [B, T, H, K]; v: [B, T, H, V]; g: [B, T, H, K] log decay;
      beta: [B, T, H]; state: [B, H, K, V] float32.
    Returns:
      o [B, T, H, V] in q's dtype, final state [B, H, K, V] float32.
    """
    dtype = q.dtype
    q, k, v, g, beta = _prepare(q, k, v, g, beta)

    def step(s, xs):  # s [B, H, K, V]
        q_t, k_t, v_t, g_t, b_t = xs
        s = s * jnp.exp(g_t)[..., None]
        mem = jnp.einsum("bhkv,bhk->bhv", s, k_t)
        delta = (v_t - mem) * b_t[..., None]
        s = s + jnp.einsum("bhk,bhv->bhkv", k_t, delta)
        return s, jnp.einsum("bhkv,bhk->bhv", s, q_t)

    xs = tuple(jnp.moveaxis(a, 1, 0) for a in (q, k, v, g, beta))
    state, o = jax.lax.scan(step, state.astype(jnp.float32), xs)
    return jnp.moveaxis(o, 0, 1).astype(dtype), state


def _chunk_step(s, xs):
    """One chunk of C tokens. s [B, H, K, V]; xs per chunk, heads first."""
    q, k, v, g, beta = xs  # [B, H, C, K] x3 (v: V), g [B, H, C, K], beta [B, H, C]
    c = q.shape[2]
    gc = jnp.cumsum(g, axis=2)  # [B, H, C, K]
    causal = jnp.tril(jnp.ones((c, c), bool))  # row i sees columns j <= i
    # decay[i, j] = exp(gc[i] - gc[j]) for j <= i: always <= 1, so stable in fp32.
    diff = gc[:, :, :, None, :] - gc[:, :, None, :, :]  # [B, H, C, C, K]
    decay = jnp.exp(jnp.where(causal[:, :, None], diff, -jnp.inf))
    kb = k * beta[..., None]
    a = -jnp.einsum("bhik,bhjk,bhijk->bhij", kb, k, decay)
    a = jnp.where(jnp.tril(causal, -1), a, 0.0)
    eye = jnp.eye(c, dtype=a.dtype)
    # WY form: T = (I - A)^-1, lower unitriangular.
    t = jax.lax.linalg.triangular_solve(eye - a, jnp.broadcast_to(eye, a.shape),
                                        left_side=True, lower=True)
    u = jnp.einsum("bhij,bhjv->bhiv", t, v * beta[..., None])  # [B, H, C, V]
    w = jnp.einsum("bhij,bhjk->bhik", t, kb * jnp.exp(gc))  # [B, H, C, K]
    aqk = jnp.where(causal, jnp.einsum("bhik,bhjk,bhijk->bhij", q, k, decay), 0.0)
    v_new = u - jnp.einsum("bhik,bhkv->bhiv", w, s)
    o = jnp.einsum("bhik,bhkv->bhiv", q * jnp.exp(gc), s) + jnp.einsum("bhij,bhjv->bhiv", aqk, v_new)
    g_last = gc[:, :, -1]  # [B, H, K]
    s = s * jnp.exp(g_last)[..., None] + jnp.einsum(
        "bhik,bhiv->bhkv", k * jnp.exp(g_last[:, :, None] - gc), v_new)
    return s, o


def kda_chunked(q, k, v, g, beta, state, chunk: int = 64):
    """Chunk-parallel KDA, equal to `kda_recurrent` (same args and returns).

    The scan body is rematerialised, so the backward pass keeps only the
    [B, H, K, V] state per chunk, not the [C, C, K] decay tensors.
    """
    dtype = q.dtype
    q, k, v, g, beta = _prepare(q, k, v, g, beta)
    b, t, h, _ = q.shape
    pad = (-t) % chunk
    n = (t + pad) // chunk

    def chunks(x):  # [B, T, H, ...] -> [N, B, H, C, ...]; padding has k=0, beta=0, g=0
        x = jnp.pad(x, [(0, 0), (0, pad)] + [(0, 0)] * (x.ndim - 2))
        x = x.reshape(b, n, chunk, h, *x.shape[3:])
        return jnp.moveaxis(jnp.moveaxis(x, 1, 0), 3, 2)

    xs = tuple(chunks(a) for a in (q, k, v, g, beta))
    state, o = jax.lax.scan(jax.checkpoint(_chunk_step), state.astype(jnp.float32), xs)
    o = jnp.moveaxis(o, 0, 1)  # [B, N, H, C, V]
    o = jnp.swapaxes(o, 2, 3).reshape(b, n * chunk, h, -1)[:, :t]
    return o.astype(dtype), state


def causal_conv(x: jax.Array, w: jax.Array, prev: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Depthwise causal conv + SiLU.

    Args:
      x: [B, T, F] inputs; w: [W, F] taps (tap W-1 multiplies the current token);
      prev: [B, W-1, F] the inputs before x (zeros at the start of a sequence).
    Returns:
      SiLU(conv) [B, T, F] and the new `prev` (last W-1 inputs).
    """
    width = w.shape[0]
    xp = jnp.concatenate([prev.astype(x.dtype), x], axis=1)  # [B, W-1+T, F]
    t = x.shape[1]
    y = sum(xp[:, j:j + t] * w[j].astype(x.dtype) for j in range(width))
    return jax.nn.silu(y), xp[:, t:]


class KDA(nnx.Module):
    """A KDA token mixer with the reference's parameters (one per checkpoint tensor)."""

    def __init__(self, cfg: LingConfig, rngs: nnx.Rngs):
        d, h, kd = cfg.hidden_size, cfg.num_heads, cfg.linear_head_dim
        hk = h * kd
        self.cfg = cfg
        self.q_proj = Linear(d, hk, ("embed", "heads"), cfg, rngs)
        self.k_proj = Linear(d, hk, ("embed", "heads"), cfg, rngs)
        self.v_proj = Linear(d, hk, ("embed", "heads"), cfg, rngs)
        pdt = dtype_of(cfg.param_dtype)

        def conv():
            w = jax.random.uniform(rngs.params(), (cfg.conv_kernel, hk), pdt, -0.5, 0.5)
            return nnx.Param(w, axes=("conv", "heads"))

        self.q_conv, self.k_conv, self.v_conv = conv(), conv(), conv()
        self.f_proj = Linear(d, hk, ("embed", "heads"), cfg, rngs)
        a = jax.random.uniform(rngs.params(), (h,), jnp.float32, 1.0, 16.0)
        self.A_log = nnx.Param(jnp.log(a), axes=("heads",))
        dt = jnp.exp(jax.random.uniform(rngs.params(), (hk,), jnp.float32, jnp.log(1e-3), jnp.log(1e-1)))
        self.dt_bias = nnx.Param(dt + jnp.log(-jnp.expm1(-dt)), axes=("heads",))
        self.b_proj = Linear(d, h, ("embed", "heads"), cfg, rngs)
        self.g_proj = Linear(d, hk, ("embed", "heads"), cfg, rngs)
        self.o_norm = GatedRMSNorm(kd, cfg.rms_norm_eps, cfg)
        self.o_proj = Linear(hk, d, ("heads", "embed"), cfg, rngs)

    def decay(self, x: jax.Array) -> jax.Array:
        """log decay g [B, T, H, K] in float32."""
        cfg = self.cfg
        z = self.f_proj(x).astype(jnp.float32).reshape(*x.shape[:2], cfg.num_heads, cfg.linear_head_dim)
        z = z + self.dt_bias[...].astype(jnp.float32).reshape(cfg.num_heads, cfg.linear_head_dim)
        rate = jnp.exp(self.A_log[...].astype(jnp.float32))[:, None]  # [H, 1]
        if cfg.kda_safe_gate:
            return cfg.kda_lower_bound * jax.nn.sigmoid(rate * z)
        return -rate * jax.nn.softplus(z)

    def __call__(self, x: jax.Array, mask: jax.Array | None, cache: dict | None):
        """x [B, T, D]; mask [B, T] (False = padding) or None; cache per layer or None.

        Returns (y [B, T, D], new cache or None).
        """
        cfg = self.cfg
        b, t, _ = x.shape
        h, kd = cfg.num_heads, cfg.linear_head_dim
        if mask is not None:
            x = x * mask[..., None].astype(x.dtype)
        hk = h * kd
        zeros = jnp.zeros((b, cfg.conv_kernel - 1, hk), x.dtype)
        prev = cache["conv"] if cache is not None else (zeros, zeros, zeros)
        outs = [causal_conv(p(x), w[...], s) for p, w, s in
                ((self.q_proj, self.q_conv, prev[0]), (self.k_proj, self.k_conv, prev[1]),
                 (self.v_proj, self.v_conv, prev[2]))]
        q, k, v = (constrain(o.reshape(b, t, h, kd), ("batch", "seq", "heads", "kv")) for o, _ in outs)
        g = self.decay(x).astype(x.dtype)
        beta = jax.nn.sigmoid(self.b_proj(x))  # [B, T, H]
        state = cache["state"] if cache is not None else jnp.zeros((b, h, kd, kd), jnp.float32)
        if t == 1:
            o, state = kda_recurrent(q, k, v, g, beta, state)
        else:
            o, state = kda_chunked(q, k, v, g, beta, state, cfg.kda_chunk_size)
        gate = self.g_proj(x).reshape(b, t, h, kd)
        o = self.o_norm(o, gate).reshape(b, t, hk)
        new_cache = None if cache is None else {"conv": tuple(s for _, s in outs), "state": state}
        return self.o_proj(o), new_cache
