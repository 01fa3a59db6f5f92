"""End to end: the real evaluator scores a broken counter app (coverage on), then the record
is localized and weighted."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest

from evaluators.config import EvalConfig
from evaluators.localize.api import localize_record
from evaluators.fleet.pool import score_rows_async
from evaluators.tasks import load_responses, load_tasks, parse_task

pytestmark = pytest.mark.browser
EXAMPLES = Path(__file__).resolve().parents[2] / "evaluators" / "examples"


def _inside(span, spans) -> bool:
    return any(s <= span[0] and span[1] <= e for s, e in spans)


def test_scored_broken_app_is_localized():
    tasks = load_tasks(EXAMPLES / "tasks.jsonl")
    rows = [r for r in load_responses(EXAMPLES / "responses.jsonl", tasks)
            if r["model"] == "partial: reset and class broken"]
    cfg = EvalConfig()
    cfg = dataclasses.replace(cfg, browser=dataclasses.replace(
        cfg.browser, coverage=True, pages_per_worker=4, load_timeout_ms=20_000,
        probe_time_limit_ms=20_000))
    (rec,) = asyncio.run(score_rows_async(rows, tasks, cfg))
    verdicts = {v["id"]: v["verdict"] for v in rec["rubrics"]}
    assert verdicts["reset"] == verdicts["positive-class"] == "fail", rec["rubrics"]
    out = localize_record(rec, task=tasks[rec["task_id"]])
    response = rec["response"]
    diags = {d["rubric_id"]: d for d in out["diagnostics"] if d["kind"] == "probe_failure"}

    reset = diags["reset"]  # the reset handler lost its `count = 0;`
    assert reset["weighted"] and reset["coverage"] is not None
    handler = response.index("() => {\n  render();\n}")
    assert _inside((handler, handler + len("() => {\n  render();\n}")), reset["s_dir"])
    assert any(e["by"] == "coverage" for e in reset["evidence"])

    cls = diags["positive-class"]  # render() no longer toggles the class
    render = response.index("function render() {")
    assert _inside((render, response.index("}", render) + 1), cls["s_dir"])

    for d in diags.values():  # every blamed span is inside the app
        start, end = rec["extraction"]["start"], rec["extraction"]["end"]
        assert all(start <= s < e <= end for s, e in d["s_dir"] + d["s_ctx"])


BRANCH_APP = """```html
<button id="go">Go</button><p id="out">-</p>
<script>
function onGo(ev) {
  if (ev.shiftKey) {
    document.getElementById('out').textContent = 'shift';
  } else {
    document.getElementById('out').textContent = 'plain';
  }
  // padding: a function this long is narrowed to its slice instead of blamed whole.......
  // padding: a function this long is narrowed to its slice instead of blamed whole.......
  // padding: a function this long is narrowed to its slice instead of blamed whole.......
}
document.getElementById('go').addEventListener('click', onGo);
</script>
```"""


def test_coverage_reports_the_blocks_that_did_not_run():
    task = parse_task({"id": "tests/branch", "prompt": "x", "rubrics": [
        {"id": "shift", "text": "x", "kind": "dynamic", "importance": "core", "probe": {
            "timeout_ms": 500, "steps": [{"do": "click", "locator": "#go"},
                                         {"expect": "text", "locator": "#out", "value": "shift"}]}}]})
    cfg = EvalConfig()
    cfg = dataclasses.replace(cfg, browser=dataclasses.replace(cfg.browser, coverage=True))
    row = {"task_id": task.id, "response": BRANCH_APP}
    (rec,) = asyncio.run(score_rows_async([row], {task.id: task}, cfg))
    (fail,) = [d for d in rec["diagnostics"] if d["kind"] == "probe_failure"]
    cov = fail["coverage"]
    assert [f["name"] for f in cov["functions"]] == ["onGo"]
    shift = BRANCH_APP.index("document.getElementById('out').textContent = 'shift';")
    plain = BRANCH_APP.index("document.getElementById('out').textContent = 'plain';")
    assert _inside((shift, shift + 10), cov["skipped"])
    assert not _inside((plain, plain + 10), cov["skipped"])
    out = localize_record(rec, task=task)
    (loc,) = [d for d in out["diagnostics"] if d["kind"] == "probe_failure"]
    assert _inside((plain, plain + 10), loc["s_dir"])
    assert not _inside((shift, shift + 10), loc["s_dir"]) and _inside((shift, shift + 10), loc["s_ctx"])


def test_passing_probes_paths_let_the_spectrum_blame_what_only_the_failing_path_ran():
    from tests.localize.test_rule_intents import SPECTRUM

    probe = lambda button, out: {"timeout_ms": 500, "steps": [  # noqa: E731
        {"do": "click", "locator": button}, {"expect": "text", "locator": out, "value": "1"}]}
    task = parse_task({"id": "tests/spectrum", "prompt": "x", "rubrics": [
        {"id": "a", "text": "x", "kind": "dynamic", "importance": "core", "probe": probe("#a", "#n")},
        {"id": "b", "text": "x", "kind": "dynamic", "importance": "core", "probe": probe("#b", "#m")}]})
    app = "```html\n" + SPECTRUM + "\n```"
    row = {"task_id": task.id, "response": app}

    def scored(passing: bool) -> dict:
        cfg = EvalConfig()
        cfg = dataclasses.replace(cfg, browser=dataclasses.replace(
            cfg.browser, coverage=True, coverage_passing=passing))
        (rec,) = asyncio.run(score_rows_async([row], {task.id: task}, cfg))
        return rec

    rec = scored(True)
    a, b = rec["rubrics"]
    assert (a["verdict"], b["verdict"]) == ("pass", "fail")
    assert {f["name"] for f in a["coverage"]["functions"]} >= {"show"}
    out = localize_record(rec, method="sbfl", task=task)
    (loc,) = [d for d in out["diagnostics"] if d["kind"] == "probe_failure"]
    assert "spectrum" not in loc  # the localizer's input, not part of the record
    bug = app.index("m -= 1;")
    assert _inside((bug, bug + 7), loc["s_dir"])
    other = app.index("n += 1;")
    assert not _inside((other, other + 7), loc["s_dir"] + loc["s_ctx"])
    # Without passing probes' paths there is no spectrum: the method blames nothing.
    plain = scored(False)
    assert "coverage" not in plain["rubrics"][0]
    (loc,) = [d for d in localize_record(plain, method="sbfl", task=task)["diagnostics"]
              if d["kind"] == "probe_failure"]
    assert loc["s_dir"] == [] and loc["s_ctx"] == []


def test_a_break_that_skipped_the_checked_write_is_blamed_with_real_block_coverage():
    from tests.localize.test_rule_intents import EARLY

    task = parse_task({"id": "tests/early", "prompt": "x", "rubrics": [
        {"id": "r", "text": "x", "kind": "dynamic", "importance": "core", "probe": {
            "timeout_ms": 500, "steps": [{"do": "click", "locator": "#go"},
                                         {"expect": "text", "locator": "#out", "value": "1"}]}}]})
    app = "```html\n" + EARLY + "\n```"
    cfg = EvalConfig()
    cfg = dataclasses.replace(cfg, browser=dataclasses.replace(cfg.browser, coverage=True))
    (rec,) = asyncio.run(score_rows_async([{"task_id": task.id, "response": app}],
                                          {task.id: task}, cfg))
    out = localize_record(rec, task=task)
    (loc,) = [d for d in out["diagnostics"] if d["kind"] == "probe_failure"]
    jump = app.index("break;")
    assert _inside((jump, jump + 6), loc["s_dir"]), (loc["coverage"], loc["evidence"])
    assert any(e["rule"] == "flow.skipped_by" for e in loc["evidence"])


def test_an_undefined_followed_back_two_calls_to_the_return_that_gave_it():
    # A real V8 stack: the exception is read in `draw`; the value came from `pick`, which
    # passed on what `fresh` returned (nothing).
    from tests.localize.rows_origins import TWO_CALLS_DEEP

    task = parse_task({"id": "tests/origins", "prompt": "x", "rubrics": [
        {"id": "shown", "text": "x", "kind": "initial", "importance": "core", "probe": {
            "timeout_ms": 500, "steps": [{"expect": "visible", "locator": "#c"}]}}]})
    app = "```html\n" + TWO_CALLS_DEEP + "\n```"
    (rec,) = asyncio.run(score_rows_async([{"task_id": task.id, "response": app}],
                                          {task.id: task}, EvalConfig()))
    out = localize_record(rec, task=task)
    errors = [d for d in out["diagnostics"] if d["kind"] == "page_error"]
    assert errors and errors[0]["exception"]["null_read"], rec["diagnostics"]
    empty = app.index("return;")
    lookup = app.index("return BANK[n];")
    assert _inside((empty, empty + 7), errors[0]["s_dir"])
    assert not _inside((lookup, lookup + 15), errors[0]["s_dir"])
