"""Does judging slow browser scoring? The same apps scored without and with a judge.

  python benchmarks/judge_throughput.py [--apps 16] [--delay 3] [--concurrency 4] [--pages 4]

Scores the first `--apps` InteractScience answers of `--model` that have rubrics without a
probe, in one process with one browser (`score_rows_async`), first with no judge and then with
the scripted OpenAI-compatible server on loopback as the judge, answering each request after
`--delay` seconds (a hosted model's latency). Prints wall time, probes run per second of wall
time, and the judge's requests. Judging runs after a response's probes, holding no page, so
the browser keeps working while requests wait: with the judge, the wall time should grow by
about one judge latency (the last response's), not by one per response.
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

from evaluators.config import EvalConfig  # noqa: E402
from evaluators.fleet.pool import score_rows_async  # noqa: E402
from evaluators.judge.config import JudgeConfig  # noqa: E402
from evaluators.judge.fake import FakeJudgeServer, all_pass  # noqa: E402
from evaluators.summary import table  # noqa: E402
from evaluators.tasks import load_responses, load_tasks  # noqa: E402

DATA = REPO.parent / "shared" / "data" / "interactscience"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--apps", type=int, default=16)
    ap.add_argument("--model", default="gpt-4o")
    ap.add_argument("--delay", type=float, default=3.0)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--pages", type=int, default=4)
    a = ap.parse_args()
    tasks = load_tasks(DATA / "tasks.jsonl")
    rows = [r for r in load_responses(DATA / "answers" / f"{a.model}.jsonl", tasks)
            if any(x.probe is None for x in tasks[r["task_id"]].rubrics)][:a.apps]
    base = EvalConfig()
    base = dataclasses.replace(base, browser=dataclasses.replace(
        base.browser, pages_per_worker=a.pages))
    out = []

    def slow(body):
        time.sleep(a.delay)  # the server's thread waits; the client's event loop does not
        return all_pass(body)

    for name in ("no judge", "judge"):
        with FakeJudgeServer(default=slow) as server:
            cfg = base if name == "no judge" else dataclasses.replace(base, judge=JudgeConfig(
                base_url=server.base_url, model="fake", concurrency=a.concurrency))
            t0 = time.perf_counter()
            recs = asyncio.run(score_rows_async(rows, tasks, cfg))
            wall = time.perf_counter() - t0
            probes = sum(1 for r in recs for v in r["rubrics"]
                         if v.get("decided_by") != "judge" and "duration_ms" in v)
            out.append([name, len(recs), f"{wall:.1f}", probes, f"{probes / wall:.2f}",
                        len(server.requests), sum(r.get("status") == "error" for r in recs)])
    print(f"{len(rows)} answers of {a.model}; judge latency {a.delay:g} s, "
          f"{a.concurrency} requests in flight, {a.pages} pages\n")
    print(table(["run", "apps", "wall s", "probes", "probes/s", "judge requests", "errors"], out))


if __name__ == "__main__":
    main()
