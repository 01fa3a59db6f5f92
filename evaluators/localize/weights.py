"""Per-token loss weights from localized diagnostics.

Each diagnostic k marks tokens as direct (overlapping its S_dir), context (overlapping its
S_ctx) or other, giving that token the weight w_k = ``direct``, ``context`` or ``other``; a
token in both S_dir and S_ctx of one diagnostic counts as direct. Diagnostics add their excess
over ``other``, and the sum is capped:

    w = min(cap, other + Σ_k (w_k − other)),  i.e. min(cap, 1 + Σ_k (w_k − 1)) for other = 1,

so a token blamed directly by two diagnostics gets min(4, 1 + 2 + 2) = 4, not 9. Tokens
no diagnostic touches keep ``other``. ``diagnosed`` marks tokens in any span of any diagnostic.

The weight actually applied depends on the sign of the response's advantage A, which the
group decides: the trainer applies that rule (``rcca_jax.rl.loss.token_weights``, inside the
jitted step) to the base weights and the ``diagnosed`` mask computed here.
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
    """

    direct: float = 3.0
    context: float = 1.5
    other: float = 1.0
    cap: float = 4.0


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
