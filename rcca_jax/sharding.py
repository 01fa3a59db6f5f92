"""Sharding in one place: logical axis names -> mesh axes.

Every parameter carries its logical axes as NNX metadata (`axes=...`), every
activation constraint names logical axes; `RULES` maps them to the mesh axes
`data`, `fsdp`, `expert`, `tensor`. Nothing else in the code names a mesh axis,
except the expert-parallel MoE dispatch, which runs under `shard_map` and must
say which axis it exchanges tokens over (it reads that from `RULES` too).
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any, Iterator, Sequence

import jax
import numpy as np
from flax import nnx
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

MESH_AXES = ("data", "fsdp", "expert", "tensor")

# logical axis -> mesh axis (or tuple of mesh axes, or None = replicated).
RULES: dict[str, Any] = {
    "batch": ("data", "fsdp", "expert"),  # tokens: every axis but tensor
    "seq": None,
    "embed": "fsdp",                     # model dim of weights (ZeRO-3 style)
    "act_embed": None,                   # model dim of activations
    "concat_embed": None,                # input dim of MTP eh_proj ([embedding; hidden], 2 x model)
    "vocab": "tensor",
    "heads": "tensor",
    "kv": None,                          # head dim
    "latent": None,                      # MLA kv_lora_rank
    "mlp": "tensor",                     # ffn dim, dense and experts
    "exp": "expert",                     # expert index of expert weights
    "exp_route": None,                   # router output (all experts per token)
    "conv": None,
    "norm": None,
    "layers": None,                      # leading axis of stacked layer groups (scanned, never sharded)
}


@dataclasses.dataclass(frozen=True)
class MeshContext:
    mesh: Mesh
    rules: dict[str, Any]


_CTX: list[MeshContext] = []


@contextlib.contextmanager
def use_mesh(mesh: Mesh | None, rules: dict[str, Any] | None = None) -> Iterator[None]:
    """Activates `mesh` for activation constraints inside model code."""
    if mesh is None:
        yield
        return
    _CTX.append(MeshContext(mesh, dict(RULES if rules is None else rules)))
    try:
        yield
    finally:
        _CTX.pop()


def current() -> MeshContext | None:
    return _CTX[-1] if _CTX else None


def make_mesh(shape: dict[str, int], devices: Sequence[jax.Device] | None = None) -> Mesh:
    """A mesh with all four axes (missing ones get size 1), e.g. {"fsdp": 4, "expert": 2}."""
    unknown = set(shape) - set(MESH_AXES)
    if unknown:
        raise ValueError(f"mesh axes {sorted(unknown)} unknown; expected a subset of {MESH_AXES}")
    dims = tuple(int(shape.get(a, 1)) for a in MESH_AXES)
    devices = list(jax.devices() if devices is None else devices)
    n = int(np.prod(dims))
    if n > len(devices):
        raise ValueError(f"mesh {dict(zip(MESH_AXES, dims))} needs {n} devices, have {len(devices)}")
    return Mesh(np.asarray(devices[:n]).reshape(dims), MESH_AXES)


def spec(axes: Sequence[str | None] | None, rules: dict[str, Any] | None = None,
         mesh: Mesh | None = None, shape: Sequence[int] | None = None) -> P:
    """PartitionSpec for logical `axes`.

    A mesh axis is used at most once (first wins); with `mesh`, axes of size 1
    are left out, and with `shape` too, so are axes that would not divide the
    dimension evenly (that dimension is then replicated over them).
    """
    if axes is None:
        return P()
    rules = RULES if rules is None else rules
    used: set[str] = set()
    out = []
    for name in axes:
        target = rules.get(name) if name is not None else None
        if name is not None and name not in rules:
            raise KeyError(f"logical axis {name!r} has no rule in the sharding rules table")
        if target is None:
            out.append(None)
            continue
        targets = (target,) if isinstance(target, str) else tuple(target)
        keep = tuple(t for t in targets if t not in used
                     and (mesh is None or mesh.shape.get(t, 1) > 1))
        if shape is not None and mesh is not None:
            dim, fit = shape[len(out)], []
            for t in keep:
                if dim % (int(np.prod([mesh.shape[a] for a in fit])) * mesh.shape[t]) == 0:
                    fit.append(t)
            keep = tuple(fit)
        used.update(keep)
        out.append(keep[0] if len(keep) == 1 else (keep or None))
    return P(*out)


def constrain(x: jax.Array, axes: Sequence[str | None]) -> jax.Array:
    """with_sharding_constraint by logical axes; no-op outside `use_mesh`."""
    ctx = current()
    if ctx is None:
        return x
    return jax.lax.with_sharding_constraint(x, NamedSharding(ctx.mesh, spec(axes, ctx.rules, ctx.mesh)))


def mesh_axes_for(name: str, rules: dict[str, Any] | None = None) -> tuple[str, ...]:
    target = (RULES if rules is None else rules).get(name)
    if target is None:
        return ()
    return (target,) if isinstance(target, str) else tuple(target)


def _var_axes(v: nnx.Variable, ndim: int) -> tuple | None:
    axes = v.get_metadata().get("axes") if hasattr(v, "get_metadata") else getattr(v, "axes", None)
    if axes is not None and len(axes) != ndim:
        raise ValueError(f"axes {axes} do not match a {ndim}-d parameter")
    return axes


def state_shardings(state: nnx.State, mesh: Mesh, rules: dict[str, Any] | None = None) -> nnx.State:
    """NamedShardings for every leaf of an NNX state, from each Variable's `axes`."""
    rules = RULES if rules is None else rules

    def one(v):
        if isinstance(v, nnx.Variable):
            value = v.get_value()
            axes = _var_axes(v, np.ndim(value))
            return v.replace(NamedSharding(mesh, spec(axes, rules, mesh, np.shape(value))))
        return NamedSharding(mesh, P())

    return jax.tree.map(one, state, is_leaf=lambda x: isinstance(x, nnx.Variable))


def shard_model(model: nnx.Module, mesh: Mesh, rules: dict[str, Any] | None = None) -> nnx.Module:
    """Places every parameter of `model` with its sharding (in place) and returns it."""
    state = nnx.state(model)
    shardings = state_shardings(state, mesh, rules)
    nnx.update(model, jax.device_put(state, shardings))
    return model
