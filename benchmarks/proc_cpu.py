"""CPU seconds by process kind while a benchmark section runs (Linux /proc).

The evaluator's work is spread over Chromium's browser, GPU, renderer and utility processes,
Playwright's Node driver and our Python workers. ``CpuSampler`` polls ``/proc`` every
``interval_s`` and adds up the user + system time of the processes descending from this one,
by kind. A process that exits between two polls loses at most one interval of its time, so
short-lived processes are slightly under-counted; the machine-wide total from ``/proc/stat``
is reported beside it as a check.
"""

from __future__ import annotations

import collections
import os
import threading
import time

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stat(pid: int) -> tuple[int, int, int] | None:
    """(ppid, user + system ticks, start time) of a process, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[1]), int(fields[11]) + int(fields[12]), int(fields[19])
    except (OSError, IndexError, ValueError):
        return None


def process_kind(pid: int) -> str | None:
    """``gpu``, ``renderer``, ``utility``, ``browser`` (Chromium's main process), ``driver``
    (Playwright's Node), ``python`` or ``other``; None once the process is gone."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    # Chromium rewrites its process title: its arguments may come back joined by spaces.
    args = [a for part in raw.split(b"\0") for a in part.split(b" ") if a]
    if not args:
        return None
    exe = os.path.basename(args[0].decode(errors="replace"))
    if exe.startswith("chrom"):
        kind = next((a[7:].decode() for a in args if a.startswith(b"--type=")), "browser")
        return {"gpu-process": "gpu"}.get(kind, kind)
    if exe == "node":
        return "driver"
    return "python" if exe.startswith("python") else "other"


def descendants(root: int) -> list[tuple[int, str, int]]:
    """(pid, kind, CPU ticks) of every live process descending from ``root``."""
    parents, ticks = {}, {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = _stat(int(name))
            if st is not None:
                parents[int(name)], ticks[int(name)] = st[0], st[1]
    out = []
    for pid in parents:
        p, depth = parents[pid], 32
        while depth and p > 1 and p != root:
            p, depth = parents.get(p, 0), depth - 1
        if p == root:
            kind = process_kind(pid)
            if kind is not None:
                out.append((pid, kind, ticks[pid]))
    return out


def _machine_busy_ticks() -> int:
    with open("/proc/stat", encoding="ascii") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return sum(v) - v[3] - (v[4] if len(v) > 4 else 0)


class CpuSampler:
    """Context manager: CPU seconds by process kind of this process's descendants.

    Attributes (after exit):
        by_kind: {kind: CPU seconds}.
        total: their sum. machine: busy CPU seconds of the whole machine.
        wall: seconds inside the block.
    """

    def __init__(self, interval_s: float = 0.2):
        self.interval_s = interval_s
        self.by_kind: dict[str, float] = {}
        self.total = self.machine = self.wall = 0.0
        self._last: dict[tuple[int, int], list] = {}
        self._ticks: collections.Counter = collections.Counter()
        self._stop = threading.Event()
        self._root = os.getpid()
        self._ours: dict[tuple[int, int], bool] = {}

    def _descends(self, pid: int, depth: int = 32) -> bool:
        while depth and pid > 1:
            if pid == self._root:
                return True
            st = _stat(pid)
            if st is None:
                return False
            pid, depth = st[0], depth - 1
        return pid == self._root

    def _poll(self, first: bool = False) -> None:
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            pid = int(name)
            st = _stat(pid)
            if st is None:
                continue
            key = (pid, st[2])
            if key not in self._ours:
                self._ours[key] = self._descends(pid)
            if not self._ours[key]:
                continue
            if key not in self._last:
                kind = process_kind(pid)
                if kind is None:
                    continue
                # Processes already running at the start count from then, new ones from birth.
                self._last[key] = [kind, st[1] if first else 0]
            kind, last = self._last[key]
            self._ticks[kind] += st[1] - last
            self._last[key][1] = st[1]

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._poll()

    def __enter__(self) -> "CpuSampler":
        self._poll(first=True)
        self._t0, self._m0 = time.perf_counter(), _machine_busy_ticks()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self._poll()
        self.wall = time.perf_counter() - self._t0
        self.machine = (_machine_busy_ticks() - self._m0) / _TICK
        self.by_kind = {k: v / _TICK for k, v in self._ticks.most_common() if v}
        self.total = sum(self.by_kind.values())

    def summary(self, kinds: tuple[str, ...] = ("gpu", "renderer", "browser", "driver",
                                                 "python")) -> str:
        """``gpu 12.3, renderer 4.5, ...`` CPU seconds, the other kinds summed last."""
        parts = [f"{k} {self.by_kind.get(k, 0.0):.0f}" for k in kinds]
        rest = sum(v for k, v in self.by_kind.items() if k not in kinds)
        return ", ".join(parts + [f"other {rest:.0f}"])
