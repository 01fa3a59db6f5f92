"""Weighted GRPO for RCCA: advantages, token weights, loss, train step, sampler."""

from rcca_jax.rl.loss import (AGGREGATORS, group_advantages, kl_penalty, loss_denominator,
                              policy_loss, token_weights)

__all__ = ["AGGREGATORS", "group_advantages", "kl_penalty", "loss_denominator", "policy_loss",
           "token_weights"]
