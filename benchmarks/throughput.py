"""Evaluator throughput: probes/s and apps/s at several concurrency levels vs a baseline.

The baseline scores one probe at a time per worker, starts a new browser
for every app and a new context for every probe. Ours keeps browsers, reuses
page slots (reset between probes) and overlaps probes (most of a probe's time
is waiting: fixed waits and assertions retrying until their timeout). All
configurations run on the same apps, on the same machine, in the same run, and
their verdicts are compared with the baseline's.

Two samples of the recorded answers: ``--every N`` (default 2: 75 apps, 344 probes) takes
one answer to every N-th task, the ten models taking turns, so that tasks, models and the
libraries the apps load are as in the whole answer set (three.js 17% of the apps against
16%, Plotly 28% against 27%, p5 56% against 56%); ``--every 0 --tasks K`` takes every
model's answer to K tasks spread over the task list (the sample this benchmark first used;
its 3 tasks hold 30% three.js apps and no Plotly). Each row also gives the CPU seconds the configuration used, by process kind
(Chromium's GPU process, renderers, browser process, Playwright's driver, Python).

Run:
  python benchmarks/throughput.py [--every 2 | --every 0 --tasks 3]
      [--configs 1x4,1x8,1x16,2x8,1x8r1]

Prints one table row per configuration and the verdicts that differ from the baseline's.
Target (issue 2): >= 5x the baseline's probes/s on 2 cores, with unchanged verdicts.
Measured on 2 cores, default sample, with probes that time out beside other pages rerun alone
(``BrowserConfig.rerun_contended_timeouts``, the default): baseline 2,266 s (0.152 probes/s);
2x8 424 s (5.3x, no verdict differing, 6 probes rerun); 1x8 532 s (4.3x, 2 of 344 differing,
4 probes rerun; the two are of the heavy 3D SH2Domain app). Without reruns (an earlier run): 1x8 406 s (5.5x,
1 differing), 2x8 6.9x (6 differing), 1x16 7.8x (10 differing: 16 pages starve on 2 cores).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.proc_cpu import CpuSampler  # noqa: E402
from evaluators.sandbox.browser import BrowserWorker  # noqa: E402
from evaluators.config import EvalConfig  # noqa: E402
from evaluators.fleet.pool import EvaluatorPool, make_mirror  # noqa: E402
from evaluators.checks.score import score_with_retries  # noqa: E402
from evaluators.summary import table  # noqa: E402
from evaluators.tasks import load_responses, load_tasks  # noqa: E402

DATA = REPO.parent / "shared" / "data" / "interactscience"


LIBRARIES = {"three.js": re.compile(r"<script[^>]+three(?:\.module)?(?:\.min)?\.js", re.I),
             "Plotly": re.compile(r"<script[^>]+plotly", re.I),
             "p5": re.compile(r"<script[^>]+p5(?:\.min)?\.js", re.I)}


def sample(every: int | None, n_tasks: int | None) -> tuple[dict, list[dict]]:
    """One answer to every ``every``-th task, the models taking turns; or, with ``every``
    None, every model's answer to ``n_tasks`` tasks spread over the task list."""
    tasks = load_tasks(DATA / "tasks.jsonl")
    answers = {p.stem: {r["task_id"]: r for r in load_responses(p, tasks)}
               for p in sorted((DATA / "answers").glob("*.jsonl"))}
    models, ids = sorted(answers), sorted(tasks)
    if every:
        return tasks, [answers[models[j % len(models)]][tid]
                       for j, tid in enumerate(ids[::every]) if tid in answers[models[j % len(models)]]]
    step = max(1, len(ids) // n_tasks)
    keep = ids[::step][:n_tasks]
    return tasks, [answers[m][tid] for m in models for tid in keep if tid in answers[m]]


def library_mix(rows: list[dict]) -> str:
    """Share of the apps loading each heavy library."""
    return ", ".join(f"{name} {sum(bool(rx.search(r['response'])) for r in rows) / len(rows):.0%}"
                     for name, rx in LIBRARIES.items())


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


def reruns(records: list[dict]) -> int:
    """Probes that timed out beside other pages and were run again alone."""
    return sum("rerun" in v for r in records for v in r["rubrics"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--every", type=int, default=2,
                    help="one answer to every N-th task, models in turn (0: use --tasks)")
    ap.add_argument("--tasks", type=int, default=3,
                    help="with --every 0: tasks (x 10 models' answers)")
    ap.add_argument("--configs", default="1x4,1x8,1x16,2x8,1x8r1",
                    help="comma-separated WORKERSxPAGES configurations; a suffix rN sets "
                         "page_reuse=N (default 50; r1 = a new context per probe)")
    args = ap.parse_args()
    tasks, rows = sample(args.every or None, args.tasks)
    n_probes = sum(1 for r in rows for rub in tasks[r["task_id"]].rubrics if rub.probe)
    print(f"{len(rows)} apps ({len(set(r['task_id'] for r in rows))} tasks), {n_probes} probes; "
          f"apps loading {library_mix(rows)}", flush=True)

    with CpuSampler() as cpu:
        base = asyncio.run(_baseline(tasks, rows))
    base_s = cpu.wall
    ref = verdicts(base)
    results = [["baseline (1 probe, new browser per app)", base_s, len(rows) / base_s,
                n_probes / base_s, 1.0, 0, len(ref), reruns(base), cpu.total, cpu.summary()]]
    print(f"baseline: {base_s:.0f} s, {cpu.total:.0f} CPU-s ({cpu.summary()})", flush=True)
    for spec in args.configs.split(","):
        shape, _, reuse = spec.partition("r")
        workers, pages = (int(x) for x in shape.split("x"))
        reuse = int(reuse or EvalConfig().browser.page_reuse)
        with CpuSampler() as cpu:
            recs = list(EvaluatorPool(tasks, _config(pages, reuse), workers=workers).score(rows))
        secs = cpu.wall
        got = verdicts(recs)
        diff = sum(1 for k in ref if got.get(k) != ref[k])
        results.append([f"{workers} worker(s) x {pages} pages, page reuse {reuse}", secs,
                        len(rows) / secs, n_probes / secs, base_s / secs, diff, len(ref),
                        reruns(recs), cpu.total, cpu.summary()])
        print(f"{spec}: {secs:.0f} s, {diff} verdicts differ, {reruns(recs)} probes rerun alone, "
              f"{cpu.total:.0f} CPU-s "
              f"({cpu.summary()})", flush=True)
        for i, rid in (k for k in ref if got.get(k) != ref[k]):
            print(f"  {rows[i]['task_id']} {rows[i].get('model', '')} {rid}: baseline "
                  f"{ref[i, rid]}, here {got.get((i, rid), 'not run')}", flush=True)
    print()
    print(table(["configuration", "seconds", "apps/s", "probes/s", "speedup",
                 "verdicts differing", "verdicts compared", "probes rerun", "CPU-s",
                 "CPU-s by process"],
                results))


if __name__ == "__main__":
    main()
