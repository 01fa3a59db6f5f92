"""How often does the same response get a different verdict? Re-scoring, alone and under load.

  python benchmarks/reward_noise.py [--model gpt-4o] [--apps 30] [--skip 0] [--repeats 3]
      [--workers 1 --pages 4] [--no-load | --only-load] [--load-nice 10]

Scores the same `--apps` InteractScience answers (after the first `--skip`, so that a later run
can add answers no earlier run scored) `--repeats` times with the evaluator's default
settings (the rubrics the gated reward needs, as in RL), first alone, then while the policy's
train step and sampler run on the same cores (`benchmarks/rl_step.py` in a loop, as the
training loop runs them beside scoring, its XLA threads at the loop's niceness:
`evaluator.compute_nice`). A (response, rubric) flips when its verdict is not
the same in every repeat; a response's gate and reward flip likewise. Prints the flip rates per
rubric kind (initial / dynamic), per importance, and of the gate and the reward, for each
condition; evaluator errors are counted apart (an error is not a verdict). The last line reads
`flip rate under load: X%` (rubric verdicts).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from evaluators.config import EvalConfig  # noqa: E402
from evaluators.fleet.pool import EvaluatorPool  # noqa: E402
from evaluators.summary import table  # noqa: E402
from evaluators.tasks import load_responses, load_tasks  # noqa: E402

DATA = REPO.parent / "shared" / "data" / "interactscience"


@contextlib.contextmanager
def training_load(on: bool, nice: int | None):
    """The policy's train step and sampler running on the same cores, restarted until done,
    their XLA threads at niceness `nice` (the loop's `evaluator.compute_nice`; None: 0)."""
    if not on:
        yield
        return
    flag = "" if nice is None else f" --yield-cpu {nice}"
    cmd = (f"while true; do {sys.executable} {REPO / 'benchmarks' / 'rl_step.py'} --steps 200"
           f"{flag} > /dev/null 2>&1; done")
    proc = subprocess.Popen(["bash", "-c", cmd], start_new_session=True)
    try:
        yield
    finally:
        import os
        import signal

        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def flips(runs: list[list[dict]]) -> dict[str, list[int]]:
    """Per group: [flipped, compared], over the (response, rubric) pairs and responses."""
    out: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    for k, first in enumerate(runs[0]):
        recs = [run[k] for run in runs]
        if any(r.get("status") != "ok" for r in recs):
            out["errors"][0] += 1
            continue
        for key in ("gate", "reward"):
            out[key][0] += len({str(r.get(key)) for r in recs}) > 1
            out[key][1] += 1
        for j, v in enumerate(first["rubrics"]):
            verdicts = {r["rubrics"][j]["verdict"] for r in recs}
            if verdicts <= {"unjudged"}:
                continue
            flipped = len(verdicts) > 1
            for group in ("rubrics", f"kind {v['kind']}", f"importance {v['importance']}"):
                out[group][0] += flipped
                out[group][1] += 1
    return out


def flipped(runs: list[list[dict]]) -> list[str]:
    """One line per (response, rubric) whose verdict changed, and per response whose gate did:
    what each repeat said, for finding the cause."""
    out = []
    for k, first in enumerate(runs[0]):
        recs = [run[k] for run in runs]
        if any(r.get("status") != "ok" for r in recs):
            continue
        if len({str(r.get("gate")) for r in recs}) > 1:
            out.append(f"{first['task_id']} gate: " + " | ".join(
                f"{r.get('gate')}: {(r.get('diagnostics') or [{}])[0].get('message', '')[:90]}"
                if r.get("gate") else "passed" for r in recs))
        for j, v in enumerate(first["rubrics"]):
            got = [r["rubrics"][j] for r in recs]
            if len({g["verdict"] for g in got}) > 1:
                out.append(f"{first['task_id']} {v['id']} ({v['kind']}): " + " | ".join(
                    f"{g['verdict']}" + (f" ({(g.get('message') or '')[:90]})"
                                         if g["verdict"] != "pass" else "") for g in got))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="gpt-4o")
    ap.add_argument("--apps", type=int, default=30)
    ap.add_argument("--skip", type=int, default=0,
                    help="leave out the model's first N answers (those an earlier run scored)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--pages", type=int, default=EvalConfig().browser.pages_per_worker)
    ap.add_argument("--no-load", action="store_true", help="only the run alone")
    ap.add_argument("--only-load", action="store_true", help="only the run under load")
    ap.add_argument("--load-nice", type=int, default=10,
                    help="niceness of the load's XLA threads, as the training loop sets it "
                         "(evaluator.compute_nice, 10); -1: left at 0, as before it did")
    a = ap.parse_args()
    tasks = load_tasks(DATA / "tasks.jsonl")
    rows = load_responses(DATA / "answers" / f"{a.model}.jsonl", tasks)[a.skip:a.skip + a.apps]
    cfg = EvalConfig()
    cfg = dataclasses.replace(cfg, browser=dataclasses.replace(cfg.browser,
                                                               pages_per_worker=a.pages))
    results, listing, seconds = {}, {}, {}
    for name, load in (("alone", False), ("under load", True)):
        if (load and a.no_load) or (not load and a.only_load):
            continue
        t0 = time.perf_counter()
        with training_load(load, None if a.load_nice < 0 else a.load_nice):
            runs = [list(EvaluatorPool(tasks, cfg, workers=a.workers).score(rows))
                    for _ in range(a.repeats)]
        seconds[name] = time.perf_counter() - t0
        results[name] = flips(runs)
        listing[name] = flipped(runs)
    groups = sorted({g for r in results.values() for g in r if g != "errors"})
    head = ["group", *(f"{n} flips" for n in results)]
    body = [[g, *(f"{r[g][0]}/{r[g][1]} ({r[g][0] / max(1, r[g][1]):.1%})" for r in
                  results.values())] for g in groups]
    body.append(["responses with an evaluator error", *(r["errors"][0] for r in results.values())])
    print(f"{len(rows)} answers of {a.model} (from answer {a.skip}), each scored {a.repeats} times per condition\n")
    print(table(head, body))
    for name, lines in listing.items():
        print(f"\n{name} ({seconds[name]:.0f} s): {len(lines)} flipped")
        for line in lines:
            print("  " + line)
    print()
    for name, r in results.items():
        rate = r["rubrics"][0] / max(1, r["rubrics"][1])
        print(f"flip rate {'under load' if name == 'under load' else 'alone'}: {rate:.2%}")


if __name__ == "__main__":
    main()
