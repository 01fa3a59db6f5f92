"""Chaos: score real and hostile apps while browsers, renderers, a worker and a Ray actor die.

The same apps are scored three ways and compared:

1. calm: an ``EvaluatorPool`` with nothing killed (the reference verdicts);
2. chaos: the same pool while a killer thread SIGKILLs a Chromium process of the pool's
   workers at random (exponential gaps, mean ``--kill-every`` seconds; a browser's main
   process with probability ``--browser-share``, else a renderer; a process chosen is
   SIGSTOPped instead with probability ``--stop-share``: alive, but answering nothing),
   and one pool worker process is SIGKILLed a third of the way through;
3. Ray: the first ``--ray-apps`` apps on ``evaluators.fleet.ray_fleet.RayScorer`` actors, one
   of which is SIGKILLed mid-batch.

Apps: ``--apps`` (default 1,000) = the hostile apps of ``tests/hostile_apps.py`` (about
a tenth, repeated as needed) spread among InteractScience answers (the ten models in turn,
tasks spread over the set). Network attacks aim at loopback listeners this script owns;
the table says what reached them (must be nothing).

For each run: records returned (all must come back, in input order), evaluator errors
(status ``error``: retried, never a low score), verdicts (rubric verdicts that ran, plus
each record's gate and reward) differing from the calm run's, for the non-hostile and the
hostile apps, kills by kind and wall time. Differing verdicts are listed by name.

Each pass's records, cut to what the passes compare (`compact`: verdicts, gate, reward,
status; no answer, no diagnostics), go to ``--out`` (``calm.jsonl``, ``chaos.jsonl``,
``ray.jsonl``, with the commit and sample they came from), so that a long run can be split:
``--passes calm`` first, then ``--passes chaos ray``, which reads the calm pass back when it
was made by the same code.

Run:
  python benchmarks/chaos.py [--apps 1000] [--kill-every 20] [--stop-share 0.25] [--workers 2]
                             [--ray-apps 40] [--passes calm chaos ray] [--out runs/chaos]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import socket
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.proc_cpu import descendants  # noqa: E402
from benchmarks.revision import code_version  # noqa: E402
from evaluators.config import EvalConfig  # noqa: E402
from evaluators.fleet.pool import EvaluatorPool  # noqa: E402
from evaluators.summary import table  # noqa: E402
from evaluators.tasks import load_responses, load_tasks  # noqa: E402
from tests.hostile_apps import hostile_apps, hostile_tasks  # noqa: E402
from tests.test_evaluator_containment import _Listeners  # noqa: E402
from tests.test_evaluator_browser import COUNTER, GOOD  # noqa: E402

DATA = REPO.parent / "shared" / "data" / "interactscience"


def sample(n: int, hostile_share: float, ports: tuple[int, ...]) -> tuple[dict, list[dict]]:
    """`n` rows: real answers (models in turn, tasks spread) with hostile apps spread in."""
    tasks = load_tasks(DATA / "tasks.jsonl")
    answers = {p.stem: {r["task_id"]: r for r in load_responses(p, tasks)}
               for p in sorted((DATA / "answers").glob("*.jsonl"))}
    models, ids = sorted(answers), sorted(tasks)
    n_hostile = round(n * hostile_share)
    real = []
    for j in range(n - n_hostile):
        model = models[j % len(models)]
        # Consecutive rows take tasks far apart; the ten models cover each task in turn.
        tid = ids[(j * 37 + j // len(ids)) % len(ids)]
        row = answers[model].get(tid)
        if row is not None:
            real.append({**row, "name": f"{tid} {model}", "hostile": False})
    apps = hostile_apps(GOOD, *ports)
    bad = [{"task_id": h.task_id, "response": h.response, "hostile": True,
            "name": f"hostile {k}: {h.name}"}
           for k, h in ((k, apps[k % len(apps)]) for k in range(n_hostile))]
    rows, every = [], max(1, len(real) // max(1, len(bad)))
    for i, row in enumerate(real):
        rows.append(row)
        if bad and i % every == every - 1:
            rows.append(bad.pop(0))
    rows.extend(bad)
    return {**tasks, **hostile_tasks(COUNTER)}, rows


class Killer:
    """SIGKILLs Chromium processes descending from this one at random, from a thread.

    Args:
      every_s: mean seconds between kills (exponential gaps).
      browser_share: chance a kill takes a browser's main process (else a renderer).
      stop_share: chance a process chosen is stopped (SIGSTOP) instead of killed.
      seed: for the gaps and the choices.
    """

    def __init__(self, every_s: float, browser_share: float, seed: int, stop_share: float = 0.0):
        self.every_s, self.browser_share, self.stop_share = every_s, browser_share, stop_share
        self.rng = random.Random(seed)
        self.kills = {"browser": 0, "renderer": 0, "browser stopped": 0,
                      "renderer stopped": 0, "worker": 0, "actor": 0}
        self.stopped: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "Killer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        for pid in self.stopped:  # the evaluator kills stopped processes; in case it did not
            self.kill(pid, None)

    def _run(self) -> None:
        while not self._stop.wait(self.rng.expovariate(1 / self.every_s)):
            kind = "browser" if self.rng.random() < self.browser_share else "renderer"
            pids = [pid for pid, k, _ in descendants(os.getpid()) if k == kind
                    and _exe(pid) == "chromium"]
            if not pids:
                continue
            pid = self.rng.choice(sorted(pids))
            if self.rng.random() < self.stop_share:
                self.kill(pid, f"{kind} stopped", signal.SIGSTOP)
                self.stopped.append(pid)
            else:
                self.kill(pid, kind)

    def kill(self, pid: int, kind: str | None, sig: int = signal.SIGKILL) -> None:
        """Sends `sig` to `pid`, counted under `kind` (None: not counted)."""
        try:
            os.kill(pid, sig)
            if kind is not None:
                self.kills[kind] += 1
        except ProcessLookupError:
            pass


def _exe(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            first = f.read().split(b"\0")[0].split(b" ")[0]
        return os.path.basename(first.decode(errors="replace"))
    except OSError:
        return ""


def verdicts(records: list[dict]) -> dict[tuple[int, str], str]:
    """(row, rubric id or '<gate>'/'<reward>') -> what the evaluator decided, for ok records."""
    out = {}
    for i, r in enumerate(records):
        if r["status"] != "ok":
            continue
        out[i, "<gate>"] = str(r["gate"])
        out[i, "<reward>"] = f"{r['reward']:.3f}"
        for v in r["rubrics"]:
            if v.get("ran", True) and v["verdict"] in ("pass", "fail"):
                out[i, v["id"]] = v["verdict"]
    return out


def compare(rows: list[dict], calm: dict, got: list[dict]) -> tuple[int, int, int, list[str]]:
    """(differing non-hostile, differing hostile, differing in all, one line for each)."""
    ours = verdicts(got)
    diff = [k for k in calm if k in ours and ours[k] != calm[k]]
    lines = [f"  {rows[i]['name']} / {rid}: calm {calm[i, rid]}, here {ours[i, rid]}"
             for i, rid in diff]
    real = sum(not rows[i]["hostile"] for i, _ in diff)
    return real, len(diff) - real, len(diff), lines


def run_pool(tasks: dict, rows: list[dict], workers: int, killer: Killer | None) -> tuple:
    """Scores rows on a pool; with a killer, one worker process is killed a third of the way."""
    t0 = time.monotonic()
    out = []
    with EvaluatorPool(tasks, EvalConfig(), workers=workers) as pool:
        ids = pool.submit(rows)
        done = threading.Event()
        threading.Thread(target=_progress, daemon=True,
                         args=("chaos" if killer else "calm", pool, len(ids), t0, done)).start()
        for k, idx in enumerate(ids):
            out.extend(pool.collect([idx]))
            if killer is not None and k == len(ids) // 3:
                victim = max((s for s in pool._slots if s is not None), key=lambda s: len(s.inflight))
                killer.kill(victim.proc.pid, "worker")
        restarts = pool.restarts
        done.set()
    return out, time.monotonic() - t0, restarts


def _progress(name: str, pool: EvaluatorPool, n: int, t0: float, done: threading.Event) -> None:
    """Prints every 5 minutes how many rows are scored (the pool runs the longest first, so
    the in-order results say little until late)."""
    while not done.wait(300):
        print(f"  {name}: {n - pool.pending}/{n} scored after {time.monotonic() - t0:.0f} s",
              file=sys.stderr, flush=True)


def run_ray(tasks: dict, rows: list[dict], actors: int, killer: Killer) -> tuple:
    from evaluators.fleet.ray_fleet import RayScorer

    t0 = time.monotonic()
    with RayScorer(tasks, EvalConfig(), actors=actors) as scorer:
        pids = scorer.pids()  # the actors are up: their first batches start now
        # Mid-batch: 10 s into the first batches (an app takes several seconds).
        timer = threading.Timer(10.0, lambda: killer.kill(pids[0], "actor"))
        timer.start()
        out = scorer.score(rows)
        timer.cancel()
        replaced = scorer.replaced
    return out, time.monotonic() - t0, replaced


def _row(name: str, rows: list[dict], out: list[dict], wall: float, calm: dict | None,
         kills: dict, diffs: list[str]) -> list:
    in_order = len(out) == len(rows) and all(o.get("name") == r["name"] for o, r in zip(out, rows))
    errors = sum(o["status"] == "error" for o in out)
    diffs.extend(f"{name}: evaluator error for {o['name']}: "
                 f"{(o.get('error') or '?').splitlines()[0][:200]}"
                 for o in out if o["status"] == "error")
    real = hostile = "-"
    if calm is not None:
        real, hostile, _, lines = compare(rows, calm, out)
        diffs.extend([f"{name}:"] + lines if lines else [])
    kill_text = ", ".join(f"{k} {v}" for k, v in kills.items() if v) or "none"
    return [name, len(rows), f"{len(out)} ({'in order' if in_order else 'NOT IN ORDER'})",
            errors, real, hostile, kill_text, round(wall)]


def _saved(path: Path, head: dict) -> tuple[list[dict], dict] | None:
    """A pass's records and footer from an earlier run of the same code and sample, or None."""
    if not path.exists():
        return None
    lines = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]
    if len(lines) < 2 or lines[0] != head or not lines[-1].get("done"):
        print(f"{path}: not a finished pass of this code and sample: it runs again",
              file=sys.stderr)
        return None
    return lines[1:-1], lines[-1]


def compact(record: dict) -> dict:
    """What a later pass compares of a record (`verdicts`, `_row`), and the typed fields that
    say why a rubric failed (severity, failed step, time, the probe failure's reason): no
    response, no diagnostics, no messages, so that a saved pass is small and holds none of
    the benchmark's answers."""
    out = {k: record.get(k) for k in ("name", "status", "gate", "reward")}
    reasons = {d.get("rubric_id"): d.get("reason") for d in record.get("diagnostics") or ()
               if d.get("kind") == "probe_failure"}
    out["rubrics"] = [{"id": v["id"], "verdict": v["verdict"], "ran": v.get("ran", True),
                       **{k: v.get(k) for k in ("severity", "failed_step", "duration_ms")},
                       "reason": reasons.get(v["id"])}
                      for v in record.get("rubrics") or ()]
    if record.get("status") == "error":
        lines = (record.get("error") or "").strip().splitlines() or ["(no message)"]
        out["error"] = lines[0][:500]
    return out


def _save(path: Path, head: dict, records: list[dict], foot: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for line in (head, *map(compact, records), {**foot, "done": True}):
            f.write(json.dumps(line) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--apps", type=int, default=1000, help="apps scored in each pool run")
    ap.add_argument("--hostile-share", type=float, default=0.1)
    ap.add_argument("--kill-every", type=float, default=20.0,
                    help="mean seconds between SIGKILLs of Chromium processes")
    ap.add_argument("--browser-share", type=float, default=0.25,
                    help="share of kills that take a browser's main process (else a renderer)")
    ap.add_argument("--stop-share", type=float, default=0.25,
                    help="share of the processes chosen that are stopped (SIGSTOP), not killed")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--ray-apps", type=int, default=40, help="apps for the Ray run (0: skip)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--passes", nargs="+", choices=("calm", "chaos", "ray"),
                    default=["calm", "chaos", "ray"],
                    help="passes to run; the calm pass's records are read from --out when a "
                         "finished one of the same code and sample is there")
    ap.add_argument("--out", type=Path, default=REPO / "runs" / "chaos",
                    help="each pass's records (calm.jsonl, chaos.jsonl, ray.jsonl)")
    args = ap.parse_args()

    ears = _Listeners()
    ports = (ears.port(socket.AF_INET, socket.SOCK_STREAM),
             ears.port(socket.AF_INET6, socket.SOCK_STREAM),
             ears.port(socket.AF_INET, socket.SOCK_DGRAM), ears.port(socket.AF_INET6, socket.SOCK_DGRAM))
    tasks, rows = sample(args.apps, args.hostile_share, ports)
    n_hostile = sum(r["hostile"] for r in rows)
    commit = code_version()
    print(f"{len(rows)} apps ({n_hostile} hostile), {args.workers} workers, a kill every "
          f"{args.kill_every} s on average ({args.browser_share:.0%} browsers, "
          f"{args.stop_share:.0%} of the picks stopped, not killed), commit {commit}", flush=True)
    # The hostile apps name this run's listener ports: a calm pass of another run scored
    # the same apps with other port numbers, which no verdict depends on.
    head = {"commit": commit, "apps": args.apps, "hostile_share": args.hostile_share,
            "workers": args.workers}
    results, diffs = [], []
    path = args.out / "calm.jsonl"
    got = None if "calm" in args.passes else _saved(path, {**head, "pass": "calm"})
    if got is None:
        if "calm" not in args.passes:
            raise SystemExit(f"no finished calm pass of commit {commit} in {path}: run "
                             "--passes calm first (or with the other passes)")
        calm_out, wall, _ = run_pool(tasks, rows, args.workers, None)
        _save(path, {**head, "pass": "calm"}, calm_out, {"wall_s": wall})
    else:
        calm_out, wall = got[0], got[1]["wall_s"]
    calm = verdicts(calm_out)
    results.append(_row("calm", rows, calm_out, wall, None, {}, diffs))
    print(f"calm: {wall:.0f} s", flush=True)
    if "chaos" in args.passes:
        killer = Killer(args.kill_every, args.browser_share, args.seed, args.stop_share)
        with killer:
            out, wall, restarts = run_pool(tasks, rows, args.workers, killer)
        _save(args.out / "chaos.jsonl", {**head, "pass": "chaos"}, out,
              {"wall_s": wall, "kills": killer.kills, "restarts": restarts})
        results.append(_row("chaos (pool)", rows, out, wall, calm, dict(killer.kills), diffs))
        print(f"chaos: {wall:.0f} s, kills {killer.kills}, worker restarts {restarts}",
              flush=True)
    if args.ray_apps and "ray" in args.passes:
        sub = rows[:args.ray_apps]
        ray_killer = Killer(1e9, 0, args.seed)  # no random kills: only the actor
        out, wall, replaced = run_ray(tasks, sub, args.workers, ray_killer)
        sub_calm = {k: v for k, v in calm.items() if k[0] < len(sub)}
        kills = {**ray_killer.kills, "actors replaced": replaced}
        _save(args.out / "ray.jsonl", {**head, "pass": "ray"}, out, {"wall_s": wall,
                                                                     "kills": kills})
        results.append(_row("Ray actors", sub, out, wall, sub_calm, kills, diffs))
        print(f"ray: {wall:.0f} s, actors replaced {replaced}", flush=True)
    time.sleep(1.0)
    seen = list(ears.seen)
    ears.close()
    print()
    print(table(["run", "apps", "records returned", "evaluator errors",
                 "verdicts differing (non-hostile)", "verdicts differing (hostile)", "kills",
                 "wall s"], results))
    print(f"\npackets at the loopback listeners: {len(seen)} {seen[:5]}")
    print("\n".join(["evaluator errors and verdicts differing from the calm run:"] + diffs)
          if diffs else "no evaluator error, no verdict differs from the calm run")


if __name__ == "__main__":
    main()
