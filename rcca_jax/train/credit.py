"""Credit arms: what a run does with the base token weights before the train step.

`rl.method` picks one (`CREDIT`). Every arm but `grpo` starts from the localized base
weights of each rollout row (`weights_base`, `diagnosed`, over its sampled ids with EOS
appended); the train step then applies the advantage-sign rule (`rl.loss.token_weights`).
The arms exist to test the method's claim, that localized weights beat GRPO's uniform
advantage, against the right controls:

- ``rcca``: the weights as localized.
- ``grpo``: no weights (flat).
- ``placebo``: the same weights moved to random places of the same row: as many blamed
  tokens, at each weight, but on code the diagnostics did not point at. If it does as well
  as ``rcca``, the gain is from reweighting, not from localization.
- ``contrastive``: a blamed token that the row shares, in a matching run of tokens, with a
  better row of its group is not up-weighted (base weight 1). With flat weights such shared
  tokens cancel across the group's advantages; up-weighting them on the failing row alone
  pushes down code the better row also wrote.

Pure NumPy over per-row arrays; shapes: rows of [L_i] (the row's sampled ids).
"""

from __future__ import annotations

import difflib
import hashlib
from typing import Callable, Sequence

import numpy as np

Rows = tuple[list[np.ndarray], list[np.ndarray]]  # (base weights, diagnosed), each [L_i]


def placebo(weights: list[np.ndarray], diagnosed: list[np.ndarray], ids: Sequence[Sequence[int]],
            rewards: np.ndarray, group_size: int, seed: int) -> Rows:
    """Each row's weights (with their diagnosed marks) permuted over its tokens, EOS kept last.

    The permutation is seeded by `seed` and the row's ids, so a run is reproducible and two
    arms given the same rows move them alike.
    """
    out_w, out_d = [], []
    for w, d, r in zip(weights, diagnosed, ids):
        n = max(0, len(w) - 1)  # the EOS slot stays where it is (weight 1, not diagnosed)
        key = hashlib.sha256(np.asarray(r, np.int64).tobytes() + seed.to_bytes(8, "little"))
        perm = np.random.default_rng(int.from_bytes(key.digest()[:8], "little")).permutation(n)
        w2, d2 = w.copy(), d.copy()
        w2[:n], d2[:n] = w[:n][perm], d[:n][perm]
        out_w.append(w2)
        out_d.append(d2)
    return out_w, out_d


def shared_with_better(ids: Sequence[int], better: Sequence[Sequence[int]],
                       min_run: int = 4) -> np.ndarray:
    """bool [len(ids)]: tokens inside a matching run of at least `min_run` tokens with any of
    `better` (difflib's longest matching blocks, which keep the order: the same place)."""
    shared = np.zeros(len(ids), bool)
    a = [int(x) for x in ids]
    for other in better:
        m = difflib.SequenceMatcher(None, a, [int(x) for x in other], autojunk=False)
        for block in m.get_matching_blocks():
            if block.size >= min_run:
                shared[block.a:block.a + block.size] = True
    return shared


def contrastive(weights: list[np.ndarray], diagnosed: list[np.ndarray],
                ids: Sequence[Sequence[int]], rewards: np.ndarray, group_size: int,
                seed: int) -> Rows:
    """Base weight 1 for a row's tokens it shares with a better row of its group (groups are
    consecutive runs of `group_size` rows); the rest as localized."""
    out_w = [w.copy() for w in weights]
    for i, r in enumerate(ids):
        g0 = i - i % group_size
        better = [ids[j] for j in range(g0, g0 + group_size)
                  if j != i and rewards[j] > rewards[i]]
        if not better:
            continue
        shared = shared_with_better(r, better)
        k = min(len(shared), len(out_w[i]))
        row = out_w[i][:k]
        row[shared[:k] & (row > 1.0)] = 1.0
    return out_w, [d.copy() for d in diagnosed]


def as_localized(weights, diagnosed, ids, rewards, group_size, seed) -> Rows:
    return weights, diagnosed


# rl.method -> the transform of the localized weights; None: flat weights (no localization).
CREDIT: dict[str, Callable[..., Rows] | None] = {
    "rcca": as_localized, "grpo": None, "placebo": placebo, "contrastive": contrastive}
