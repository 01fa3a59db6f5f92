"""The train step yields the CPU to the pages that score beside it.

On a machine where the local fleet's browsers share the cores with the policy (the CPU
demo, a host that samples and scores), a page starved by the train step or the sampler
runs past a wall-clock limit that it meets alone: its verdict, and the reward, then
depend on what the trainer was doing at that moment (`benchmarks/reward_noise.py`). The
step itself only waits. So XLA's compute threads run at a higher niceness than the
scoring processes: under the kernel's fair scheduler a page at niceness 0 beside a
thread at 10 gets about nine tenths of a contended core, and the step keeps every cycle
the pages leave idle.

Only native threads are changed (those Python did not start: XLA's pools). Python's own
threads stay as they are, the main thread among them: the fleet's worker processes are
started from them and inherit their niceness, and raising a niceness back cannot be
undone without privileges. Niceness is per thread on Linux; elsewhere this does nothing.
"""

from __future__ import annotations

import os
import threading


def yield_cpu(nice: int | None) -> int:
    """Raises this process's native threads to at least niceness `nice`.

    Threads the runtime starts later take their creator's niceness (XLA's pools start more
    from their own threads); call this again after such a start, e.g. once per step.

    Returns:
      How many threads were changed (0 where `nice` is None or threads are not visible).
    """
    if nice is None or not hasattr(os, "setpriority"):
        return 0
    try:
        tids = [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        return 0
    python = {t.native_id for t in threading.enumerate()}
    changed = 0
    for tid in tids:
        if tid in python:
            continue
        try:
            if os.getpriority(os.PRIO_PROCESS, tid) < nice:
                os.setpriority(os.PRIO_PROCESS, tid, nice)
                changed += 1
        except OSError:  # the thread ended meanwhile
            continue
    return changed
