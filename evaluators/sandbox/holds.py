"""The pages a browser worker has admitted, each with the task that holds it.

Admission (`BrowserWorker._admit`, `_admit_alone`) counts open pages. A bare counter cannot
tell a page still in use from one whose holder went away without closing it, and a page
waiting to run alone then waits for a count that never comes down: the worker's other
pages queue behind it and the worker scores nothing more, while its event loop and
heartbeat turn as if all were well (a chaos run lost four rows in a stall that looked like
this, its cause unproven, with nothing in the log to say where they waited). Here each
admitted page is held by a task:

- a hold whose task has ended is stale: it is dropped, with a warning (`live`);
- a hold older than `report_s` while another page waits for admission is reported once,
  with every pending task's stack on stderr (`aio.dump_tasks`), so that what holds it
  is on record; the hold itself is left alone (the pool's deadline for the row is the
  last resort): a page held long may still be legitimate (an agentic judge's).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time

from evaluators.aio import dump_tasks

log = logging.getLogger(__name__)
# No probe page stays open this long (a probe's limit is 30 s, plus the CPU waits it is
# given back alone, plus its ending): a page waiting behind one that has is worth a look.
REPORT_S = 300.0


@dataclasses.dataclass
class Hold:
    """One admitted page: the task that holds it, since when, whether it runs alone."""
    owner: asyncio.Task | None
    since: float
    alone: bool
    reported: bool = False


class Holds:
    """The admitted pages of one worker (see the module docstring).

    Args:
      report_s: a hold older than this is reported (once) while a page waits.
    """

    def __init__(self, report_s: float = REPORT_S):
        self.report_s = report_s
        self._holds: dict[int, Hold] = {}
        self._next = 0

    def add(self, alone: bool = False) -> int:
        """Registers a page admitted for the current task; returns its key."""
        key, self._next = self._next, self._next + 1
        self._holds[key] = Hold(asyncio.current_task(), time.monotonic(), alone)
        return key

    def remove(self, key: int) -> None:
        self._holds.pop(key, None)

    def live(self) -> int:
        """Pages held by a task still running (stale holds are dropped, with a warning)."""
        for key, hold in list(self._holds.items()):
            if hold.owner is not None and hold.owner.done():
                log.warning("a page admitted %.0f s ago was never closed by its task (%s), "
                            "which has ended: its place is given back",
                            time.monotonic() - hold.since, hold.owner.get_name())
                del self._holds[key]
        return len(self._holds)

    def waiting(self) -> None:
        """Called while a page waits for admission: reports holds older than `report_s`."""
        now = time.monotonic()
        late = [h for h in self._holds.values() if not h.reported and now - h.since > self.report_s]
        if not late:
            return
        for hold in late:
            hold.reported = True
            log.warning("a page has been open for %.0f s (%s%s) while another waits to open: "
                        "the stacks of all pending tasks follow on stderr", now - hold.since,
                        "alone, " if hold.alone else "",
                        hold.owner.get_name() if hold.owner is not None else "no task")
        dump_tasks()
