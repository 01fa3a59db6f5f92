"""Orbax checkpoints of the run: train state, plus JSON metadata (stage, data position, RNG).

Saves are asynchronous; Orbax writes each step into a temporary directory
and renames it only when complete, so a process killed during a save leaves
the previous checkpoint as the latest usable one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jax
import orbax.checkpoint as ocp

from rcca_jax.train.config import CheckpointConfig


class Checkpoints:
    def __init__(self, directory: str | Path, cfg: CheckpointConfig):
        self.cfg = cfg
        options = ocp.CheckpointManagerOptions(max_to_keep=cfg.max_to_keep,
                                               enable_async_checkpointing=cfg.async_save)
        path = directory if str(directory).startswith("gs://") else Path(directory).absolute()
        self.manager = ocp.CheckpointManager(path, options=options, item_names=("state", "meta"))

    def latest(self) -> int | None:
        return self.manager.latest_step()

    def save(self, step: int, state: Any, meta: dict, force: bool = False) -> bool:
        """Saves at `step` when due (every `every_steps`) or when `force`d."""
        if not force and (self.cfg.every_steps <= 0 or step % self.cfg.every_steps):
            return False
        return self.manager.save(step, args=ocp.args.Composite(
            state=ocp.args.StandardSave(state), meta=ocp.args.JsonSave(meta)), force=True)

    def restore(self, step: int, abstract_state: Any, shardings: Any = None) -> tuple[Any, dict]:
        """Restores into the structure and dtypes of `abstract_state` (arrays or shapes), placed
        by `shardings` (a matching tree) or else by the arrays' own shardings."""
        if shardings is None:
            target = jax.tree.map(lambda a: jax.ShapeDtypeStruct(
                a.shape, a.dtype, sharding=getattr(a, "sharding", None)), abstract_state)
        else:
            target = jax.tree.map(lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s),
                                  abstract_state, shardings)
        out = self.manager.restore(step, args=ocp.args.Composite(
            state=ocp.args.StandardRestore(target), meta=ocp.args.JsonRestore()))
        return out.state, out.meta

    def wait(self) -> None:
        self.manager.wait_until_finished()

    def close(self) -> None:
        self.manager.wait_until_finished()
        self.manager.close()
