"""The evaluator fleet: browser workers in separate processes.

Each worker process owns one Chromium and scores several apps at once (their
probes overlap: most of a probe's time is waiting). The parent hands out jobs,
keeps a bounded number in flight per worker, restarts a worker that dies or
stops answering, and returns exactly one record per input row. The pool can be
used once (`score`) or kept up across training steps and fed group by group
(`start`, `submit`, `collect`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import heapq
import logging
import multiprocessing as mp
import os
import queue
import signal
import threading
import time
import traceback
from multiprocessing import connection as mp_connection
from multiprocessing.connection import Connection
from typing import Callable, Iterable, Iterator

from evaluators.aio import dump_tasks
from evaluators.sandbox.browser import BrowserWorker, EvaluatorFault
from evaluators.config import EvalConfig
from evaluators.localize.api import Localizer, localize_in_worker
from evaluators.checks.record import after_lost_attempts
from evaluators.checks.score import error_record, merge, score_with_retries
from evaluators.judge.client import JudgeUnavailable
from evaluators.judge.judge import Judge, judge_record
from evaluators.tasks import Task

log = logging.getLogger(__name__)
HEARTBEAT_S = 5.0
# A worker that dies this many times in a row before its browser is up cannot start
# (no Chromium, a broken install): the pool raises instead of restarting it for ever.
START_ATTEMPTS = 3
WORKER_DIED = "the evaluator worker died while scoring this row"
# A worker whose event loop has not turned for this long is stuck (or its
# browser start hangs): it is killed and its apps are rescored elsewhere.
STUCK_S = 180.0
# How long a worker that kept a row past its deadline is given to write its tasks' stacks.
DUMP_S = 1.0


class EvaluatorStartError(RuntimeError):
    """The pool's workers cannot start their browsers (an installation problem, not a row's)."""


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
                           on_result: Callable[[int, dict], None] | None = None,
                           localizer: Localizer | None = None) -> list[dict]:
    """Scores rows in this process with one browser (tests, notebooks, small jobs, a Ray
    actor). Apps run concurrently, bounded by the worker's page limit; with a `localizer`,
    rows that carry ``token_ids`` come back localized.
    """
    own = worker is None
    if own:
        worker = await BrowserWorker(cfg.browser, make_mirror(cfg)).start()
    apps = asyncio.Semaphore(max(1, cfg.browser.pages_per_worker))
    judge = Judge(cfg.judge) if cfg.judge.enabled else None

    async def one(i: int, row: dict) -> dict:
        task = tasks.get(row.get("task_id"))
        async with apps:
            rec = await score_with_retries(worker, task, row, cfg)
        # No page or app slot is held while the model thinks (an agentic judge takes one page).
        rec = await judged(judge, task, row, rec, cfg, worker)
        if localizer is not None:
            rec = await asyncio.to_thread(localize_in_worker, localizer, row, rec,
                                          tasks.get(row.get("task_id")))
        if on_result:
            on_result(i, rec)
        return rec

    try:
        return list(await asyncio.gather(*(one(i, r) for i, r in enumerate(rows))))
    finally:
        if judge is not None:
            await judge.close()
        if own:
            await worker.close()


async def judged(judge: Judge | None, task: Task | None, row: dict, rec: dict,
                 cfg: EvalConfig, worker: BrowserWorker | None = None) -> dict:
    """The record after the judge's step (``evaluators.judge.judge``), when there is a judge;
    a judge that does not answer makes the record an evaluator error, never a low score.

    A judge's page that lost its browser (not the response's doing) is judged again, up to
    ``cfg.retries`` times, as scoring is."""
    if judge is None or task is None or rec.get("status") != "ok":
        return rec
    for _ in range(cfg.retries + 1):
        try:
            return await judge_record(judge, task, row["response"], rec, cfg.reward, worker,
                                      cfg.browser)
        except JudgeUnavailable as e:
            err = error_record(task, f"judge unavailable: {e}")
            break
        except EvaluatorFault as e:
            err = error_record(task, f"evaluator fault while judging: {e}")
    return merge(row, {**err, "attempts": rec.get("attempts")})


def _parent_gone(parent_pid: int) -> bool:
    """Whether the pool process that started this worker has ended: its sentinel (a pipe
    that closes as it dies, even before this worker's first look), else a new parent pid."""
    parent = mp.parent_process()
    if parent is not None:
        return not parent.is_alive()
    return os.getppid() != parent_pid


async def _orphaned(worker: BrowserWorker) -> None:
    """Ends a worker whose pool process is gone (killed: its exit handlers never ran).

    Nothing would ever send it a job again, and its queue never reports the parent's end
    (the worker holds the queue's pipe too), so without this its browser, and whatever
    the last apps left running in it, would stay up for good beside the next run.
    """
    log.warning("the pool process is gone: this worker closes its browser and exits")
    # Exits even if closing hangs (on 3.11, wait_for waits for the close's own cancel).
    threading.Timer(30, os._exit, (0,)).start()
    with contextlib.suppress(Exception):
        await asyncio.wait_for(worker.close(), 20)
    os._exit(0)


def _worker_main(wid: int, tasks: dict[str, Task], cfg: EvalConfig, jobs: mp.Queue,
                 out: Connection, localizer: Localizer | None = None) -> None:
    logging.basicConfig(level=logging.WARNING)
    # One sender thread owns the pipe, so the event loop never blocks on a
    # parent that is busy elsewhere (e.g. sampling the next group).
    outbox: queue.SimpleQueue = queue.SimpleQueue()

    def sender() -> None:
        while (msg := outbox.get()) is not None:
            out.send(msg)

    thread = threading.Thread(target=sender, daemon=True)
    thread.start()
    try:
        asyncio.run(_worker_loop(wid, tasks, cfg, jobs, outbox, localizer))
    finally:
        outbox.put(None)
        thread.join(timeout=30)


async def _worker_loop(wid: int, tasks: dict[str, Task], cfg: EvalConfig, jobs: mp.Queue,
                       outbox: queue.SimpleQueue, localizer: Localizer | None = None) -> None:
    parent = os.getppid()  # before the browser starts: the pool may be killed meanwhile
    try:
        worker = await BrowserWorker(cfg.browser, make_mirror(cfg)).start()
    except Exception as e:  # noqa: BLE001 - reported to the parent, which decides
        outbox.put(("start_failed", None, f"{type(e).__name__}: {e}"[:2000]))
        return
    outbox.put(("ready", None, None))
    judge = Judge(cfg.judge) if cfg.judge.enabled else None
    loop = asyncio.get_running_loop()
    running: set[asyncio.Task] = set()

    async def heartbeat() -> None:
        # Apps may wait long for CPU admission; the parent judges a worker by
        # whether its event loop still turns, not by how long an app takes.
        while True:
            if _parent_gone(parent):
                await _orphaned(worker)
            outbox.put(("beat", None, None))
            await asyncio.sleep(HEARTBEAT_S)

    beat = asyncio.create_task(heartbeat())
    # `kill -USR1 <worker pid>` writes what every task of this worker awaits to its stderr.
    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
        loop.add_signal_handler(signal.SIGUSR1, dump_tasks)

    async def one(idx: int, row: dict) -> None:
        task = tasks.get(row.get("task_id"))
        attempts = 0
        try:
            rec = await score_with_retries(worker, task, row, cfg)
            attempts = rec.get("attempts") or 0
            rec = await judged(judge, task, row, rec, cfg, worker)
            # Localized here, beside the browser that produced the record: the trainer host
            # only gathers weights. In a thread, so the pages of other apps keep being served.
            rec = await asyncio.to_thread(localize_in_worker, localizer, row, rec, task)
        except Exception:  # noqa: BLE001 - a row without a record would wait for its deadline
            rec = merge(row, {**error_record(task, "evaluator exception:\n" +
                                             traceback.format_exc(limit=8)), "attempts": attempts})
        outbox.put(("result", idx, rec))

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
    if judge is not None:
        await judge.close()
    await worker.close()


@dataclasses.dataclass
class _Slot:
    proc: mp.Process
    jobs: mp.Queue
    conn: Connection              # this worker's results; EOF when it dies
    inflight: dict                # job id -> deadline
    last_beat: float = 0.0
    ready: bool = False           # its browser started
    start_error: str | None = None


class EvaluatorPool:
    """Scores (task, response) rows with `workers` browser processes.

    Two ways to use it:
    - `score(rows)`: yields one record per row in input order (starts the
      workers if needed and, if it started them, stops them at the end);
    - persistent and streaming: `start()` once (or `with pool:`), then
      `submit(rows)` groups as they are produced and `collect(ids)` their
      records later. `submit` applies back-pressure: it blocks while more than
      `max_pending` rows are queued or in flight.

    Each worker answers on its own pipe, so a worker killed mid-write (OOM,
    a crash) cannot wedge the others; its apps are rescored elsewhere.

    Args:
      tasks: {task id: Task}.
      cfg: evaluator config.
      workers: browser processes.
      apps_per_worker: apps in flight per worker (default: pages_per_worker).
      max_pending: back-pressure bound for `submit` (default: unbounded).
    """

    def __init__(self, tasks: dict[str, Task], cfg: EvalConfig = EvalConfig(), workers: int = 1,
                 apps_per_worker: int | None = None, max_pending: int | None = None,
                 localizer: Localizer | None = None):
        self.tasks, self.cfg, self.n = tasks, cfg, max(1, workers)
        self.localizer = localizer
        self.per_worker = apps_per_worker or cfg.browser.pages_per_worker
        self.max_pending = max_pending
        self._ctx = mp.get_context("spawn")
        self._slots: list[_Slot | None] = [None] * self.n
        self._rows: dict[int, dict] = {}
        # (0 for a row to retry, else 1; minus its probes; id): retries first, then the
        # rows whose tasks have the most probes, so the slowest apps do not start last and
        # stretch the tail of a batch (records still come back in input order).
        self._todo: list[tuple[int, int, int]] = []
        self._done: dict[int, dict] = {}
        self._next_id = 0
        self.restarts = 0
        self._failed_starts = [0] * self.n  # consecutive deaths before "ready", per worker

    # -- lifecycle -----------------------------------------------------------
    @property
    def started(self) -> bool:
        return self._slots[0] is not None

    def start(self) -> "EvaluatorPool":
        """Starts the worker processes (idempotent)."""
        for wid in range(self.n):
            if self._slots[wid] is None:
                self._start(wid)
        return self

    def __enter__(self) -> "EvaluatorPool":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def _start(self, wid: int) -> None:
        jobs = self._ctx.Queue()
        reader, writer = self._ctx.Pipe(duplex=False)
        proc = self._ctx.Process(target=_worker_main, daemon=True,
                                 args=(wid, self.tasks, self.cfg, jobs, writer, self.localizer))
        proc.start()
        writer.close()  # the child holds the only writer: its death reads as EOF here
        self._slots[wid] = _Slot(proc, jobs, reader, {}, time.monotonic())

    def close(self) -> None:
        """Stops the workers; rows still pending are dropped."""
        live = [s for s in self._slots if s is not None]
        for slot in live:
            if slot.proc.is_alive():
                slot.jobs.put(None)
        for slot in live:
            slot.proc.join(timeout=15)
            if slot.proc.is_alive():
                slot.proc.kill()
            slot.conn.close()
        self._slots = [None] * self.n
        self._rows.clear()
        self._todo.clear()
        self._done.clear()

    # -- streaming API -------------------------------------------------------
    @property
    def pending(self) -> int:
        """Rows submitted whose records have not been produced yet."""
        return len(self._rows) - len(self._done)

    def submit(self, rows: Iterable[dict]) -> list[int]:
        """Queues rows for scoring; returns their job ids (for `collect`)."""
        self.start()
        ids = []
        for row in rows:
            while self.max_pending is not None and self.pending >= self.max_pending:
                self._pump(1.0)
            idx, self._next_id = self._next_id, self._next_id + 1
            self._rows[idx] = row
            heapq.heappush(self._todo, (1, -self._probes(row), idx))
            ids.append(idx)
        self._dispatch()
        return ids

    def _probes(self, row: dict) -> int:
        task = self.tasks.get(row.get("task_id"))
        return 0 if task is None else sum(r.probe is not None for r in task.rubrics)

    def collect(self, ids: Iterable[int]) -> list[dict]:
        """Blocks until the records of `ids` are done; returns them in that order."""
        ids = list(ids)
        for idx in ids:
            while idx not in self._done:
                self._pump(1.0)
        out = [self._done.pop(i) for i in ids]
        for i in ids:
            self._rows.pop(i, None)
        return out

    def score(self, rows: Iterable[dict]) -> Iterator[dict]:
        """Yields one record per row, in input order."""
        owned = not self.started
        try:
            for idx in self.submit(rows):
                yield from self.collect([idx])
        finally:
            if owned:
                self.close()

    # -- the parent's event pump ----------------------------------------------
    def _deadline(self, row: dict) -> float:
        """A last resort per app (heartbeats catch a stuck worker much sooner)."""
        task = self.tasks.get(row.get("task_id"))
        n = len(task.rubrics) if task else 1
        b = self.cfg.browser
        per_try = (b.load_timeout_ms + b.probe_time_limit_ms * (1 + n)) / 1000 + 60
        judging = self.cfg.judge.budget_s() if self.cfg.judge.enabled else 0.0
        # Apps queue for CPU admission behind the worker's other apps.
        return time.monotonic() + (per_try * (self.cfg.retries + 1) + judging) * self.per_worker

    def _dispatch(self) -> None:
        for slot in self._slots:
            while self._todo and len(slot.inflight) < self.per_worker:
                idx = heapq.heappop(self._todo)[2]
                row = self._rows[idx]
                slot.inflight[idx] = self._deadline(row)
                slot.jobs.put((idx, row))

    def _pump(self, timeout: float) -> None:
        """Dispatches, reads what the workers sent (waiting up to `timeout`), checks health."""
        self._dispatch()
        conns = {s.conn: wid for wid, s in enumerate(self._slots)}
        dead: set[int] = set()
        for conn in mp_connection.wait(list(conns), timeout):
            wid = conns[conn]
            slot = self._slots[wid]
            try:
                while conn.poll():
                    kind, idx, rec = conn.recv()
                    slot.last_beat = time.monotonic()
                    if kind == "ready":
                        slot.ready, self._failed_starts[wid] = True, 0
                    elif kind == "start_failed":
                        slot.start_error = rec
                    elif kind == "result" and idx in slot.inflight:
                        del slot.inflight[idx]
                        if rec.pop("_rcca_pool_retry", None):
                            rec = after_lost_attempts(rec, [WORKER_DIED])
                        self._done[idx] = rec
            except (EOFError, OSError):
                dead.add(wid)
        self._check_workers(dead)
        self._dispatch()

    def _check_workers(self, dead: set[int]) -> None:
        now = time.monotonic()
        for wid, slot in enumerate(self._slots):
            gone = wid in dead or not slot.proc.is_alive()
            overdue = any(dl < now for dl in slot.inflight.values())
            stuck = now - slot.last_beat > STUCK_S or overdue
            if not gone and not stuck:
                continue
            silent = now - slot.last_beat > STUCK_S
            why = ("died" if gone else "stopped answering" if silent
                   else "kept a row past its deadline")
            log.warning("worker %d %s; restarting it", wid, why)
            if not gone and not silent:
                # Its loop still turns: what each of its tasks awaits goes to its stderr first
                # (`aio.dump_tasks`), the one record of where a stalled row waited.
                with contextlib.suppress(ProcessLookupError):
                    os.kill(slot.proc.pid, signal.SIGUSR1)
                time.sleep(DUMP_S)
            slot.proc.kill()
            slot.proc.join(timeout=15)
            slot.conn.close()
            if not slot.ready:
                self._failed_starts[wid] += 1
                if self._failed_starts[wid] >= START_ATTEMPTS:
                    self._slots[wid] = None
                    self.close()
                    raise EvaluatorStartError(
                        f"evaluator worker {wid} failed to start {START_ATTEMPTS} times in a "
                        f"row (exit code {slot.proc.exitcode}): "
                        f"{slot.start_error or 'it died before its browser was up'}")
            self.restarts += 1
            for idx in slot.inflight:
                # A worker that never came up did not run its jobs: they keep their retry.
                self._requeue(idx, ran=slot.ready)
            self._start(wid)

    def _requeue(self, idx: int, ran: bool = True) -> None:
        row = self._rows[idx]
        if not ran:
            heapq.heappush(self._todo, (0, 0, idx))
            return
        # A job that took a worker down twice gets an error record; its first
        # crash may have been a neighbour's fault.
        if row.get("_rcca_pool_retry"):
            rec = error_record(self.tasks.get(row.get("task_id")),
                               "the evaluator worker died twice while scoring this row")
            clean = {k: v for k, v in row.items() if k != "_rcca_pool_retry"}
            self._done[idx] = after_lost_attempts(merge(clean, {**rec, "attempts": 0}),
                                                  [WORKER_DIED] * 2)
        else:
            self._rows[idx] = {**row, "_rcca_pool_retry": 1}
            heapq.heappush(self._todo, (0, 0, idx))
