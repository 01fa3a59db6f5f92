"""Supervised warm-up: cross-entropy on reference solutions, same state and sharding as RL."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax
from flax import nnx

from rcca_jax.models.logprobs import token_logprobs
from rcca_jax.rl.train_step import TrainState
from rcca_jax.train.config import SFTConfig


def sft_optimizer(cfg: SFTConfig, max_grad_norm: float = 1.0) -> optax.GradientTransformation:
    warm = optax.linear_schedule(0.0, cfg.learning_rate, max(1, cfg.warmup_steps))
    return optax.chain(optax.clip_by_global_norm(max_grad_norm), optax.adamw(warm, weight_decay=0.0))


def init_sft_state(model: nnx.Module, cfg: SFTConfig) -> tuple[nnx.GraphDef, TrainState]:
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    return graphdef, TrainState(params, rest, sft_optimizer(cfg).init(params), jnp.zeros((), jnp.int32))


def sft_step(graphdef, cfg: SFTConfig, chunk: int, state: TrainState, batch: dict):
    """One step of token-mean cross-entropy on `loss_mask` tokens.

    batch: tokens int32 [B, T], loss_mask bool [B, T] (True on response tokens,
    as prediction targets; position 0 never counts).
    """
    def loss_fn(params):
        model = nnx.merge(graphdef, params, state.rest)
        h, _, _ = model.hidden(batch["tokens"][:, :-1])
        logp, _ = token_logprobs(h, model.head_kernel(), batch["tokens"][:, 1:], chunk)
        m = batch["loss_mask"][:, 1:].astype(jnp.float32)
        return -(logp * m).sum() / jnp.maximum(m.sum(), 1.0)

    loss, grads = jax.value_and_grad(loss_fn)(state.params)
    updates, opt_state = sft_optimizer(cfg).update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    metrics = {"sft/loss": loss, "sft/grad_norm": optax.tree.norm(grads)}
    return TrainState(params, state.rest, opt_state, state.step + 1), metrics
