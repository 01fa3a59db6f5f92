"""What writer tracing costs: probes/s and CPU with and without `BrowserConfig.trace_writers`.

Scores the same sample of recorded answers (throughput's, by default every 10th task with the
models taking turns) twice with coverage on, as localization scores them: once without
tracing, once with the page recording every DOM write's stack (`sandbox.writers`). Verdicts
that differ between the two runs are listed: the wrappers must change nothing an app can see,
so a difference is either the tracing's fault or a probe whose verdict drifts with timing
(run it again to tell).

Run:
  python benchmarks/trace_cost.py [--every 10] [--workers 1 --pages 4]

Prints one row per setting: seconds, probes/s, CPU seconds by process, verdicts differing.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.proc_cpu import CpuSampler  # noqa: E402
from benchmarks.throughput import library_mix, sample, verdicts  # noqa: E402
from evaluators.config import EvalConfig  # noqa: E402
from evaluators.fleet.pool import EvaluatorPool  # noqa: E402
from evaluators.summary import table  # noqa: E402


def _config(trace: bool, pages: int) -> EvalConfig:
    cfg = EvalConfig()
    return dataclasses.replace(cfg, run_rubrics_after_gate_failure=True, browser=dataclasses.replace(
        cfg.browser, coverage=True, trace_writers=trace, pages_per_worker=pages))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--every", type=int, default=10, help="one answer to every N-th task")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--pages", type=int, default=4)
    args = ap.parse_args()
    tasks, rows = sample(args.every, None)
    n_probes = sum(1 for r in rows for rub in tasks[r["task_id"]].rubrics if rub.probe)
    print(f"{len(rows)} apps, {n_probes} probes; apps loading {library_mix(rows)}", flush=True)
    out, ref = [], None
    for trace in (False, True):
        with CpuSampler() as cpu:
            recs = list(EvaluatorPool(tasks, _config(trace, args.pages),
                                      workers=args.workers).score(rows))
        got = verdicts(recs)
        ref = got if ref is None else ref
        differ = [k for k in ref if got.get(k) != ref[k]]
        writes = sum(len(d.get("writers") or ()) for r in recs for d in r["diagnostics"])
        failed = sum(d["kind"] == "probe_failure" for r in recs for d in r["diagnostics"])
        out.append(["traced" if trace else "not traced", cpu.wall, n_probes / cpu.wall,
                    cpu.total, cpu.summary(), len(differ), f"{writes} on {failed} failures"])
        for i, rid in differ:
            print(f"  {rows[i]['task_id']} {rid}: {ref[i, rid]} untraced, "
                  f"{got.get((i, rid), 'not run')} traced", flush=True)
    print(table(["pages", "seconds", "probes/s", "CPU-s", "CPU-s by process",
                 "verdicts differing", "writes recorded"], out))


if __name__ == "__main__":
    main()
