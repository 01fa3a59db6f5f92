"""Command line: `python -m evaluators score|localize|leaderboard|demo ...`."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
import traceback

from evaluators.config import EvalConfig
from evaluators.judge.config import PROBED, STRUCTURED, JudgeConfig
from evaluators.records import dumps_record
from evaluators.tasks import FormatError, iter_jsonl, load_responses, load_tasks


def _fleet(args: argparse.Namespace) -> None:
    """Fills --workers and --pages left at 0 from the machine (`config.machine_fleet`)."""
    from evaluators.config import machine_fleet

    workers, pages = machine_fleet()
    if getattr(args, "workers", 0) <= 0:
        args.workers = workers
    if getattr(args, "pages", 0) <= 0:
        args.pages = pages


def _config(args: argparse.Namespace) -> EvalConfig:
    cfg = EvalConfig()
    browser = dataclasses.replace(cfg.browser, pages_per_worker=args.pages,
                                  probe_time_limit_ms=args.probe_time_limit_ms,
                                  page_reuse=args.page_reuse,
                                  decide_when_quiet=not getattr(args, "wait_out_timeouts", False))
    judge = cfg.judge
    if getattr(args, "judge_base_url", None):
        judge = JudgeConfig(base_url=args.judge_base_url, model=args.judge_model or "",
                            api_key_env=args.judge_api_key_env, probed=args.judge_probed,
                            structured=args.judge_structured, cache_dir=args.judge_cache or "",
                            concurrency=args.judge_concurrency, agentic=args.judge_agentic,
                            agent_steps=args.judge_agent_steps,
                            max_tokens=args.judge_max_tokens)
    return dataclasses.replace(cfg, browser=browser, judge=judge,
                               run_rubrics_after_gate_failure=getattr(args, "all_rubrics", False))


def _run(args: argparse.Namespace, cfg: EvalConfig, finish=None) -> int:
    """Scores the rows of args.responses, passes each record through `finish`, writes them."""
    from tqdm import tqdm

    from evaluators.fleet.pool import EvaluatorPool
    from evaluators.summary import summarize

    try:
        tasks = load_tasks(args.tasks)
        rows = load_responses(args.responses, tasks)
    except (FormatError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    records = []
    with open(args.out, "w", encoding="utf-8") as out:
        scored = EvaluatorPool(tasks, cfg, workers=args.workers).score(rows)
        for rec in tqdm(scored, total=len(rows), unit="app", disable=args.quiet):
            if finish is not None and rec["status"] == "ok":
                rec = _finished(finish, rec, tasks[rec["task_id"]], args)
            out.write(dumps_record(rec) + "\n")
            out.flush()
            records.append(rec)
    print(summarize(records, time.perf_counter() - t0))
    return 0


def _finished(finish, rec: dict, task, args: argparse.Namespace) -> dict:
    """`finish(rec, task)`; if it fails, the record as scored, with the failure noted.

    Localization failing on one record is the evaluator's problem and must not stop the
    run: the record keeps its verdicts and reward, and `localization.error` says why it
    has no spans.
    """
    try:
        return finish(rec, task)
    except Exception:  # noqa: BLE001 - one record's localization, never the run
        why = traceback.format_exc(limit=4)
        print(f"warning: localization failed for a {rec['task_id']} record:\n{why}",
              file=sys.stderr)
        return {**rec, "localization": {"method": getattr(args, "method", None),
                                        "error": why[-2000:]}}


def cmd_score(args: argparse.Namespace) -> int:
    return _run(args, _config(args))


def cmd_localize(args: argparse.Namespace) -> int:
    """Scores with execution grounding (JS coverage of failing probes), then localizes."""
    from evaluators.localize.api import localize_record
    from evaluators.localize.spans import SPECTRUM_METHODS

    tokenizer = None
    if args.tokenizer:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(args.tokenizer)
    cfg = _config(args)
    cfg = dataclasses.replace(cfg, browser=dataclasses.replace(
        cfg.browser, coverage=True,
        coverage_passing=cfg.browser.coverage_passing or args.method in SPECTRUM_METHODS))
    return _run(args, cfg, lambda rec, task: localize_record(
        rec, method=args.method, tokenizer=tokenizer, task=task))


def _score_file(args: argparse.Namespace, tasks: dict, path: str, cache) -> list[dict]:
    """The records of one responses file: read when already scored, else scored once and
    cached in `cache` (reused while it holds one record per row, in order)."""
    from evaluators.leaderboard import is_scored
    from evaluators.fleet.pool import EvaluatorPool

    if is_scored(path):
        return [obj for _, obj in iter_jsonl(path)]
    rows = load_responses(path, tasks)
    if cache.exists():
        cached = [obj for _, obj in iter_jsonl(cache)]
        if [r.get("task_id") for r in cached] == [r["task_id"] for r in rows]:
            return cached
    cfg = dataclasses.replace(_config(args), run_rubrics_after_gate_failure=not args.gated_only)
    cache.parent.mkdir(parents=True, exist_ok=True)
    records = []
    with open(cache.with_suffix(".tmp"), "w", encoding="utf-8") as out:
        for rec in EvaluatorPool(tasks, cfg, workers=args.workers).score(rows):
            out.write(dumps_record(rec) + "\n")
            records.append(rec)
    cache.with_suffix(".tmp").replace(cache)
    return records


def cmd_leaderboard(args: argparse.Namespace) -> int:
    """One row per responses file: Overall, Average, Perfect, reward (evaluators.leaderboard)."""
    from pathlib import Path

    from evaluators import leaderboard as lb

    try:
        tasks = load_tasks(args.tasks)
        reports = {}
        for path in args.responses:
            cache = Path(args.out) / (Path(path).stem + ".records.jsonl")
            records = _score_file(args, tasks, path, cache)
            reports[lb.model_name(path, records)] = lb.report(records, tasks)
    except (FormatError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(lb.text_table({m: r["all"] for m, r in reports.items()}))
    for part, title in (("by_difficulty", "difficulty"), ("by_domain", "domain")):
        groups = sorted({g for r in reports.values() for g in r[part]})
        print(f"\nOverall by {title}:")
        print(lb.table(["model", *groups], [[m, *(r[part].get(g, {}).get("Overall", float("nan"))
                                                  for g in groups)] for m, r in reports.items()]))
    if args.json:
        Path(args.json).write_text(json.dumps(reports, indent=2))
    if args.markdown:
        Path(args.markdown).write_text("\n\n".join(lb.report_markdown(m, r) for m, r in reports.items())
                                       + "\n")
    return 0


def cmd_synth(args: argparse.Namespace) -> int:
    """Drafts validated into tasks (evaluators.synth.pipeline)."""
    from evaluators.synth.pipeline import run

    return run(args, _config(args), args.workers)


def cmd_demo(args: argparse.Namespace) -> int:
    """Scores the bundled example set (a counter app and eight responses)."""
    from pathlib import Path

    examples = Path(__file__).parent / "examples"
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    args.tasks, args.responses = str(examples / "tasks.jsonl"), str(examples / "responses.jsonl")
    return cmd_score(args)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m evaluators")
    sub = ap.add_subparsers(dest="cmd", required=True)
    fleet = argparse.ArgumentParser(add_help=False)
    fleet.add_argument("--workers", type=int, default=0, help="browser processes (default "
                         "0: one per CPU, fewer when memory is short; config.machine_fleet)")
    fleet.add_argument("--pages", type=int, default=0, help="most probes in flight per "
                         "browser (default 0: up to 6, as the available memory allows)")
    fleet.add_argument("--probe-time-limit-ms", type=int,
                         default=EvalConfig().browser.probe_time_limit_ms)
    fleet.add_argument("--page-reuse", type=int, default=EvalConfig().browser.page_reuse,
                         help="probes a page slot serves (reset between them) before it is "
                              "closed; 1 = a new browser context for every probe")
    fleet.add_argument("--wait-out-timeouts", action="store_true", help="wait every step "
                         "out to its timeout, as Playwright's runner does, even on a page where "
                         "nothing is pending (BrowserConfig.decide_when_quiet off)")
    browser = argparse.ArgumentParser(add_help=False, parents=[fleet])
    browser.add_argument("--tasks", required=True, help="tasks.jsonl (shared/specs/task-format.md)")
    judge = browser.add_argument_group("judge", "an OpenAI-compatible LLM judge for rubrics "
                                       "without a probe (evaluators.judge)")
    judge.add_argument("--judge-base-url", default="", help="API root, e.g. "
                       "http://127.0.0.1:8000/v1 (empty: no judge; such rubrics stay unjudged)")
    judge.add_argument("--judge-model", default="", help="the model name the server serves")
    judge.add_argument("--judge-api-key-env", default=JudgeConfig.api_key_env,
                       help="environment variable holding the API key (unset: none sent)")
    judge.add_argument("--judge-probed", default=JudgeConfig.probed, choices=PROBED,
                       help="'both': the judge also scores rubrics that have a probe (the "
                            "probe's verdict stands; the record keeps both)")
    judge.add_argument("--judge-structured", default=JudgeConfig.structured, choices=STRUCTURED,
                       help="'prompt' for servers without response_format json_schema")
    judge.add_argument("--judge-cache", default="", help="folder of the judge's cache")
    judge.add_argument("--judge-concurrency", type=int, default=JudgeConfig.concurrency,
                       help="judge requests in flight per worker")
    judge.add_argument("--judge-max-tokens", type=int, default=JudgeConfig.max_tokens,
                       help="most tokens of one judge answer")
    judge.add_argument("--judge-agentic", action="store_true", help="the judge drives the app "
                       "with browser tools (click, fill, read...) before it answers")
    judge.add_argument("--judge-agent-steps", type=int, default=JudgeConfig.agent_steps,
                       help="most tool calls of an agentic judge per response")
    common = argparse.ArgumentParser(add_help=False, parents=[browser])
    common.add_argument("--responses", required=True, help="JSON Lines with task_id and response")
    common.add_argument("--out", required=True, help="output JSON Lines, one record per response")
    common.add_argument("--all-rubrics", action="store_true",
                        help="run every probe even when a gate failed (the reward stays gated)")
    common.add_argument("--quiet", action="store_true", help="no progress bar")
    sub.add_parser("score", parents=[common],
                   help="gated reward, verdicts and diagnostics for each response")
    lo = sub.add_parser("localize", parents=[common], help="score, then localize each "
                        "diagnostic to response spans and (with --tokenizer) token weights")
    lo.add_argument("--tokenizer", default=None,
                    help="a transformers fast tokenizer (name or path): adds weights_base and "
                         "diagnosed per token, aligned with `token_ids` when a row has them")
    lo.add_argument("--method", default="grounded",
                    choices=("grounded", "ranked", "text", "naive", "sbfl"),
                    help="ranked: grounded's evidence and the spectrum in one scored ranking; "
                         "sbfl: spectrum-based suspiciousness alone (both score passing "
                         "probes' coverage too)")
    lb = sub.add_parser("leaderboard", parents=[browser], help="Overall, Average, Perfect and "
                        "reward per responses file, by difficulty and domain")
    lb.add_argument("--responses", required=True, nargs="+",
                    help="responses files (or files of scored records), one row each")
    lb.add_argument("--out", default="runs/leaderboard",
                    help="folder for the scored records (reused when present)")
    lb.add_argument("--gated-only", action="store_true", help="skip the probes of a response "
                    "that failed a gate (they count as failed); default: run every probe, as "
                    "a benchmark's own runner does (the reward stays gated)")
    lb.add_argument("--json", default=None, help="write every figure as JSON")
    lb.add_argument("--markdown", default=None, help="write the tables as Markdown")
    synth = sub.add_parser("synth", parents=[fleet], help="tasks from drafts (a model's or "
                           "offline), validated by running them (evaluators.synth)")
    from evaluators.synth.pipeline import add_arguments as synth_arguments
    synth_arguments(synth)
    demo = sub.add_parser("demo", help="score the bundled example set and print the table")
    demo.add_argument("--out", default="runs/demo.jsonl")
    args = ap.parse_args(argv)
    _fleet(args)
    try:
        _config(args) if args.cmd != "demo" else None
    except ValueError as e:  # a bad judge setting: named, before any browser starts
        ap.error(str(e))
    if args.cmd == "demo":
        defaults = EvalConfig().browser
        args.workers, args.pages, args.quiet, args.all_rubrics = 1, defaults.pages_per_worker, False, False
        args.probe_time_limit_ms, args.page_reuse = defaults.probe_time_limit_ms, defaults.page_reuse
    return {"score": cmd_score, "localize": cmd_localize, "leaderboard": cmd_leaderboard,
            "demo": cmd_demo, "synth": cmd_synth}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
