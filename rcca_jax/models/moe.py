"""Sigmoid-routed, group-limited MoE with a shared expert, and its two dispatch paths.

Routing (as the reference): sigmoid scores; the expert bias is added for
*selection only*; groups are ranked by the sum of their two best biased
scores, all but `topk_group` groups are masked out, the top-k experts of the
rest are chosen; their weights are the unbiased scores, renormalised (+1e-20)
and multiplied by `routed_scaling_factor`.

Dispatch paths with equal results when nothing is dropped:
- `dispatch_dropless`: sort token-expert pairs by expert and run grouped
  matmuls with `jax.lax.ragged_dot`; under a mesh with an `expert` axis it runs
  in `shard_map` and exchanges tokens with `all_to_all` over that axis.
- `dispatch_capacity`: GShard einsum dispatch/combine per sequence with a
  capacity of ceil(capacity_factor * T * k / E) slots per expert; XLA inserts
  the collectives from the shardings.
"""

from __future__ import annotations

import math
import jax
import jax.numpy as jnp
from flax import nnx
from jax.sharding import PartitionSpec as P

from rcca_jax import sharding
from rcca_jax.models.config import LingConfig
from rcca_jax.models.layers import MLP, Linear, dtype_of, param


class ExpertBias(nnx.Variable):
    """Selection bias of the aux-loss-free balancer; updated outside the optimizer."""


def route(x: jax.Array, w: jax.Array, bias: jax.Array, cfg: LingConfig):
    """Top-k routing.

    Args:
      x: [N, D] tokens; w: [D, E] router kernel; bias: [E] selection bias.
    Returns:
      weights [N, k] float32, expert ids [N, k] int32.
    """
    n, e, g = x.shape[0], cfg.num_experts, cfg.n_group
    logits = jnp.einsum("nd,de->ne", x.astype(jnp.float32), w.astype(jnp.float32))
    scores = jax.nn.sigmoid(logits)
    choice = scores + bias.astype(jnp.float32)
    group_scores = jax.lax.top_k(choice.reshape(n, g, e // g), 2)[0].sum(-1)  # [N, G]
    _, top_groups = jax.lax.top_k(group_scores, cfg.topk_group)
    keep = jnp.zeros((n, g), bool).at[jnp.arange(n)[:, None], top_groups].set(True)
    keep = jnp.repeat(keep, e // g, axis=1)  # [N, E]
    _, ids = jax.lax.top_k(jnp.where(keep, choice, -jnp.inf), cfg.num_experts_per_tok)
    weights = jnp.take_along_axis(scores, ids, axis=1)
    if cfg.norm_topk_prob:
        weights = weights / (weights.sum(-1, keepdims=True) + 1e-20)
    return weights * cfg.routed_scaling_factor, ids.astype(jnp.int32)


def expert_load(ids: jax.Array, num_experts: int) -> jax.Array:
    """Fraction of routed (token, slot) pairs per expert [E]; sums to 1."""
    counts = jnp.zeros((num_experts,), jnp.float32).at[ids.reshape(-1)].add(1.0)
    return counts / ids.size


TIE_RTOL = 1e-5  # update_expert_bias: load differences this close to the mean are ties


def update_expert_bias(bias: jax.Array, load: jax.Array, rate: float,
                       zero_mean: bool = False) -> jax.Array:
    """Aux-loss-free balancing: bias += rate * sign(mean(load) - load) (DeepSeek-V3).

    Underloaded experts become more likely to be selected. `zero_mean` keeps
    sum(bias) fixed at 0 so the bias cannot drift as a whole. An expert whose load
    equals the mean (the same count of tokens) stays put: differences within
    `TIE_RTOL` of the mean are float32 rounding of the mean, which XLA computes in
    an order of its own per program (a scanned and an unrolled layer would otherwise
    move a tied expert opposite ways). Real differences are at least one token, E/N
    of the mean for N routed token slots per step (ling_flash: 8e-5).
    """
    mean = jnp.mean(load, axis=-1, keepdims=True)
    diff = mean - load
    new = bias + rate * jnp.where(jnp.abs(diff) <= TIE_RTOL * mean, 0.0, jnp.sign(diff))
    if zero_mean:
        new = new - jnp.mean(new, axis=-1, keepdims=True)
    return new


def _swiglu_grouped(xs, w_gate, w_up, w_down, sizes):
    h = jax.nn.silu(jax.lax.ragged_dot(xs, w_gate, sizes)) * jax.lax.ragged_dot(xs, w_up, sizes)
    return jax.lax.ragged_dot(h, w_down, sizes)


def _grouped_local(x, weights, ids, w_gate, w_up, w_down, first_expert):
    """Routed output for tokens x [N, D] from the experts held locally.

    Experts first_expert .. first_expert + E_l - 1 are local; pairs routed
    elsewhere are sorted to the end, outside every group, and weighted 0.
    """
    n, k = ids.shape
    e_local = w_gate.shape[0]
    local = ids - first_expert
    mine = (local >= 0) & (local < e_local)
    key = jnp.where(mine, local, e_local).reshape(-1)  # [N*k]
    order = jnp.argsort(key, stable=True)
    sizes = jnp.zeros((e_local + 1,), jnp.int32).at[key].add(1)[:e_local]
    rows = order // k
    xs = x[rows]  # [N*k, D]
    out = _swiglu_grouped(xs, w_gate, w_up, w_down, sizes)
    wt = jnp.where(mine, weights, 0.0).reshape(-1)[order]
    out = out * wt[:, None].astype(out.dtype)
    return jnp.zeros_like(x).at[rows].add(out)


def dispatch_dropless(x, weights, ids, w_gate, w_up, w_down, cfg: LingConfig):
    """Dropless routed experts. x [N, D], weights/ids [N, k] -> [N, D]."""
    ctx = sharding.current()
    ep_axes = sharding.mesh_axes_for("exp", None if ctx is None else ctx.rules)
    if ctx is None or not ep_axes or all(ctx.mesh.shape.get(a, 1) == 1 for a in ep_axes):
        return _grouped_local(x, weights, ids, w_gate, w_up, w_down, 0)
    return _dropless_sharded(x, weights, ids, w_gate, w_up, w_down, ctx)


def _dropless_sharded(x, weights, ids, w_gate, w_up, w_down, ctx):
    mesh, rules = ctx.mesh, ctx.rules
    tok = sharding.spec(("batch", None), rules, mesh)
    ex = "expert"
    mlp = sharding.spec(("mlp",), rules, mesh)[0]
    tensor_axes = () if mlp is None else ((mlp,) if isinstance(mlp, str) else tuple(mlp))
    ep = mesh.shape[ex]

    def body(x, weights, ids, w_gate, w_up, w_down):
        e_local = w_gate.shape[0]
        first = jax.lax.axis_index(ex) * e_local
        # Every token goes to every expert shard ([ep, N_l, D] all_to_all); a
        # shard computes only the pairs routed to its experts, and the partial
        # outputs travel back the same way and are summed at the source.
        xs = jax.lax.all_to_all(jnp.broadcast_to(x, (ep, *x.shape)), ex, 0, 0, tiled=False)
        ws = jax.lax.all_to_all(jnp.broadcast_to(weights, (ep, *weights.shape)), ex, 0, 0)
        ids_ = jax.lax.all_to_all(jnp.broadcast_to(ids, (ep, *ids.shape)), ex, 0, 0)
        flat = lambda a: a.reshape(-1, *a.shape[2:])
        out = _grouped_local(flat(xs), flat(ws), flat(ids_), w_gate, w_up, w_down, first)
        if tensor_axes:
            out = jax.lax.psum(out, tensor_axes)
        back = jax.lax.all_to_all(out.reshape(xs.shape), ex, 0, 0)
        return back.sum(0)

    w_in = P(ex, None, mlp)
    w_out = P(ex, mlp, None)
    fn = jax.shard_map(body, mesh=mesh, in_specs=(tok, tok, tok, w_in, w_in, w_out),
                       out_specs=tok, check_vma=False)
    return fn(x, weights, ids, w_gate, w_up, w_down)


def capacity(tokens: int, cfg: LingConfig) -> int:
    return max(1, math.ceil(cfg.capacity_factor * tokens * cfg.num_experts_per_tok / cfg.num_experts))


def dispatch_capacity(x, weights, ids, w_gate, w_up, w_down, cfg: LingConfig):
    """GShard-style routed experts with a capacity per group of tokens.

    x [B, T, D], weights/ids [B, T, k] -> [B, T, D]. Each sequence is cut into
    groups of `moe_group_size` tokens (the last one padded); an expert takes
    at most ceil(capacity_factor * group * k / E) pairs per group, in token
    order then slot order, and drops the rest. Padding comes last in its
    group, so it never displaces a real token. The dispatch and combine
    tensors are [B*N, G, E, C], built one routing slot at a time so the
    [.., k, E, C] product never exists.
    """
    b, t, k = ids.shape
    d, e = x.shape[-1], cfg.num_experts
    g = min(cfg.moe_group_size, t)
    pad = (-t) % g
    if pad:
        x = jnp.pad(x, ((0, 0), (0, pad), (0, 0)))
        ids = jnp.pad(ids, ((0, 0), (0, pad), (0, 0)))
        weights = jnp.pad(weights, ((0, 0), (0, pad), (0, 0)))
    n = (t + pad) // g
    cap = capacity(g, cfg)
    xg = x.reshape(b * n, g, d)
    ids = ids.reshape(b * n, g, k)
    weights = weights.reshape(b * n, g, k).astype(x.dtype)
    onehot = jax.nn.one_hot(ids.reshape(b * n, g * k), e, dtype=jnp.int32)  # [BN, G*k, E]
    pos = (jnp.cumsum(onehot, axis=1) - 1).reshape(b * n, g, k, e)
    pos = jnp.take_along_axis(pos, ids[..., None], axis=-1)[..., 0]  # [BN, G, k] slot in its expert
    dispatch = jnp.zeros((b * n, g, e, cap), x.dtype)
    combine = jnp.zeros((b * n, g, e, cap), x.dtype)
    for j in range(k):
        keep = (pos[..., j] < cap).astype(x.dtype)[..., None, None]
        one = jax.nn.one_hot(ids[..., j], e, dtype=x.dtype)[..., None] * \
            jax.nn.one_hot(pos[..., j], cap, dtype=x.dtype)[..., None, :] * keep  # [BN, G, E, C]
        dispatch = dispatch + one
        combine = combine + one * weights[..., j, None, None]
    dispatch = sharding.constrain(dispatch, ("batch", None, "exp", None))
    xe = jnp.einsum("bgec,bgd->becd", dispatch, xg)
    xe = sharding.constrain(xe, ("batch", "exp", None, "act_embed"))
    h = jax.nn.silu(jnp.einsum("becd,edf->becf", xe, w_gate)) * jnp.einsum("becd,edf->becf", xe, w_up)
    ye = jnp.einsum("becf,efd->becd", h, w_down)
    y = jnp.einsum("bgec,becd->bgd", combine, ye).reshape(b, n * g, d)
    return y[:, :t]


class MoE(nnx.Module):
    """Routed experts + shared expert. Returns (y, per-expert load [E])."""

    def __init__(self, cfg: LingConfig, rngs: nnx.Rngs):
        d, f, e = cfg.hidden_size, cfg.moe_intermediate_size, cfg.num_experts
        self.cfg = cfg
        self.router = Linear(d, e, ("embed", "exp_route"), cfg, rngs)
        self.expert_bias = ExpertBias(jnp.zeros((e,), jnp.float32), axes=("exp_route",))
        self.w_gate = param(rngs, (e, d, f), ("exp", "embed", "mlp"), cfg)
        self.w_up = param(rngs, (e, d, f), ("exp", "embed", "mlp"), cfg)
        self.w_down = param(rngs, (e, f, d), ("exp", "mlp", "embed"), cfg)
        self.shared_experts = MLP(d, f * cfg.n_shared_experts, cfg, rngs) if cfg.n_shared_experts else None

    def __call__(self, x: jax.Array) -> tuple[jax.Array, jax.Array]:  # x [B, T, D]
        cfg = self.cfg
        b, t, d = x.shape
        dt = dtype_of(cfg.dtype)
        weights, ids = route(x.reshape(b * t, d), self.router.kernel[...], self.expert_bias[...], cfg)
        experts = tuple(w[...].astype(dt) for w in (self.w_gate, self.w_up, self.w_down))
        if cfg.moe_dispatch == "capacity":
            y = dispatch_capacity(x.astype(dt), weights.reshape(b, t, -1), ids.reshape(b, t, -1),
                                  *experts, cfg)
        else:
            y = dispatch_dropless(x.reshape(b * t, d).astype(dt), weights, ids, *experts, cfg)
            y = y.reshape(b, t, d)
        if self.shared_experts is not None:
            y = y + self.shared_experts(x)
        return y, expert_load(ids, cfg.num_experts)
