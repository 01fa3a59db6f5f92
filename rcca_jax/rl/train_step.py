"""The weighted-GRPO train step: pure, jitted once, explicit shardings, donation.

Batch layout (all [B, T] arrays aligned with `tokens`; position t of
`old_logp`, `weights` and `loss_mask` refers to token t as a prediction
target, so position 0 is never counted):

  tokens     int32 [B, T]   prompt + response + right padding
  loss_mask  bool  [B, T]   response tokens that count (False: prompt, pad, `error` rows)
  old_logp   f32   [B, T]   log-prob of each token under the sampling policy
  advantages f32   [B]
  weights_base f32 [B, T]   localization's base weight of each token (1 where nothing
                            is blamed); with `diagnosed`, leave both out for plain GRPO
  diagnosed  bool  [B, T]   tokens some counted diagnostic blames
  ref_logp   f32   [B, T]   log-prob of each token under the frozen reference policy
                            (`reference_logprobs`); only when the KL penalty is on

Temperature. The step recomputes log-probs of the sampled tokens under the
policy at the temperature the rollouts were sampled with (the sampler's), so the
ratio compares the same distribution: it is an argument of the step, taken from
the one `SamplerConfig.temperature` of a run, never a setting of its own.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import jax
import jax.numpy as jnp
import optax
from flax import nnx
from jax.sharding import Mesh

from rcca_jax import sharding
from rcca_jax.models.logprobs import token_logprobs
from rcca_jax.models.moe import update_expert_bias
from rcca_jax.models.stack import expert_bias_rows
from rcca_jax.state import TrainState, abstract_state, batch_shardings, compile_step, is_abstract
from rcca_jax.rl.loss import WEIGHT_NORMS, kl_penalty, loss_denominator, policy_loss, token_weights



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
    kl_estimator: str = "k3"   # a key of loss.KL_ESTIMATORS
    kl_ref_dtype: str = ""     # parameters of the frozen reference; "" = the model's compute dtype
    # Report `loss/kl` against the reference at kl_coef 0 too (it stays out of the loss): a
    # run's drift from its start, for one more forward per step.
    kl_measure: bool = False
    micro_batches: int = 1
    logprob_chunk: int = 256
    lr_schedule: str = "constant"  # a key of LR_SCHEDULES (after `warmup_steps` of linear warmup)
    warmup_steps: int = 0      # optimizer steps of linear warmup from 0
    decay_steps: int = 0       # "cosine": steps after warmup to decay to lr * lr_end_factor
    lr_end_factor: float = 0.1
    expert_bias_rate: float = 1e-3
    expert_bias_zero_mean: bool = True
    weight_norm: str = "none"  # "none" (the weights as given) or "row_mean" (loss.WEIGHT_NORMS)
    # The A >= 0 side of the asymmetric rule (`loss.token_weights`); A < 0 rows take the base weights.
    positive_other: float = 1.2
    positive_diagnosed: float = 1.0


def uses_reference(cfg: TrainConfig) -> bool:
    """Whether the step reads the frozen reference's log-probs (`batch['ref_logp']`)."""
    return bool(cfg.kl_coef) or cfg.kl_measure


def _constant_after_warmup(cfg: TrainConfig) -> optax.Schedule:
    if cfg.warmup_steps <= 0:
        return optax.constant_schedule(cfg.learning_rate)
    return optax.linear_schedule(0.0, cfg.learning_rate, cfg.warmup_steps)  # then holds lr


def _cosine_after_warmup(cfg: TrainConfig) -> optax.Schedule:
    if cfg.decay_steps <= 0:
        raise ValueError("TrainConfig.lr_schedule='cosine' needs decay_steps > 0")
    return optax.warmup_cosine_decay_schedule(
        0.0, cfg.learning_rate, max(cfg.warmup_steps, 0), cfg.warmup_steps + cfg.decay_steps,
        end_value=cfg.learning_rate * cfg.lr_end_factor)


# Learning rate per optimizer step (the optimizer's own step count, so resumes continue it).
LR_SCHEDULES = {"constant": _constant_after_warmup, "cosine": _cosine_after_warmup}


def learning_rate(cfg: TrainConfig) -> optax.Schedule:
    if cfg.lr_schedule not in LR_SCHEDULES:
        raise ValueError(f"TrainConfig.lr_schedule={cfg.lr_schedule!r}: expected one of {sorted(LR_SCHEDULES)}")
    return LR_SCHEDULES[cfg.lr_schedule](cfg)


OPTIMIZERS = {
    "adamw": lambda cfg: optax.adamw(learning_rate(cfg), weight_decay=cfg.weight_decay),
    # Plain SGD: updates linear in the gradient (used to test exactness of the step).
    "sgd": lambda cfg: optax.sgd(learning_rate(cfg)),
}


def optimizer(cfg: TrainConfig) -> optax.GradientTransformation:
    if cfg.optimizer not in OPTIMIZERS:
        raise ValueError(f"TrainConfig.optimizer={cfg.optimizer!r}: expected one of {sorted(OPTIMIZERS)}")
    return optax.chain(optax.clip_by_global_norm(cfg.max_grad_norm), OPTIMIZERS[cfg.optimizer](cfg))


def init_state(model: nnx.Module, cfg: TrainConfig) -> tuple[nnx.GraphDef, TrainState]:
    """(graphdef, the RL train state) of a model; abstract when the model is (`abstract_state`)."""
    tx = optimizer(cfg)
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    if is_abstract(params):
        return abstract_state(model, tx)
    return graphdef, TrainState(params, rest, tx.init(params), jnp.zeros((), jnp.int32))


def _micro_loss(graphdef, cfg: TrainConfig, temperature: float, params, rest, mb, denominator):
    model = nnx.merge(graphdef, params, rest)
    h, _, aux = model.hidden(mb["tokens"][:, :-1])
    logp, ent = token_logprobs(h, model.head_kernel(), mb["tokens"][:, 1:], cfg.logprob_chunk,
                               temperature)  # [B, T-1]
    mask = mb["loss_mask"][:, 1:]
    m = mask.astype(jnp.float32)
    if "weights_base" in mb:
        weights = token_weights(mb["weights_base"][:, 1:], mb["diagnosed"][:, 1:], mb["advantages"],
                                positive_other=cfg.positive_other,
                                positive_diagnosed=cfg.positive_diagnosed)
        dir_neg = (mb["diagnosed"][:, 1:] & (mb["advantages"][:, None] < 0)).astype(jnp.float32) * m
        diag = mb["diagnosed"][:, 1:].astype(jnp.float32) * m
        w_sums = {"w": (weights * m).sum(), "w_dir": (weights * dir_neg).sum(), "n_dir": dir_neg.sum(),
                  "n_diag": diag.sum(), "ent_diag": (ent * diag).sum()}
    else:
        weights, w_sums = jnp.ones_like(logp), {}
    weights = WEIGHT_NORMS[cfg.weight_norm](weights, m)
    loss, metrics = policy_loss(logp, mb["old_logp"][:, 1:], mb["advantages"], weights,
                                mask, eps_low=cfg.eps_low, eps_high=cfg.eps_high, agg=cfg.agg,
                                dual_clip=cfg.dual_clip, denominator=denominator)
    sums = {**w_sums, "entropy": (ent * m).sum(), "tokens": m.sum(),
            "old_logp_diff_max": jnp.where(m > 0, jnp.abs(logp - mb["old_logp"][:, 1:]), 0.0).max()}
    if uses_reference(cfg):
        kl = kl_penalty(logp, mb["ref_logp"][:, 1:], mask, cfg.kl_estimator)
        if cfg.kl_coef:
            loss = loss + cfg.kl_coef * kl
        sums["kl"] = jax.lax.stop_gradient(kl)
    return loss, (metrics, sums, aux["expert_load"])


def _update_biases(rest: nnx.State, loads: jax.Array, cfg: TrainConfig) -> nnx.State:
    """Aux-loss-free balancing of every MoE layer, outside the optimizer.

    `loads` [L_moe, E] is in layer order; `expert_bias_rows` gives each bias its rows
    (one for an unrolled layer's [E], N for a scanned group position's [N, E]). Only
    the main model's layers: the MTP modules (`mtp_layers`) do not run here.
    """
    rows = expert_bias_rows(rest)
    out = []
    for path, var in nnx.to_flat_state(rest):
        if path in rows:
            var = var.replace(update_expert_bias(var.get_value(), loads[rows[path]],
                                                 cfg.expert_bias_rate, cfg.expert_bias_zero_mean))
        out.append((path, var))
    return nnx.from_flat_state(out)


def train_step(graphdef, cfg: TrainConfig, state: TrainState, batch: dict, *,
               temperature: float = 1.0):
    """One optimizer step over `cfg.micro_batches` accumulated micro-batches.

    `temperature` is the one the rollouts were sampled at (see the module docstring).
    """
    n_mb = cfg.micro_batches
    if uses_reference(cfg) and "ref_logp" not in batch:
        raise ValueError("TrainConfig.kl_coef > 0 or kl_measure needs batch['ref_logp'] "
                         "(reference_logprobs)")
    denominator = loss_denominator(batch["loss_mask"][:, 1:], cfg.agg)
    split = jax.tree.map(lambda a: _split_micro(a, n_mb), batch)
    grad_fn = jax.value_and_grad(
        lambda p, mb: _micro_loss(graphdef, cfg, temperature, p, state.rest, mb, denominator),
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
        "optim/learning_rate": learning_rate(cfg)(state.step),
    }
    if uses_reference(cfg):
        out["loss/kl"] = sums["kl"].mean()
    if "w" in sums:  # the final weights, before any normalisation (WEIGHT_NORMS)
        out["weights/mean"] = sums["w"].sum() / tokens
        out["weights/frac_diagnosed"] = sums["n_diag"].sum() / tokens
        out["weights/mean_dir"] = jnp.where(sums["n_dir"].sum() > 0, sums["w_dir"].sum()
                                            / jnp.maximum(sums["n_dir"].sum(), 1.0), 1.0)
        # Does the policy grow unsure where it was blamed, and only there?
        n_diag = sums["n_diag"].sum()
        out["policy/entropy_diagnosed"] = sums["ent_diag"].sum() / jnp.maximum(n_diag, 1.0)
        out["policy/entropy_other"] = ((sums["entropy"].sum() - sums["ent_diag"].sum())
                                       / jnp.maximum(sums["tokens"].sum() - n_diag, 1.0))
    return TrainState(params, rest, opt_state, state.step + 1), out


def _split_micro(a: jax.Array, n_mb: int) -> jax.Array:
    """[B, ...] -> [n_mb, B / n_mb, ...], micro-batch m holding rows m, m + n_mb, ...

    Each device's block of rows holds rows of every micro-batch, so the split keeps the
    batch sharding (a contiguous split would put a micro-batch on a fraction of the
    devices and make XLA reshard the batch).
    """
    return jnp.swapaxes(a.reshape(a.shape[0] // n_mb, n_mb, *a.shape[1:]), 0, 1)


def _merge_micro(a: jax.Array) -> jax.Array:
    """The inverse of `_split_micro`."""
    return jnp.swapaxes(a, 0, 1).reshape(a.shape[0] * a.shape[1], *a.shape[2:])


def reference_logprobs(graphdef, ref: "Reference", batch: dict, *, chunk: int,
                       temperature: float, micro_batches: int = 1) -> jax.Array:
    """Log-probs [B, T] of `batch["tokens"]` under the frozen reference policy.

    Position t is token t as a prediction target (0 at t = 0), as `old_logp`; the
    train step reads the result as `batch["ref_logp"]` for its KL penalty. The batch
    is run `micro_batches` at a time, as the train step runs it (forward only).
    """
    model = nnx.merge(graphdef, ref.params, ref.rest)

    def one(tokens):  # [b, T]
        h, _, _ = model.hidden(tokens[:, :-1])
        logp, _ = token_logprobs(h, model.head_kernel(), tokens[:, 1:], chunk, temperature)  # [b, T-1]
        return jnp.pad(logp, ((0, 0), (1, 0)))

    return _merge_micro(jax.lax.map(one, _split_micro(batch["tokens"], micro_batches)))


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class Reference:
    """The frozen reference policy of the KL penalty (the policy RL started from)."""

    params: nnx.State
    rest: nnx.State


def make_reference(state: TrainState, dtype, mesh: Mesh | None = None) -> Reference:
    """A frozen copy of the state's policy, its floating weights in `dtype`.

    Weights the model keeps in float32 whatever its dtype (`checkpoint.FP32_PARAMS`:
    gates, conv taps, expert biases) stay float32, as when a checkpoint is loaded in
    `dtype`. The copy is a new buffer placed like the policy (the train step donates
    the policy's), computed by one jitted function.
    """
    from rcca_jax.models.checkpoint import FP32_PARAMS

    def cast(tree: nnx.State) -> nnx.State:
        flat = []
        for path, var in nnx.to_flat_state(tree):
            a = var.get_value()
            if jnp.issubdtype(a.dtype, jnp.floating) and path[-1] not in FP32_PARAMS:
                a = a.astype(dtype)
            flat.append((path, var.replace(a + jnp.zeros((), a.dtype))))  # a new buffer
        return nnx.from_flat_state(flat)

    fn = lambda p, r: Reference(cast(p), cast(r))  # noqa: E731
    if mesh is None:
        return jax.jit(fn)(state.params, state.rest)
    out = Reference(sharding.state_shardings(state.params, mesh), sharding.state_shardings(state.rest, mesh))
    return jax.jit(fn, out_shardings=out)(state.params, state.rest)


def compile_reference_logprobs(graphdef, ref: Reference, example_batch: dict, mesh: Mesh | None, *,
                               chunk: int, temperature: float, micro_batches: int = 1) -> Callable:
    """`reference_logprobs` jitted once: (ref, batch) -> ref_logp [B, T], sharded like the batch."""
    fn = lambda r, b: reference_logprobs(graphdef, r, b, chunk=chunk, temperature=temperature,  # noqa: E731
                                         micro_batches=micro_batches)
    if mesh is None:
        return jax.jit(fn)
    r_shard = Reference(sharding.state_shardings(ref.params, mesh), sharding.state_shardings(ref.rest, mesh))
    b_shard = batch_shardings(mesh, {k: v for k, v in example_batch.items() if k != "ref_logp"})

    def meshed(r, b):
        with sharding.use_mesh(mesh):
            return fn(r, b)

    return jax.jit(meshed, in_shardings=(r_shard, b_shard), out_shardings=b_shard["tokens"])


def compile_train_step(graphdef, cfg: TrainConfig, state: TrainState, example_batch: dict,
                       mesh: Mesh | None = None, *, temperature: float = 1.0
                       ) -> tuple[TrainState, Callable]:
    """`compile_step` of the weighted-GRPO `train_step` at the sampling `temperature`."""
    return compile_step(lambda s, b: train_step(graphdef, cfg, s, b, temperature=temperature),
                        state, example_batch, mesh)
