"""Per-token loss weights from localized diagnostics.

Each diagnostic k marks tokens as direct (overlapping its S_dir), context (overlapping its
S_ctx) or other, giving that token the weight w_k = ``direct``, ``context`` or ``other``; a
token in both S_dir and S_ctx of one diagnostic counts as direct. Diagnostics add their excess
over ``other``, and the sum is capped:

    w = min(cap, other + Σ_k (w_k − other)),  i.e. min(cap, 1 + Σ_k (w_k − 1)) for other = 1,

so a token blamed directly by two diagnostics gets min(4, 1 + 2 + 2) = 4, not 9. Tokens
no diagnostic touches keep ``other``. ``diagnosed`` marks tokens in any span of any diagnostic.

The weight actually applied depends on the sign of the response's advantage A: when A < 0 the
localized weights w focus the penalty on the blamed code; when A ≥ 0 the diagnosed tokens get
``positive_diagnosed`` and all others ``positive_other``, so that reinforcement of a partly
good response leans away from the code diagnostics point at.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np


@dataclass(frozen=True)
class WeightConfig:
    """Weights of the localization (see the module docstring).

    Attributes:
        direct: w_k of a token overlapping the diagnostic's S_dir.
        context: w_k of a token overlapping its S_ctx (and not S_dir).
        other: w_k of any other token; also the weight of undiagnosed tokens when A < 0.
        cap: Upper bound of the accumulated weight.
        positive_other: Weight of undiagnosed tokens when A ≥ 0.
        positive_diagnosed: Weight of diagnosed tokens when A ≥ 0.
    """

    direct: float = 3.0
    context: float = 1.5
    other: float = 1.0
    cap: float = 4.0
    positive_other: float = 1.2
    positive_diagnosed: float = 1.0


def base_weights(n_tokens: int, per_diagnostic_masks: Sequence[tuple[np.ndarray, np.ndarray]],
                 cfg: WeightConfig = WeightConfig()) -> tuple[np.ndarray, np.ndarray]:
    """Accumulated localization weights of one response.

    Args:
        n_tokens: T, the number of sampled tokens.
        per_diagnostic_masks: One ``(dir_mask, ctx_mask)`` per diagnostic, each bool [T]
            (``span_mask`` of the diagnostic's S_dir and S_ctx).
        cfg: The weights.

    Returns:
        (w, diagnosed): w float32 [T] = min(cap, other + Σ_k (w_k − other)); diagnosed
        bool [T], True where a token overlaps any span of any diagnostic.

    Raises:
        ValueError: a mask does not have shape [T].
    """
    excess = np.zeros(n_tokens, dtype=np.float64)  # Σ_k (w_k − other), [T]
    diagnosed = np.zeros(n_tokens, dtype=bool)  # [T]
    for dir_mask, ctx_mask in per_diagnostic_masks:
        dir_mask = np.asarray(dir_mask, dtype=bool)
        ctx_mask = np.asarray(ctx_mask, dtype=bool)
        if dir_mask.shape != (n_tokens,) or ctx_mask.shape != (n_tokens,):
            raise ValueError(f"masks must have shape ({n_tokens},), got {dir_mask.shape} "
                             f"and {ctx_mask.shape}")
        w_k = np.where(dir_mask, cfg.direct, np.where(ctx_mask, cfg.context, cfg.other))
        excess += w_k - cfg.other
        diagnosed |= dir_mask | ctx_mask
    w = np.minimum(cfg.cap, cfg.other + excess).astype(np.float32)
    return w, diagnosed


def asymmetric_weights_batch(w: np.ndarray, diagnosed: np.ndarray, advantages: np.ndarray,
                             cfg: WeightConfig = WeightConfig()) -> np.ndarray:
    """Final weights of a batch, by the sign of each response's advantage.

    Args:
        w: float [B, T], ``base_weights`` of each response (padding included).
        diagnosed: bool [B, T].
        advantages: float [B], the advantage A of each response.
        cfg: The weights.

    Returns:
        float32 [B, T]: row b is w[b] when A[b] < 0, else ``positive_diagnosed`` on diagnosed
        tokens and ``positive_other`` elsewhere.

    Raises:
        ValueError: shapes disagree, or an advantage is not finite (its sign would be
            meaningless).
    """
    w = np.asarray(w, dtype=np.float32)
    diagnosed = np.asarray(diagnosed, dtype=bool)
    advantages = np.asarray(advantages, dtype=np.float64)
    if w.ndim != 2 or diagnosed.shape != w.shape or advantages.shape != (w.shape[0],):
        raise ValueError(f"expected w and diagnosed [B, T] and advantages [B], got {w.shape}, "
                         f"{diagnosed.shape}, {advantages.shape}")
    if not np.all(np.isfinite(advantages)):
        raise ValueError("advantages must be finite")
    positive = np.where(diagnosed, cfg.positive_diagnosed, cfg.positive_other)  # [B, T]
    return np.where(advantages[:, None] < 0, w, positive).astype(np.float32)


def asymmetric_weights(w: np.ndarray, diagnosed: np.ndarray, advantage: float,
                       cfg: WeightConfig = WeightConfig()) -> np.ndarray:
    """Final weights of one response (see ``asymmetric_weights_batch``).

    Args:
        w: float [T].
        diagnosed: bool [T].
        advantage: The response's advantage A.
        cfg: The weights.

    Returns:
        float32 [T].
    """
    return asymmetric_weights_batch(np.asarray(w)[None], np.asarray(diagnosed)[None],
                                    np.asarray([advantage]), cfg)[0]
