"""Host-side batch assembly for SFT and RL (NumPy; fixed shapes so steps compile once)."""

from __future__ import annotations

from typing import Sequence

import numpy as np


def sft_batch(prompts: Sequence[Sequence[int]], responses: Sequence[Sequence[int]], seq_len: int,
              pad_id: int) -> dict[str, np.ndarray]:
    """tokens [B, seq_len] = prompt + response (+EOS) + pad; loss on response tokens.

    Raises ValueError naming the row when prompt + response exceed seq_len.
    """
    b = len(prompts)
    tokens = np.full((b, seq_len), pad_id, np.int32)
    mask = np.zeros((b, seq_len), bool)
    for i, (p, r) in enumerate(zip(prompts, responses)):
        n = len(p) + len(r)
        if n > seq_len:
            raise ValueError(f"row {i}: prompt ({len(p)}) + response ({len(r)}) tokens exceed "
                             f"seq_len={seq_len}")
        tokens[i, :n] = np.concatenate([p, r])
        mask[i, len(p):n] = True
    return {"tokens": tokens, "loss_mask": mask}


def response_ids(tokens: np.ndarray, lengths: np.ndarray) -> list[np.ndarray]:
    """Sampled rows [N, L] cut to their lengths (EOS included where emitted)."""
    return [tokens[i, :int(lengths[i])] for i in range(len(lengths))]


def rl_batch(prompts: Sequence[Sequence[int]], rollout_ids: Sequence[np.ndarray],
             rollout_logp: Sequence[np.ndarray], advantages: np.ndarray, valid: np.ndarray,
             localized: tuple[Sequence[np.ndarray], Sequence[np.ndarray]] | None, seq_len: int,
             pad_id: int) -> dict[str, np.ndarray]:
    """The train step's batch (see `rcca_jax.rl.train_step`).

    Args:
      prompts: prompt ids of each rollout row; rollout_ids / rollout_logp: per
        row, the sampled ids and their log-probs [L_i]; advantages [N];
        valid [N] (False: evaluation error, masked out); localized: per row, the
        base weights [L_i] and the diagnosed mask [L_i] of its sampled ids
        (`pad_weights`), or None for plain GRPO (no such keys). The step turns them
        into the final weights with the advantage's sign (`loss.token_weights`).
    """
    n = len(prompts)
    out = sft_batch(prompts, rollout_ids, seq_len, pad_id)
    old = np.zeros((n, seq_len), np.float32)
    base = np.ones((n, seq_len), np.float32)
    diagnosed = np.zeros((n, seq_len), bool)
    for i, (p, lp) in enumerate(zip(prompts, rollout_logp)):
        old[i, len(p):len(p) + len(lp)] = lp
        if localized is not None:
            w, d = localized[0][i], localized[1][i]
            base[i, len(p):len(p) + len(w)] = w
            diagnosed[i, len(p):len(p) + len(d)] = d
    out["loss_mask"] &= np.asarray(valid, bool)[:, None]
    out["old_logp"] = old
    out["advantages"] = np.asarray(advantages, np.float32)
    if localized is not None:
        out["weights_base"], out["diagnosed"] = base, diagnosed
    return out


def pad_weights(base: np.ndarray, diagnosed: np.ndarray, length: int) -> tuple[np.ndarray, np.ndarray]:
    """Extends per-token arrays of the response ids to `length` tokens (EOS: weight 1, not diagnosed)."""
    w = np.ones(length, np.float32)
    d = np.zeros(length, bool)
    k = min(length, len(base))
    w[:k], d[:k] = base[:k], diagnosed[:k]
    return w, d
