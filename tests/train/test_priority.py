"""The train step's threads yield the CPU to the scoring pages (issue 20)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from rcca_jax.train.config import EvaluatorConfig
from rcca_jax.train.priority import yield_cpu

# In a process of its own: the niceness of the test runner's threads is left alone.
_SCRIPT = """
import json, os, subprocess, sys, threading
import jax, jax.numpy as jnp
jax.jit(lambda a: (a @ a).sum())(jnp.ones((256, 256))).block_until_ready()
from rcca_jax.train.priority import yield_cpu
busy = threading.Thread(target=threading.Event().wait, args=(5,), daemon=True)
busy.start()
changed = yield_cpu(7)
python = {t.native_id for t in threading.enumerate()}
nice = {int(t): os.getpriority(os.PRIO_PROCESS, int(t)) for t in os.listdir("/proc/self/task")}
child = subprocess.run([sys.executable, "-c", "import os; print(os.getpriority(os.PRIO_PROCESS, 0))"],
                       capture_output=True, text=True).stdout.strip()
print(json.dumps({"changed": changed, "again": yield_cpu(7),
                  "native": sorted(v for t, v in nice.items() if t not in python),
                  "python": sorted(v for t, v in nice.items() if t in python),
                  "child": int(child)}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="niceness per thread is Linux's")
def test_native_threads_yield_and_python_threads_keep_their_niceness():
    out = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["changed"] >= 1 and got["again"] == 0  # XLA's threads, once
    assert set(got["native"]) == {7}
    assert set(got["python"]) == {0} and len(got["python"]) == 2  # main and the waiting one
    assert got["child"] == 0  # a worker the fleet starts later keeps the pages' priority


def test_none_changes_nothing_and_the_setting_is_checked():
    assert yield_cpu(None) == 0
    with pytest.raises(ValueError, match="compute_nice"):
        EvaluatorConfig(compute_nice=25)
