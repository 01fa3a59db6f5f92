"""Standalone held-out evaluation: `python -m rcca_jax.evaluate --config=configs/x.py [--checkpoint=DIR]`.

Answers the config's held-out tasks with a released-format policy folder
(`--checkpoint`, e.g. a run's `export/final`; default the run's final export if
there is one, else the config's `model.init_from`), scores them and writes the
tables under `<workdir>/eval/<tag>` (`rcca_jax.train.evaluation`). Prints the
leaderboard row.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from absl import app, flags

from rcca_jax import launch

_CHECKPOINT = flags.DEFINE_string("checkpoint", None, "released-format policy folder to evaluate")
_TAG = flags.DEFINE_string("tag", None, "report name under <workdir>/eval (default: the folder's name)")


def main(argv) -> None:
    del argv
    import jax
    from absl import logging

    logging.set_verbosity(logging.WARNING)
    launch.init_distributed()
    from evaluators.leaderboard import text_table
    from rcca_jax.train.config import run_config
    from rcca_jax.train.evaluation import evaluate
    from rcca_jax.train.loop import Run

    workdir = Path(launch._WORKDIR.value or os.path.join("runs", launch.config_name()))
    final = workdir / "export" / "final"
    folder = _CHECKPOINT.value or (str(final) if final.is_dir() else None)
    cd = launch._CONFIG.value
    if folder:  # the folder being evaluated stands in for config.model.init_from
        cd = cd.copy_and_resolve_references()
        with cd.unlocked():
            cd.model.init_from = folder
    cfg = run_config(cd, jax.device_count())
    folder = cfg.model.init_from
    from rcca_jax.models.config import RUNTIME_FIELDS

    # The folder's own config.json gives the shape; the config file only how to compute.
    fields = {k: v for k, v in cfg.model.fields.items() if k in RUNTIME_FIELDS}
    cfg = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, init_from=folder, fields=fields))
    run = Run(cfg, workdir, train=False)
    tag = _TAG.value or Path(folder.rstrip("/")).name
    report = evaluate(run, run.policy.load(run.mesh), tag, 0)
    run.close()
    if jax.process_index() == 0:
        print(text_table({tag: report["all"]}))
        print(f"tables: {workdir / 'eval' / tag}")


if __name__ == "__main__":
    flags.mark_flag_as_required("config")
    app.run(main)
