"""The training state both SFT and RL steps take, and its placement on a mesh.

`TrainState` is the pytree a jitted step maps to its successor: trainable parameters,
the other variables (expert biases), the optimizer's state and the step count.
`compile_step` jits any ``step(state, batch) -> (state, metrics)`` with explicit
shardings and donation; `global_batch` assembles each process's rows into the
sharded global batch.
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


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class TrainState:
    """What a train step updates (SFT and RL alike)."""

    params: nnx.State
    rest: nnx.State       # non-trainable variables (expert biases)
    opt_state: Any
    step: jax.Array


def batch_shardings(mesh: Mesh, local: dict) -> dict:
    """Every batch array is sharded over its leading (batch) dimension.

    `local` holds one process's rows (its arrays or shapes); the shardings are those of
    the global batch, every process's rows together (`global_batch`).
    """
    out = {}
    for k, v in local.items():
        shape = (np.shape(v)[0] * jax.process_count(), *np.shape(v)[1:])
        out[k] = NamedSharding(mesh, sharding.spec(("batch",) + (None,) * (len(shape) - 1), mesh=mesh,
                                                   shape=shape))
    return out


def state_shardings(state: TrainState, mesh: Mesh) -> TrainState:
    is_state = lambda x: isinstance(x, nnx.State)  # noqa: E731
    opt = jax.tree.map(lambda x: sharding.state_shardings(x, mesh) if is_state(x)
                       else NamedSharding(mesh, P()), state.opt_state, is_leaf=is_state)
    return TrainState(sharding.state_shardings(state.params, mesh),
                      sharding.state_shardings(state.rest, mesh), opt, NamedSharding(mesh, P()))


def is_abstract(tree) -> bool:
    """Whether a pytree's leaves are shapes only (`jax.ShapeDtypeStruct`), not arrays."""
    leaves = jax.tree.leaves(tree)
    return bool(leaves) and all(isinstance(x, jax.ShapeDtypeStruct) for x in leaves)


def abstract_state(model: nnx.Module, tx: optax.GradientTransformation) -> tuple[nnx.GraphDef, TrainState]:
    """(graphdef, TrainState of shapes) of a model built with `nnx.eval_shape`: what a
    checkpoint is restored into without materialising the weights first."""
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    return graphdef, TrainState(params, rest, jax.eval_shape(tx.init, params),
                                jax.ShapeDtypeStruct((), jnp.int32))


def compile_step(step: Callable, state: TrainState, example_batch: dict,
                 mesh: Mesh | None = None) -> tuple[TrainState, Callable]:
    """Places `state` and jits `step(state, batch) -> (state, metrics)` with donation.

    With a mesh: explicit in/out shardings (state by its logical axes, batch
    over `batch`; `example_batch` holds one process's rows); the caller places
    batches with `global_batch`. An abstract
    `state` (ShapeDtypeStructs, e.g. to restore a checkpoint into) is returned
    as it is.
    """
    if mesh is None:
        return state, jax.jit(step, donate_argnums=0)
    s_shard = state_shardings(state, mesh)
    b_shard = batch_shardings(mesh, example_batch)
    if not is_abstract(state):
        state = jax.device_put(state, s_shard)

    def meshed(s, b):
        with sharding.use_mesh(mesh):
            return step(s, b)

    return state, jax.jit(meshed, in_shardings=(s_shard, b_shard), out_shardings=(s_shard, None),
                          donate_argnums=0)


def global_batch(local: dict[str, np.ndarray], mesh: Mesh) -> dict[str, jax.Array]:
    """Assembles each process's host-local rows into the global, sharded batch."""
    shard = batch_shardings(mesh, local)
    return {k: jax.make_array_from_process_local_data(
        shard[k], np.asarray(v), (v.shape[0] * jax.process_count(), *v.shape[1:])) for k, v in local.items()}
