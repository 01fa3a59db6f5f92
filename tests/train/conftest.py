"""Launcher runs of the real path at toy size: a tiny released-format checkpoint and tasks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.train import mini

REPO = Path(__file__).resolve().parents[2]


def launcher(config: str, workdir: Path, *overrides: str, devices: int = 1, process: tuple | None = None,
             timeout: int = 1500, wait: bool = True):
    """Runs `python -m rcca_jax.launch` on `devices` CPU devices (per process).

    process: (coordinator, number of processes, this process's id) for a multi-process run.
    wait=False returns the process running, its output going to a log file beside `workdir`
    (wait for it with `finish`).
    """
    cmd = [sys.executable, "-m", "rcca_jax.launch", f"--config={config}", f"--workdir={workdir}", *overrides]
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    if devices > 1:
        env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices}"
    if process is not None:
        coordinator, n, pid = process
        cmd += [f"--coordinator={coordinator}", f"--num_processes={n}", f"--process_id={pid}"]
    if not wait:
        # A file, not a pipe: the pipe of a process nobody reads yet (its peer is awaited first)
        # fills and blocks it, and its peer then waits in a collective until the run fails.
        name = f"{workdir.name}-process{process[2] if process else 0}.log"
        with open(workdir.parent / name, "w") as log:
            proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
        proc.log = workdir.parent / name
        return proc
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout, env=env)


def finish(procs: list[subprocess.Popen], timeout: int = 1800) -> list[tuple[int, str]]:
    """Waits for processes started with wait=False: (return code, tail of the log) of each.

    Those still running `timeout` seconds from now are killed and reported (code -9): a
    process waiting for a peer that died would otherwise outlive the test.
    """
    deadline = time.monotonic() + timeout
    out = []
    for proc in procs:
        try:
            code = proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
        out.append((code, proc.log.read_text(errors="replace")[-4000:]))
    return out


def metrics(workdir: Path) -> dict[int, dict]:
    lines = (workdir / "metrics.jsonl").read_text().splitlines()
    return {d["step"]: d for d in map(json.loads, lines)}


@pytest.fixture(scope="session")
def mini_files(tmp_path_factory):
    """(tasks.jsonl, refs.jsonl, checkpoint folder) of the task family and a random tiny model."""
    pytest.importorskip("torch")
    root = tmp_path_factory.mktemp("mini")
    tasks_path, refs_path, tasks = mini.write_tasks(root)
    return tasks_path, refs_path, mini.write_checkpoint(root / "ckpt", tasks)


def mini_args(files, init_from=None) -> list[str]:
    tasks_path, refs_path, ckpt = files
    return [f"--config.model.init_from={init_from or ckpt}", f"--config.data.source={tasks_path}",
            f"--config.data.sft_source={refs_path}"]
