"""One-trip probe actions (`checks.shots`) against Playwright's calls: screenshots, then verdicts.

Loads recorded InteractScience answers whose probes read screenshots and, for every element
those probes picture, takes Playwright's screenshot and ours in turn, twice (P, O, P, O), on
the same page in the same browser, so both see the same machine. Reports per library the
apps load (three.js, Plotly, p5, other): the median and 90th percentile of each, the ratio of
medians, which path ours took (its own capture or Playwright's), and whether the bytes are
equal where they can be: for an element whose two Playwright pictures are equal (it did not
change meanwhile), ours must equal them too.

With ``--verdicts N``, N answers (after the same ``--skip``; any answers, not only those with
screenshots) are then scored with ``BrowserConfig.one_trip_actions`` on and off (two pools
side by side, one answer at a time, the first of the two alternating), and the table gives
each side's wall time, probe time (the sum of the rubrics' durations) and the rubric verdicts
that differ, listed by name.

Run:
  python benchmarks/screenshots.py [--model gemini-2.5-pro] [--apps 40] [--skip 0]
      [--verdicts 0]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import math
import re
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from evaluators.checks.extract import extract_app  # noqa: E402
from evaluators.checks.shots import element_png  # noqa: E402
from evaluators.config import EvalConfig  # noqa: E402
from evaluators.fleet.pool import EvaluatorPool, make_mirror  # noqa: E402
from evaluators.sandbox.app_server import APP_URL  # noqa: E402
from evaluators.sandbox.browser import BrowserWorker  # noqa: E402
from evaluators.summary import table  # noqa: E402
from evaluators.tasks import load_responses, load_tasks  # noqa: E402

DATA = REPO.parent / "shared" / "data" / "interactscience"


def pictured(task) -> list[str]:
    """CSS selectors of the elements a task's probes read as screenshots, in order, once."""
    out: list[str] = []

    def walk(steps):
        for s in steps:
            if isinstance(s, dict) and s.get("read") == "screenshot":
                sel = s["from"] if isinstance(s["from"], str) else s["from"].get("css")
                if sel and sel not in out:
                    out.append(sel)
            if isinstance(s, dict) and "retry" in s:
                walk(s["retry"].get("steps", []) if isinstance(s["retry"], dict) else [])
    for r in task.rubrics:
        if r.probe:
            walk(r.probe["steps"])
    return out


def library(code: str) -> str:
    """The heaviest drawing library among the scripts the app loads (three, plotly, p5)."""
    srcs = " ".join(re.findall(r"<script[^>]*\ssrc\s*=\s*[\"']?([^\"'\s>]+)", code, re.I)).lower()
    for name in ("three", "plotly", "p5"):
        if re.search(rf"(^|[/@.\-_ ]){name}([@.\-_/]|$)", srcs):
            return name
    return "other"


async def timed(coro) -> tuple[float, bytes | None]:
    t0 = time.perf_counter()
    try:
        got = await coro
    except Exception:  # noqa: BLE001 - an element the app never drew: no sample
        got = None
    return (time.perf_counter() - t0) * 1000, got


async def measure(rows, tasks, settle_ms: int) -> list[dict]:
    cfg = EvalConfig()
    worker = await BrowserWorker(cfg.browser, make_mirror(cfg)).start()
    out = []
    try:
        for row in rows:
            ex = extract_app(row["response"])
            sels = pictured(tasks[row["task_id"]])
            if ex is None or not sels:
                continue
            async with worker.page(ex.code) as (page, _watch, context):
                try:
                    await page.goto(APP_URL, wait_until="load", timeout=30000)
                except Exception:  # noqa: BLE001 - an app that does not load: no sample
                    continue
                await page.wait_for_timeout(settle_ms)
                cdp = await context.new_cdp_session(page)
                for sel in sels:
                    loc = page.locator(sel)
                    counted = CountingCdp(cdp)
                    p1 = await timed(loc.screenshot(timeout=5000, animations="allow"))
                    o1 = await timed(element_png(loc, 5000, counted))
                    p2 = await timed(loc.screenshot(timeout=5000, animations="allow"))
                    o2 = await timed(element_png(loc, 5000, counted))
                    if None in (p1[1], o1[1], p2[1], o2[1]):
                        continue
                    static = p1[1] == p2[1]
                    out.append({"lib": library(ex.code), "pw": [p1[0], p2[0]],
                                "ours": [o1[0], o2[0]], "own": counted.captures == 2,
                                "static": static,
                                "equal": static and o1[1] == p1[1] and o2[1] == p1[1]})
    finally:
        await worker.close()
    return out


class CountingCdp:
    """A CDP session that counts the screenshots it was asked for (ours took its own path
    when it did, Playwright's when it did not)."""

    def __init__(self, cdp):
        self.cdp, self.captures = cdp, 0

    async def send(self, method, params=None):
        self.captures += method == "Page.captureScreenshot"
        return await self.cdp.send(method, params)


def report(samples: list[dict]) -> str:
    rows = []
    for lib in ("three", "plotly", "p5", "other", "all"):
        got = [s for s in samples if lib in ("all", s["lib"])]
        if not got:
            continue
        pw = [t for s in got for t in s["pw"]]
        ours = [t for s in got for t in s["ours"]]
        static = [s for s in got if s["static"]]

        def q90(xs):
            return sorted(xs)[max(0, math.ceil(0.9 * len(xs)) - 1)]
        rows.append([lib, len(got), f"{statistics.median(pw):.0f} / {q90(pw):.0f}",
                     f"{statistics.median(ours):.0f} / {q90(ours):.0f}",
                     f"{statistics.median(pw) / max(1e-9, statistics.median(ours)):.1f}x",
                     f"{sum(s['own'] for s in got)}/{len(got)}",
                     f"{sum(s['equal'] for s in static)}/{len(static)}"])
    return table(["library", "elements", "Playwright ms (median / p90)", "ours ms (median / p90)",
                  "speed-up", "own capture", "equal bytes (static)"], rows)


def verdicts(rows, tasks) -> str:
    """Scores each of `rows` with one-trip actions on and off (two pools open side by side,
    one answer at a time, which goes first alternating, so both see the same machine); a
    table and the differing verdicts."""
    base = EvalConfig()
    pools = {on: EvaluatorPool(tasks, dataclasses.replace(base, browser=dataclasses.replace(
        base.browser, one_trip_actions=on)), workers=1) for on in (True, False)}
    recs: dict[bool, list[dict]] = {True: [], False: []}
    wall = {True: 0.0, False: 0.0}
    try:
        for i, row in enumerate(rows):
            for on in ((True, False) if i % 2 == 0 else (False, True)):
                t0 = time.perf_counter()
                recs[on] += pools[on].collect(pools[on].submit([row]))
                wall[on] += time.perf_counter() - t0
    finally:
        for pool in pools.values():
            pool.close()
    body = []
    for on in (True, False):
        probe_s = sum((v.get("duration_ms") or 0) for r in recs[on]
                      for v in r.get("rubrics", [])) / 1000
        body.append(["one trip" if on else "Playwright", len(recs[on]), f"{wall[on]:.0f}",
                     f"{probe_s:.0f}", sum(r.get("status") != "ok" for r in recs[on])])
    lines = []
    for a, b in zip(recs[True], recs[False]):
        for va, vb in zip(a.get("rubrics", []), b.get("rubrics", [])):
            if va["verdict"] != vb["verdict"]:
                lines.append(f"  {a['task_id']} {va['id']}: one trip {va['verdict']} "
                             f"({(va.get('message') or '')[:80]}), Playwright {vb['verdict']} "
                             f"({(vb.get('message') or '')[:80]})")
    total = sum(len(r.get("rubrics", [])) for r in recs[True])
    return (table(["actions", "answers", "wall s", "probe s", "evaluator errors"], body) +
            f"\n\nrubric verdicts differing: {len(lines)} of {total}\n" + "\n".join(lines))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="gemini-2.5-pro")
    ap.add_argument("--apps", type=int, default=40)
    ap.add_argument("--skip", type=int, default=0)
    ap.add_argument("--settle-ms", type=int, default=1000)
    ap.add_argument("--verdicts", type=int, default=0,
                    help="then score this many answers with one-trip actions on and off")
    a = ap.parse_args()
    tasks = load_tasks(DATA / "tasks.jsonl")
    rows = [r for r in load_responses(DATA / "answers" / f"{a.model}.jsonl", tasks)
            if pictured(tasks[r["task_id"]])][a.skip:a.skip + a.apps]
    t0 = time.perf_counter()
    samples = asyncio.run(measure(rows, tasks, a.settle_ms))
    print(f"{len(rows)} answers of {a.model} whose probes read screenshots (from {a.skip}), "
          f"{time.perf_counter() - t0:.0f} s\n")
    print(report(samples))
    if a.verdicts:
        rows = load_responses(DATA / "answers" / f"{a.model}.jsonl", tasks)
        print(f"\n{a.verdicts} answers of {a.model} (from {a.skip}) scored both ways:\n")
        print(verdicts(rows[a.skip:a.skip + a.verdicts], tasks))


if __name__ == "__main__":
    main()
