"""Entry point: `python -m rcca_jax.launch --config=configs/tiny.py [--config.key=value] [--workdir=DIR]`.

Validates the config into frozen dataclasses, initialises multi-host JAX when
on a pod (or when --coordinator is given: several processes on one machine),
runs SFT then RCCA (resuming from the workdir), and prints the result line
`mean reward: sft=<x> (se <s>) rcca=<y> (se <s>); rcca-sft=<d> (se <s>, paired over <n> tasks)`
(held-out gated reward after SFT and after RL, standard errors with the task as the unit).
"""

from __future__ import annotations

import os

from absl import app, flags
from ml_collections import config_flags

_CONFIG = config_flags.DEFINE_config_file("config", None, "configs/x.py[:arg]", lock_config=True)
_WORKDIR = flags.DEFINE_string("workdir", None, "run directory; default runs/<config name>")
_COORDINATOR = flags.DEFINE_string("coordinator", None, "host:port of the JAX coordinator, for "
                                   "several processes on one machine (TPU pods find theirs)")
_NUM_PROCESSES = flags.DEFINE_integer("num_processes", None, "with --coordinator")
_PROCESS_ID = flags.DEFINE_integer("process_id", None, "with --coordinator")


def init_distributed() -> None:
    """jax.distributed.initialize when this is one process of several."""
    import jax

    if _COORDINATOR.value:
        jax.distributed.initialize(_COORDINATOR.value, _NUM_PROCESSES.value, _PROCESS_ID.value)
    elif os.environ.get("TPU_WORKER_HOSTNAMES") or os.environ.get("JAX_COORDINATOR_ADDRESS"):
        jax.distributed.initialize()


def config_name() -> str:
    return os.path.splitext(os.path.basename(flags.FLAGS["config"].config_filename or "run"))[0]


def main(argv) -> None:
    del argv
    import jax
    from absl import logging

    logging.set_verbosity(logging.WARNING)  # Orbax logs every file operation at INFO
    init_distributed()
    from rcca_jax.train.config import run_config
    from rcca_jax.train.loop import run

    cfg = run_config(_CONFIG.value, jax.device_count())
    workdir = _WORKDIR.value or os.path.join("runs", config_name())
    result = run(cfg, workdir, progress=jax.process_index() == 0)
    if jax.process_index() == 0:
        print(result_line(result))


def result_line(result: dict) -> str:
    """`mean reward: sft=<x> (se <s>) rcca=<y> (se <s>)`, then the paired difference."""
    def one(mean, se):
        if mean is None:
            return "nan"
        return f"{mean:.3f}" + ("" if se is None or se != se else f" (se {se:.3f})")

    line = (f"mean reward: sft={one(result['sft'], result.get('sft_se'))} "
            f"rcca={one(result['rcca'], result.get('rcca_se'))}")
    d = result.get("difference")
    if d is not None:
        line += f"; rcca-sft={d['mean']:+.3f} (se {d['se']:.3f}, paired over {d['tasks']} tasks)"
    return line


if __name__ == "__main__":
    flags.mark_flag_as_required("config")
    app.run(main)
