"""Weighted GRPO: group-relative advantages, asymmetric token weights, clipped loss.

The one change RCCA makes to GRPO is a per-token weight w folded into the
advantage inside the clipped objective:

    l_{i,t} = min(rho_{i,t} w_{i,t} A_i, clip(rho_{i,t}, 1 - eps_low, 1 + eps_high) w_{i,t} A_i)

The loss is the negated, aggregated objective. Weights never enter the
aggregation denominators, so all-ones weights give exactly plain GRPO.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp



def group_advantages(rewards: jax.Array, valid: jax.Array, group_size: int,
                     eps: float = 1e-6) -> jax.Array:
    """A_i = (r_i - mean_G) / (std_G + eps) within consecutive groups of `group_size`.

    std is the unbiased sample estimate (ddof=1, as TRL's GRPO), over the valid
    members only. Rows with `valid` False (evaluation `error`) take no part in
    their group's statistics and get A = 0. A group whose valid rewards are all
    equal, or that has fewer than two valid rows, gets A = 0 for every row: a
    group with no contrast carries no signal and must not be amplified by a
    tiny denominator.

    Args:
      rewards: float [B] with B = groups * group_size, groups contiguous.
      valid: bool [B].
    Returns:
      float32 [B].
    """
    r = rewards.astype(jnp.float32).reshape(-1, group_size)  # [N, G]
    m = valid.reshape(-1, group_size)
    r = jnp.where(m, r, 0.0)
    n = m.sum(-1, keepdims=True)
    mean = r.sum(-1, keepdims=True) / jnp.maximum(n, 1)
    dev = jnp.where(m, r - mean, 0.0)
    var = (dev * dev).sum(-1, keepdims=True) / jnp.maximum(n - 1, 1)
    std = jnp.sqrt(var)
    spread = (jnp.where(m, r, -jnp.inf).max(-1, keepdims=True)
              - jnp.where(m, r, jnp.inf).min(-1, keepdims=True))
    informative = (n >= 2) & (spread > 0)
    adv = jnp.where(m & informative, dev / (std + eps), 0.0)
    return adv.reshape(-1)


def token_weights(base: jax.Array, diagnosed: jax.Array, advantages: jax.Array, *,
                  positive_other: float = 1.2, positive_diagnosed: float = 1.0) -> jax.Array:
    """Final per-token weights by the sign of each response's advantage (the method's rule).

    A_i < 0: the localization weights `base` (the penalty focused on blamed code:
    direct 3, context 1.5, other 1, accumulated and capped by the localizer);
    A_i >= 0: `positive_diagnosed` on diagnosed tokens and `positive_other`
    elsewhere, so reinforcing a partly good response leans away from the code the
    diagnostics point at. This is the rule's only implementation; the train step
    applies it inside the jitted step.

    Args:
      base: float [B, T]; diagnosed: bool [B, T]; advantages: float [B].
    Returns:
      float32 [B, T].
    """
    positive = jnp.where(diagnosed, positive_diagnosed, positive_other)
    return jnp.where(advantages[:, None] < 0, base.astype(jnp.float32), positive).astype(jnp.float32)


def _weights_as_given(weights: jax.Array, m: jax.Array) -> jax.Array:
    return weights


def _weights_row_mean(weights: jax.Array, m: jax.Array) -> jax.Array:
    """Each response's weights rescaled to mean 1 over its counted tokens.

    The weights then move credit between a response's tokens without changing
    its total, so a group's weighted advantages still sum to zero as in GRPO.
    As given, A < 0 rows (weights up to 4) outweigh A >= 0 rows (1 to 1.2): the
    update as a whole pushes probability off diagnosed tokens, which on a small
    sharply peaked policy shows up as rising entropy.
    """
    w = weights.astype(jnp.float32)
    mean = (w * m).sum(-1, keepdims=True) / jnp.maximum(m.sum(-1, keepdims=True), 1.0)  # [B, 1]
    return w / jnp.maximum(mean, 1e-6)


# How the token weights enter the loss (`TrainConfig.weight_norm`).
WEIGHT_NORMS = {"none": _weights_as_given, "row_mean": _weights_row_mean}


# Each aggregator returns (numerator, denominator) so that micro-batches can
# share the full batch's denominator and sum to exactly the full-batch loss.
def _token_mean(obj: jax.Array, m: jax.Array):
    return (obj * m).sum(), m.sum()


def _seq_mean_token_mean(obj: jax.Array, m: jax.Array):
    per_seq_n = m.sum(-1)
    per_seq = (obj * m).sum(-1) / jnp.maximum(per_seq_n, 1.0)
    has = (per_seq_n > 0).astype(jnp.float32)  # sequences with no counted token do not dilute
    return (per_seq * has).sum(), has.sum()


def _seq_mean_token_sum_norm(obj: jax.Array, m: jax.Array):
    return ((obj * m).sum(-1) / obj.shape[-1]).sum(), jnp.asarray(obj.shape[0], jnp.float32)


AGGREGATORS = {
    "seq-mean-token-mean": _seq_mean_token_mean,
    "token-mean": _token_mean,
    "seq-mean-token-sum-norm": _seq_mean_token_sum_norm,
}


def policy_loss(logp: jax.Array, old_logp: jax.Array, advantages: jax.Array, weights: jax.Array,
                mask: jax.Array, *, eps_low: float = 0.2, eps_high: float = 0.2,
                agg: str = "seq-mean-token-mean", dual_clip: float | None = None,
                denominator: jax.Array | None = None):
    """Weighted clipped policy-gradient loss.

    Args:
      logp: float [B, T] log-probs of the sampled tokens under the current policy.
      old_logp: float [B, T] the same under the sampling policy.
      advantages: float [B]; weights: float [B, T]; mask: bool/float [B, T]
        (1 on response tokens that count; padding, prompt and `error` rows 0).
      eps_low, eps_high: clip range [1 - eps_low, 1 + eps_high].
      agg: "seq-mean-token-mean" (GRPO), "token-mean", "seq-mean-token-sum-norm"
        (Dr. GRPO: per-sequence sum over T_max = T, then mean over sequences).
      dual_clip: if set (> 1), negative-advantage terms are bounded below by
        dual_clip * w * A (dual-clip PPO).
      denominator: the aggregation denominator to use instead of this batch's
        own (`loss_denominator` of the full batch, for micro-batches).
    Returns:
      (loss scalar, metrics dict).
    """
    if agg not in AGGREGATORS:
        raise ValueError(f"agg={agg!r}: expected one of {sorted(AGGREGATORS)}")
    logp = logp.astype(jnp.float32)
    ratio = jnp.exp(logp - old_logp.astype(jnp.float32))
    wa = weights.astype(jnp.float32) * advantages.astype(jnp.float32)[:, None]  # [B, T]
    unclipped = ratio * wa
    clipped = jnp.clip(ratio, 1.0 - eps_low, 1.0 + eps_high) * wa
    obj = jnp.minimum(unclipped, clipped)
    if dual_clip is not None:
        obj = jnp.where(wa < 0, jnp.maximum(obj, dual_clip * wa), obj)
    m = mask.astype(jnp.float32)
    num, den = AGGREGATORS[agg](obj, m)
    den = den if denominator is None else denominator
    loss = -num / jnp.maximum(den, 1.0)
    n = jnp.maximum(m.sum(), 1.0)
    adv_b = advantages[:, None]
    metrics = {
        "loss/pg": loss,
        "clip/low_frac": (((ratio < 1.0 - eps_low) & (adv_b < 0)) * m).sum() / n,
        "clip/high_frac": (((ratio > 1.0 + eps_high) & (adv_b > 0)) * m).sum() / n,
        "ratio/mean": (ratio * m).sum() / n,
        "ratio/max": jnp.where(m > 0, ratio, -jnp.inf).max(),
    }
    return loss, metrics


def loss_denominator(mask: jax.Array, agg: str) -> jax.Array:
    """The denominator `agg` uses for a batch with this mask [B, T]."""
    m = mask.astype(jnp.float32)
    return AGGREGATORS[agg](jnp.zeros_like(m), m)[1]


def kl_penalty(logp: jax.Array, ref_logp: jax.Array, mask: jax.Array, estimator: str = "k3") -> jax.Array:
    """Token-mean KL(pi || pi_ref) estimate on sampled tokens: k1 = log r, k3 = r - 1 - log r
    with r = pi_ref / pi (Schulman's estimators; k3 is unbiased and non-negative)."""
    log_r = ref_logp.astype(jnp.float32) - logp.astype(jnp.float32)
    if estimator not in KL_ESTIMATORS:
        raise ValueError(f"estimator={estimator!r}: expected one of {sorted(KL_ESTIMATORS)}")
    kl = KL_ESTIMATORS[estimator](log_r)
    m = mask.astype(jnp.float32)
    return (kl * m).sum() / jnp.maximum(m.sum(), 1.0)


KL_ESTIMATORS = {
    "k1": lambda log_r: -log_r,
    "k3": lambda log_r: jnp.exp(log_r) - 1.0 - log_r,
}
