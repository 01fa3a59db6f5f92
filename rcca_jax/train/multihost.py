"""Rows of a batch spread over JAX processes: assembling them, getting them back, gathering.

Each process holds its own rows (its prompts, its rollouts, its evaluator's
records). A global array is assembled with `jax.make_array_from_process_local_data`
under the batch sharding, so process p's rows are the p-th block of the batch;
`local_rows` returns a process its block. Python objects (records, metrics) are
gathered with `allgather_objects`. With one process all of this is the identity.
"""

from __future__ import annotations

import json
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from rcca_jax import sharding


def row_sharding(mesh: Mesh, n_rows: int) -> NamedSharding:
    """The sharding of a global batch of `n_rows` rows: dim 0 over the batch axes.

    Raises:
      ValueError: with several processes, when the rows cannot be split evenly
        between them (each must hold a whole block of its own rows).
    """
    spec = sharding.spec(("batch",), mesh=mesh, shape=(n_rows,))
    out = NamedSharding(mesh, spec)
    n_proc, me = jax.process_count(), jax.process_index()
    if n_proc > 1:
        mine: set[int] = set()
        for device, index in out.devices_indices_map((n_rows,)).items():
            if device.process_index == me:
                mine.update(range(*index[0].indices(n_rows)[:2]))
        n_local = n_rows // n_proc
        if n_rows % n_proc or mine != set(range(me * n_local, (me + 1) * n_local)):
            raise ValueError(f"{n_rows} rows cannot be split evenly over {n_proc} processes by "
                             f"the batch axes of mesh {dict(mesh.shape)}; make the rows per "
                             "process a multiple of the batch-axis devices per process")
    return out


def global_rows(local: np.ndarray, rows: NamedSharding) -> jax.Array:
    """This process's rows [n, ...] -> the global array [n * processes, ...] under `rows`."""
    local = np.asarray(local)
    shape = (local.shape[0] * jax.process_count(), *local.shape[1:])
    spec = P(rows.spec[0] if len(rows.spec) else None, *([None] * (local.ndim - 1)))
    return jax.make_array_from_process_local_data(NamedSharding(rows.mesh, spec), local, shape)


def local_rows(x: jax.Array) -> np.ndarray:
    """The rows of a batch-sharded global array that this process's devices hold, in order."""
    if x.is_fully_addressable:
        return np.asarray(x)
    blocks: dict[int, np.ndarray] = {}
    for shard in x.addressable_shards:
        start = (shard.index[0].start or 0) if shard.index else 0
        blocks.setdefault(start, np.asarray(shard.data))
    return np.concatenate([blocks[k] for k in sorted(blocks)])


def allgather_objects(obj: Any) -> list[Any]:
    """Every process's JSON-serialisable `obj`, in process order (a collective: all call it)."""
    if jax.process_count() == 1:
        return [obj]
    from jax.experimental import multihost_utils

    data = np.frombuffer(json.dumps(obj).encode("utf-8"), np.uint8)
    sizes = multihost_utils.process_allgather(np.asarray([data.size], np.int64))
    padded = np.zeros(int(sizes.max()), np.uint8)
    padded[:data.size] = data
    every = multihost_utils.process_allgather(padded)
    return [json.loads(bytes(every[p][:int(sizes[p][0])]).decode("utf-8"))
            for p in range(jax.process_count())]


def sync(name: str) -> None:
    """A barrier across processes (no-op for one)."""
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices(name)
