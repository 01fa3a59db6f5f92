"""Chaos: score real and hostile apps while browsers, renderers, a worker and a Ray actor die.

The same apps are scored three ways and compared:

1. calm: an ``EvaluatorPool`` with nothing killed (the reference verdicts);
2. chaos: the same pool while a killer thread SIGKILLs a Chromium process of the pool's
   workers at random (exponential gaps, mean ``--kill-every`` seconds; a browser's main
   process with probability ``--browser-share``, else a renderer; a process chosen is
   SIGSTOPped instead with probability ``--stop-share``: alive, but answering nothing),
   and the pool worker with the most rows in flight is SIGKILLed once a third are scored;
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
was made by the same evaluator code (``evaluators/``, the hostile apps and the pinned
packages, by their git content, not the commit) and the same sample.

Recheck (``--passes recheck``, ``--recheck N`` times): a verdict can differ between two calm
runs too (an app racing its own timers or the probe's time limit on a busy CPU), so each real
app whose verdicts differ in the chaos or Ray pass is scored ``N`` times more, calm, on the
same pool, and each differing verdict is called *run-to-run* when a calm rescoring gives the
verdict the killed run gave, else *not seen calm*: the kills may have made it, or the
rescorings were too few to show a rare race of the app's own (read its cause before blaming
the kills).

Run:
  python benchmarks/chaos.py [--apps 1000] [--kill-every 20] [--stop-share 0.25] [--workers 2]
                             [--ray-apps 40] [--passes calm chaos ray recheck] [--recheck 4]
                             [--out runs/chaos]
"""

from __future__ import annotations

import argparse
import hashlib
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
from benchmarks.revision import code_version, tree_version  # noqa: E402
from evaluators.config import EvalConfig  # noqa: E402
from evaluators.fleet.pool import EvaluatorPool  # noqa: E402
from evaluators.summary import table  # noqa: E402
from evaluators.tasks import load_responses, load_tasks  # noqa: E402
from tests.hostile_apps import hostile_apps, hostile_tasks  # noqa: E402
from tests.test_evaluator_containment import _Listeners  # noqa: E402
from tests.test_evaluator_browser import COUNTER, GOOD  # noqa: E402

DATA = REPO.parent / "shared" / "data" / "interactscience"
# What a pass's verdicts depend on besides the sample: a pass saved by another commit with
# the same content here is reused.
CODE = ("evaluators", "tests/hostile_apps.py", "tests/test_evaluator_browser.py", "setup.py")
# Diagnostic kinds that fail a gate (F, S, E): `compact` keeps their typed reasons.
GATE_KINDS = ("no_app", "syntax_error", "parse_timeout", "runtime_failure")
# The fields of a saved pass's first line that must match for it to be reused ("commit" is
# kept for the reader, not compared).
KEY = ("code", "sample", "apps", "hostile_share", "workers", "pass")


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
    """Scores rows on a pool; with a killer, one worker process is killed mid-batch."""
    t0 = time.monotonic()
    out = []
    with EvaluatorPool(tasks, EvalConfig(), workers=workers) as pool:
        ids = pool.submit(rows)
        done = threading.Event()
        threading.Thread(target=_progress, daemon=True,
                         args=("chaos" if killer else "calm", pool, len(ids), t0, done)).start()
        if killer is not None:
            threading.Thread(target=_kill_worker, daemon=True,
                             args=(pool, killer, len(ids), done)).start()
        out = pool.collect(ids)
        restarts = pool.restarts
        done.set()
    return out, time.monotonic() - t0, restarts


def _kill_worker(pool: EvaluatorPool, killer: Killer, n: int, done: threading.Event) -> None:
    """SIGKILLs the pool worker with the most rows in flight once a third of the rows are
    scored. By the count scored, not by the in-order results: the pool runs the longest rows
    first, so the row a third of the way in order can come back with the batch all but done,
    and a worker killed then has nothing in flight to lose (seen in a 1,000-app run)."""
    while not done.wait(1.0):
        if n - pool.pending < n // 3:
            continue
        busy = [s for s in list(pool._slots) if s is not None and s.inflight]
        if busy:
            killer.kill(max(busy, key=lambda s: len(s.inflight)).proc.pid, "worker")
            return


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
    same = len(lines) >= 2 and all(lines[0].get(k) == head.get(k) for k in KEY)
    if not same or not lines[-1].get("done"):
        print(f"{path}: not a finished pass of this code and sample: it runs again",
              file=sys.stderr)
        return None
    return lines[1:-1], lines[-1]


def compact(record: dict) -> dict:
    """What a later pass compares of a record (`verdicts`, `_row`), and the typed fields that
    say why a gate or a rubric failed (severity, failed step, time, the probe failure's
    reason, the gate diagnostics' kind and reason): no response, no diagnostics, no
    messages, so that a saved pass is small and holds none of the benchmark's answers."""
    out = {k: record.get(k) for k in ("name", "status", "gate", "reward")}
    reasons = {d.get("rubric_id"): d.get("reason") for d in record.get("diagnostics") or ()
               if d.get("kind") == "probe_failure"}
    out["rubrics"] = [{"id": v["id"], "verdict": v["verdict"], "ran": v.get("ran", True),
                       **{k: v.get(k) for k in ("severity", "failed_step", "duration_ms")},
                       "reason": reasons.get(v["id"])}
                      for v in record.get("rubrics") or ()]
    # Why a gate failed, typed (a calm-calm difference on gate E kept no cause before).
    out["gate_causes"] = [[d.get("kind"), d.get("reason")] for d in record.get("diagnostics") or ()
                          if d.get("kind") in GATE_KINDS]
    if record.get("status") == "error":
        lines = (record.get("error") or "").strip().splitlines() or ["(no message)"]
        out["error"] = lines[0][:500]
    return out


def sample_digest(tasks: dict, rows: list[dict]) -> str:
    """A name for the sample: each row's name and answer with its task's rubrics. A hostile
    row counts by name only, since its answer holds this run's listener ports."""
    h = hashlib.sha256()
    for r in rows:
        part = [r["name"], "" if r["hostile"] else r["response"], tasks.get(r["task_id"])]
        h.update(json.dumps(part, sort_keys=True, default=str).encode())
    return h.hexdigest()[:12]


def differing(rows: list[dict], calm: dict, out: list[dict]) -> list[tuple[int, str]]:
    """The (row, verdict key) of the real apps whose verdict in `out` differs from calm."""
    ours = verdicts(out)
    return [k for k in calm if k in ours and ours[k] != calm[k] and not rows[k[0]]["hostile"]]


def recheck(tasks: dict, rows: list[dict], calm: dict, passes: dict[str, list[dict]],
            workers: int, times: int) -> tuple[list[list], int]:
    """Scores each real app with a differing verdict `times` more times, calm, as copies on
    one pool (so the CPU is as busy as in a pass), and tells run-to-run noise from the kills.

    Args:
      passes: pass name -> its records, for rows[0:len(records)].

    Returns:
      `classify`'s table rows and count.
    """
    apps = sorted({i for out in passes.values() for i, _ in differing(rows, calm, out)})
    if not apps:
        return [], 0
    copies = [rows[i] for i in apps for _ in range(times)]
    with EvaluatorPool(tasks, EvalConfig(), workers=workers) as pool:
        again = pool.collect(pool.submit(copies))
    return classify(rows, calm, passes, {i: again[k * times:(k + 1) * times]
                                         for k, i in enumerate(apps)})


def classify(rows: list[dict], calm: dict, passes: dict[str, list[dict]],
             again: dict[int, list[dict]]) -> tuple[list[list], int]:
    """Each verdict a pass gives against calm's, called run-to-run when one of the calm
    rescorings of its app (`again`: row -> records) gives it too, else not seen calm.

    Returns:
      One table row per differing verdict, and how many no calm rescoring gave.
    """
    seen: dict[tuple[int, str], list[str]] = {}
    for i, records in again.items():
        for record in records:
            for (_, rid), v in verdicts([record]).items():
                seen.setdefault((i, rid), []).append(v)
    out, only_kills = [], 0
    for name, records in passes.items():
        ours = verdicts(records)
        for i, rid in differing(rows, calm, records):
            calm_too = ours[i, rid] in seen.get((i, rid), [])
            only_kills += not calm_too
            out.append([name, f"{rows[i]['name']} / {rid}", calm[i, rid], ours[i, rid],
                        ", ".join(seen.get((i, rid), ["(no ok record)"])),
                        "run-to-run" if calm_too else "not seen calm"])
    return out, only_kills


def _save(path: Path, head: dict, records: list[dict], foot: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for line in (head, *map(compact, records), {**foot, "done": True}):
            f.write(json.dumps(line) + "\n")


def _args() -> argparse.Namespace:
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
    ap.add_argument("--passes", nargs="+", choices=("calm", "chaos", "ray", "recheck"),
                    default=["calm", "chaos", "ray", "recheck"],
                    help="passes to run; a pass not run is read from --out when a finished "
                         "one of the same evaluator code and sample is there")
    ap.add_argument("--recheck", type=int, default=4,
                    help="calm rescorings of each real app whose verdicts differ")
    ap.add_argument("--out", type=Path, default=REPO / "runs" / "chaos",
                    help="each pass's records (calm.jsonl, chaos.jsonl, ray.jsonl)")
    return ap.parse_args()


def _chaos(args, tasks: dict, rows: list[dict]) -> tuple[list[dict], float, dict]:
    killer = Killer(args.kill_every, args.browser_share, args.seed, args.stop_share)
    with killer:
        out, wall, restarts = run_pool(tasks, rows, args.workers, killer)
    print(f"chaos: {wall:.0f} s, kills {killer.kills}, worker restarts {restarts}", flush=True)
    return out, wall, {**killer.kills, "worker restarts": restarts}


def _ray(args, tasks: dict, rows: list[dict]) -> tuple[list[dict], float, dict]:
    ray_killer = Killer(1e9, 0, args.seed)  # no random kills: only the actor
    out, wall, replaced = run_ray(tasks, rows[:args.ray_apps], args.workers, ray_killer)
    print(f"ray: {wall:.0f} s, actors replaced {replaced}", flush=True)
    return out, wall, {**ray_killer.kills, "actors replaced": replaced}


def _pass(name: str, run, args, head: dict) -> tuple[list[dict], float, dict] | None:
    """A pass run now (when asked for) and saved, or read back from --out, or None."""
    path = args.out / f"{name}.jsonl"
    if name in args.passes:
        out, wall, kills = run()
        _save(path, {**head, "pass": name}, out, {"wall_s": wall, "kills": kills})
        return out, wall, kills
    got = _saved(path, {**head, "pass": name})
    return None if got is None else (got[0], got[1]["wall_s"], got[1].get("kills") or {})


def main() -> None:
    args = _args()
    ears = _Listeners()
    ports = (ears.port(socket.AF_INET, socket.SOCK_STREAM),
             ears.port(socket.AF_INET6, socket.SOCK_STREAM),
             ears.port(socket.AF_INET, socket.SOCK_DGRAM), ears.port(socket.AF_INET6, socket.SOCK_DGRAM))
    tasks, rows = sample(args.apps, args.hostile_share, ports)
    head = {"commit": code_version(), "code": tree_version(*CODE),
            "sample": sample_digest(tasks, rows), "apps": args.apps,
            "hostile_share": args.hostile_share, "workers": args.workers}
    print(f"{len(rows)} apps ({sum(r['hostile'] for r in rows)} hostile), {args.workers} "
          f"workers, a kill every {args.kill_every} s on average ({args.browser_share:.0%} "
          f"browsers, {args.stop_share:.0%} of the picks stopped, not killed), commit "
          f"{head['commit']}, evaluator code {head['code']}, sample {head['sample']}", flush=True)
    got = _pass("calm", lambda: run_pool(tasks, rows, args.workers, None)[:2] + ({},), args, head)
    if got is None:
        raise SystemExit(f"no finished calm pass of this code and sample in {args.out}: run "
                         "--passes calm first (or with the other passes)")
    calm_out, wall, _ = got
    print(f"calm: {wall:.0f} s", flush=True)
    calm = verdicts(calm_out)
    results, diffs, done = [_row("calm", rows, calm_out, wall, None, {}, [])], [], {}
    for name, label, run in (("chaos", "chaos (pool)", lambda: _chaos(args, tasks, rows)),
                             ("ray", "Ray actors", lambda: _ray(args, tasks, rows))):
        if name == "ray" and not args.ray_apps:
            continue
        got = _pass(name, run, args, head)
        if got is not None:
            done[name] = got[0]
            sub = rows if name == "chaos" else rows[:args.ray_apps]
            results.append(_row(label, sub, got[0], got[1],
                                {k: v for k, v in calm.items() if k[0] < len(sub)}, got[2], diffs))
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
    if "recheck" in args.passes:
        _report_recheck(args, tasks, rows, calm, done)


def _report_recheck(args, tasks: dict, rows: list[dict], calm: dict, done: dict) -> None:
    t0 = time.monotonic()
    lines, only_kills = recheck(tasks, rows, calm, done, args.workers, args.recheck)
    print(f"\nrecheck: each real app with a differing verdict scored {args.recheck} more times "
          f"calm ({time.monotonic() - t0:.0f} s)")
    if lines:
        print(table(["pass", "app / verdict", "calm", "under kills",
                     f"calm again x{args.recheck}", "cause"], lines))
    print(f"differing verdicts no calm rescoring gave (the kills may have made them): {only_kills}")


if __name__ == "__main__":
    main()
