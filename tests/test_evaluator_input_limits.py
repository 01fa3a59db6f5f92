"""Responses built to break the scorer before any browser sees them (issue 17, holes 3-5).

A response's own fault must get its gated reward: a syntax error nested thousands of
brackets deep, a lone UTF-16 surrogate, a document nested so deeply that tree-sitter
takes a minute. These reach gate S, which decides without a browser, so the scorer runs
here with no browser worker at all (a test that reached one would fail on None).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time

import jsonschema
import pytest

from evaluators.config import EvalConfig
from evaluators.records import dumps_record
from evaluators.checks.score import score_with_retries
from evaluators.tasks import parse_task
from tests.test_schema import SCHEMA_PATH

TASK = parse_task({"id": "t", "prompt": "p", "rubrics": [
    {"id": "r", "text": "x", "kind": "initial", "importance": "core",
     "probe": {"steps": [{"expect": "visible", "locator": "body"}]}}]})
VALIDATOR = jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text(encoding="utf-8")))


def _score(response: str, cfg: EvalConfig = EvalConfig()) -> dict:
    row = {"task_id": "t", "response": response}
    rec = asyncio.run(score_with_retries(None, TASK, row, cfg))
    problems = [e.message for e in VALIDATOR.iter_errors(rec)]
    assert problems == [], problems
    return rec


def _app(script: str, body: str = "") -> str:
    return f"```html\n<!DOCTYPE html><html><body>{body}<script>{script}</script></body></html>\n```"


def test_a_deeply_nested_syntax_error_fails_gate_s_not_the_evaluator():
    # 5,000 open brackets and one stray operator: a deep error tree (hole 3).
    rec = _score(_app("(" * 5000 + "1 +" + ")" * 5000))
    assert (rec["status"], rec["gate"], rec["reward"]) == ("ok", "source", 0.0), rec.get("error")
    (diag,) = [d for d in rec["diagnostics"] if d["kind"] == "syntax_error"]
    start, end = diag["span"]
    assert start <= rec["response"].index("1 +") + 3 <= end + 1


def test_a_lone_surrogate_is_scored_and_written():
    # A JSON "\ud800" escape with no partner (hole 4): gate S still reads the script, and the
    # record is written as strict UTF-8 JSON that reads back to the same response.
    response = _app("let a = 1 +;", body="<p>half a pair: \ud800</p>")
    rec = _score(response)
    assert (rec["status"], rec["gate"], rec["reward"]) == ("ok", "source", 0.0), rec.get("error")
    (diag,) = [d for d in rec["diagnostics"] if d["kind"] == "syntax_error"]
    # The span is still in response coordinates: the surrogate before it counts one.
    assert response[diag["span"][0]:diag["span"][1]].strip() in ("+", "+;", ";")
    line = dumps_record(rec)
    line.encode("utf-8")  # strict: would raise on a raw surrogate
    assert json.loads(line) == rec


def test_dumps_record_writes_what_json_cannot_hold():
    nested: list = []
    inner = nested
    for _ in range(5000):
        inner.append([])
        inner = inner[0]
    rec = {"task_id": "t", "response": "x\udfff", "actual": float("nan"), "big": float("inf"),
           "deep": nested}
    back = json.loads(dumps_record(rec))
    assert back["response"] == "x\udfff"
    assert (back["actual"], back["big"]) == ("NaN", "Infinity")
    assert "nested deeper than 64 levels" in json.dumps(back["deep"])


def test_a_document_too_deep_to_parse_in_time_fails_gate_s_without_stalling_the_loop():
    # 40,000 nested elements take tree-sitter several seconds (quadratic); with a 1 s limit
    # the check ends at 1 s as a gate S failure, and the event loop keeps turning meanwhile
    # (other apps' pages are driven from it) (hole 5).
    response = "```html\n<!DOCTYPE html><html><body>" + "<div>" * 40_000 + "</body></html>\n```"
    cfg = dataclasses.replace(EvalConfig(), source_time_limit_ms=1000)

    async def run() -> tuple[dict, float, float]:
        gaps, last, done = [], time.monotonic(), asyncio.Event()

        async def ticker() -> None:
            nonlocal last
            while not done.is_set():
                await asyncio.sleep(0.05)
                gaps.append(time.monotonic() - last)
                last = time.monotonic()

        tick = asyncio.ensure_future(ticker())
        t0 = time.monotonic()
        rec = await score_with_retries(None, TASK, {"task_id": "t", "response": response}, cfg)
        took = time.monotonic() - t0
        done.set()
        await tick
        return rec, took, max(gaps)

    rec, took, worst_gap = asyncio.run(run())
    assert (rec["status"], rec["gate"], rec["reward"]) == ("ok", "source", 0.0), rec.get("error")
    (diag,) = rec["diagnostics"]
    assert diag["kind"] == "parse_timeout" and diag["limit_ms"] == 1000
    assert took < 4.0, took
    # The parse shares the GIL with the loop; a stall would be the whole parse (seconds).
    assert worst_gap < 0.5, worst_gap
    assert not VALIDATOR.is_valid({**rec, "diagnostics": []})  # gate S needs its reason


@pytest.mark.parametrize("depth", [200, 2000])
def test_deep_valid_nesting_passes_gate_s(depth):
    # Deep but valid code is not an error: it goes on to the browser (None here, so the
    # scorer's attempt to use it is an evaluator error, never a gate S verdict).
    rec = asyncio.run(score_with_retries(
        None, TASK, {"task_id": "t", "response": _app("[" * depth + "]" * depth + ";")},
        EvalConfig()))
    assert rec["status"] == "error" and "NoneType" in rec["error"]
