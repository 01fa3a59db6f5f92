"""The gated reward on hand-written apps, in real headless Chromium, one test per path.

All cases are scored in one concurrent batch (a module fixture), then each test
checks its own record.
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest

from evaluators.sandbox.browser import BrowserWorker
from evaluators.config import EvalConfig
from evaluators.fleet.pool import make_mirror, score_rows_async
from evaluators.tasks import load_responses, load_tasks, parse_task

pytestmark = pytest.mark.browser
EXAMPLES = Path(__file__).resolve().parents[1] / "evaluators" / "examples"
TASKS = load_tasks(EXAMPLES / "tasks.jsonl")
COUNTER = TASKS["examples/counter"]
BASE = {r["model"]: r for r in load_responses(EXAMPLES / "responses.jsonl", TASKS)}
GOOD = BASE["correct"]["response"]
GOOD_SCRIPT_END = "document.getElementById('reset').addEventListener('click', () => {\n  count = 0;\n  render();\n});"
assert GOOD_SCRIPT_END in GOOD


def variant(extra_js: str) -> str:
    """The correct app with `extra_js` appended to its script."""
    return GOOD.replace(GOOD_SCRIPT_END, GOOD_SCRIPT_END + "\n" + extra_js)


PROBE_TASK = parse_task({
    "id": "tests/probe-errors", "prompt": "same counter app",
    "rubrics": [
        {"id": "unknown-step", "text": "x", "kind": "dynamic", "importance": "behavior",
         "probe": {"steps": [{"do": "click", "locator": "#inc"}, {"teleport": "#count"}]}},
        {"id": "bad-selector", "text": "x", "kind": "initial", "importance": "behavior",
         "probe": {"steps": [{"expect": "visible", "locator": "#count[[["}], "timeout_ms": 1000}},
        {"id": "ok", "text": "x", "kind": "initial", "importance": "core",
         "probe": {"steps": [{"expect": "text", "locator": "#count", "value": "0"}]}},
    ]})

FILE_TASK = parse_task({
    "id": "tests/file-read", "prompt": "same counter app",
    "rubrics": [{"id": "title-after-fetch", "text": "x", "kind": "initial", "importance": "core",
                 "probe": {"steps": [{"wait_ms": 300}, {"save": "title", "eval": "() => document.title"}]}}]})

EXTRA = {
    "infinite loop on load": variant("while (true) {}"),
    "memory bomb on load": variant("const hog = []; while (true) hog.push(new Array(1e6).fill(1.5));"),
    "opens a popup": variant("window.open('https://example.com/ad');"),
    "navigates away on reset": GOOD.replace("  count = 0;\n  render();",
                                            "  count = 0;\n  render();\n  location.href = 'https://example.com/';"),
    "hangs on reset click": GOOD.replace("  count = 0;\n  render();", "  while (true) {}"),
}
CFG = EvalConfig()
CFG = dataclasses.replace(CFG, browser=dataclasses.replace(
    CFG.browser, load_timeout_ms=5000, probe_time_limit_ms=12000, hang_timeout_ms=8000,
    pages_per_worker=8))


@pytest.fixture(scope="module")
def records() -> dict[str, dict]:
    rows = list(BASE.values())
    rows += [{"task_id": COUNTER.id, "model": k, "response": v} for k, v in EXTRA.items()]
    rows.append({"task_id": PROBE_TASK.id, "model": "probe errors", "response": GOOD})
    rows.append({"task_id": FILE_TASK.id, "model": "reads a local file", "response": variant(
        "fetch('file:///etc/hostname').then(r => r.text()).then(t => { document.title = 'read ' + t.length; })"
        ".catch(() => { document.title = 'blocked'; });")})
    tasks = {**TASKS, PROBE_TASK.id: PROBE_TASK, FILE_TASK.id: FILE_TASK}
    out = asyncio.run(score_rows_async(rows, tasks, CFG))
    assert [r["model"] for r in out] == [r["model"] for r in rows], "records must keep input order"
    return {r["model"]: r for r in out}


def verdicts(rec: dict) -> dict[str, str]:
    return {v["id"]: v["verdict"] for v in rec["rubrics"]}


def kinds(rec: dict) -> list[str]:
    return [d["kind"] for d in rec["diagnostics"]]


def test_no_fenced_code(records):
    rec = records["no code"]
    assert (rec["reward"], rec["gate"], rec["status"]) == (0.0, "format", "ok")
    assert kinds(rec) == ["no_app"]
    assert rec["extraction"] is None


def test_js_syntax_error(records):
    rec = records["JS syntax error"]
    assert (rec["reward"], rec["gate"]) == (0.0, "source")
    (diag,) = [d for d in rec["diagnostics"] if d["kind"] == "syntax_error"]
    start, end = diag["span"]
    # The span is in response coordinates and covers the stray ')'.
    assert rec["response"][start:end] == ")"
    assert rec["response"][:end].endswith("count += step;;)")


def test_exception_on_load(records):
    rec = records["throws on load"]
    assert (rec["reward"], rec["gate"]) == (0.1, "runtime")
    (err,) = [d for d in rec["diagnostics"] if d["kind"] == "page_error"]
    assert "TypeError" in err["message"]
    top = err["frames"][0]
    assert top["in_app"]
    # The top frame maps back to the throwing expression in the response.
    assert rec["response"][top["offset"]:].startswith("theme")
    assert err["excerpt"] == "console.log(config.theme);"


def test_infinite_loop_on_load_is_bounded(records):
    rec = records["infinite loop on load"]
    assert (rec["reward"], rec["gate"], rec["status"]) == (0.1, "runtime", "ok")
    fail = [d for d in rec["diagnostics"] if d["kind"] == "runtime_failure"][0]
    # Ended by the 5 s load timeout of CFG, not by anything slower.
    assert "did not load within 5000 ms" in fail["message"]


def test_memory_bomb_crashes_only_its_page(records):
    rec = records["memory bomb on load"]
    assert (rec["reward"], rec["gate"], rec["status"]) == (0.1, "runtime", "ok")
    # Apps scored in the same browser at the same time were not affected.
    assert records["correct"]["reward"] == 1.0


def test_click_handler_throws_in_core_rubric(records):
    rec = records["click handler throws"]
    assert (rec["reward"], rec["gate"]) == (0.1, "runtime")
    inc = next(v for v in rec["rubrics"] if v["id"] == "increment")
    assert inc["verdict"] == "fail" and inc["runtime_error"] and inc["severity"] == "severe"
    err = next(d for d in rec["diagnostics"] if d["kind"] == "page_error" and d["rubric_id"] == "increment")
    assert "renderCount is not defined" in err["message"]
    assert err["interaction_index"] == 0
    assert rec["response"][err["frames"][0]["offset"]:].startswith("renderCount();")


def test_partially_correct_app(records):
    rec = records["partial: reset and class broken"]
    v = verdicts(rec)
    assert v == {"title": "pass", "count-starts-at-zero": "pass", "increment": "pass",
                 "step-slider": "pass", "reset": "fail", "positive-class": "fail",
                 "looks-clean": "unjudged"}
    sev = {r["id"]: r["severity"] for r in rec["rubrics"]}
    assert sev["reset"] == "moderate"          # wrong text: behavior x moderate = 0.15
    assert sev["positive-class"] == "minor"    # class assertion: rendering x minor = 0.03
    assert rec["gate"] is None
    assert rec["reward"] == pytest.approx(1 - 0.15 - 0.03)
    fail = next(d for d in rec["diagnostics"] if d["kind"] == "probe_failure" and d["rubric_id"] == "reset")
    assert (fail["selector"], fail["expected"], fail["actual"], fail["step_index"]) == ("#count", "0", "1", 2)
    assert fail["after_action"]["selector"] == "#reset"


def test_fully_correct_app(records):
    rec = records["correct"]
    assert (rec["reward"], rec["gate"], rec["status"]) == (1.0, None, "ok")
    assert rec["rubric_counts"] == {"pass": 6, "fail": 0, "error": 0, "unjudged": 1}
    assert [d for d in rec["diagnostics"] if d["severity"] != "info"] == []


def test_external_fetch_is_blocked_and_recorded(records):
    rec = records["fetches an external URL"]
    assert rec["reward"] == 1.0
    blocked = [d for d in rec["diagnostics"] if d["kind"] == "blocked_request"]
    assert blocked and blocked[0]["url"] == "https://example.com/api/score"


def test_alert_is_answered(records):
    rec = records["calls alert()"]
    assert rec["reward"] == 1.0
    dialogs = [d for d in rec["diagnostics"] if d["kind"] == "dialog"]
    assert dialogs and "count is 1" in dialogs[0]["message"]


def test_popup_is_blocked(records):
    rec = records["opens a popup"]
    assert rec["reward"] == 1.0
    assert "popup_blocked" in kinds(rec)


def test_navigation_away_is_blocked(records):
    rec = records["navigates away on reset"]
    assert verdicts(rec)["reset"] == "pass"
    nav = [d for d in rec["diagnostics"] if d["kind"] == "navigation_blocked"]
    assert nav and nav[0]["url"] == "https://example.com/"


def test_file_urls_cannot_be_read(records):
    rec = records["reads a local file"]
    assert rec["rubrics"][0]["verdict"] == "pass"
    assert rec["reward"] == 1.0


def test_file_read_probe_sees_the_fetch_fail():
    # The same page, probed directly: the title proves the fetch was refused.
    html = [r for r in BASE.values()][0]["response"]
    task = parse_task({"id": "t", "prompt": "p", "rubrics": [
        {"id": "title", "text": "x", "kind": "initial", "importance": "core", "probe": {"steps": [
            {"wait_ms": 300}, {"save": "t", "eval": "() => document.title"},
            {"assert": "equal", "left": {"var": "t"}, "right": "blocked"}]}}]})
    row = {"task_id": "t", "response": html.replace(
        "let count = 0;", "fetch('file:///etc/hostname').then(r => r.text())"
        ".then(t => { document.title = 'read ' + t.length; })"
        ".catch(() => { document.title = 'blocked'; });\nlet count = 0;")}
    (rec,) = asyncio.run(score_rows_async([row], {"t": task}, CFG))
    assert rec["rubrics"][0]["verdict"] == "pass", rec["rubrics"][0]["message"]


def test_hang_in_a_handler_is_bounded(records):
    rec = records["hangs on reset click"]
    v = {r["id"]: r for r in rec["rubrics"]}
    assert v["reset"]["verdict"] == "fail" and v["reset"]["severity"] == "severe"
    assert v["increment"]["verdict"] == "pass"
    assert v["reset"]["duration_ms"] < 12000 + 5000


def test_unknown_step_is_an_error_not_a_failure(records):
    rec = records["probe errors"]
    v = {r["id"]: r for r in rec["rubrics"]}
    assert v["unknown-step"]["verdict"] == "error"
    assert v["unknown-step"]["failed_step"] == 1
    assert v["unknown-step"]["error_source"] == "probe"
    assert v["bad-selector"]["verdict"] == "error"
    assert v["ok"]["verdict"] == "pass"
    # Errors are the probe's fault and cost the response nothing.
    assert rec["reward"] == 1.0 and rec["status"] == "ok"


def test_checked_expectations_and_their_negation():
    html = ("```html\n<html><body><input id=a type=checkbox checked><input id=b type=checkbox>"
            "</body></html>\n```")
    steps = [{"expect": "checked", "locator": "#a"}, {"expect": "checked", "locator": "#b", "not": True},
             {"expect": "checked", "locator": "#b", "value": False},
             {"expect": "checked", "locator": "#a", "value": False, "not": True}]
    task = parse_task({"id": "c", "prompt": "p", "rubrics": [
        {"id": "ok", "text": "x", "kind": "initial", "importance": "core",
         "probe": {"steps": steps, "timeout_ms": 2000}},
        {"id": "wrong", "text": "x", "kind": "initial", "importance": "behavior",
         "probe": {"steps": [{"expect": "checked", "locator": "#b"}], "timeout_ms": 1000}}]})
    (rec,) = asyncio.run(score_rows_async([{"task_id": "c", "response": html}], {"c": task}, CFG))
    assert verdicts(rec) == {"ok": "pass", "wrong": "fail"}, rec["rubrics"]


def _score_with(rows, tasks, cfg=CFG):
    """(records, pages the browser served) for rows scored with a worker of our own."""
    async def run():
        worker = await BrowserWorker(cfg.browser, make_mirror(cfg)).start()
        try:
            return await score_rows_async(rows, tasks, cfg, worker=worker), worker.pages_served
        finally:
            await worker.close()
    return asyncio.run(run())


def test_runtime_gate_is_decided_on_the_first_probes_page():
    # Six probes, six pages: gate E no longer loads the app on a page of its own.
    (rec,), pages = _score_with([BASE["correct"]], TASKS)
    assert (rec["reward"], rec["gate"]) == (1.0, None)
    assert pages == 6
    # A load-time exception fails the gate on that page and no other page is opened.
    (rec,), pages = _score_with([BASE["throws on load"]], TASKS)
    assert (rec["reward"], rec["gate"]) == (0.1, "runtime")
    assert pages == 1
    assert all(v["verdict"] == "fail" and v.get("ran") is False
               for v in rec["rubrics"] if v["id"] != "looks-clean")
    (fail,) = [d for d in rec["diagnostics"] if d["kind"] == "runtime_failure"]
    assert fail["message"].startswith("uncaught exception during load: uncaught TypeError")


def test_runtime_gate_without_probes_gets_a_page_of_its_own():
    task = parse_task({"id": "judge-only", "prompt": "p", "rubrics": [
        {"id": "looks", "text": "x", "kind": "initial", "importance": "rendering", "probe": None}]})
    rows = [{"task_id": "judge-only", "model": m, "response": BASE[m]["response"]}
            for m in ("correct", "throws on load")]
    (ok, throws), pages = _score_with(rows, {"judge-only": task})
    assert pages == 2
    assert (ok["reward"], ok["gate"]) == (1.0, None)
    assert (throws["reward"], throws["gate"]) == (0.1, "runtime")
    assert [v["verdict"] for v in ok["rubrics"]] == ["unjudged"]


def test_probes_still_run_after_a_failed_gate_when_asked():
    cfg = dataclasses.replace(CFG, run_rubrics_after_gate_failure=True)
    (rec,), pages = _score_with([BASE["throws on load"]], TASKS, cfg)
    assert (rec["reward"], rec["gate"]) == (0.1, "runtime")
    assert pages == 6
    # The gate's page went on to run its probe: every probe has a verdict of its own.
    assert all(v.get("ran", True) for v in rec["rubrics"])
    assert verdicts(rec)["title"] == "pass"
