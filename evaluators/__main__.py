"""Command line: `python -m evaluators score|localize ...`."""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
import traceback

from evaluators.config import EvalConfig
from evaluators.records import dumps_record
from evaluators.tasks import FormatError, load_responses, load_tasks


def _config(args: argparse.Namespace) -> EvalConfig:
    cfg = EvalConfig()
    browser = dataclasses.replace(cfg.browser, pages_per_worker=args.pages,
                                  probe_time_limit_ms=args.probe_time_limit_ms,
                                  page_reuse=args.page_reuse)
    return dataclasses.replace(cfg, browser=browser,
                               run_rubrics_after_gate_failure=args.all_rubrics)


def _run(args: argparse.Namespace, cfg: EvalConfig, finish=None) -> int:
    """Scores the rows of args.responses, passes each record through `finish`, writes them."""
    from tqdm import tqdm

    from evaluators.pool import EvaluatorPool
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

    tokenizer = None
    if args.tokenizer:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(args.tokenizer)
    cfg = _config(args)
    cfg = dataclasses.replace(cfg, browser=dataclasses.replace(cfg.browser, coverage=True))
    return _run(args, cfg, lambda rec, task: localize_record(
        rec, method=args.method, tokenizer=tokenizer, task=task))


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
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--tasks", required=True, help="tasks.jsonl (shared/specs/task-format.md)")
    common.add_argument("--responses", required=True, help="JSON Lines with task_id and response")
    common.add_argument("--out", required=True, help="output JSON Lines, one record per response")
    common.add_argument("--workers", type=int, default=1, help="browser processes")
    common.add_argument("--pages", type=int, default=EvalConfig().browser.pages_per_worker,
                        help="most probes in flight per browser")
    common.add_argument("--probe-time-limit-ms", type=int,
                        default=EvalConfig().browser.probe_time_limit_ms)
    common.add_argument("--page-reuse", type=int, default=EvalConfig().browser.page_reuse,
                        help="probes a page slot serves (reset between them) before it is "
                             "closed; 1 = a new browser context for every probe")
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
    lo.add_argument("--method", default="grounded", choices=("grounded", "text", "naive"))
    demo = sub.add_parser("demo", help="score the bundled example set and print the table")
    demo.add_argument("--out", default="runs/demo.jsonl")
    args = ap.parse_args(argv)
    if args.cmd == "demo":
        defaults = EvalConfig().browser
        args.workers, args.pages, args.quiet, args.all_rubrics = 1, defaults.pages_per_worker, False, False
        args.probe_time_limit_ms, args.page_reuse = defaults.probe_time_limit_ms, defaults.page_reuse
    return {"score": cmd_score, "localize": cmd_localize, "demo": cmd_demo}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
