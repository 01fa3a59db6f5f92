"""Ending asyncio tasks for sure.

On Python 3.11 ``asyncio.wait_for`` swallows a cancellation that lands while the call it
waits for has just finished (CPython gh-86296, fixed in 3.12 by the rewrite over
``asyncio.timeout``). A task that loops over ``wait_for`` (a page's watchdog asking the page
to answer every second) then goes on after ``cancel()``, and ``await gather(task)`` waits
for it for ever. Measured here: a loop of 1 ms sleeps and ``wait_for`` calls went on after
148 of 300 cancels. In the evaluator one such watchdog held its probe's page open, the
probe after it waited to run alone, and the pool worker scored nothing more.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from typing import TextIO

log = logging.getLogger(__name__)


async def cancel_and_wait(*tasks: asyncio.Future, every_s: float = 0.5,
                          rounds: int = 20) -> set[asyncio.Future]:
    """Cancels ``tasks`` and waits until they end, cancelling again those that go on.

    After ``rounds`` rounds of ``every_s`` seconds the tasks still running are left (and
    logged): a caller is never held for longer than that. The results and exceptions of
    the tasks that ended are retrieved, so none is reported as never retrieved.

    Returns:
      The tasks left running (empty when all ended): what they hold is still in use.
    """
    pending = {t for t in tasks if t is not None}
    for _ in range(rounds):
        for t in pending:
            t.cancel()
        if not pending:
            break
        _, pending = await asyncio.wait(pending, timeout=every_s)
    for t in tasks:
        if t is not None and t.done() and not t.cancelled():
            t.exception()
    if pending:
        log.warning("%d task(s) went on after %d cancels; left running", len(pending), rounds)
    return pending


def dump_tasks(file: TextIO | None = None, limit: int = 64) -> int:
    """Writes what every pending task of the running loop awaits to `file` (stderr): the
    task (with the future it waits for) and its whole chain of awaiting coroutines, outermost
    first; returns how many. For a process that has stalled: its coroutines are suspended, so
    a thread dump (py-spy, gdb) shows only the loop's `select`, never what each task awaits;
    and `Task.print_stack` shows a suspended task's outermost coroutine only (3.11), not the
    call deep inside it that waits.
    """
    out = sys.stderr if file is None else file
    tasks = [t for t in asyncio.all_tasks() if not t.done()]
    for t in tasks:
        print(f"--- {t.get_name()}: {t!r}", file=out)
        for line in await_chain(t.get_coro(), limit):
            print(line, file=out)
    out.flush()
    return len(tasks)


def await_chain(coro, limit: int = 64) -> list[str]:
    """``File "...", line N, in name`` for ``coro`` and each coroutine or generator it awaits
    in turn (``cr_await``, ``gi_yieldfrom``), down to the one suspended on a future."""
    lines, obj = [], coro
    while obj is not None and len(lines) < limit:
        frame = getattr(obj, "cr_frame", None) or getattr(obj, "gi_frame", None)
        if frame is not None:
            lines.append(f'  File "{frame.f_code.co_filename}", line {frame.f_lineno}, '
                         f"in {frame.f_code.co_name}")
        obj = getattr(obj, "cr_await", None) or getattr(obj, "gi_yieldfrom", None)
    return lines
