"""A browser that stops answering (issue 17: the pool stall) is killed and its apps rescored.

A Chromium main process that is alive but silent (here SIGSTOPped; in the wild a deadlock)
used to hold every call on it for ever, and its pages' watchdogs then failed the apps as
hung: the evaluator's failure scored as the response's. A stopped renderer did the second
alone. Real Chromium throughout, but for the silence of a deadlock (a session that never
answers).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchmarks.proc_cpu import descendants
from evaluators.checks.score import error_record
from evaluators.config import EvalConfig
from evaluators.fleet import pool as pool_mod
from evaluators.fleet.pool import make_mirror, score_rows_async
from evaluators.sandbox.browser import BrowserWorker, EvaluatorFault
from evaluators.sandbox.ending import end_retired
from evaluators.sandbox.processes import (IdleBurn, below, browser_mark, browser_pid, cpu_waits, kill,
                                          read_tree, state, stopped, waited_since,
                                          watch_browser)
from evaluators.tasks import parse_task
from tests.test_evaluator_browser import GOOD

CFG = EvalConfig()
CFG = dataclasses.replace(CFG, browser=dataclasses.replace(
    CFG.browser, load_timeout_ms=10_000, probe_time_limit_ms=25_000, hang_timeout_ms=3000,
    pages_per_worker=4, browser_answer_timeout_ms=3000, decide_when_quiet=False))
SLOW = parse_task({"id": "slow", "prompt": "p", "rubrics": [
    {"id": "r", "text": "x", "kind": "dynamic", "importance": "core", "probe": {
        "steps": [{"wait_ms": 4000}, {"expect": "text", "locator": "#count", "value": "0"}],
        "timeout_ms": 3000}}]})


def test_browser_pid_finds_the_main_process_by_its_mark():
    mark = browser_mark()
    sleep = [sys.executable, "-c", "import time; time.sleep(60)"]
    main = subprocess.Popen([*sleep, mark])
    child = subprocess.Popen([*sleep, mark, "--type=renderer"])  # a child carries --type=
    other = subprocess.Popen([*sleep, browser_mark()])
    try:
        time.sleep(0.3)
        assert browser_pid(mark) == main.pid
        main.kill()
        main.wait()
        assert browser_pid(mark) is None  # the renderer is not taken for the browser
    finally:
        for p in (main, child, other):
            p.kill()
            p.wait()


def _two_below(pid: int) -> list[int]:
    """The two processes below `pid`, once both have started (within 5 s)."""
    below: list[int] = []
    for _ in range(100):
        below = [p for p, _, _ in descendants(pid)]
        if len(below) == 2:
            break
        time.sleep(0.05)
    assert len(below) == 2, below
    return below


def test_stopped_finds_the_stopped_processes_below_a_pid():
    # A parent with a child and a grandchild; only the stopped grandchild is reported.
    code = ("import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', "
            "\"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', "
            "'import time; time.sleep(60)']); time.sleep(60)\"]); time.sleep(60)")
    top = subprocess.Popen([sys.executable, "-c", code])
    below = []
    try:
        below = _two_below(top.pid)
        assert stopped(top.pid) == []
        leaf = max(below)  # started last
        os.kill(leaf, signal.SIGSTOP)
        for _ in range(100):
            if stopped(top.pid):
                break
            time.sleep(0.02)
        assert stopped(top.pid) == [leaf]
        os.kill(leaf, signal.SIGCONT)
        time.sleep(0.2)
        assert stopped(top.pid) == []
    finally:
        for pid in below:
            os.kill(pid, signal.SIGKILL)
        top.kill()
        top.wait()


# A tracer that starts a child which asks to be traced and stops itself: the child sits in
# a tracing stop (state t) with the tracer as its TracerPid, as a crashing renderer does
# while the browser's crashpad handler dumps it.
_TRACED = ("import ctypes, os, signal, time\n"
           "ctypes.CDLL(None).ptrace(0, 0, 0, 0)\n"  # PTRACE_TRACEME
           "os.kill(os.getpid(), signal.SIGSTOP)\ntime.sleep(60)")
# (Named otherwise, Python cannot find itself from argv[0]: its path is spelled out.)
_TRACER = ("import subprocess, time; "
           f"subprocess.Popen([{sys.executable!r}, '-c', {_TRACED!r}]); time.sleep(60)")


def test_a_process_held_by_the_crash_reporter_is_not_stopped_from_outside():
    # Two tracers below one "browser", each holding a child in a tracing stop: the one
    # named as Chromium's crash reporter is dumping a crash (the app's own end, not an
    # outside stop); the other is any debugger, and its child is stopped from outside.
    code = ("import subprocess, sys, time\n"
            f"for name in ('chrome_crashpad_handler', 'debugger'):\n"
            f"    subprocess.Popen([name, '-c', {_TRACER!r}], executable=sys.executable)\n"
            "time.sleep(60)")
    top = subprocess.Popen([sys.executable, "-c", code])
    try:
        held: list[int] = []
        for _ in range(200):
            held = [p for p in below(top.pid) if state(p) == "t"]
            if len(held) == 2:
                break
            time.sleep(0.05)
        assert len(held) == 2, [(p, state(p)) for p in below(top.pid)]
        by_tracer = {_argv0(_tracer(p)): p for p in held}
        assert sorted(by_tracer) == ["chrome_crashpad_handler", "debugger"], by_tracer
        assert stopped(top.pid) == [by_tracer["debugger"]]
        assert [p for p, r in read_tree(top.pid).items() if r.stopped] == [by_tracer["debugger"]]
    finally:
        for pid in below(top.pid):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        top.kill()
        top.wait()


def _tracer(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(x for x in status.splitlines() if x.startswith("TracerPid:")).split()[1])


def _argv0(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()


def test_cpu_waits_reads_the_run_delay_of_renderers_and_gpu_only():
    # Two "renderers" spinning on one shared CPU each wait for it while the other runs; an
    # idle "utility" is not read. Pinned to one CPU so the waits happen on any machine.
    cpu = sorted(os.sched_getaffinity(0))[0]
    spin = (f"import os, time\nos.sched_setaffinity(0, {{{cpu}}})\n"
            "while time.process_time() < 0.6: pass\ntime.sleep(60)")
    code = ("import subprocess, sys, time; "
            f"[subprocess.Popen([sys.executable, '-c', {spin!r}, t]) "
            "for t in ('--type=renderer', '--type=gpu-process')]; "
            "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)', "
            "'--type=utility']); time.sleep(60)")
    top = subprocess.Popen([sys.executable, "-c", code])
    try:
        start, waits = {}, {}
        for _ in range(300):
            waits = cpu_waits(top.pid)
            if len(waits) == 2 and not start:
                start = waits
            if waited_since({}, waits) >= 0.4:
                break
            time.sleep(0.1)
        assert len(waits) == 2, waits  # the utility process is left out
        assert waited_since({}, waits) >= 0.4, waits
        assert waited_since(waits, start) == 0.0  # never negative
    finally:
        for p in [q for q, _, _ in descendants(top.pid)]:
            with contextlib.suppress(OSError):
                os.kill(p, signal.SIGKILL)
        top.kill()
        top.wait()


def test_read_tree_reads_state_cpu_and_role_of_each_process_below_once():
    # A parent with two children: a "renderer" (by its command line) that burns CPU, and a
    # stopped idle one. One reading must tell both apart, as the browser check uses it.
    # It spins for 0.5 s of its own CPU time (not wall time: the test may run on busy cores).
    spin = "import time\nwhile time.process_time() < 0.5: pass\ntime.sleep(60)"
    code = ("import subprocess, sys, time; "
            f"subprocess.Popen([sys.executable, '-c', {spin!r}, '--type=renderer']); "
            "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
            "time.sleep(60)")
    top = subprocess.Popen([sys.executable, "-c", code])
    below = []
    try:
        below = _two_below(top.pid)
        (renderer,) = [p for p in below
                       if b"--type=renderer" in Path(f"/proc/{p}/cmdline").read_bytes()]
        (idle,) = set(below) - {renderer}
        os.kill(idle, signal.SIGSTOP)
        for _ in range(600):
            procs = read_tree(top.pid)
            if procs.get(renderer) and procs[renderer].cpu >= 0.45:
                break
            time.sleep(0.1)
        assert set(procs) == {renderer, idle}
        assert procs[renderer].renderer and not procs[idle].renderer
        assert procs[idle].stopped and not procs[renderer].stopped
        assert procs[renderer].cpu >= 0.45 > 0.2 > procs[idle].cpu
        assert read_tree(10 ** 9) == {}  # a pid that is gone: nothing, no error
    finally:
        for pid in below:
            os.kill(pid, signal.SIGKILL)
        top.kill()
        top.wait()


def test_a_browser_that_never_answers_is_called_stuck():
    # A deadlocked browser (a session whose questions never return) is reported once,
    # within the limit, and the watch ends; one that answers is left alone.
    class Session:
        def __init__(self, silent):
            self.silent, self.asked = silent, 0

        async def send(self, method):
            self.asked += 1
            if self.silent:
                await asyncio.Event().wait()
            return {"product": "x"}

    async def run(silent):
        session, stuck, ticks = Session(silent), [], []
        watch = watch_browser(session, lambda: True, 0.05, 0.2, stuck.append,
                              on_tick=lambda: ticks.append(1))
        try:
            await asyncio.wait_for(watch, 1.0)
        except asyncio.TimeoutError:
            pass
        return session.asked, stuck, len(ticks)

    asked, stuck, ticks = asyncio.run(run(silent=True))
    assert (asked, ticks, len(stuck)) == (1, 1, 1) and "0 s" in stuck[0]
    asked, stuck, ticks = asyncio.run(run(silent=False))
    assert stuck == [] and asked >= 5 and ticks == asked


def test_a_failing_periodic_check_does_not_end_the_watch():
    # The check run at each watch (stopped processes, idle CPU) raising must not end the
    # watch: the browser would never be asked again whether it answers.
    class Session:
        asked = 0

        async def send(self, method):
            Session.asked += 1
            return {"product": "x"}

    def broken_check():
        raise OSError("a /proc read failed")

    async def run():
        stuck = []
        watch = watch_browser(Session(), lambda: True, 0.05, 0.2, stuck.append,
                              on_tick=broken_check)
        try:
            await asyncio.wait_for(watch, 0.6)
        except asyncio.TimeoutError:
            pass
        return stuck

    assert asyncio.run(run()) == [] and Session.asked >= 5


def test_kill_with_a_mark_spares_a_process_that_does_not_carry_it():
    # A browser's pid is only killed while the process still carries the browser's launch
    # mark: after the browser ended, the pid may belong to another program.
    mark = browser_mark()
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", mark])
    try:
        time.sleep(0.2)
        kill(proc.pid, "test", mark=browser_mark())  # another browser's mark: spared
        time.sleep(0.2)
        assert proc.poll() is None
        kill(proc.pid, "test", mark=mark)
        assert proc.wait(timeout=10) == -signal.SIGKILL
    finally:
        proc.kill()
        proc.wait()


def _stop_while_probing(kind: str) -> tuple[dict, float, int, int]:
    """Scores GOOD on SLOW and SIGSTOPs the worker's Chromium processes of `kind` while the
    probe waits in its first step. Returns (record, seconds from the stop, browser restarts,
    processes stopped); every process stopped is SIGKILLed at the end, whatever happened."""

    async def run():
        worker = await BrowserWorker(CFG.browser, make_mirror(CFG)).start()
        pids = []
        try:
            scoring = asyncio.ensure_future(score_rows_async(
                [{"task_id": "slow", "response": GOOD}], {"slow": SLOW}, CFG, worker=worker))
            await asyncio.sleep(2.5)  # loaded, waiting in its first step
            pids = [pid for pid, k, _ in descendants(os.getpid()) if k == kind]
            for pid in pids:
                os.kill(pid, signal.SIGSTOP)
            t0 = time.monotonic()
            (rec,) = await asyncio.wait_for(scoring, 90)
            return rec, time.monotonic() - t0, worker.restarts, len(pids)
        finally:
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            await worker.close()

    return asyncio.run(run())


@pytest.mark.browser
@pytest.mark.timeout(180)
def test_a_stopped_renderer_is_killed_and_its_app_scored_again():
    # SIGSTOP to the page's renderer while a probe waits: the page answers nothing and its
    # watchdog (3 s here) would call the app hung. The stopped process is found (at the
    # browser's next check, or as the page ends), killed, and the page's verdicts are void:
    # the response is scored again, same verdict as undisturbed, second attempt.
    rec, _, _, stopped = _stop_while_probing("renderer")
    assert stopped >= 1
    assert (rec["status"], rec["reward"], rec["attempts"]) == ("ok", 1.0, 2), rec["diagnostics"]


@pytest.mark.browser
@pytest.mark.timeout(180)
def test_a_stopped_browser_is_killed_and_its_app_scored_again():
    # SIGSTOP to the browser's main process while a probe waits: its page cannot answer
    # (the watchdog would call the app hung) and nothing on that browser returns. The
    # browser is found stopped within 3 s, killed, and the response scored again on a new
    # one: same verdict as undisturbed, second attempt, well inside a minute.
    rec, wall, restarts, stopped = _stop_while_probing("browser")
    assert stopped == 1
    assert (rec["status"], rec["reward"], rec["attempts"]) == ("ok", 1.0, 2), rec["diagnostics"]
    assert restarts == 1
    assert wall < 45, wall


def test_a_fault_while_judging_is_an_evaluator_error(monkeypatch):
    # The judge's page can lose its browser too: it is judged again (cfg.retries times), and
    # a row whose every try failed comes back as an evaluator error (never a low score),
    # instead of escaping the worker and leaving its row unanswered.
    calls = []

    async def broken(*args, **kwargs):
        calls.append(1)
        if len(calls) <= failures:
            raise EvaluatorFault("the browser stopped answering")
        return {**args[3], "judged": True}

    monkeypatch.setattr(pool_mod, "judge_record", broken)
    rec = {"status": "ok", "reward": 1.0, "attempts": 1}
    row = {"task_id": "slow", "response": GOOD}
    failures = CFG.retries + 1
    out = asyncio.run(pool_mod.judged(object(), SLOW, row, rec, CFG))
    want = error_record(SLOW, "")
    assert (out["status"], out["reward"], out["attempts"]) == (want["status"], None, 1)
    assert "evaluator fault while judging" in out["error"] and len(calls) == CFG.retries + 1
    calls.clear()
    failures = CFG.retries  # the last try answers
    out = asyncio.run(pool_mod.judged(object(), SLOW, row, rec, CFG))
    assert out == {**rec, "judged": True} and len(calls) == CFG.retries + 1


def test_idle_burn_counts_busy_processes_beyond_the_open_pages():
    # Readings one second apart: 0.5 s of CPU in a second is busy, 0.05 s is not. A busy
    # renderer per open page is expected; one more, on two ticks in a row, is too many.
    burn = IdleBurn(share=0.1, strikes=2)
    r = {1, 2}
    assert not burn.tick({1: 0.0, 2: 0.0, 9: 0.0}, r, 1, 0.0)  # a first reading: no rate
    assert not burn.tick({1: 0.5, 2: 0.05, 9: 0.0}, r, 1, 1.0)  # one busy, one page
    assert not burn.tick({1: 1.0, 2: 0.55, 9: 0.0}, r, 1, 2.0)  # two busy: strike one
    assert burn.tick({1: 1.5, 2: 1.05, 9: 0.0}, r, 1, 3.0)  # strike two
    assert not burn.tick({1: 2.0, 2: 1.55, 9: 0.0}, r, 1, 4.0)  # counted afresh
    assert not burn.tick({1: 2.0, 2: 1.55, 9: 0.0}, r, 1, 5.0)  # all quiet: no strike
    # No page open: any busy process counts (here the GPU process, 9), renderers or not.
    assert not burn.tick({1: 2.0, 2: 1.55, 9: 0.5}, r, 0, 6.0)
    assert burn.tick({1: 2.0, 2: 1.55, 9: 1.0}, r, 0, 7.0)
    # A process first seen on this tick has no rate yet, whatever its CPU so far.
    assert not burn.tick({3: 50.0}, {3}, 0, 8.0)
    assert not burn.tick({3: 50.0, 4: 9.0}, {3, 4}, 0, 9.0)


@pytest.mark.browser
@pytest.mark.timeout(120)
def test_an_idle_slot_that_burns_cpu_is_closed():
    # Work that outlives its app in a reset slot (here a busy interval started on the idle
    # slot's about:blank) is found at the browser's checks (every second here) and the idle
    # slots are closed; the browser stays and serves the next page.
    async def run():
        worker = await BrowserWorker(CFG.browser, make_mirror(CFG)).start()
        try:
            async with worker.page(GOOD) as (page, _, _):
                await page.goto("about:blank")
            gen = worker._gen
            (slot,) = gen.idle
            await slot.page.evaluate("setInterval(() => { const t = performance.now(); "
                                     "while (performance.now() - t < 50) {} }, 60)")
            for _ in range(100):
                if not gen.idle:
                    break
                await asyncio.sleep(0.1)
            closed = (not gen.idle, gen.cooled, worker._gen is gen)
            async with worker.page(GOOD) as (page, _, _):
                await page.goto("about:blank")
            return closed, worker.restarts
        finally:
            await worker.close()

    closed, restarts = asyncio.run(run())
    assert closed == (True, 1, True) and restarts == 0


@pytest.mark.browser
@pytest.mark.timeout(120)
def test_a_retired_browser_that_does_not_close_is_killed():
    # A close that never returns (here patched to hang) leaves a browser nobody watches:
    # it is killed once the limit passes.
    async def run():
        worker = await BrowserWorker(CFG.browser, make_mirror(CFG)).start()
        gen = worker._gen
        try:
            async def hang():
                await asyncio.Event().wait()

            gen.browser.close = hang
            await end_retired(gen, limit_s=0.5)
            for _ in range(50):
                if state(gen.pid) in (None, "Z"):
                    break
                await asyncio.sleep(0.1)
            return state(gen.pid)
        finally:
            worker._gen = None
            await worker.close()

    assert asyncio.run(run()) in (None, "Z")


_POOL_THEN_WAIT = """
import sys, time
from evaluators.config import EvalConfig
from evaluators.fleet.pool import EvaluatorPool
from tests.test_evaluator_browser import GOOD, COUNTER
pool = EvaluatorPool({"t": COUNTER}, EvalConfig(), workers=1).__enter__()
list(pool.score([{"task_id": "t", "response": GOOD}]))
print(pool._slots[0].proc.pid, flush=True)
time.sleep(600)
"""


@pytest.mark.browser
@pytest.mark.timeout(180)
def test_a_pool_worker_whose_parent_was_killed_exits_with_its_browser():
    # A trainer killed by a signal (the OOM killer, an operator) runs no exit handler: its
    # worker used to wait on the job queue for good, with its browser up beside the next run.
    parent = subprocess.Popen([sys.executable, "-c", _POOL_THEN_WAIT], stdout=subprocess.PIPE,
                              text=True, cwd=os.path.dirname(os.path.dirname(__file__)))
    worker = int(parent.stdout.readline())
    below = [pid for pid, _, _ in descendants(worker)]
    assert below, "the worker has no browser"
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    left = [worker, *below]
    for _ in range(300):
        left = [pid for pid in left if state(pid) not in (None, "Z")]
        if not left:
            break
        time.sleep(0.1)
    for pid in left:  # whatever happened, nothing stays behind the test
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert left == []
