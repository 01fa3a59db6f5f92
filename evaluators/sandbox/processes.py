"""The browser's processes: found by a mark, capped in memory, watched, killed when silent.

Memory: every renderer starts under a cap (`renderer_memory_args`).

Priority: Chromium raises its own threads (the main and compositor threads of the browser and
of every renderer) to nice -8 when it may, that is when it runs as root. The apps' code would
then outrank the trainer, the coordinator and the evaluator's own event loop (its watchdogs),
and `nice` on the evaluator would not hold for its browsers. `keep_priority_executable`
starts the browser without the capability to raise them (CAP_SYS_NICE).

Silence: a browser that stops answering is killed, so that its hang becomes a crash. A
process of the browser that is stopped (SIGSTOP, a debugger: `stopped`) is killed too.
A stopped renderer answers nothing either, and its page's watchdog would fail the app as
hung; nothing an app can do stops its own process, so a stopped one is always the work of
something outside, and the pages open meanwhile are void (`sandbox.browser`).

Playwright's calls on a browser wait as long as its pipe stays open. A Chromium main
process that is alive but no longer answers (stopped by a signal, deadlocked, swapped out
for good) therefore holds every call on it for ever: opening a context, a page, a CDP
command outside a probe's own time limit. Those waits have no limit of their own, and the
worker's event loop keeps turning, so nothing else noticed: one such browser stalled a
pool until its per-row deadline, over an hour. Its renderers have a watchdog of their own
(`checks.score`), the browser had none.

`watch_browser` asks the browser a trivial question (``Browser.getVersion``) every few
seconds. When no answer comes within the limit it SIGKILLs the browser's main process:
Playwright then sees the pipe close, every pending call on that browser fails at once,
and the apps that were using it are scored again on a new browser as after any other
browser crash (an evaluator fault, never the response's).
"""

from __future__ import annotations

import asyncio
import atexit
import dataclasses
import functools
import logging
import os
import shlex
import shutil
import signal
import tempfile
import time
import uuid
from pathlib import Path
from typing import Callable

log = logging.getLogger(__name__)

# Chromium keeps unknown switches on its command line and ignores them: this one names
# the browser's main process among every Chromium on the machine.
_MARK = "--rcca-browser="
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def browser_mark() -> str:
    """A fresh switch to launch a browser with, for `browser_pid`."""
    return _MARK + uuid.uuid4().hex


def browser_pid(mark: str, proc: Path = Path("/proc")) -> int | None:
    """The pid of the Chromium main process launched with `mark`, or None if none lives.

    Its child processes (renderers, GPU, zygotes) carry ``--type=``; the main one does not.
    """
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        args = [a.decode(errors="replace") for a in argv]
        if mark in args and not any(a.startswith("--type=") for a in args):
            return int(entry.name)
    return None


async def answers(session, limit_s: float) -> bool:
    """Whether the browser answers a trivial question within `limit_s`.

    A browser that is gone (closed, crashed) counts as answering: its calls fail at once,
    and the paths that handle a crash take it from there.
    """
    try:
        await asyncio.wait_for(session.send("Browser.getVersion"), limit_s)
    except asyncio.TimeoutError:
        return False
    except Exception:  # noqa: BLE001 - closed or crashed, not stuck
        pass
    return True


def children(pid: int, proc: Path = Path("/proc"), threads: bool = True) -> list[int]:
    """Pids of the processes `pid` started, [] once it is gone.

    With `threads`, those any of its threads started; else those of its main thread only
    (one read instead of one per thread).
    """
    out: list[int] = []
    try:
        tids = os.listdir(proc / str(pid) / "task") if threads else [str(pid)]
    except OSError:
        return out
    for tid in tids:
        try:
            with open(proc / str(pid) / "task" / tid / "children", encoding="ascii") as f:
                out += [int(c) for c in f.read().split()]
        except (OSError, ValueError):
            continue
    return out


def state(pid: int, proc: Path = Path("/proc")) -> str | None:
    """A process's state letter (``R``, ``S``, ``T`` stopped, ``t`` traced...), None if gone."""
    try:
        with open(proc / str(pid) / "stat", encoding="ascii", errors="replace") as f:
            # The command name in parentheses may hold spaces and parentheses: split after it.
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def below(pid: int, proc: Path = Path("/proc")) -> list[int]:
    """The processes below `pid` (renderers, GPU, utilities, zygotes), [] once it is gone.

    Walked through ``/proc/<pid>/task/<tid>/children``: every thread of `pid` (Chromium
    starts its children from a launcher thread), the main thread of the processes below it
    (a zygote forks from its only thread; renderers start nothing). About 70 small reads
    for a browser with a dozen renderers, a few ms of CPU: cheap enough as every page ends.
    """
    found, todo = [], children(pid, proc)
    while todo:
        p = todo.pop()
        found.append(p)
        todo += children(p, proc, threads=False)
    return found


def cpu_waits(pid: int | None, proc: Path = Path("/proc")) -> dict[int, float]:
    """{pid: seconds} that the main thread of each renderer and GPU process below the
    browser `pid` has spent runnable but waiting for a CPU (``schedstat``'s run delay).

    The time a page lost to other work on the machine, where a wall-clock limit would
    charge it to the app (`waited_since`). Empty where the kernel does not say.
    """
    out = {}
    for p in below(pid, proc) if pid is not None else []:
        try:
            argv = (proc / str(p) / "cmdline").read_bytes()
            if b"--type=renderer" not in argv and b"--type=gpu-process" not in argv:
                continue
            out[p] = int((proc / str(p) / "schedstat").read_text().split()[1]) / 1e9
        except (OSError, IndexError, ValueError):
            continue
    return out


def waited_since(start: dict[int, float], now: dict[int, float]) -> float:
    """Seconds of CPU wait between two `cpu_waits` readings (a process new since `start`
    counts from zero; one gone since is left out)."""
    return sum(max(0.0, w - start.get(p, 0.0)) for p, w in now.items())


def _pressure_files() -> list[Path]:
    """Where CPU pressure is read: this process's cgroup first (a container's own work, not
    its neighbours' on a shared host; cgroup v2, or the v2 tree of a hybrid layout), then
    the whole machine's."""
    out = []
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            if line.startswith("0::"):
                rel = line[3:].lstrip("/")
                out += [Path("/sys/fs/cgroup") / rel / "cpu.pressure",
                        Path("/sys/fs/cgroup/unified") / rel / "cpu.pressure"]
    except OSError:
        pass
    return out + [Path("/proc/pressure/cpu")]


_PRESSURE = _pressure_files()


def cpu_wait_clock(pid: int | None) -> Callable[[], float]:
    """A reader of the seconds the browser `pid`'s renderer and GPU processes have waited
    for a CPU from now on (`cpu_waits`): on a page alone, the time its app lost."""
    start = cpu_waits(pid)

    def waited() -> float:
        return waited_since(start, cpu_waits(pid))
    return waited


def cpu_stall_s(paths: list[Path] | None = None) -> float | None:
    """Total seconds during which some runnable task of this cgroup (else of the machine)
    waited for a CPU (pressure stall information, ``some``); None where the kernel does
    not report it."""
    for path in _PRESSURE if paths is None else paths:
        try:
            with open(path, encoding="ascii") as f:
                return int(f.readline().rsplit("total=", 1)[1]) / 1e6
        except (OSError, IndexError, ValueError):
            continue
    return None


# A page open while tasks waited for a CPU at least this share of the time may have been
# starved by the evaluator's other work: a time limit it ran out of may not be its own.
STARVED_SHARE = 0.1


def stall_mark() -> tuple[float | None, float]:
    """(`cpu_stall_s`, monotonic seconds) now: a start for `starved_since`."""
    return cpu_stall_s(), time.monotonic()


def starved_since(mark: tuple[float | None, float]) -> bool:
    """Whether tasks waited for a CPU `STARVED_SHARE` of the time since `mark` or more
    (False where the kernel does not report pressure)."""
    stall0, t0 = mark
    stall = cpu_stall_s()
    if stall0 is None or stall is None:
        return False
    return stall - stall0 >= STARVED_SHARE * (time.monotonic() - t0)


def stopped(pid: int, proc: Path = Path("/proc")) -> list[int]:
    """The processes below `pid` that are stopped (state ``T`` or ``t``), but those a crash
    reporter holds (`dumped`)."""
    return [p for p in below(pid, proc)
            if state(p, proc) in ("T", "t") and not dumped(p, proc)]


def dumped(pid: int, proc: Path = Path("/proc")) -> bool:
    """Whether `pid` is traced by Chromium's crash reporter (``chrome_crashpad_handler``).

    A renderer that crashed by itself (a memory bomb's) is held in a tracing stop while
    the browser's crashpad handler writes its minidump, then ends: a stop of the app's
    own making, not one from outside. (Chromium has no working switch to turn crashpad
    off here: ``--disable-crashpad-for-testing`` breaks renderers started through
    ``--renderer-cmd-prefix``.) A page cannot start a process, so the tracer is the
    browser's own.
    """
    try:
        with open(proc / str(pid) / "status", encoding="ascii", errors="replace") as f:
            tracer = next((int(x.split()[1]) for x in f if x.startswith("TracerPid:")), 0)
        if tracer <= 0:
            return False
        argv0 = (proc / str(tracer) / "cmdline").read_bytes().split(b"\0")[0]
    except (OSError, ValueError, IndexError):
        return False
    return os.path.basename(argv0) == b"chrome_crashpad_handler"


@dataclasses.dataclass(frozen=True)
class Reading:
    """One process below a browser, read once from ``/proc``.

    Attributes:
        state: The state letter (``T`` or ``t``: stopped).
        cpu: CPU seconds used so far (user + system, all threads).
        renderer: Whether it is a renderer (``--type=renderer`` on its command line).
    """

    state: str
    cpu: float
    renderer: bool

    @property
    def stopped(self) -> bool:
        return self.state in ("T", "t")


def read_tree(pid: int, proc: Path = Path("/proc")) -> dict[int, Reading]:
    """Every process below the browser `pid`, each read once: one walk serves the browser's
    periodic check (stopped processes, then CPU no open page uses). Gone ones are left out."""
    out = {}
    for p in below(pid, proc):
        try:
            with open(proc / str(p) / "stat", encoding="ascii", errors="replace") as f:
                # The command name in parentheses may hold spaces and parentheses.
                fields = f.read().rsplit(")", 1)[1].split()
            cpu = (int(fields[11]) + int(fields[12])) / _TICKS
            argv = (proc / str(p) / "cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
        # A stop of the crash reporter's is read as running: the process ends by itself.
        st = "S" if fields[0] in ("T", "t") and dumped(p, proc) else fields[0]
        out[p] = Reading(st, cpu, b"--type=renderer" in argv)
    return out


class IdleBurn:
    """Tells when a browser's processes burn CPU that no open page accounts for.

    A reset slot's renderer sits at about:blank and a closed page's renderer is gone, so
    between probes a renderer has nothing to run. Work that outlived its app anyway (in one
    1,000-app run a renderer of a worker with nothing in flight kept the GPU process at 85%
    of a core for an hour) takes CPU from every page scored beside it, and its timing
    limits. Busy: more than `share` of a core over a tick. Too many: more busy renderers
    than pages open, or any busy process while no page is open, on `strikes` ticks in a row
    (a renderer winding down for a few seconds after its reset is not counted).

    Args:
      share: fraction of one core a process must use over a tick to be busy.
      strikes: consecutive ticks with too many busy processes before `tick` says so.
    """

    def __init__(self, share: float = 0.1, strikes: int = 2):
        self.share, self.strikes = share, strikes
        self._last: dict[int, float] = {}
        self._t: float | None = None
        self._count = 0

    def tick(self, cpu: dict[int, float], renderers: set[int], pages_open: int,
             now: float) -> bool:
        """Takes a reading (CPU seconds and renderers, from `read_tree`) at `now` (seconds);
        True when CPU burns unaccounted."""
        last, t = self._last, self._t
        self._last, self._t = cpu, now
        if t is None or now <= t:
            return False
        limit = self.share * (now - t)
        busy = {p for p, s in cpu.items() if p in last and s - last[p] > limit}
        if len(busy & renderers) > pages_open or (pages_open == 0 and busy):
            self._count += 1
        else:
            self._count = 0
        if self._count >= self.strikes:
            self._count = 0
            return True
        return False


def launched_with(pid: int, mark: str, proc: Path = Path("/proc")) -> bool:
    """Whether the live process `pid` carries `mark` (`browser_mark`) on its command line."""
    try:
        return mark.encode() in (proc / str(pid) / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return False


def kill(pid: int | None, why: str, what: str = "the browser", mark: str | None = None) -> None:
    """SIGKILLs a process of the browser (its main one: its renderers end with it).

    With `mark`, only while `pid` still carries it: a browser that ended on its own was
    reaped by the driver, and its pid may since belong to another program of the machine.
    """
    if pid is not None and mark is not None and not launched_with(pid, mark):
        log.info("not killing pid %s (%s): it is not %s any more", pid, why, what)
        return
    log.warning("killing %s (pid %s): %s", what, pid, why)
    if pid is not None:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:  # gone already, or (reused) not ours to signal
            pass


async def watch_browser(session, connected, every_s: float, limit_s: float,
                        on_stuck, on_tick=None) -> None:
    """Asks the browser for its version every `every_s`; calls `on_stuck` if it does not answer.

    Args:
      session: the browser's CDP session (Playwright's ``new_browser_cdp_session``).
      connected: callable, False once the browser is closed or gone (the watch ends).
      every_s: seconds between questions.
      limit_s: seconds an answer may take.
      on_stuck: called once when an answer did not come (it kills the browser).
      on_tick: called before each question (it kills the browser's stopped processes).
    """
    while True:
        await asyncio.sleep(every_s)
        if not connected():
            return
        if on_tick is not None:
            try:
                on_tick()
            except Exception:  # noqa: BLE001 - a failed check must not end the watch
                log.exception("the browser's periodic check failed; the watch goes on")
        if not await answers(session, limit_s):
            on_stuck(f"it did not answer within {limit_s:.0f} s")
            return


class CpuMeter:
    """Fraction of the machine's CPU time spent busy, over windows of `window_s`.

    Reads /proc/stat; where it is missing (not Linux) the CPUs always look idle.
    """

    def __init__(self, window_s: float = 0.25):
        self.window_s = window_s
        self._last = self._read()
        self._t = time.monotonic()
        self._busy = 0.0

    @staticmethod
    def _read() -> tuple[int, int] | None:
        try:
            with open("/proc/stat", encoding="ascii") as f:
                v = [int(x) for x in f.readline().split()[1:]]
        except (OSError, ValueError):
            return None
        idle = v[3] + (v[4] if len(v) > 4 else 0)
        return sum(v) - idle, sum(v)

    def busy(self) -> float:
        now = time.monotonic()
        if now - self._t >= self.window_s:
            cur = self._read()
            if cur is not None and self._last is not None and cur[1] > self._last[1]:
                self._busy = (cur[0] - self._last[0]) / (cur[1] - self._last[1])
            self._last, self._t = cur, now
        return self._busy


def renderer_memory_args(cap_mb: int | None) -> list[str]:
    """Chromium flags that start every renderer under a memory cap (RLIMIT_DATA), or none.

    Renderers are started through ``prlimit`` (util-linux), so the cap holds from a
    renderer's first instruction: allocations past it fail inside that renderer (an
    ArrayBuffer throws a RangeError, anything else crashes the renderer), and no page
    can push a machine that runs many of them into the kernel's OOM killer. RLIMIT_DATA
    counts private writable memory, which is what the JS heap, ArrayBuffers, the DOM and
    canvases take; address space merely reserved (V8's sandbox, 1 TB) does not count.

    Raises:
        RuntimeError: a cap is asked for and ``prlimit`` is missing.
    """
    if cap_mb is None:
        return []
    prlimit = shutil.which("prlimit")
    if prlimit is None:
        raise RuntimeError("prlimit (util-linux) is needed to cap renderer memory "
                           "(BrowserConfig.renderer_memory_mb; None turns the cap off)")
    cap = int(cap_mb) << 20
    # Chromium splits the prefix at spaces: prlimit's path has none.
    return [f"--renderer-cmd-prefix={prlimit} --data={cap}:{cap}"]


_CAP_SETPCAP, _CAP_SYS_NICE = 8, 23


def effective_caps() -> int:
    """This process's effective capability set (``CapEff`` of ``/proc/self/status``)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("CapEff:"):
                return int(line.split()[1], 16)
    except OSError:
        pass
    return 0


def keep_priority_executable(executable: str) -> str:
    """What to launch instead of ``executable`` so that the browser cannot raise its priority.

    Without CAP_SYS_NICE (not root) Chromium cannot raise it anyway: ``executable`` itself.
    With it, a script that starts ``executable`` through ``setpriv`` (util-linux) with
    CAP_SYS_NICE dropped from the inheritable and bounding sets, which every process of the
    browser inherits. ``exec`` all the way: the browser keeps the script's process id.

    Where the capability cannot be dropped (no ``setpriv``, no CAP_SETPCAP) the browser is
    started as it is, with a warning: scoring goes on, only the priority is not held. A path
    that is not an executable file is returned as it is, so that the launch error names it
    (through a script it would name the script).
    """
    caps = effective_caps()
    if not caps >> _CAP_SYS_NICE & 1 or not os.access(executable, os.X_OK):
        return executable
    setpriv = shutil.which("setpriv")
    if setpriv is None or not caps >> _CAP_SETPCAP & 1:
        _warn_once("Chromium may raise its threads to nice -8 here: dropping CAP_SYS_NICE "
                   "needs setpriv (util-linux) and CAP_SETPCAP")
        return executable
    return _launcher(setpriv, executable)


@functools.cache
def _warn_once(message: str) -> None:
    log.warning(message)


@functools.cache
def _launcher(setpriv: str, executable: str) -> str:
    folder = tempfile.mkdtemp(prefix="rcca-browser-")
    atexit.register(shutil.rmtree, folder, True)
    path = os.path.join(folder, "chromium")
    with open(path, "w") as f:
        f.write(f"#!/bin/sh\nexec {shlex.quote(setpriv)} --inh-caps=-sys_nice "
                f"--bounding-set=-sys_nice -- {shlex.quote(executable)} \"$@\"\n")
    os.chmod(path, 0o700)
    return path
