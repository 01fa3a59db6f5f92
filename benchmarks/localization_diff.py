"""Does a change to localization change what it blames? This checkout against another revision.

  python benchmarks/localization_diff.py [--base HEAD~1] [--models gpt-4o kimi-k2]
      [--records runs/leaderboard/*.records.jsonl]

Localizes the same diagnostics with the code of `--base` (checked out into a temporary git
worktree) and with this checkout, every method, and prints how many S_dir, S_ctx and evidence
(less the rule ids, which a refactor may rename) are identical, per method. The diagnostics:
for every InteractScience answer of `--models`, probe failures of each probed rubric's first
checks (wrong value, missing element, time-out, hang; no coverage, half the functions run,
none run) and uncaught exceptions of five common kinds at seeded random places; and, with
`--records`, every diagnostic of those scored records (e.g. the leaderboard's). A refactor
should print 0 differing; a change of behaviour prints what it changed, to be measured with
`benchmarks/localization.py`.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data" / "interactscience"
METHODS = ("grounded", "text", "naive")
EXCEPTIONS = ("TypeError: Cannot read properties of null (reading 'value')",
              "ReferenceError: updateDisplay is not defined",
              "TypeError: Cannot read properties of undefined (reading 'x')",
              "RangeError: Maximum call stack size exceeded",
              "TypeError: ctx.fillRect is not a function")


def _checks(probe) -> list[dict]:
    out = []

    def walk(x):
        if isinstance(x, dict):
            if ("expect" in x or "do" in x) and "locator" in x:
                out.append(x)
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)
    walk(probe)
    return out


def synthetic(g, task, response: str) -> list[tuple[dict | None, dict]]:
    """(probe, diagnostic) pairs for one answer, seeded by its text."""
    import hashlib
    import random

    from evaluators.contract import JsException

    rnd = random.Random(hashlib.sha1(response.encode("utf-8", "replace")).hexdigest())
    fns, out = list(g.functions), []
    for r in task.rubrics:
        steps = _checks(r.probe) if r.probe else []
        acts = [s for s in steps if "do" in s]
        for check in [s for s in steps if "expect" in s][:3]:
            act = rnd.choice(acts) if acts else None
            after = None if act is None else {"step_index": 0, "step": act,
                                              "locator": act.get("locator")}
            for reason in ("wrong_value", "missing_element", "timeout", "hang"):
                d = {"kind": "probe_failure", "reason": reason, "stage": "rubric",
                     "severity": "moderate", "rubric_id": r.id, "message": "m",
                     "step_index": 1, "step": check, "locator": check.get("locator"),
                     "expected": check.get("value"), "actual": "x", "after_action": after}
                out.append((r.probe, d))
                if fns:
                    half = rnd.sample(fns, max(1, len(fns) // 2))
                    cov = [{"name": f.name, "start": f.span[0], "end": f.span[1], "count": 1}
                           for f in half]
                    out += [(r.probe, {**d, "coverage": {"functions": cov}}),
                            (r.probe, {**d, "coverage": {"functions": []}})]
    for report in EXCEPTIONS:
        name, message = report.split(": ", 1)
        for _ in range(3):
            at = rnd.randrange(len(response)) if response else 0
            out.append((None, {"kind": "page_error", "reason": "uncaught_at_load",
                               "stage": "runtime", "severity": "severe", "rubric_id": None,
                               "message": report,
                               "exception": _exception(JsException, name, message),
                               "frames": [{"in_app": True, "offset": at}]}))
    out.append((None, {"kind": "runtime_failure", "reason": "hang", "message": "hung"}))
    return out


def _exception(cls, name: str, message: str) -> dict:
    # Written without JsException.to_json, which older revisions lack.
    import dataclasses

    exc = cls.from_report(name, message)
    return {**dataclasses.asdict(exc), "thrown": list(exc.thrown)}


def _plain(loc) -> list:
    return [loc.s_dir, loc.s_ctx, [{k: v for k, v in e.items()
                                    if k not in ("rule", "also", "demoted_by")}
                                   for e in loc.evidence]]


def dump(out: str, models: list[str], records: list[str]) -> None:
    """Writes one JSON line per (diagnostic, method) with the code importable now."""
    from evaluators.localize.graph import build_graph
    from evaluators.localize.spans import localize
    from evaluators.tasks import load_tasks

    tasks = load_tasks(DATA / "tasks.jsonl")
    with open(out, "w", encoding="utf-8") as f:
        for model in models:
            for line in open(DATA / "answers" / f"{model}.jsonl", encoding="utf-8"):
                row = json.loads(line)
                task = tasks.get(row["task_id"])
                if task is None:
                    continue
                g = build_graph(row["response"])
                for probe, d in synthetic(g, task, row["response"]):
                    f.write(json.dumps([_plain(localize(g, d, m, probe)) for m in METHODS])
                            + "\n")
        for path in records:
            for line in open(path, encoding="utf-8"):
                rec = json.loads(line)
                if rec.get("status") != "ok" or rec.get("extraction") is None:
                    continue
                ext = rec["extraction"]
                g = build_graph(rec["response"], (ext["start"], ext["end"]))
                probes = {r.id: r.probe for r in tasks[rec["task_id"]].rubrics}
                for d in rec["diagnostics"]:
                    f.write(json.dumps([_plain(localize(g, d, m, probes.get(d.get("rubric_id"))))
                                        for m in METHODS]) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default="HEAD~1", help="the revision to compare with")
    ap.add_argument("--models", nargs="*", default=["gpt-4o", "kimi-k2"])
    ap.add_argument("--records", nargs="*", default=[], help="scored records files")
    ap.add_argument("--dump", nargs=3, metavar=("OUT", "MODELS", "RECORDS"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.dump:  # the child: run with the code on sys.path[0]
        out, models, records = args.dump
        dump(out, [m for m in models.split(",") if m], [r for r in records.split(",") if r])
        return
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "base"
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "-q", str(base),
                        args.base], check=True)
        try:
            outs = {}
            for name, root in (("base", base), ("this", REPO)):
                outs[name] = Path(tmp) / f"{name}.jsonl"
                code = (f"import sys; sys.path.insert(0, {str(root)!r}); "
                        f"sys.argv = ['x', '--dump', {str(outs[name])!r}, "
                        f"{','.join(args.models)!r}, {','.join(map(str, args.records))!r}]; "
                        f"import runpy; runpy.run_path({str(Path(__file__))!r}, "
                        "run_name='__main__')")
                subprocess.run([sys.executable, "-c", code], check=True, cwd=root)
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(base)],
                           check=False)
        a = outs["base"].read_text().splitlines()
        b = outs["this"].read_text().splitlines()
    if len(a) != len(b):
        sys.exit(f"the two revisions made different numbers of diagnostics ({len(a)}, {len(b)})")
    print(f"{len(a)} diagnostics, base {args.base} vs this checkout\n")
    print("| method | identical | differing (S_dir) | differing (S_ctx) | differing (evidence) |")
    print("|---|---|---|---|---|")
    rows = [(json.loads(x), json.loads(y)) for x, y in zip(a, b)]
    for k, m in enumerate(METHODS):
        pairs = [(x[k], y[k]) for x, y in rows]
        same = sum(p == q for p, q in pairs)
        print(f"| {m} | {same} | " + " | ".join(str(sum(p[i] != q[i] for p, q in pairs))
                                               for i in range(3)) + " |")


if __name__ == "__main__":
    main()
