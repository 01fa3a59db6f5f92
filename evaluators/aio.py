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


def dump_tasks(file: TextIO | None = None, limit: int = 16) -> int:
    """Writes the stack of every pending task of the running loop to `file` (stderr);
    returns how many. For a process that has stalled: its coroutines are suspended, so a
    thread dump (py-spy, gdb) shows only the loop's `select`, never what each task awaits.
    """
    out = sys.stderr if file is None else file
    tasks = [t for t in asyncio.all_tasks() if not t.done()]
    for t in tasks:
        print(f"--- {t.get_name()}: {t.get_coro()!r}", file=out)
        t.print_stack(limit=limit, file=out)
    out.flush()
    return len(tasks)
