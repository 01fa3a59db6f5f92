"""Ending what a browser runs: stopped processes, silent and retired browsers, crashed pages.

The pieces of `browser.BrowserWorker` that end something by force or after the fact, on a
browser generation (`browser._Generation`): kept apart so that the worker reads as the
life of its pages.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

from evaluators.sandbox.processes import Reading, kill, state, stopped

if TYPE_CHECKING:
    from evaluators.sandbox.browser import _Generation

log = logging.getLogger(__name__)


def stuck(gen: _Generation, why: str) -> None:
    """Kills a browser that stopped answering: every call waiting on it fails at once."""
    gen.draining = gen.unanswering = True
    kill(gen.pid, why, mark=gen.mark)


def unstop(gen: _Generation, procs: dict[int, Reading] | None = None) -> None:
    """Kills the browser's processes that something outside stopped (`processes.stopped`;
    from `procs` when the caller has just read the tree).

    Which page a stopped renderer served is not known here, so every page open meanwhile
    is void (`browser.BrowserWorker.page`): a few extra scorings, only when something stopped one.
    """
    if gen.pid is None or gen.unanswering:
        return
    if state(gen.pid) in ("T", "t"):  # the main process: no need to wait for its silence
        stuck(gen, "it was stopped from outside")
        return
    pids = stopped(gen.pid) if procs is None else [p for p, r in procs.items() if r.stopped]
    for pid in pids:
        gen.stops += 1
        kill(pid, "it was stopped from outside", what="a process of the browser")


async def end_retired(gen: _Generation, limit_s: float = 30) -> None:
    """Closes a retired browser; one that does not close within `limit_s` is killed.

    Nothing watches a retired browser any more, so one left running (a close that hung)
    would keep its renderers' work going for the rest of the run.
    """
    try:
        await asyncio.wait_for(gen.browser.close(), limit_s)
    except Exception as e:  # noqa: BLE001 - a timeout, or a close that failed
        kill(gen.pid, f"it did not close when retired ({type(e).__name__})", mark=gen.mark)


def on_crash(gen: _Generation, event: dict) -> None:
    """Marks the slot whose page crashed (Target.targetCrashed), with Chromium's status."""
    slot = gen.slots.get(event.get("targetId"))
    if slot is not None:
        slot.dead = True
        slot.watch.crashed = True
        slot.watch.crash_status = event.get("status") or "crashed"


def retrieve(task: asyncio.Future) -> None:
    """Reads a finished task's outcome, so that a failure nobody awaits is logged, not lost."""
    if not task.cancelled() and task.exception() is not None:
        log.warning("ending a page failed: %r", task.exception())


async def quietly(awaitable) -> None:
    with contextlib.suppress(Exception):
        await awaitable
