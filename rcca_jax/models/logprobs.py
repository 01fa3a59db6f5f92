"""Per-token log-probabilities without materialising [B, T, V] logits."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def token_logprobs(h: jax.Array, head: jax.Array, targets: jax.Array, chunk: int = 256,
                   temperature: float = 1.0) -> tuple[jax.Array, jax.Array]:
    """log p(targets) and entropy per position, computed T-chunk by T-chunk.

    Args:
      h: [B, T, D] final hidden states; head: [D, V] LM head;
      targets: int [B, T]; chunk: positions per chunk (the [B, chunk, V]
      logits of one chunk are the largest temporary; the chunk body is
      rematerialised so the backward pass does not keep them either).
      temperature: logits are divided by it (the sampler's distribution).
    Returns:
      (logp [B, T], entropy [B, T]) in float32.
    """
    b, t, d = h.shape
    pad = (-t) % chunk
    hp = jnp.pad(h, ((0, 0), (0, pad), (0, 0))).reshape(b, -1, chunk, d)
    tp = jnp.pad(targets, ((0, 0), (0, pad))).reshape(b, -1, chunk)

    @jax.checkpoint
    def one(hc, tc):  # [B, C, D], [B, C]
        logits = jnp.einsum("bcd,dv->bcv", hc, head.astype(hc.dtype)).astype(jnp.float32) / temperature
        lse = jax.nn.logsumexp(logits, axis=-1)
        logp = jnp.take_along_axis(logits, tc[..., None], axis=-1)[..., 0] - lse
        p = jax.nn.softmax(logits, axis=-1)
        ent = lse - jnp.sum(p * logits, axis=-1)
        return logp, ent

    def body(_, xs):
        return None, one(*xs)

    _, (logp, ent) = jax.lax.scan(body, None, (jnp.moveaxis(hp, 1, 0), jnp.moveaxis(tp, 1, 0)))
    logp = jnp.moveaxis(logp, 0, 1).reshape(b, -1)[:, :t]
    ent = jnp.moveaxis(ent, 0, 1).reshape(b, -1)[:, :t]
    return logp, ent
