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

Random numbers. Every row draws from its own key, `fold_in(fold_in(rng, row id),
sample index)`, folded with the decoding position: a row's samples depend on the
key, its prompt's id and the policy, not on which other rows share the batch,
how rows are cut into sampler calls or over how many processes they are spread.

Multi-host. With a `mesh`, each process passes its own prompts; they are
assembled into one global batch sharded over the mesh's batch axes, decoded
together, and each process gets back the rows of its own prompts.

An external engine (an OpenAI-compatible vLLM/SGLang server) can stand behind
the same interface: it must return token ids, `logprobs` as defined above
(`logprobs=1` with the same temperature and no truncation in the server's
log-prob computation) and lengths; see `Sampler` for the contract.
"""

from __future__ import annotations

import dataclasses
from functools import partial
from typing import Protocol, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import Mesh

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


def _choose(logits: jax.Array, keys: jax.Array, cfg: SamplerConfig):
    """Next token [B] and its two log-probs from last-position logits [B, V], one key per row."""
    if cfg.temperature == 0.0:
        lp = jax.nn.log_softmax(logits, axis=-1)
        tok = jnp.argmax(logits, axis=-1)
        chosen = jnp.take_along_axis(lp, tok[:, None], axis=-1)[:, 0]
        return tok.astype(jnp.int32), chosen, chosen
    scaled = logits / cfg.temperature
    full = jax.nn.log_softmax(scaled, axis=-1)
    trunc = jax.nn.log_softmax(_truncate(scaled, cfg.top_k, cfg.top_p), axis=-1)
    tok = jax.vmap(lambda k, row: jax.random.categorical(k, row))(keys, trunc)
    pick = lambda a: jnp.take_along_axis(a, tok[:, None], axis=-1)[:, 0]  # noqa: E731
    return tok.astype(jnp.int32), pick(full), pick(trunc)


@partial(nnx.jit, static_argnames=("cfg", "eos", "rows"))
def _generate(model: Ling, prompt: jax.Array, mask: jax.Array, keys: jax.Array, cfg: SamplerConfig,
              eos: tuple[int, ...], rows=None):
    """Decodes prompts [B, P] (left padded, `mask`) with one key per row, keys [B]; `rows`:
    the sharding of the outputs' batch dimension (None: as XLA propagates it)."""
    b, p = prompt.shape
    cache = model.init_cache(b, p + cfg.max_new_tokens)
    positions = jnp.maximum(jnp.cumsum(mask, axis=1) - 1, 0).astype(jnp.int32)
    logits, cache = model.step(prompt, cache, positions=positions, mask=mask)
    next_pos = mask.sum(1).astype(jnp.int32)  # [B]
    eos_arr = jnp.asarray(eos if eos else (-1,), jnp.int32)

    def body(carry, t):
        logits, cache, pos, done = carry  # logits [B, V] of the last position
        keys_t = jax.vmap(jax.random.fold_in, (0, None))(keys, t)
        tok, lp, slp = _choose(logits, keys_t, cfg)
        tok = jnp.where(done, cfg.pad_id, tok)
        lp, slp = jnp.where(done, 0.0, lp), jnp.where(done, 0.0, slp)
        emitted = ~done
        done = done | jnp.isin(tok, eos_arr)
        logits, cache = model.step(tok[:, None], cache, positions=pos[:, None])
        return (logits[:, -1], cache, pos + 1, done), (tok, lp, slp, emitted)

    init = (logits[:, -1], cache, next_pos, jnp.zeros((b,), bool))
    _, (toks, lps, slps, emitted) = jax.lax.scan(body, init, jnp.arange(cfg.max_new_tokens))
    t = lambda a: jnp.swapaxes(a, 0, 1)  # noqa: E731
    out = Rollouts(t(toks), t(lps), t(slps), emitted.sum(0).astype(jnp.int32))
    if rows is not None:
        out = jax.tree.map(lambda a: jax.lax.with_sharding_constraint(
            a, jax.sharding.NamedSharding(rows.mesh, jax.sharding.PartitionSpec(
                rows.spec[0], *([None] * (a.ndim - 1))))), out)
    return out


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


def row_keys(rng: jax.Array, prompt_ids: np.ndarray, group_size: int) -> np.ndarray:
    """Raw key data [N*G, ...] of row (prompt i, sample g): fold_in(fold_in(rng, id_i), g)."""
    rng = rng if _is_typed(rng) else jax.random.wrap_key_data(rng)
    ids = jnp.asarray(prompt_ids, jnp.uint32)
    per_prompt = jax.vmap(lambda i: jax.random.fold_in(rng, i))(ids)
    keys = jax.vmap(lambda k: jax.vmap(lambda g: jax.random.fold_in(k, g))(jnp.arange(group_size)))(per_prompt)
    return np.asarray(jax.random.key_data(keys.reshape(-1)))


def sample(model: Ling, prompts: list[list[int]], rng: jax.Array, cfg: SamplerConfig,
           width: int | None = None, prompt_ids: Sequence[int] | None = None,
           mesh: Mesh | None = None) -> Rollouts:
    """G samples for each prompt (token-id lists). Returns rows grouped by prompt.

    Args:
      model: the policy.
      prompts: this process's prompts, token ids.
      rng: the call's key (a new-style or raw PRNG key).
      cfg: sampling settings.
      width: prompt width (left padding); a fixed one keeps shapes constant so
        decoding compiles once.
      prompt_ids: an id per prompt naming it in the key schedule (default
        0, 1, ...); give ids unique across processes so no two prompts share keys.
      mesh: assemble the processes' prompts into one global batch over this mesh's
        batch axes (multi-host); the returned rows are this process's own.
    Returns:
      Host (NumPy) rollouts of this process's prompts, rows [N*G, L].
    """
    toks, mask = left_pad(prompts, cfg.pad_id, width)
    toks = np.repeat(toks, cfg.group_size, axis=0)
    mask = np.repeat(mask, cfg.group_size, axis=0)
    ids = np.arange(len(prompts)) if prompt_ids is None else np.asarray(prompt_ids)
    keys = row_keys(rng, ids, cfg.group_size)
    if mesh is None:
        out = _generate(model, jnp.asarray(toks), jnp.asarray(mask),
                        jax.random.wrap_key_data(jnp.asarray(keys)), cfg, model.cfg.eos_ids)
        return jax.device_get(out)
    from rcca_jax.train import multihost

    rows = multihost.row_sharding(mesh, toks.shape[0] * jax.process_count())
    toks_g, mask_g, keys_g = (multihost.global_rows(a, rows) for a in (toks, mask, keys))
    out = _generate(model, toks_g, mask_g, jax.random.wrap_key_data(keys_g), cfg,
                    model.cfg.eos_ids, rows=rows)
    return jax.tree.map(multihost.local_rows, out)


def _is_typed(key: jax.Array) -> bool:
    return jnp.issubdtype(getattr(key, "dtype", None), jax.dtypes.prng_key)
