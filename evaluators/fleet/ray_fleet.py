"""Scoring on Ray actors that may die: every row comes back, in order (CPU only, no JAX).

Each actor keeps one browser worker for its whole life (like a pool worker process) and
scores the rows it is handed concurrently. When an actor dies mid-batch (killed, its
node lost, out of memory), Ray raises on the batch's reference: the actor is replaced
and its rows are scored again elsewhere. A row that was in flight on two actors that
died gets an error record (status `error`, never a low score): its first actor's death
may have been a neighbour's doing, two in a row are the row's.

Usage::

    with RayScorer(tasks, EvalConfig(), actors=2) as scorer:
        records = scorer.score(rows)
"""

from __future__ import annotations

import collections
import logging
import os

from evaluators.config import EvalConfig
from evaluators.checks.record import after_lost_attempts
from evaluators.checks.score import error_record, merge
from evaluators.tasks import Task

ACTOR_DIED = "the Ray actor scoring this row died"

log = logging.getLogger(__name__)


class _ScoringActor:
    """One Ray actor: a browser worker, started on first use, scoring batches of rows."""

    def __init__(self, tasks: dict[str, Task], cfg: EvalConfig):
        self.tasks, self.cfg = tasks, cfg
        self.worker = None

    def pid(self) -> int:
        return os.getpid()

    async def score(self, rows: list[dict]) -> list[dict]:
        from evaluators.sandbox.browser import BrowserWorker
        from evaluators.fleet.pool import make_mirror, score_rows_async

        if self.worker is None:
            self.worker = await BrowserWorker(self.cfg.browser, make_mirror(self.cfg)).start()
        return await score_rows_async(rows, self.tasks, self.cfg, worker=self.worker)


class RayScorer:
    """Scores rows on `actors` Ray actors, each holding `per_actor` rows in flight.

    Args:
      tasks: {task id: Task}.
      cfg: evaluator config.
      actors: how many actors (each one Chromium).
      per_actor: rows per batch; an actor runs one batch at a time, so this is also how
        many rows an actor's death sends back to be rescored.
      address: a Ray cluster to join ("auto"), or None to start a local instance.
    """

    def __init__(self, tasks: dict[str, Task], cfg: EvalConfig = EvalConfig(), actors: int = 2,
                 per_actor: int | None = None, address: str | None = None):
        import ray

        self.tasks, self.cfg = tasks, cfg
        self.per_actor = per_actor or cfg.browser.pages_per_worker
        if not ray.is_initialized():
            ray.init(address=address, include_dashboard=False, log_to_driver=False,
                     **({} if address else {"num_cpus": max(1, actors)}))
        self._remote = ray.remote(num_cpus=1)(_ScoringActor)
        self.actors = [self._new_actor() for _ in range(max(1, actors))]
        self.replaced = 0  # actors that died and were replaced

    def _new_actor(self):
        return self._remote.remote(self.tasks, self.cfg)

    def __enter__(self) -> "RayScorer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def pids(self) -> list[int]:
        """The actors' process ids (for tests and the chaos benchmark)."""
        import ray

        return ray.get([a.pid.remote() for a in self.actors])

    def score(self, rows: list[dict]) -> list[dict]:
        """One record per row, in input order; never raises for a row's sake."""
        import ray

        out: list[dict | None] = [None] * len(rows)
        deaths = collections.Counter()  # row index -> actors that died with it in flight
        todo = collections.deque(range(len(rows)))
        running: dict = {}  # ref -> (actor slot, row indices)
        while todo or running:
            busy = {slot for slot, _ in running.values()}
            for slot in range(len(self.actors)):
                if slot not in busy and todo:
                    batch = [todo.popleft() for _ in range(min(self.per_actor, len(todo)))]
                    ref = self.actors[slot].score.remote([rows[i] for i in batch])
                    running[ref] = (slot, batch)
            done, _ = ray.wait(list(running), num_returns=1)
            for ref in done:
                slot, batch = running.pop(ref)
                try:
                    for i, rec in zip(batch, ray.get(ref)):
                        out[i] = after_lost_attempts(rec, [ACTOR_DIED] * deaths[i])
                except ray.exceptions.RayError as e:  # the actor died (or could not start)
                    self._replace(slot, e)
                    for i in batch:
                        deaths[i] += 1
                        if deaths[i] >= 2:
                            out[i] = after_lost_attempts(merge(rows[i], {**error_record(
                                self.tasks.get(rows[i].get("task_id")),
                                f"two Ray actors died while scoring this row: {e}"[:4000]),
                                "attempts": 0}), [ACTOR_DIED] * 2)
                        else:
                            todo.appendleft(i)
        return out  # type: ignore[return-value]

    def _replace(self, slot: int, error: BaseException) -> None:
        import ray

        log.warning("Ray actor %d died (%s); replacing it", slot, str(error).splitlines()[0][:200])
        ray.kill(self.actors[slot])
        self.actors[slot] = self._new_actor()
        self.replaced += 1

    def close(self) -> None:
        import ray

        for a in self.actors:
            ray.kill(a)
        self.actors = []
