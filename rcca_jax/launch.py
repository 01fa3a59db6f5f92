"""Entry point: `python -m rcca_jax.launch --config=configs/tiny.py [--config.key=value] [--workdir=DIR]`.

Validates the config into frozen dataclasses, initialises multi-host JAX when
on a pod, runs SFT then RCCA (resuming from the workdir), and prints the
result line `mean reward: sft=<x> rcca=<y>`.
"""

from __future__ import annotations

import os

from absl import app, flags
from ml_collections import config_flags

_CONFIG = config_flags.DEFINE_config_file("config", None, "configs/x.py[:arg]", lock_config=True)
_WORKDIR = flags.DEFINE_string("workdir", None, "run directory (local or gs://); default runs/<config name>")


def main(argv) -> None:
    del argv
    import jax
    from absl import logging

    logging.set_verbosity(logging.WARNING)  # Orbax logs every file operation at INFO

    if os.environ.get("TPU_WORKER_HOSTNAMES") or os.environ.get("JAX_COORDINATOR_ADDRESS"):
        jax.distributed.initialize()
    from rcca_jax.train.config import run_config
    from rcca_jax.train.loop import run

    cfg = run_config(_CONFIG.value, jax.device_count())
    name = os.path.splitext(os.path.basename(flags.FLAGS["config"].config_filename or "run"))[0]
    workdir = _WORKDIR.value or os.path.join("runs", name)
    result = run(cfg, workdir, progress=jax.process_index() == 0)
    if jax.process_index() == 0:
        print(f"mean reward: sft={result['sft']:.3f} rcca={result['rcca']:.3f}")


if __name__ == "__main__":
    flags.mark_flag_as_required("config")
    app.run(main)
