"""The weighted-GRPO train step: pure, jitted once, explicit shardings, donation.

Batch layout (all [B, T] arrays aligned with `tokens`; position t of
`old_logp`, `weights` and `loss_mask` refers to token t as a prediction
target, so position 0 is never counted):

  tokens     int32 [B, T]   prompt + response + right padding
  loss_mask  bool  [B, T]   response tokens that count (False: prompt, pad, `error` rows)
  old_logp   f32   [B, T]   log-prob of each token under the sampling policy
  advantages f32   [B]
  weights    f32   [B, T]   final token weights (`token_weights`); leave the key
                            out for plain, unweighted GRPO
  ref_logp   f32   [B, T]   only when the KL penalty is on
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from rcca_jax import sharding
from rcca_jax.models.logprobs import token_logprobs
from rcca_jax.models.moe import ExpertBias, update_expert_bias
from rcca_jax.rl.loss import WEIGHT_NORMS, kl_penalty, loss_denominator, policy_loss



@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Optimisation settings of the RL step (documented defaults: the paper's GRPO)."""

    optimizer: str = "adamw"  # a key of OPTIMIZERS
    learning_rate: float = 1e-6
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    eps_low: float = 0.2
    eps_high: float = 0.2
    dual_clip: float | None = None
    agg: str = "seq-mean-token-mean"
    kl_coef: float = 0.0
    kl_estimator: str = "k3"
    micro_batches: int = 1
    logprob_chunk: int = 256
    temperature: float = 1.0  # the sampler's; logits are divided by it
    expert_bias_rate: float = 1e-3
    expert_bias_zero_mean: bool = True
    weight_norm: str = "none"  # "none" (the weights as given) or "row_mean" (loss.WEIGHT_NORMS)


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class TrainState:
    params: nnx.State
    rest: nnx.State       # non-trainable variables (expert biases)
    opt_state: Any
    step: jax.Array


OPTIMIZERS = {
    "adamw": lambda cfg: optax.adamw(cfg.learning_rate, weight_decay=cfg.weight_decay),
    # Plain SGD: updates linear in the gradient (used to test exactness of the step).
    "sgd": lambda cfg: optax.sgd(cfg.learning_rate),
}


def optimizer(cfg: TrainConfig) -> optax.GradientTransformation:
    if cfg.optimizer not in OPTIMIZERS:
        raise ValueError(f"TrainConfig.optimizer={cfg.optimizer!r}: expected one of {sorted(OPTIMIZERS)}")
    return optax.chain(optax.clip_by_global_norm(cfg.max_grad_norm), OPTIMIZERS[cfg.optimizer](cfg))


def init_state(model: nnx.Module, cfg: TrainConfig) -> tuple[nnx.GraphDef, TrainState]:
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    return graphdef, TrainState(params, rest, optimizer(cfg).init(params), jnp.zeros((), jnp.int32))


def _micro_loss(graphdef, cfg: TrainConfig, params, rest, mb, denominator):
    model = nnx.merge(graphdef, params, rest)
    h, _, aux = model.hidden(mb["tokens"][:, :-1])
    logp, ent = token_logprobs(h, model.head_kernel(), mb["tokens"][:, 1:], cfg.logprob_chunk,
                               cfg.temperature)  # [B, T-1]
    mask = mb["loss_mask"][:, 1:]
    weights = mb["weights"][:, 1:] if "weights" in mb else jnp.ones_like(logp)
    weights = WEIGHT_NORMS[cfg.weight_norm](weights, mask.astype(jnp.float32))
    loss, metrics = policy_loss(logp, mb["old_logp"][:, 1:], mb["advantages"], weights,
                                mask, eps_low=cfg.eps_low, eps_high=cfg.eps_high, agg=cfg.agg,
                                dual_clip=cfg.dual_clip, denominator=denominator)
    m = mask.astype(jnp.float32)
    sums = {"entropy": (ent * m).sum(), "tokens": m.sum(),
            "old_logp_diff_max": jnp.where(m > 0, jnp.abs(logp - mb["old_logp"][:, 1:]), 0.0).max()}
    if cfg.kl_coef:
        kl = kl_penalty(logp, mb["ref_logp"][:, 1:], mask, cfg.kl_estimator)
        loss = loss + cfg.kl_coef * kl
        sums["kl"] = kl
    return loss, (metrics, sums, aux["expert_load"])


def _update_biases(rest: nnx.State, loads: jax.Array, cfg: TrainConfig) -> nnx.State:
    """Aux-loss-free balancing of every MoE layer, in layer order, outside the optimizer.

    Only the main model's layers: the MTP modules (`mtp_layers`) do not run here.
    """
    flat = list(nnx.to_flat_state(rest))
    out, i = [], 0
    for path, var in flat:
        if isinstance(var, ExpertBias) and path[0] == "layers":
            new = update_expert_bias(var.get_value(), loads[i], cfg.expert_bias_rate,
                                     cfg.expert_bias_zero_mean)
            var = var.replace(new)
            i += 1
        out.append((path, var))
    return nnx.from_flat_state(out)


def train_step(graphdef, cfg: TrainConfig, state: TrainState, batch: dict):
    """One optimizer step over `cfg.micro_batches` accumulated micro-batches."""
    n_mb = cfg.micro_batches
    denominator = loss_denominator(batch["loss_mask"][:, 1:], cfg.agg)
    split = jax.tree.map(lambda a: a.reshape(n_mb, a.shape[0] // n_mb, *a.shape[1:]), batch)
    grad_fn = jax.value_and_grad(lambda p, mb: _micro_loss(graphdef, cfg, p, state.rest, mb, denominator),
                                 has_aux=True)

    def accumulate(carry, mb):
        grads, loss = carry
        (l, aux), g = grad_fn(state.params, mb)
        return (jax.tree.map(jnp.add, grads, g), loss + l), aux

    zeros = jax.tree.map(jnp.zeros_like, state.params)
    (grads, loss), (metrics, sums, loads) = jax.lax.scan(accumulate, (zeros, jnp.zeros(())), split)
    tx = optimizer(cfg)
    updates, opt_state = tx.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    load = loads.mean(0)  # [L_moe, E]
    rest = _update_biases(state.rest, load, cfg)
    tokens = jnp.maximum(sums["tokens"].sum(), 1.0)
    out = {
        "loss/total": loss,
        "loss/pg": metrics["loss/pg"].sum(),
        "clip/low_frac": metrics["clip/low_frac"].mean(),
        "clip/high_frac": metrics["clip/high_frac"].mean(),
        "ratio/mean": metrics["ratio/mean"].mean(),
        "ratio/max": metrics["ratio/max"].max(),
        "policy/entropy": sums["entropy"].sum() / tokens,
        "policy/logp_diff_max": sums["old_logp_diff_max"].max(),
        "optim/grad_norm": optax.tree.norm(grads),
        "moe/load_max_over_mean": (load.max(-1) * load.shape[-1]).max() if load.size else jnp.zeros(()),
        "moe/load": load,
    }
    if cfg.kl_coef:
        out["loss/kl"] = sums["kl"].mean()
    return TrainState(params, rest, opt_state, state.step + 1), out


def batch_shardings(mesh: Mesh, batch: dict) -> dict:
    """Every batch array is sharded over its leading (batch) dimension."""
    return {k: NamedSharding(mesh, sharding.spec(("batch",) + (None,) * (np.ndim(v) - 1), mesh=mesh,
                                                 shape=np.shape(v)))
            for k, v in batch.items()}


def state_shardings(state: TrainState, mesh: Mesh) -> TrainState:
    is_state = lambda x: isinstance(x, nnx.State)  # noqa: E731
    opt = jax.tree.map(lambda x: sharding.state_shardings(x, mesh) if is_state(x)
                       else NamedSharding(mesh, P()), state.opt_state, is_leaf=is_state)
    return TrainState(sharding.state_shardings(state.params, mesh),
                      sharding.state_shardings(state.rest, mesh), opt, NamedSharding(mesh, P()))


def compile_step(step: Callable, state: TrainState, example_batch: dict,
                 mesh: Mesh | None = None) -> tuple[TrainState, Callable]:
    """Places `state` and jits `step(state, batch) -> (state, metrics)` with donation.

    With a mesh: explicit in/out shardings (state by its logical axes, batch
    over `batch`); the caller places batches with `global_batch`.
    """
    if mesh is None:
        return state, jax.jit(step, donate_argnums=0)
    s_shard = state_shardings(state, mesh)
    b_shard = batch_shardings(mesh, example_batch)
    state = jax.device_put(state, s_shard)

    def meshed(s, b):
        with sharding.use_mesh(mesh):
            return step(s, b)

    return state, jax.jit(meshed, in_shardings=(s_shard, b_shard), out_shardings=(s_shard, None),
                          donate_argnums=0)


def compile_train_step(graphdef, cfg: TrainConfig, state: TrainState, example_batch: dict,
                       mesh: Mesh | None = None) -> tuple[TrainState, Callable]:
    """`compile_step` of the weighted-GRPO `train_step`."""
    return compile_step(lambda s, b: train_step(graphdef, cfg, s, b), state, example_batch, mesh)


def global_batch(local: dict[str, np.ndarray], mesh: Mesh) -> dict[str, jax.Array]:
    """Assembles each process's host-local rows into the global, sharded batch."""
    shard = batch_shardings(mesh, {k: np.zeros((v.shape[0] * jax.process_count(), *v.shape[1:]))
                                   for k, v in local.items()})
    return {k: jax.make_array_from_process_local_data(shard[k], np.asarray(v)) for k, v in local.items()}
