"""The layer stack: an unrolled prefix, then scanned repeats of one layer group.

Ling-3.0's layers repeat one group pattern (`layer_group_size` layers: KDA ... KDA,
MLA), except that the first `first_k_dense_replace` layers have dense MLPs. With
`cfg.scan_layers`, `layer_split` finds the shortest unrolled prefix after which the
layers' (attention, MLP) kinds are N >= 2 repeats of one group of `period` layers.
Those layers are stored stacked: the module `layer_groups[j]` holds group position j
of every group, each of its parameters with a leading [N] axis (logical axis
"layers", never sharded). `scan_groups` runs them with one `jax.lax.scan`, so XLA
compiles the prefix and one group instead of every layer. ling_flash: a prefix of 6
layers (the first group, with the 2 dense layers), then 6 scanned groups of 6.

Layer i of the model is `layers[i]` for i < prefix, else position
j = (i - prefix) % period of `layer_groups` at row g = (i - prefix) // period of its
stacked parameters. Expert loads, checkpoint names and the expert-bias rows follow
the model's layer order whatever the layout (`layer_view`, `expert_bias_rows`).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from rcca_jax.models.config import LingConfig
from rcca_jax.models.decoder import layer_call
from rcca_jax.models.moe import ExpertBias

PREFIX = "layers"        # the model attribute holding the unrolled layers
GROUPS = "layer_groups"  # the model attribute holding the stacked group positions
STACK_AXIS = "layers"    # logical name of the leading [N] axis of stacked parameters


@dataclasses.dataclass(frozen=True)
class LayerSplit:
    """Layers 0 .. prefix-1 unrolled, then `groups` groups of `period` layers scanned."""

    prefix: int
    period: int
    groups: int

    def layer(self, j: int, g: int) -> int:
        """The model layer at position j of scanned group g."""
        return self.prefix + g * self.period + j


def layer_split(cfg: LingConfig) -> LayerSplit:
    """The split that compiles the fewest layers (prefix + one group).

    Every period p and the shortest prefix s for which layers s .. L-1 are at least
    two repeats of the kinds of layers s .. s+p-1 are candidates; the one with the
    least s + p wins (then the shortest prefix). Without `cfg.scan_layers`, or when
    no tail repeats, every layer is in the prefix.
    """
    kinds = list(zip(cfg.layer_types, cfg.mlp_layer_types))
    n = len(kinds)
    best = None
    for period in range(1, n // 2 + 1) if cfg.scan_layers else ():
        for prefix in range(n % period, n - 2 * period + 1, period):
            tail = kinds[prefix:]
            if all(k == tail[t % period] for t, k in enumerate(tail)):
                if best is None or (prefix + period, prefix) < (best.prefix + best.period, best.prefix):
                    best = LayerSplit(prefix, period, (n - prefix) // period)
                break  # the shortest prefix for this period
    return best or LayerSplit(n, 0, 0)


def stack_modules(modules: list[nnx.Module]) -> nnx.Module:
    """One module like `modules[0]` whose every variable stacks theirs: [N, ...].

    The stacked variables keep their type and gain the leading logical axis
    `STACK_AXIS`, which the sharding rules never shard.
    """
    graphdef, _ = nnx.split(modules[0])
    flats = [nnx.to_flat_state(nnx.state(m)) for m in modules]
    out = []
    for entries in zip(*flats, strict=True):
        path, first = entries[0]
        if any(p != path for p, _ in entries):
            raise ValueError(f"stacked modules differ in structure at {'.'.join(map(str, path))}")
        value = jnp.stack([v.get_value() for _, v in entries])
        axes = first.get_metadata().get("axes")
        out.append((path, first.replace(value, axes=None if axes is None else (STACK_AXIS, *axes))))
    return nnx.merge(graphdef, nnx.from_flat_state(out))


def scan_groups(groups: nnx.List, cfg: LingConfig, x: jax.Array, positions: jax.Array,
                mask: jax.Array | None, key_mask: jax.Array | None, caches: list | None,
                index: jax.Array | None):
    """Runs the stacked layer groups in order with one `jax.lax.scan`.

    The group's layers are split into a pure function of their (sliced) state, as
    `decoder.remat_call` does, so the body works inside any outer transform; a layer
    must not mutate its variables (none does). With `cfg.remat` each layer of the
    body is rematerialised, as in the unrolled stack.

    Args:
      groups: the `period` stacked DecoderLayers (parameters [N, ...]).
      cfg: the model config.
      x: [B, T, D] the prefix's output.
      positions, mask, key_mask, index: as `DecoderLayer.__call__`.
      caches: per group position, that position's cache stacked over groups
        ([N, ...] leaves), or None for a cache-free forward.
    Returns:
      (x [B, T, D], new caches like `caches` or None, expert loads [N * m, E] in layer
      order, m the MoE layers of a group).
    """
    graphdef, state = nnx.split(groups)
    call = layer_call(cfg)
    e = cfg.num_experts

    def body(x, xs):
        st, group_caches = xs
        new_caches, loads = [], []
        for j, layer in enumerate(nnx.merge(graphdef, st)):
            cache = None if group_caches is None else group_caches[j]
            x, cache, load = call(layer, x, positions, mask, key_mask, cache, index)
            new_caches.append(cache)
            if load is not None:
                loads.append(load)
        loads = jnp.stack(loads) if loads else jnp.zeros((0, e), jnp.float32)  # [m, E]
        return x, (None if group_caches is None else new_caches, loads)

    x, (new_caches, loads) = jax.lax.scan(body, x, (state, caches))
    return x, new_caches, loads.reshape(-1, e)  # [N, m, E] -> [N*m, E]: row g*m + r is layer order


def layer_view(state: nnx.State, split: LayerSplit) -> list[tuple[tuple, nnx.Variable, int | None]]:
    """Every variable under the path the unrolled model gives it, in that model's order.

    Returns (unrolled path, variable, row): row g of a stacked variable's value is the
    layer's tensor; row None means the whole value.
    """
    out = []
    for path, var in nnx.to_flat_state(state):
        if path[0] == GROUPS:
            out += [((PREFIX, split.layer(path[1], g), *path[2:]), var, g) for g in range(split.groups)]
        else:
            out.append((path, var, None))
    return sorted(out, key=lambda entry: entry[0])


def source_paths(path: tuple, split: LayerSplit) -> list[tuple]:
    """The unrolled paths of a variable: N (row order) for a stacked one, else itself."""
    if path[0] != GROUPS:
        return [path]
    return [(PREFIX, split.layer(path[1], g), *path[2:]) for g in range(split.groups)]


def expert_bias_rows(state: nnx.State) -> dict[tuple, int | np.ndarray]:
    """Rows of the expert load [L_moe, E] (layer order) for each main-model expert bias.

    An unrolled layer's bias [E] gets one row; a stacked one [N, E] gets N rows, one
    per group. MTP modules are not main-model layers and get none.
    """
    biases = [(p, v) for p, v in nnx.to_flat_state(state) if isinstance(v, ExpertBias)]
    prefix = sorted((p for p, _ in biases if p[0] == PREFIX), key=lambda p: p[1])
    stacked = sorted(((p, v) for p, v in biases if p[0] == GROUPS), key=lambda pv: pv[0][1])
    rows: dict[tuple, int | np.ndarray] = {p: r for r, p in enumerate(prefix)}
    for r, (p, v) in enumerate(stacked):
        rows[p] = len(prefix) + r + len(stacked) * np.arange(v.get_value().shape[0])
    return rows
