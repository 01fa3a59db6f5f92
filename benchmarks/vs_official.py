"""Our evaluator beside InteractScience's official runner, on the same apps, in one run.

  python benchmarks/vs_official.py [--every 5] [--official-workers 2] [--arms auto,...]

The sample: every 5th answer of Qwen2.5-Coder-32B-Instruct (30 apps, 162 Playwright tests).
The official arm runs the benchmark's own Playwright Test files, unchanged, with its config's
launch options changed only to use Debian's Chromium and to send the CDN hosts to our offline
mirror (`--host-resolver-rules` onto a loopback server, as our browsers do); `@playwright/test`
is installed from npm into a cache folder on first use. Pages are extracted by the benchmark's
own `extract_and_save_code.py`. Each of our arms runs `python -m evaluators score
--all-rubrics` (every probe, as a benchmark's runner does) as a process of its own. Wall time
is the arm's process; CPU-s is the user + system time of that process and everything it
started (Chromium, Node), sampled from /proc.

Verdicts are compared on the rubrics both check fully (a probe and no dropped screenshot
step): our pass/fail against the runner's passed vs failed/timedOut of the same run.

Arms: `official`; `auto` (our defaults: workers and pages from the machine, steps decided
early on quiet pages); `wait` (the same, every step waited out to its timeout); `w1p4` (the
defaults before: 1 worker, 4 pages, waiting steps out).

Measured on 2 cores (one run of `python benchmarks/vs_official.py` at the defaults, 2 workers
x 6 pages on that machine):

  arm       wall s  CPU-s  tests  tests/s  speed-up  agree (full)
  official  899     649    162    0.180    1.00x     111/111
  auto      164     226    138    0.843    5.49x     111/111
  wait      229     266    138    0.602    3.92x     111/111

A short unit-test job shared the machine for about 90 s of the official arm; the run before
(defaults 2 x 8 then) gave the official arm 849 s, against which 164 s is 5.18x. `w1p4` (run
once, before the longest apps were dispatched first): 434 s, 2 of 111 differing.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from evaluators.config import CHROMIUM, EvalConfig, machine_fleet  # noqa: E402
from proc_cpu import CpuSampler  # noqa: E402
from evaluators.fleet.pool import make_mirror  # noqa: E402
from evaluators.sandbox.app_server import AppServer  # noqa: E402
from evaluators.summary import table  # noqa: E402
from evaluators.tasks import load_tasks  # noqa: E402

DATA = REPO.parent / "shared" / "data" / "interactscience"
RUNNER = DATA / "official_runner"
MODEL = "Qwen2.5-Coder-32B-Instruct"
PLAYWRIGHT_TEST = "1.65.1"  # the Node twin of our Python Playwright's generation
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "rcca" / "official-runner"
ARMS = {
    "auto": [],
    "wait": ["--wait-out-timeouts"],
    "w1p4": ["--workers", "1", "--pages", "4", "--wait-out-timeouts"],
}
_CONFIG = """// The official playwright_PFT.config.js with its launch options changed (see vs_official.py).
const {{ defineConfig, devices }} = require('@playwright/test');
module.exports = defineConfig({{
  testDir: './PFT_tests',
  fullyParallel: true,
  use: {{ trace: 'on-first-retry', launchOptions: {launch} }},
  projects: [{{ name: 'chromium', use: {{ ...devices['Desktop Chrome'] }} }}],
}});
"""


def sample(every: int) -> list[dict]:
    with open(DATA / "answers" / f"{MODEL}.jsonl", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    return rows[::every]


def install_runner(version: str) -> Path:
    """`@playwright/test` at `version` under the cache folder (npm, once; no browser download)."""
    root = CACHE / version
    if not (root / "node_modules" / "@playwright" / "test" / "package.json").exists():
        root.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD": "1"}
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--prefix", str(root),
                        f"@playwright/test@{version}"], check=True, env=env)
    return root


def timed(cmd: list[str], **kw) -> tuple[float, float, subprocess.CompletedProcess]:
    """(wall s, CPU-s of the process and all it started, result) of one command.

    CPU is sampled from /proc (`proc_cpu.CpuSampler`): the kernel's accounting of reaped
    children misses Chromium's renderers, which their zygote does not wait for.
    """
    t0 = time.perf_counter()
    with CpuSampler() as cpu:
        done = subprocess.run(cmd, **kw)
    return time.perf_counter() - t0, cpu.total, done


def official_arm(rows: list[dict], workers: int, version: str) -> tuple[float, float, dict]:
    """Runs the official runner on the sample. Returns (wall, CPU-s, {(task, title): status})."""
    root = install_runner(version)
    work = Path(tempfile.mkdtemp(prefix="run-", dir=root))  # under node_modules' folder
    try:
        (work / "PFT_tests").mkdir()
        answers = work / "answers.jsonl"
        with open(answers, "w", encoding="utf-8") as f:
            for r in rows:
                name = r["task_id"].split("/", 1)[1]
                shutil.copy(RUNNER / "PFT_tests" / f"{name}.spec.js", work / "PFT_tests")
                f.write(json.dumps({"id": name, "answer": r["response"]}) + "\n")
        subprocess.run([sys.executable, str(RUNNER / "extract_and_save_code.py"), "--input",
                        str(answers), "--output", str(work / "pages")], check=True,
                       stdout=subprocess.DEVNULL)
        server = AppServer(make_mirror(EvalConfig()))
        try:
            launch = {"executablePath": CHROMIUM,
                      "args": [*server.chromium_args(), "--ignore-certificate-errors"]}
            (work / "pft.config.js").write_text(_CONFIG.format(launch=json.dumps(launch)))
            report = work / "report.json"
            env = {**os.environ, "PLAYWRIGHT_JSON_OUTPUT_NAME": str(report)}
            wall, cpu, _ = timed([str(root / "node_modules" / ".bin" / "playwright"), "test",
                                  "--config", "pft.config.js", "--reporter=json",
                                  "--workers", str(workers)], cwd=work, env=env,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        finally:
            server.close()
        return wall, cpu, statuses(json.loads(report.read_text()))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def statuses(report: dict) -> dict[tuple[str, str], str]:
    """{(task id, test title): status} from a Playwright JSON report."""
    out = {}

    def walk(suite: dict, file: str | None) -> None:
        file = suite.get("file", file)
        for spec in suite.get("specs", []):
            task = "interactscience/" + Path(spec.get("file", file)).name.removesuffix(".spec.js")
            for test in spec["tests"]:
                result = test["results"][-1] if test["results"] else {"status": "skipped"}
                out[(task, spec["title"])] = result["status"]
        for child in suite.get("suites", []):
            walk(child, file)

    for suite in report["suites"]:
        walk(suite, None)
    return out


def our_arm(rows: list[dict], extra: list[str]) -> tuple[float, float, list[dict]]:
    with tempfile.TemporaryDirectory() as tmp:
        responses, out = Path(tmp) / "responses.jsonl", Path(tmp) / "records.jsonl"
        responses.write_text("".join(json.dumps(r) + "\n" for r in rows))
        wall, cpu, _ = timed([sys.executable, "-m", "evaluators", "score", "--tasks",
                              str(DATA / "tasks.jsonl"), "--responses", str(responses),
                              "--out", str(out), "--all-rubrics", "--quiet", *extra],
                             cwd=REPO, check=True, stdout=subprocess.DEVNULL)
        return wall, cpu, [json.loads(line) for line in out.read_text().splitlines()]


def rubric_ids(tasks, rows) -> dict[tuple[str, str], str]:
    """(task id, test title) -> rubric id: a rubric's text starts with its test's title."""
    return {(r["task_id"], rub.text.split("\n", 1)[0]): rub.id
            for r in rows for rub in tasks[r["task_id"]].rubrics}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--every", type=int, default=5, help="every Nth answer of the model")
    ap.add_argument("--official-workers", type=int, default=2)
    ap.add_argument("--playwright-test", default=PLAYWRIGHT_TEST)
    ap.add_argument("--arms", default="official,auto,wait", help="also: w1p4")
    args = ap.parse_args()
    if not DATA.exists():
        sys.exit(f"needs the InteractScience data at {DATA}")
    tasks = load_tasks(DATA / "tasks.jsonl")
    rows = sample(args.every)
    full = {(t.id, r.id) for t in tasks.values() for r in t.rubrics
            if r.probe is not None and not r.meta.get("dropped_screenshot_steps")}
    ids = rubric_ids(tasks, rows)
    print(f"{len(rows)} apps; machine_fleet() = {machine_fleet()} (workers, pages)", flush=True)
    results = []
    for arm in args.arms.split(","):
        if arm == "official":
            wall, cpu, st = official_arm(rows, args.official_workers, args.playwright_test)
            unmatched = sorted(k for k in st if k not in ids)
            if unmatched:
                print(f"official tests without a rubric: {unmatched}")
            verdicts = {(k[0], ids[k]): "pass" if v == "passed" else "fail"
                        for k, v in st.items() if k in ids}
            results.append((arm, wall, cpu, len(st), verdicts))
        else:
            wall, cpu, records = our_arm(rows, ARMS[arm])
            verdicts = {(r["task_id"], v["id"]): v["verdict"] for r in records for v in r["rubrics"]
                        if v["verdict"] in ("pass", "fail") and v.get("ran", True)}
            results.append((arm, wall, cpu, len(verdicts), verdicts))
        print(f"{arm}: {wall:.0f} s wall, {cpu:.0f} CPU-s", flush=True)
    base = next((r for r in results if r[0] == "official"), None)
    header = ["arm", "wall s", "CPU-s", "tests", "tests/s", "speed-up", "agree (full)"]
    out, notes = [], []
    for arm, wall, cpu, n, verdicts in results:
        speedup, agree = "-", "-"
        if base is not None:
            speedup = f"{base[1] / wall:.2f}x"
            both = [k for k in full if k in verdicts and k in base[4]]
            differ = sorted(k for k in both if verdicts[k] != base[4][k])
            agree = f"{len(both) - len(differ)}/{len(both)}"
            if differ:
                notes.append(f"{arm} differs from the official runner on: {differ}")
        out.append([arm, round(wall), round(cpu), n, round(n / wall, 3), speedup, agree])
    print(table(header, out))
    for line in notes:
        print(line)

if __name__ == "__main__":
    main()
