"""The evaluator fleet: browser workers in separate processes.

Each worker process owns one Chromium and scores several apps at once (their
probes overlap: most of a probe's time is waiting). The parent hands out jobs,
keeps a bounded number in flight per worker, restarts a worker that dies or
stops answering, and returns exactly one record per input row, in input order.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import multiprocessing as mp
import queue
import time
from typing import Callable, Iterable, Iterator

from evaluators.browser import BrowserWorker
from evaluators.config import EvalConfig
from evaluators.score import error_record, merge, score_with_retries
from evaluators.tasks import Task

log = logging.getLogger(__name__)
HEARTBEAT_S = 5.0
# A worker whose event loop has not turned for this long is stuck (or its
# browser start hangs): it is killed and its apps are rescored elsewhere.
STUCK_S = 180.0


def make_mirror(cfg: EvalConfig):
    """The CDN mirror the config names, or None (every CDN request aborted) if absent."""
    from evaluators import cdn  # local: keeps the import light for callers without a mirror

    root = cdn.default_root() if cfg.browser.cdn_root is None else cdn.Path(cfg.browser.cdn_root)
    if not root.exists():
        log.warning("no CDN mirror at %s: CDN requests will be blocked "
                    "(run `python -m evaluators.cdn install`)", root)
        return None
    return cdn.CdnMirror(root)


async def score_rows_async(rows: list[dict], tasks: dict[str, Task], cfg: EvalConfig,
                           worker: BrowserWorker | None = None,
                           on_result: Callable[[int, dict], None] | None = None) -> list[dict]:
    """Scores rows in this process with one browser (tests, notebooks, small jobs).

    Apps run concurrently, bounded by the worker's page limit.
    """
    own = worker is None
    if own:
        worker = await BrowserWorker(cfg.browser, make_mirror(cfg)).start()
    apps = asyncio.Semaphore(max(1, cfg.browser.pages_per_worker))

    async def one(i: int, row: dict) -> dict:
        async with apps:
            rec = await score_with_retries(worker, tasks.get(row.get("task_id")), row, cfg)
        if on_result:
            on_result(i, rec)
        return rec

    try:
        return list(await asyncio.gather(*(one(i, r) for i, r in enumerate(rows))))
    finally:
        if own:
            await worker.close()


def _worker_main(wid: int, tasks: dict[str, Task], cfg: EvalConfig, jobs: mp.Queue,
                 results: mp.Queue) -> None:
    logging.basicConfig(level=logging.WARNING)
    asyncio.run(_worker_loop(wid, tasks, cfg, jobs, results))


async def _worker_loop(wid: int, tasks: dict[str, Task], cfg: EvalConfig, jobs: mp.Queue,
                       results: mp.Queue) -> None:
    worker = await BrowserWorker(cfg.browser, make_mirror(cfg)).start()
    results.put(("ready", wid, None, None))
    loop = asyncio.get_running_loop()
    running: set[asyncio.Task] = set()

    async def heartbeat() -> None:
        # Apps may wait long for CPU admission; the parent judges a worker by
        # whether its event loop still turns, not by how long an app takes.
        while True:
            results.put(("beat", wid, None, None))
            await asyncio.sleep(HEARTBEAT_S)

    beat = asyncio.create_task(heartbeat())

    async def one(idx: int, row: dict) -> None:
        rec = await score_with_retries(worker, tasks.get(row.get("task_id")), row, cfg)
        results.put(("result", wid, idx, rec))

    while True:
        job = await loop.run_in_executor(None, jobs.get)
        if job is None:
            break
        t = asyncio.create_task(one(*job))
        running.add(t)
        t.add_done_callback(running.discard)
    if running:
        await asyncio.gather(*running)
    beat.cancel()
    await worker.close()


@dataclasses.dataclass
class _Slot:
    proc: mp.Process
    jobs: mp.Queue
    inflight: dict  # idx -> (row, deadline)
    last_beat: float = 0.0


class EvaluatorPool:
    """Scores (task, response) rows with `workers` browser processes.

    Args:
      tasks: {task id: Task}.
      cfg: evaluator config.
      workers: browser processes.
      apps_per_worker: apps in flight per worker (default: pages_per_worker).
    """

    def __init__(self, tasks: dict[str, Task], cfg: EvalConfig = EvalConfig(), workers: int = 1,
                 apps_per_worker: int | None = None):
        self.tasks, self.cfg, self.n = tasks, cfg, max(1, workers)
        self.per_worker = apps_per_worker or cfg.browser.pages_per_worker
        self._ctx = mp.get_context("spawn")
        self._results: mp.Queue = self._ctx.Queue()
        self._slots: list[_Slot | None] = [None] * self.n
        self.restarts = 0

    def _start(self, wid: int) -> None:
        jobs = self._ctx.Queue()
        proc = self._ctx.Process(target=_worker_main, daemon=True,
                                 args=(wid, self.tasks, self.cfg, jobs, self._results))
        proc.start()
        self._slots[wid] = _Slot(proc, jobs, {}, time.monotonic())

    def _deadline(self, row: dict) -> float:
        """A last resort per app (heartbeats catch a stuck worker much sooner)."""
        task = self.tasks.get(row.get("task_id"))
        n = len(task.rubrics) if task else 1
        b = self.cfg.browser
        per_try = (b.load_timeout_ms + b.probe_time_limit_ms * (1 + n)) / 1000 + 60
        # Apps queue for CPU admission behind the worker's other apps.
        return time.monotonic() + per_try * (self.cfg.retries + 1) * self.per_worker

    def score(self, rows: Iterable[dict]) -> Iterator[dict]:
        """Yields one record per row, in input order."""
        rows = list(rows)
        todo = list(range(len(rows)))[::-1]
        done: dict[int, dict] = {}
        nxt = 0
        for wid in range(self.n):
            self._start(wid)
        try:
            while nxt < len(rows):
                self._dispatch(rows, todo)
                try:
                    kind, wid, idx, rec = self._results.get(timeout=1.0)
                    if self._slots[wid] is not None:
                        self._slots[wid].last_beat = time.monotonic()
                    if kind == "result" and idx in self._slots[wid].inflight:
                        del self._slots[wid].inflight[idx]
                        rec.pop("_rcca_pool_retry", None)
                        done[idx] = rec
                except queue.Empty:
                    pass
                self._check_workers(rows, todo, done)
                while nxt in done:
                    yield done.pop(nxt)
                    nxt += 1
        finally:
            self.close()

    def _dispatch(self, rows: list[dict], todo: list[int]) -> None:
        for slot in self._slots:
            while todo and len(slot.inflight) < self.per_worker:
                idx = todo.pop()
                slot.inflight[idx] = (rows[idx], self._deadline(rows[idx]))
                slot.jobs.put((idx, rows[idx]))

    def _check_workers(self, rows: list[dict], todo: list[int], done: dict[int, dict]) -> None:
        now = time.monotonic()
        for wid, slot in enumerate(self._slots):
            dead = not slot.proc.is_alive()
            overdue = any(dl < now for _, dl in slot.inflight.values())
            stuck = now - slot.last_beat > STUCK_S or overdue
            if not dead and not stuck:
                continue
            log.warning("worker %d %s; restarting it", wid, "died" if dead else "stopped answering")
            slot.proc.kill()
            self.restarts += 1
            for idx, (row, _) in slot.inflight.items():
                # A job that took a worker down twice gets an error record; its
                # first crash may have been a neighbour's fault.
                retried = row.get("_rcca_pool_retry")
                if retried:
                    rec = error_record(self.tasks.get(row.get("task_id")),
                                       "the evaluator worker died twice while scoring this row")
                    clean = {k: v for k, v in row.items() if k != "_rcca_pool_retry"}
                    done[idx] = merge(clean, {**rec, "attempts": 2})
                else:
                    rows[idx] = {**row, "_rcca_pool_retry": 1}
                    todo.append(idx)
            self._start(wid)

    def close(self) -> None:
        for slot in self._slots:
            if slot is None:
                continue
            if slot.proc.is_alive():
                slot.jobs.put(None)
        for slot in self._slots:
            if slot is None:
                continue
            slot.proc.join(timeout=15)
            if slot.proc.is_alive():
                slot.proc.kill()
        self._slots = [None] * self.n
