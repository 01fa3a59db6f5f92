"""Greedy decoding with the model's cache (reference path for parity checks)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from rcca_jax.models.model import Ling


@nnx.jit
def _prefill(model: Ling, tokens, cache):
    return model.step(tokens, cache)


@nnx.jit
def _decode(model: Ling, token, cache):
    return model.step(token, cache)


def greedy(model: Ling, prompt: jax.Array, steps: int) -> jax.Array:
    """Argmax continuation of int32 prompt [B, P] for `steps` tokens -> [B, steps]."""
    b, p = prompt.shape
    cache = model.init_cache(b, p + steps)
    logits, cache = _prefill(model, prompt, cache)
    tok = jnp.argmax(logits[:, -1], axis=-1).astype(jnp.int32)
    out = [tok]
    for _ in range(steps - 1):
        logits, cache = _decode(model, tok[:, None], cache)
        tok = jnp.argmax(logits[:, -1], axis=-1).astype(jnp.int32)
        out.append(tok)
    return jnp.stack(out, axis=1)
