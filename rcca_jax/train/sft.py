"""Supervised warm-up: cross-entropy on reference solutions, same state and sharding as RL."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax
from flax import nnx

from rcca_jax.models.logprobs import token_logprobs
from rcca_jax.state import TrainState, abstract_state, is_abstract
from rcca_jax.train.config import SFTConfig


def sft_optimizer(cfg: SFTConfig, max_grad_norm: float = 1.0) -> optax.GradientTransformation:
    warm = optax.linear_schedule(0.0, cfg.learning_rate, max(1, cfg.warmup_steps))
    return optax.chain(optax.clip_by_global_norm(max_grad_norm), optax.adamw(warm, weight_decay=0.0))


def init_sft_state(model: nnx.Module, cfg: SFTConfig) -> tuple[nnx.GraphDef, TrainState]:
    """(graphdef, the SFT train state); abstract when the model is (to restore into)."""
    tx = sft_optimizer(cfg)
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    if is_abstract(params):
        return abstract_state(model, tx)
    return graphdef, TrainState(params, rest, tx.init(params), jnp.zeros((), jnp.int32))


def _masked_ce(h, head, targets, mask, chunk):
    """Token-mean cross-entropy of h [B, T, D] on targets [B, T] where mask [B, T]."""
    logp, _ = token_logprobs(h, head, targets, chunk)
    m = mask.astype(jnp.float32)
    return -(logp * m).sum() / jnp.maximum(m.sum(), 1.0)


def sft_loss(model: nnx.Module, batch: dict, chunk: int):
    """(objective, metrics) of one SFT batch.

    The objective is the token-mean cross-entropy of the next token on
    `loss_mask` targets; with `model.cfg.mtp` it adds `mtp_loss_scaling_factor`
    times the mean over MTP depths of each depth's cross-entropy (depth k
    predicts token t + k + 1 at position t; its targets are the `loss_mask`
    tokens k + 1 .. T-1). Metrics: "sft/loss" (main cross-entropy) and, with
    MTP, "sft/loss_mtp" (the unscaled mean MTP cross-entropy).
    """
    tokens, mask = batch["tokens"], batch["loss_mask"]
    if not model.cfg.mtp:
        h, _, _ = model.hidden(tokens[:, :-1])
        loss = _masked_ce(h, model.head_kernel(), tokens[:, 1:], mask[:, 1:], chunk)
        return loss, {"sft/loss": loss}
    h, hs, _ = model.hidden_with_mtp(tokens[:, :-1])
    head = model.head_kernel()
    loss = _masked_ce(h, head, tokens[:, 1:], mask[:, 1:], chunk)
    depths = [_masked_ce(hk, head, tokens[:, k + 1:], mask[:, k + 1:], chunk)
              for k, hk in enumerate(hs, start=1)]
    loss_mtp = sum(depths) / len(depths)
    objective = loss + model.cfg.mtp_loss_scaling_factor * loss_mtp
    return objective, {"sft/loss": loss, "sft/loss_mtp": loss_mtp}


def sft_step(graphdef, cfg: SFTConfig, chunk: int, state: TrainState, batch: dict):
    """One step of token-mean cross-entropy on `loss_mask` tokens (+ the MTP loss, see `sft_loss`).

    batch: tokens int32 [B, T], loss_mask bool [B, T] (True on response tokens,
    as prediction targets; position 0 never counts).
    """
    def loss_fn(params):
        return sft_loss(nnx.merge(graphdef, params, state.rest), batch, chunk)

    (_, metrics), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
    updates, opt_state = sft_optimizer(cfg).update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    metrics = dict(metrics, **{"sft/grad_norm": optax.tree.norm(grads)})
    return TrainState(params, state.rest, opt_state, state.step + 1), metrics
