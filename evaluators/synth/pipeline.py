"""`python -m evaluators synth`: drafts (a model's, or offline) validated into tasks.jsonl.

  python -m evaluators synth --offline --count 2000 --out tasks.jsonl --references refs.jsonl
  python -m evaluators synth --base-url http://127.0.0.1:8000/v1 --model M --count 100 \\
      --out tasks.jsonl --references refs.jsonl [--seeds requests.txt]

Drafts are drawn and validated in chunks of `--chunk` until `--count` tasks are kept or
`--max-drafts` drafts were made; each complete chunk goes to a journal beside the tasks
(`synth.progress`), so a run that stops loses at most its last chunk and `--resume` goes on
from there. Writes the kept tasks, their reference apps as a responses file, and a report
(JSON, beside the tasks unless `--report` says where): counts kept and dropped at each check,
per domain and kind, probes made judge-only by check, every drop with its reason, and the
time taken (over every run of a resumed one). With `--answers`, each kept task's difficulty
is measured: the pass rate of those answers.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import hashlib
import json
import sys
import time
from pathlib import Path

from evaluators.synth import offline
from evaluators.synth.draft import shingles
from evaluators.synth.progress import Journal, JournalError, journal_path
from evaluators.synth.validate import Outcome, ValidateConfig, run_checks, screen

# Difficulty from a measured pass rate: at least 2/3 easy, at least 1/3 medium, else hard.
_EASY, _MEDIUM = 2 / 3, 1 / 3


def _model_drafts(args, start: int, n: int, seeds: list[str]):
    from evaluators.judge.config import JudgeConfig
    from evaluators.synth import llm

    cfg = JudgeConfig(base_url=args.base_url, model=args.model, api_key_env=args.api_key_env,
                      concurrency=args.concurrency, structured=args.structured,
                      prompt_version=args.prompt_version, max_tokens=args.max_tokens,
                      temperature=args.temperature)
    specs = llm.from_seeds(seeds)[start:start + n] if seeds else llm.taxonomy(n, start)
    return asyncio.run(llm.draft_all(specs, cfg))


def synthesize(args: argparse.Namespace, eval_cfg, workers: int) -> tuple[Outcome, float]:
    """Chunks of drafting, screening and validation until enough tasks are kept, each
    recorded in the run's journal. Returns the outcome and the seconds every run took."""
    cfg = ValidateConfig(runs=args.runs, mutants=args.mutants,
                         duplicate_similarity=args.duplicate_similarity, seed=args.seed)
    seeds = Path(args.seeds).read_text(encoding="utf-8").splitlines() if args.seeds else []
    budget = args.max_drafts or 2 * args.count
    journal = Journal(journal_path(args.out), _settings(args, cfg, seeds), args.resume)
    pool = offline.drafts(budget, args.seed) if args.offline else None
    out = journal.outcome
    # Screening compares against every earlier survivor, kept or not, so a later chunk's
    # duplicate of an earlier chunk's draft is caught too (after a resume as well).
    seen = [(shingles(request), tid) for request, tid in journal.seen]
    while len(out.tasks) < args.count and journal.made < budget:
        made = journal.made
        want = min(budget - made, args.chunk, max(8, int((args.count - len(out.tasks)) * 1.25)))
        t0 = time.perf_counter()
        batch = pool[made:made + want] if pool is not None else _model_drafts(args, made, want, seeds)
        if not batch:
            break
        chunk = Outcome()
        todo = screen(batch, cfg, chunk, seen)
        run_checks(todo, eval_cfg, cfg, workers, chunk)
        journal.record(chunk, [(d.request, d.id) for d in todo], len(batch),
                       time.perf_counter() - t0)
        print(f"synth: {journal.made} drafts, {len(out.tasks)} kept, "
              f"{journal.seconds:.0f} s", file=sys.stderr, flush=True)
    out.tasks, out.references = out.tasks[:args.count], out.references[:args.count]
    return out, journal.seconds


def _settings(args: argparse.Namespace, cfg: ValidateConfig, seeds: list[str]) -> dict:
    """What decides a run's drafts and verdicts: a resumed run must keep all of it."""
    drafter = ({"offline": True} if args.offline else
               {"offline": False, "model": args.model, "prompt_version": args.prompt_version,
                "structured": args.structured, "temperature": args.temperature,
                "seeds": hashlib.sha1("\n".join(seeds).encode()).hexdigest()})
    return {**drafter, "validation": dataclasses.asdict(cfg)}


def measured_difficulty(tasks: list[dict], records: list[dict]) -> None:
    """Sets each task's difficulty from the share of rubrics the scored answers pass."""
    by_task: dict[str, list[float]] = {}
    for rec in records:
        if rec.get("status") == "ok" and rec["rubrics"]:
            rate = sum(v["verdict"] == "pass" for v in rec["rubrics"]) / len(rec["rubrics"])
            by_task.setdefault(rec["task_id"], []).append(rate)
    for t in tasks:
        rates = by_task.get(t["id"])
        if rates:
            rate = sum(rates) / len(rates)
            t["meta"]["drafted_difficulty"] = t["meta"]["difficulty"]
            t["meta"]["pass_rate"] = round(rate, 4)
            t["meta"]["difficulty"] = "easy" if rate >= _EASY else "medium" if rate >= _MEDIUM else "hard"


def _write(path: str, rows: list[dict]) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def run(args: argparse.Namespace, eval_cfg, workers: int) -> int:
    if not args.offline and not args.base_url:
        print("error: synth needs --offline or a model (--base-url and --model)")
        return 2
    if args.chunk < 1:
        print(f"error: --chunk must be at least 1, got {args.chunk}")
        return 2
    try:
        out, seconds = synthesize(args, eval_cfg, workers)
    except JournalError as e:
        print(f"error: {e}")
        return 2
    t0 = time.perf_counter()
    if args.answers:
        from evaluators.fleet.pool import EvaluatorPool
        from evaluators.tasks import load_responses, parse_task

        tasks = {t["id"]: parse_task(t) for t in out.tasks}
        rows = [r for r in load_responses(args.answers) if r["task_id"] in tasks]
        measured_difficulty(out.tasks, list(EvaluatorPool(tasks, eval_cfg, workers=workers).score(rows)))
    seconds += time.perf_counter() - t0
    _write(args.out, out.tasks)
    _write(args.references, out.references)
    report = {**out.report(), "seconds": round(seconds, 1), "workers": workers,
              "offline": bool(args.offline), "drops": out.dropped, "judge_only": out.judge_only}
    report_path = args.report or str(Path(args.out).with_suffix(".report.json"))
    Path(report_path).write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n")
    print(summary(report))
    print(f"wrote {len(out.tasks)} tasks to {args.out}, their references to {args.references}, "
          f"the report to {report_path}")
    return 0


def summary(report: dict) -> str:
    """The report as text: totals, drops by check, judge-only probes, per domain / kind."""
    lines = [f"drafts {report['drafts']}, kept {report['kept']} ({report['seconds']} s, "
             f"{report['workers']} workers)",
             "dropped: " + (", ".join(f"{k} {v}" for k, v in report["dropped"].items()) or "none"),
             f"probes kept {report['probes_kept']}; made judge-only: "
             + (", ".join(f"{k} {v}" for k, v in report["probes_judge_only"].items()) or "none")]
    for group, counts in report["groups"].items():
        lines.append(f"  {group}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    return "\n".join(lines)


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--offline", action="store_true", help="draft without a model (synth.offline)")
    ap.add_argument("--count", type=int, default=100, help="tasks to keep")
    ap.add_argument("--max-drafts", type=int, default=0, help="most drafts (default 2 x count)")
    ap.add_argument("--chunk", type=int, default=100,
                    help="drafts validated together and journaled (what a stop can lose)")
    ap.add_argument("--resume", action="store_true",
                    help="go on with the run whose journal is beside --out")
    ap.add_argument("--out", required=True, help="tasks.jsonl to write")
    ap.add_argument("--references", required=True, help="responses file of the reference apps")
    ap.add_argument("--report", default="", help="report JSON (default: beside --out)")
    ap.add_argument("--answers", default="", help="answers to these tasks: difficulty measured")
    ap.add_argument("--seeds", default="", help="seed requests, one per line (model mode)")
    ap.add_argument("--seed", type=int, default=0, help="generation and mutant seed")
    ap.add_argument("--runs", type=int, default=ValidateConfig.runs, help="reference runs (flakiness)")
    ap.add_argument("--mutants", type=int, default=ValidateConfig.mutants)
    ap.add_argument("--duplicate-similarity", type=float, default=ValidateConfig.duplicate_similarity)
    model = ap.add_argument_group("model", "an OpenAI-compatible server (as the judge's)")
    model.add_argument("--base-url", default="")
    model.add_argument("--model", default="")
    model.add_argument("--api-key-env", default="OPENAI_API_KEY")
    model.add_argument("--concurrency", type=int, default=4)
    model.add_argument("--structured", default="json_schema", choices=("json_schema", "prompt"))
    model.add_argument("--prompt-version", default="v1")
    model.add_argument("--max-tokens", type=int, default=8192)
    model.add_argument("--temperature", type=float, default=0.7)
