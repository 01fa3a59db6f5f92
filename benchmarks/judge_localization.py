"""How well judge findings localize, when the judge quotes the faulty code more or less well.

  python benchmarks/judge_localization.py [--models gpt-4o kimi-k2] [--tasks 150] [--seed 0]

Injects one fault per kind into InteractScience answers with the fault injector of
`benchmarks/localization.py` (no browser: the scripted judge below always finds the fault),
then writes the finding a judge would write about it and localizes that finding alone
(`evaluators.localize.spans_judge`). The judge is scripted, with noise of five kinds:

- exact: the faulty line, verbatim, with its line number;
- neighbour: the line just above or below it instead (the judge pointed one line off);
- paraphrase: the faulty line with its quote marks swapped, its spacing changed and its
  trailing semicolon dropped, with its line number;
- partial: about half of the faulty line's tokens, without a line number;
- wrong handler: a quote that is not in the app and the name of a function other than the
  one holding the fault.

Rows per noise kind, and mixed: each finding replaced with probability p by one of the four
noisy kinds. Per row: hit@dir (the fault inside S_dir), hit@dir+ctx, dir% (S_dir's share of the
app) and w-ratio (the share of base weight on the faulty tokens over their share under flat
weights; 3x at most for one diagnostic).

With `--grounded`, the same scripted judge is combined with execution grounding on the scored
mutants of `benchmarks/localization.py` (its cache under `runs/localization/`; run that first
with the same `--seeds`): for every caught mutant with a failed rubric, the judge writes one
finding per failed rubric about the fault, and the mutant is localized four ways (grounded
method): the execution diagnostics alone, the findings alone, both with each keeping its own
spans (`judge.corroborate` off), and both under the stated combination
(`evaluators/localize/corroborate.py`).

  python benchmarks/judge_localization.py --grounded [--seeds 0 1 2 3 4 5 6]

Measured with `--grounded --seeds 1 2 3` (93 mutants; seed 0 was used to revise the rule),
hit@dir / w-ratio: exact quotes: execution 89% / 2.91x, judge 100% / 3.42x, union 100% /
3.29x, corroborated 100% / 3.29x; half noisy: union 96% / 3.07x, corroborated 96% / 3.08x;
a wrong name: union 89% / 2.33x (S_dir 23.4%), corroborated 89% / 2.46x (S_dir 16.1%).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from evaluators.synth.faults import FAULTS, Mutation  # noqa: E402
from localization import DATA, train_tokenizer  # noqa: E402

from evaluators.checks.extract import extract_app  # noqa: E402
from evaluators.localize.api import weights_from_spans  # noqa: E402
from evaluators.localize.graph import build_graph  # noqa: E402
from evaluators.localize.spans import localize  # noqa: E402
from evaluators.localize.tokens import span_mask, token_char_ranges  # noqa: E402
from evaluators.summary import table  # noqa: E402
from evaluators.tasks import load_responses, load_tasks  # noqa: E402

NOISY = ("neighbour", "paraphrase", "partial", "wrong handler")


def _line(text: str, at: int) -> tuple[int, int]:
    start = text.rfind("\n", 0, at) + 1
    end = text.find("\n", at)
    return start, len(text) if end < 0 else end


def finding(g, response: str, fault: tuple[int, int], kind: str, rng: random.Random) -> dict:
    """The judge_finding a scripted judge of noise ``kind`` writes about ``fault``."""
    lo = g.region[0]
    s, e = _line(response, fault[0])
    line_no = response[lo:s].count("\n") + 1
    quote, line, handler = response[s:e].strip(), line_no, None
    if kind == "neighbour":
        up = rng.random() < 0.5
        s2, e2 = _line(response, max(lo, s - 2)) if up else _line(response, min(len(response) - 1, e + 1))
        quote, line = response[s2:e2].strip() or quote, line_no + (-1 if up else 1)
    elif kind == "paraphrase":
        swapped = quote.translate(str.maketrans({"'": '"', '"': "'"}))
        quote = " ".join(swapped.replace("(", " ( ").replace(")", " ) ").split()).rstrip(";")
    elif kind == "partial":
        words = quote.split()
        n = max(1, len(words) // 2)
        k = rng.randrange(0, len(words) - n + 1)
        quote, line = " ".join(words[k:k + n]), None
    elif kind == "wrong handler":
        own = g.enclosing_function(fault[0])
        others = [f.name for f in g.functions if f.name and (own is None or f.index != own.index)]
        quote, line = "updateEverything(state, true);", None
        handler = rng.choice(others) if others else None
    return {"kind": "judge_finding", "reason": "judge_finding", "stage": "rubric",
            "severity": "severe", "rubric_id": "r", "message": "the feature is broken",
            "evidence_code": quote, "evidence_line": line, "handler": handler}


def measure(g, response: str, fault, diag, ranges) -> dict:
    loc = localize(g, diag, "grounded")
    inside = lambda spans: any(a <= fault[0] and fault[1] <= b for a, b in spans)  # noqa: E731
    w, _ = weights_from_spans(ranges, [(loc.s_dir, loc.s_ctx)])
    faulty = span_mask(ranges, [fault])
    ratio = (w[faulty].sum() / w.sum()) / (faulty.sum() / len(w)) if faulty.any() else 1.0
    lo, hi = g.region
    return {"hit_dir": inside(loc.s_dir), "hit_all": inside(list(loc.s_dir) + list(loc.s_ctx)),
            "dir": sum(b - a for a, b in loc.s_dir) / max(1, hi - lo), "ratio": float(ratio)}


def mutants(rows, seed: int) -> list[tuple[str, str, tuple[int, int]]]:
    """(fault kind, mutated response, fault span): one fault of each kind per answer."""
    rng = random.Random(seed)
    out = []
    for row in rows:
        ext = extract_app(row["response"])
        if ext is None:
            continue
        g = build_graph(row["response"], (ext.start, ext.end))
        for kind, sites in FAULTS.items():
            found = sites(g, rng)
            if found:
                m = rng.choice(found)
                out.append((kind, m.apply(row["response"]), m.fault))
    return out


COMBINED = ("execution alone", "judge alone", "both, union", "both, corroborated")


def _with_findings(rec: dict, kind: str, rng: random.Random, g) -> dict | None:
    """``rec`` with one scripted finding per failed rubric about its fault; None without a
    failed rubric (a gate failure: the judge scores no rubric then)."""
    failed = [r["id"] for r in rec.get("rubrics") or () if r.get("verdict") == "fail"]
    if not failed:
        return None
    fault = Mutation(**rec["mutation"]).fault
    found = []
    for rid in failed:
        f = finding(g, rec["response"], fault, kind, rng)
        found.append({**f, "rubric_id": rid})
    return {**rec, "diagnostics": [*(rec.get("diagnostics") or ()), *found]}


def combined_rows(kept: list[dict], tasks, tok, seed: int) -> list[list]:
    """Per judge noise and arm (``COMBINED``): hit@dir, hit@dir+ctx, dir% and w-ratio."""
    from localization import measure as measure_record

    from evaluators.contract import read_record
    from evaluators.localize.rules import LocalizeConfig

    union = LocalizeConfig({"judge.corroborate"})
    noise = {"exact": "exact", "mixed p=0.5": 0.5, "wrong handler": "wrong handler"}
    rng = random.Random(seed)
    out = []
    for label, how in noise.items():
        per: dict[str, list[dict]] = {arm: [] for arm in COMBINED}
        for rec in kept:
            rec = read_record(rec)
            ext = rec["extraction"]
            g = build_graph(rec["response"], (ext["start"], ext["end"]))
            kind = how if isinstance(how, str) else (
                rng.choice(NOISY) if rng.random() < how else "exact")
            both = _with_findings(rec, kind, rng, g)
            if both is None:
                continue
            judged = {**both, "diagnostics": [d for d in both["diagnostics"]
                                              if d["kind"] == "judge_finding"]}
            ranges = token_char_ranges(rec["response"], tok)
            task = tasks[rec["task_id"]]
            for arm, r, cfg in (("execution alone", rec, LocalizeConfig()),
                                ("judge alone", judged, LocalizeConfig()),
                                ("both, union", both, union),
                                ("both, corroborated", both, LocalizeConfig())):
                per[arm].append(measure_record(r, task, "grounded", ranges, cfg))
        for arm, ms in per.items():
            n = max(1, len(ms))
            out.append([label, arm, len(ms), f"{sum(m['hit_dir'] for m in ms) / n:.0%}",
                        f"{sum(m['hit_all'] for m in ms) / n:.0%}",
                        f"{statistics.fmean(m['dir_share'] for m in ms) if ms else 0:.1%}",
                        f"{statistics.fmean(m['ratio'] for m in ms) if ms else 0:.2f}x"])
    return out


def grounded_main(seeds: list[int]) -> None:
    """The ``--grounded`` table, over the localization benchmark's cached mutants."""
    import localization as bench

    t0 = time.perf_counter()
    cfg = bench.BenchConfig(seeds=tuple(seeds))
    tasks = load_tasks(DATA / "tasks.jsonl")
    first = set(list(tasks)[:cfg.tasks])
    rows = [r for m in cfg.models for r in load_responses(DATA / "answers" / f"{m}.jsonl", tasks)
            if r["task_id"] in first]
    originals = bench.score_cached(rows, tasks, cfg)
    passing = [r for r in originals if bench.all_pass(r)]
    mutants = bench.score_cached(bench.make_mutants(passing, cfg), tasks, cfg)
    kept = [m for m in mutants if bench.caught(m)]
    tok = train_tokenizer([r["response"] for r in originals])
    print(f"Judge findings with execution grounding: {len(kept)} caught mutants of "
          f"{', '.join(cfg.models)}, seeds {seeds} (mutants with a failed rubric count)\n")
    print(table(["judge", "arm", "n", "hit@dir", "hit@dir+ctx", "dir%", "w-ratio"],
                combined_rows(kept, tasks, tok, seeds[0])))
    print(f"total {time.perf_counter() - t0:.0f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["gpt-4o", "kimi-k2"])
    ap.add_argument("--tasks", type=int, default=150)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--grounded", action="store_true",
                    help="combine with execution grounding on benchmarks/localization.py's mutants")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0],
                    help="with --grounded: the localization benchmark's seeds")
    a = ap.parse_args()
    if a.grounded:
        grounded_main(a.seeds)
        return
    t0 = time.perf_counter()
    tasks = load_tasks(DATA / "tasks.jsonl")
    first = set(list(tasks)[:a.tasks])
    rows = [r for m in a.models for r in load_responses(DATA / "answers" / f"{m}.jsonl", tasks)
            if r["task_id"] in first]
    made = mutants(rows, a.seed)
    tok = train_tokenizer([r["response"] for r in rows])
    arms = {k: k for k in ("exact", *NOISY)} | {f"mixed p={p}": p for p in (0.25, 0.5)}
    results: dict[str, list[dict]] = {arm: [] for arm in arms}
    rng = random.Random(a.seed)
    for _, response, fault in made:
        ext = extract_app(response)
        g = build_graph(response, (ext.start, ext.end))
        ranges = token_char_ranges(response, tok)
        for arm, how in arms.items():
            kind = how if isinstance(how, str) else (
                rng.choice(NOISY) if rng.random() < how else "exact")
            results[arm].append(measure(g, response, fault, finding(g, response, fault, kind,
                                                                    rng), ranges))
    rows_out = []
    for arm, ms in results.items():
        mean = {k: statistics.fmean(float(m[k]) for m in ms) for k in ms[0]}
        rows_out.append([arm, len(ms), f"{mean['hit_dir']:.0%}", f"{mean['hit_all']:.0%}",
                         f"{mean['dir']:.1%}", f"{mean['ratio']:.2f}x"])
    print(f"Judge findings localized alone: {len(made)} mutants of {len(rows)} answers of "
          f"{', '.join(a.models)} (seed {a.seed})\n")
    print(table(["judge", "n", "hit@dir", "hit@dir+ctx", "dir%", "w-ratio"], rows_out))
    print(f"total {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
