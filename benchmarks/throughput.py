"""Evaluator throughput: probes/s and apps/s at several concurrency levels vs a baseline.

The baseline scores one probe at a time per worker, starts a new browser
for every app and a new context for every probe. Ours keeps browsers, reuses
page slots (reset between probes) and overlaps probes (most of a probe's time
is waiting: fixed waits and assertions retrying until their timeout). All
configurations run on the same apps, on the same machine, in the same run, and
their verdicts are compared with the baseline's.

Run:
  python benchmarks/throughput.py [--tasks 3] [--configs 1x4,1x8,2x8,1x8r1]

Prints one table row per configuration. Target (issue 2): >= 5x the baseline's
probes/s on 2 cores, with unchanged verdicts.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from evaluators.browser import BrowserWorker  # noqa: E402
from evaluators.config import EvalConfig  # noqa: E402
from evaluators.pool import EvaluatorPool, make_mirror  # noqa: E402
from evaluators.score import score_with_retries  # noqa: E402
from evaluators.summary import table  # noqa: E402
from evaluators.tasks import load_responses, load_tasks  # noqa: E402

DATA = REPO.parent / "shared" / "data" / "interactscience"


def sample(n_tasks: int) -> tuple[dict, list[dict]]:
    """Every model's answer to n_tasks tasks spread over the task list."""
    tasks = load_tasks(DATA / "tasks.jsonl")
    ids = sorted(tasks)
    step = max(1, len(ids) // n_tasks)
    keep = set(ids[::step][:n_tasks])
    rows = []
    for path in sorted((DATA / "answers").glob("*.jsonl")):
        rows += [r for r in load_responses(path, tasks) if r["task_id"] in keep]
    return tasks, rows


def _config(pages: int, reuse: int) -> EvalConfig:
    cfg = EvalConfig()
    return dataclasses.replace(cfg, run_rubrics_after_gate_failure=True, browser=dataclasses.replace(
        cfg.browser, pages_per_worker=pages, page_reuse=reuse))


async def _baseline(tasks: dict, rows: list[dict]) -> list[dict]:
    cfg = _config(1, reuse=1)
    mirror = make_mirror(cfg)
    out = []
    for row in rows:
        worker = await BrowserWorker(cfg.browser, mirror, pages=1).start()
        try:
            out.append(await score_with_retries(worker, tasks[row["task_id"]], row, cfg))
        finally:
            await worker.close()
    return out


def verdicts(records: list[dict]) -> dict[tuple, str]:
    return {(i, v["id"]): v["verdict"] for i, r in enumerate(records) for v in r["rubrics"]
            if v.get("ran", True) and v["verdict"] in ("pass", "fail")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=3, help="tasks (x 10 models' answers)")
    ap.add_argument("--configs", default="1x4,1x8,2x8,1x8r1",
                    help="comma-separated WORKERSxPAGES configurations; a suffix rN sets "
                         "page_reuse=N (default 50; r1 = a new context per probe)")
    args = ap.parse_args()
    tasks, rows = sample(args.tasks)
    n_probes = sum(1 for r in rows for rub in tasks[r["task_id"]].rubrics if rub.probe)
    print(f"{len(rows)} apps, {n_probes} probes")

    t0 = time.perf_counter()
    base = asyncio.run(_baseline(tasks, rows))
    base_s = time.perf_counter() - t0
    ref = verdicts(base)
    results = [["baseline (1 probe, new browser per app)", base_s, len(rows) / base_s,
                n_probes / base_s, 1.0, 0, len(ref)]]
    print(f"baseline: {base_s:.0f} s")
    for spec in args.configs.split(","):
        shape, _, reuse = spec.partition("r")
        workers, pages = (int(x) for x in shape.split("x"))
        reuse = int(reuse or EvalConfig().browser.page_reuse)
        t0 = time.perf_counter()
        recs = list(EvaluatorPool(tasks, _config(pages, reuse), workers=workers).score(rows))
        secs = time.perf_counter() - t0
        got = verdicts(recs)
        diff = sum(1 for k in ref if got.get(k) != ref[k])
        results.append([f"{workers} worker(s) x {pages} pages, page reuse {reuse}", secs, len(rows) / secs,
                        n_probes / secs, base_s / secs, diff, len(ref)])
        print(f"{spec}: {secs:.0f} s, {diff} verdicts differ")
    print()
    print(table(["configuration", "seconds", "apps/s", "probes/s", "speedup",
                 "verdicts differing", "verdicts compared"], results))


if __name__ == "__main__":
    main()
