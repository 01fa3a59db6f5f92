"""Batched rollout sampler: prefill, then jitted decode steps with the model's cache.

Log-probabilities. Each sampled token comes with two log-probs:
- `logprobs`: under the policy at the sampling temperature, before top-k/top-p
  truncation, i.e. log softmax(logits / temperature). This is the
  distribution the train step recomputes (`TrainConfig.temperature`), so it is
  the one the GRPO ratio must use as `old_logp`.
- `sampling_logprobs`: under the truncated, renormalised distribution the
  token was actually drawn from (equal to `logprobs` when top_k = 0 and
  top_p = 1). Kept for importance correction and diagnostics.
With temperature 0 the sampler is greedy and both are log softmax(logits).

An external engine (an OpenAI-compatible vLLM/SGLang server) can stand behind
the same interface: it must return token ids, `logprobs` as defined above
(`logprobs=1` with the same temperature and no truncation in the server's
log-prob computation) and lengths; see `Sampler` for the contract.
"""

from __future__ import annotations

import dataclasses
from functools import partial
from typing import Protocol

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from rcca_jax.models.model import Ling


@dataclasses.dataclass(frozen=True)
class SamplerConfig:
    max_new_tokens: int = 256
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    group_size: int = 1
    pad_id: int = 0


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class Rollouts:
    """Responses [N*G, L] of N prompts x G samples (row r is prompt r // G)."""

    tokens: jax.Array             # int32 [N*G, L], pad after EOS
    logprobs: jax.Array           # f32 [N*G, L], 0 after EOS
    sampling_logprobs: jax.Array  # f32 [N*G, L]
    lengths: jax.Array            # int32 [N*G], EOS included


class Sampler(Protocol):
    def __call__(self, prompts: list[list[int]], rng: jax.Array) -> Rollouts: ...


def _truncate(logits: jax.Array, top_k: int, top_p: float) -> jax.Array:
    """Masks logits [B, V] outside the top-k and the top-p nucleus to -inf."""
    if top_k:
        kth = jax.lax.top_k(logits, top_k)[0][:, -1:]
        logits = jnp.where(logits < kth, -jnp.inf, logits)
    if top_p < 1.0:
        order = jnp.argsort(-logits, axis=-1)
        sorted_logits = jnp.take_along_axis(logits, order, axis=-1)
        probs = jax.nn.softmax(sorted_logits, axis=-1)
        before = jnp.cumsum(probs, axis=-1) - probs  # mass strictly before each token
        drop_sorted = before >= top_p
        drop = jnp.zeros_like(drop_sorted).at[jnp.arange(logits.shape[0])[:, None], order].set(drop_sorted)
        logits = jnp.where(drop, -jnp.inf, logits)
    return logits


def _choose(logits: jax.Array, key: jax.Array, cfg: SamplerConfig):
    """Next token [B] and its two log-probs from last-position logits [B, V]."""
    if cfg.temperature == 0.0:
        lp = jax.nn.log_softmax(logits, axis=-1)
        tok = jnp.argmax(logits, axis=-1)
        chosen = jnp.take_along_axis(lp, tok[:, None], axis=-1)[:, 0]
        return tok.astype(jnp.int32), chosen, chosen
    scaled = logits / cfg.temperature
    full = jax.nn.log_softmax(scaled, axis=-1)
    trunc = jax.nn.log_softmax(_truncate(scaled, cfg.top_k, cfg.top_p), axis=-1)
    tok = jax.random.categorical(key, trunc, axis=-1)
    pick = lambda a: jnp.take_along_axis(a, tok[:, None], axis=-1)[:, 0]  # noqa: E731
    return tok.astype(jnp.int32), pick(full), pick(trunc)


@partial(nnx.jit, static_argnames=("cfg", "eos"))
def _generate(model: Ling, prompt: jax.Array, mask: jax.Array, key: jax.Array, cfg: SamplerConfig,
              eos: tuple[int, ...]):
    b, p = prompt.shape
    cache = model.init_cache(b, p + cfg.max_new_tokens)
    positions = jnp.maximum(jnp.cumsum(mask, axis=1) - 1, 0).astype(jnp.int32)
    logits, cache = model.step(prompt, cache, positions=positions, mask=mask)
    next_pos = mask.sum(1).astype(jnp.int32)  # [B]
    eos_arr = jnp.asarray(eos if eos else (-1,), jnp.int32)

    def body(carry, key_t):
        logits, cache, pos, done = carry  # logits [B, V] of the last position
        tok, lp, slp = _choose(logits, key_t, cfg)
        tok = jnp.where(done, cfg.pad_id, tok)
        lp, slp = jnp.where(done, 0.0, lp), jnp.where(done, 0.0, slp)
        emitted = ~done
        done = done | jnp.isin(tok, eos_arr)
        logits, cache = model.step(tok[:, None], cache, positions=pos[:, None])
        return (logits[:, -1], cache, pos + 1, done), (tok, lp, slp, emitted)

    keys = jax.random.split(key, cfg.max_new_tokens)
    init = (logits[:, -1], cache, next_pos, jnp.zeros((b,), bool))
    _, (toks, lps, slps, emitted) = jax.lax.scan(body, init, keys)
    t = lambda a: jnp.swapaxes(a, 0, 1)  # noqa: E731
    return Rollouts(t(toks), t(lps), t(slps), emitted.sum(0).astype(jnp.int32))


def left_pad(prompts: list[list[int]], pad_id: int, width: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Prompts as left-padded int32 [N, P] and their mask (P = `width`, default the longest)."""
    if not prompts or any(len(p) == 0 for p in prompts):
        raise ValueError("every prompt needs at least one token")
    longest = max(len(p) for p in prompts)
    if width is not None and longest > width:
        raise ValueError(f"a prompt has {longest} tokens, more than the prompt width {width}")
    width = longest if width is None else width
    toks = np.full((len(prompts), width), pad_id, np.int32)
    mask = np.zeros((len(prompts), width), bool)
    for i, p in enumerate(prompts):
        toks[i, width - len(p):] = p
        mask[i, width - len(p):] = True
    return toks, mask


def sample(model: Ling, prompts: list[list[int]], rng: jax.Array, cfg: SamplerConfig,
           width: int | None = None) -> Rollouts:
    """G samples for each prompt (token-id lists). Returns rows grouped by prompt.

    A fixed `width` (left padding) keeps shapes constant so decoding compiles once.
    """
    toks, mask = left_pad(prompts, cfg.pad_id, width)
    toks = np.repeat(toks, cfg.group_size, axis=0)
    mask = np.repeat(mask, cfg.group_size, axis=0)
    return _generate(model, jnp.asarray(toks), jnp.asarray(mask), rng, cfg, model.cfg.eos_ids)
