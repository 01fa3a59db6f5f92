"""The InteractScience leaderboard from the ten models' recorded answers, beside the official figure.

  python benchmarks/leaderboard.py [--workers 2 --pages 6] [--out runs/leaderboard]

Scores every answer file in shared/data/interactscience/answers/ with every probe run (as the
benchmark's own runner does; the reward stays gated) through `python -m evaluators leaderboard`'s
code, caching the records in --out (a rerun reads them), and prints one row per model:
Overall, Average, Perfect, mean gated reward, and the share of rubrics judged (93 of the 779 have
no probe yet: they count as not passed). For the model with official results
(Qwen2.5-Coder-32B-Instruct), it prints the official figures over all 779 tests and over the
rubrics we judge, and the per-rubric agreement on the rubrics both check fully (a probe and no
dropped screenshot step; `benchmarks/faithfulness.py`'s set): two Overall figures over the same
rubrics cannot differ by more than the share of rubrics they disagree on.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from evaluators import leaderboard as lb  # noqa: E402
from evaluators.tasks import load_tasks  # noqa: E402

DATA = REPO.parent / "shared" / "data" / "interactscience"
OFFICIAL = "Qwen2.5-Coder-32B-Instruct"


def official_records(tasks) -> list[dict]:
    """The official run's statuses as records (timedOut counts as failed), one per task."""
    by_task: dict[str, dict[str, str]] = collections.defaultdict(dict)
    with open(DATA / "official" / f"{OFFICIAL}.jsonl", encoding="utf-8") as f:
        for line in f:
            o = json.loads(line)
            by_task[o["task_id"]][o["rubric_id"]] = "pass" if o["status"] == "passed" else "fail"
    return [{"task_id": tid, "status": "ok", "reward": None,
             "rubrics": [{"id": r.id, "verdict": by_task[tid].get(r.id, "fail")} for r in t.rubrics]}
            for tid, t in tasks.items()]


def restrict(records: list[dict], keep) -> list[dict]:
    """Records with only the rubrics `keep(task_id, rubric_id)` accepts (as if the tasks had no others)."""
    return [{**r, "rubrics": [v for v in r["rubrics"] if keep(r["task_id"], v["id"])]} for r in records]


def comparable(tasks) -> set[tuple[str, str]]:
    return {(t.id, r.id) for t in tasks.values() for r in t.rubrics
            if r.probe is not None and not r.meta.get("dropped_screenshot_steps")}


def agreement(ours: list[dict], official: list[dict], keys: set) -> tuple[float, int]:
    theirs = {(r["task_id"], v["id"]): v["verdict"] for r in official for v in r["rubrics"]}
    pairs = [(theirs[(r["task_id"], v["id"])], v["verdict"]) for r in ours for v in r["rubrics"]
             if (r["task_id"], v["id"]) in keys and v["verdict"] in ("pass", "fail")]
    return sum(a == b for a, b in pairs) / max(len(pairs), 1), len(pairs)


def overall_on(records: list[dict], keys: set) -> dict:
    """Overall over the rubrics in `keys` only (passed / those rubrics of the ok records)."""
    sub = [r for r in restrict(records, lambda t, r: (t, r) in keys) if r.get("status") == "ok"]
    passed = sum(v["verdict"] == "pass" for r in sub for v in r["rubrics"])
    total = sum(len(r["rubrics"]) for r in sub)
    return {"Overall": passed / total if total else float("nan"), "rubrics": total}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--pages", type=int, default=6)
    ap.add_argument("--out", default="runs/leaderboard")
    ap.add_argument("--models", nargs="*", default=None, help="answer files by model name (default: all)")
    args = ap.parse_args()
    from evaluators.__main__ import main as cli

    files = sorted((DATA / "answers").glob("*.jsonl"))
    if args.models:
        files = [f for f in files if f.stem in args.models]
    t0 = time.perf_counter()
    rc = cli(["leaderboard", "--tasks", str(DATA / "tasks.jsonl"), "--responses", *map(str, files),
              "--out", args.out, "--workers", str(args.workers), "--pages", str(args.pages),
              "--json", str(Path(args.out) / "leaderboard.json"),
              "--markdown", str(Path(args.out) / "leaderboard.md")])
    if rc:
        sys.exit(rc)
    print(f"\nscored or read in {time.perf_counter() - t0:.0f} s")
    tasks = load_tasks(DATA / "tasks.jsonl")
    cache = Path(args.out) / f"{OFFICIAL}.records.jsonl"
    if not cache.exists():
        return
    ours = [json.loads(x) for x in cache.read_text().splitlines()]
    official = official_records(tasks)
    judged = {(r["task_id"], v["id"]) for r in ours for v in r["rubrics"] if v["verdict"] in ("pass", "fail")}
    full = comparable(tasks)
    agree, n = agreement(ours, official, full)
    rows = {"official, all 779": lb.figures(official, tasks),
            f"ours ({OFFICIAL})": lb.figures(ours, tasks)}
    print(f"\n{OFFICIAL}: ours beside the official run")
    print(lb.text_table(rows))
    o_j, u_j = overall_on(official, judged), overall_on(ours, judged)
    o_f, u_f = overall_on(official, full), overall_on(ours, full)
    print(f"\nOverall on the {u_j['rubrics']} rubrics we judge: official {o_j['Overall']:.3f}, ours {u_j['Overall']:.3f}")
    print(f"Overall on the {u_f['rubrics']} fully comparable rubrics: official {o_f['Overall']:.3f}, "
          f"ours {u_f['Overall']:.3f}; agreement {agree:.1%} over {n}")
    gap = abs(u_f["Overall"] - o_f["Overall"])
    print(f"|ours - official| = {gap:.3f} <= 1 - agreement = {1 - agree:.3f}: {gap <= 1 - agree + 1e-12}")


if __name__ == "__main__":
    main()
