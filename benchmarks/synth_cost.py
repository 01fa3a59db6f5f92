"""What validating offline drafts costs: wall and CPU seconds per draft, pages, CPU by process.

Validates `--drafts` offline drafts (`evaluators.synth.offline`, every check of
`evaluators.synth.validate`) on `--workers` browser workers of `--pages` pages each, and prints
one table: scorings by role (reference runs, rewrite, mutants), probe pages, wall and CPU
seconds per draft, CPU per page and CPU seconds by process kind (`benchmarks.proc_cpu`). The
2,000-task run of issue 21 takes about `--drafts 2000` times the per-draft wall time.

Run:
  python benchmarks/synth_cost.py [--drafts 22] [--workers 2] [--pages 4] [--seed 7]
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.proc_cpu import CpuSampler  # noqa: E402
from evaluators.config import EvalConfig  # noqa: E402
from evaluators.summary import table  # noqa: E402
from evaluators.synth import offline, validate  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--drafts", type=int, default=22)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--pages", type=int, default=4)
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()
    drafts = offline.drafts(a.drafts, seed=a.seed)
    counts: collections.Counter = collections.Counter()
    score = validate._score

    def counted(rows, tasks, eval_cfg, workers, records):
        for r in rows:
            counts[r["role"]] += 1
            counts["pages"] += sum(x.probe is not None for x in tasks[r["task_id"]].rubrics)
        return score(rows, tasks, eval_cfg, workers, records)

    validate._score = counted  # counts what validation sends to the evaluator
    cfg = EvalConfig()
    cfg = dataclasses.replace(cfg, browser=dataclasses.replace(cfg.browser,
                                                               pages_per_worker=a.pages))
    with CpuSampler() as cpu:
        out = validate.validate(drafts, cfg, workers=a.workers)
    n = max(1, a.drafts)
    by_kind = ", ".join(f"{k} {v:.0f}" for k, v in sorted(cpu.by_kind.items(), key=lambda kv: -kv[1])
                        if v >= 1)
    print(f"{a.drafts} offline drafts (seed {a.seed}), {a.workers} workers x {a.pages} pages; "
          f"kept {len(out.tasks)}, dropped {out.report()['dropped'] or 'none'}, judge-only "
          f"{out.report()['probes_judge_only'] or 'none'}")
    print(table(["scorings (ref / rewrite / mutant)", "probe pages", "wall s", "wall s/draft",
                 "CPU s/draft", "CPU ms/page", "CPU-s by process"],
                [[f"{counts['reference']} / {counts['rewrite']} / {counts['mutant']}",
                  counts["pages"], f"{cpu.wall:.0f}", f"{cpu.wall / n:.1f}",
                  f"{cpu.total / n:.1f}", f"{cpu.total / max(1, counts['pages']) * 1000:.0f}",
                  by_kind]]))


if __name__ == "__main__":
    main()
