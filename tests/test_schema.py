"""The output record of `python -m evaluators score` against its JSON Schema.

evaluators/schema/result.schema.json is an interface: localization and
training code read these records. These tests check that the schema is a valid
draft 2020-12 schema, that records the real evaluator produces validate (and
hold the invariants a schema cannot express: counts, offsets), and that
records which break the contract are rejected.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import json
from pathlib import Path

import jsonschema
import pytest

from evaluators.config import EvalConfig
from evaluators.checks.extract import extract_app
from evaluators.checks.score import SCHEMA_VERSION, error_record
from evaluators.tasks import load_responses, load_tasks, parse_task

REPO_ROOT = Path(__file__).resolve().parents[1]
SCHEMA_PATH = REPO_ROOT / "evaluators" / "schema" / "result.schema.json"
EXAMPLES = REPO_ROOT / "evaluators" / "examples"
SCORING_FIELDS = {"reward", "gate", "status", "error", "rubrics", "rubric_counts", "diagnostics",
                  "extraction", "timings", "schema_version", "attempts"}


@pytest.fixture(scope="module")
def schema() -> dict:
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def validator(schema) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(schema)


def _problems(validator, rec: dict) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path)) or '<record>'}: {e.message[:300]}"
            for e in validator.iter_errors(rec)]


def _invariants(rec: dict, row: dict, task=None) -> list[str]:
    """What the schema cannot say: counts, ids, offsets and input fields agree."""
    out = []
    for k, v in row.items():
        if k not in SCORING_FIELDS and rec.get(k) != v:
            out.append(f"input field {k!r} not kept")
    faults = rec.get("faults") or []
    if [f["attempt"] for f in faults] != list(range(1, len(faults) + 1)):
        out.append(f"faults {faults} are not numbered 1, 2, ... in order")
    if rec["status"] == "ok" and len(faults) != rec["attempts"] - 1:
        out.append(f"{rec['attempts']} attempts but {len(faults)} faults: every retry says why")
    verdicts = [r["verdict"] for r in rec["rubrics"]]
    counts = {v: verdicts.count(v) for v in ("pass", "fail", "error", "unjudged")}
    if rec["rubric_counts"] != counts:
        out.append(f"rubric_counts {rec['rubric_counts']} != counted {counts}")
    ids = [r["id"] for r in rec["rubrics"]]
    if task is not None and ids != [r.id for r in task.rubrics]:
        out.append(f"rubric ids {ids} are not the task's, in order")
    for d in rec["diagnostics"]:
        if d.get("rubric_id") is not None and d["rubric_id"] not in ids:
            out.append(f"diagnostic names unknown rubric {d['rubric_id']!r}")
    response = rec["response"]
    ext = rec["extraction"]
    if ext is not None:
        found = extract_app(response)
        if found is None or (found.start, found.end, found.method) != (ext["start"], ext["end"], ext["method"]):
            out.append(f"extraction {ext} does not match extract_app")
        lo, hi = ext["start"], ext["end"]
        if not 0 <= lo <= hi <= len(response):
            out.append(f"extraction [{lo}, {hi}) outside the response")
        for d in rec["diagnostics"]:
            if d["kind"] == "syntax_error" and not lo <= d["span"][0] <= d["span"][1] <= hi:
                out.append(f"span {d['span']} outside the extracted code")
            for f in d.get("frames", []):
                if f["offset"] is not None and not lo <= f["offset"] <= hi:
                    out.append(f"frame offset {f['offset']} outside the extracted code")
            for f in (d.get("coverage") or {}).get("functions", []):
                if not lo <= f["start"] <= f["end"] <= hi:
                    out.append(f"covered function [{f['start']}, {f['end']}) outside the extracted code")
            for s, e in (d.get("coverage") or {}).get("skipped", []):
                if not lo <= s <= e <= hi:
                    out.append(f"skipped block [{s}, {e}) outside the extracted code")
            top = next((f for f in d.get("frames", []) if f["offset"] is not None), None)
            if top is not None:
                code_off = top["offset"] - lo
                code = response[lo:hi]
                line_start = code.rfind("\n", 0, code_off) + 1
                line_end = code.find("\n", code_off)
                line = code[line_start:line_end if line_end >= 0 else None].strip()[:300]
                if d["excerpt"] != line:
                    out.append(f"excerpt {d['excerpt']!r} is not the line at offset {top['offset']}")
    if rec["status"] == "ok" and rec["gate"] is None and rec["reward"] == 0:
        out.append("all gates passed but reward is 0")
    return out


# --- (a) the schema itself ------------------------------------------------------------------


def test_schema_is_valid_draft_2020_12(schema):
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["properties"]["schema_version"] == {"const": SCHEMA_VERSION}
    assert schema["additionalProperties"] is True


# --- (b) records of the real evaluator ------------------------------------------------------


@pytest.fixture(scope="module")
def example_task():
    return load_tasks(EXAMPLES / "tasks.jsonl")["examples/counter"]


def test_error_record_validates(validator, example_task):
    row = {"task_id": example_task.id, "response": "```html\n<p>hi</p>\n```", "model": "m", "n": 3}
    for task, extra in ((example_task, {"attempts": 2}), (None, {"attempts": 0})):
        rec = {**row, **error_record(task, "evaluator fault: the browser died" * 200), **extra}
        assert _problems(validator, rec) == []
        assert _invariants(rec, row, task) == []
        assert rec["reward"] is None and rec["status"] == "error"


BROKEN_APP_EXTRAS = """
<a id="nav" href="https://example.org/elsewhere">away</a>
<button id="boom">boom</button>
<button id="ask">ask</button>
<script>
document.getElementById('boom').addEventListener('click', () => { undefinedFunction(); });
document.getElementById('ask').addEventListener('click', () => { alert('hello'); });
window.open('https://example.org/popup');
</script>
</body>"""

EXTRA_RUBRICS = [
    {"id": "malformed", "text": "a probe with an unknown step", "kind": "initial",
     "importance": "behavior", "probe": {"steps": [{"frobnicate": "#inc"}]}},
    {"id": "navigates", "text": "the link stays on the page", "kind": "dynamic",
     "importance": "behavior", "probe": {"steps": [{"do": "click", "locator": "#nav"},
                                                   {"expect": "visible", "locator": "h1"}],
                                         "timeout_ms": 2000}},
    {"id": "boom", "text": "boom does nothing harmful", "kind": "dynamic",
     "importance": "behavior", "probe": {"steps": [{"do": "click", "locator": "#boom"},
                                                   {"expect": "text", "locator": "#count",
                                                    "value": "0"}], "timeout_ms": 2000}},
    {"id": "ask", "text": "ask shows a dialog", "kind": "dynamic", "importance": "rendering",
     "probe": {"steps": [{"do": "click", "locator": "#ask"},
                         {"expect": "visible", "locator": "#absent"}], "timeout_ms": 1000}},
]


def _rows_and_tasks():
    tasks = load_tasks(EXAMPLES / "tasks.jsonl")
    rows = load_responses(EXAMPLES / "responses.jsonl", tasks)
    # A variant of the correct app: a CSS syntax error (minor, gate S passes),
    # a popup, a link away, a throwing and an alerting button; and a task with
    # a malformed probe, to reach more branches of the schema.
    base = tasks["examples/counter"]
    raw = copy.deepcopy(base.raw)
    raw["id"] = "schema-test/counter"
    raw["rubrics"] = raw["rubrics"][:2] + EXTRA_RUBRICS
    tasks[raw["id"]] = parse_task(raw)
    correct = next(r for r in rows if r.get("model") == "correct")["response"]
    variant = (correct.replace("</style>", "#3d-canvas { color: red; }\n</style>", 1)
               .replace("</body>", BROKEN_APP_EXTRAS, 1))
    assert variant != correct
    rows = rows + [
        {"task_id": raw["id"], "response": variant, "model": "schema-test variant", "extra": [1]},
        {"task_id": "no/such-task", "response": correct, "model": "unknown task"},
    ]
    return rows, tasks


def _score(cfg: EvalConfig, models: set[str] | None = None):
    from evaluators.fleet.pool import score_rows_async

    rows, tasks = _rows_and_tasks()
    if models is not None:
        rows = [r for r in rows if r["model"] in models]
    recs = asyncio.run(score_rows_async(rows, tasks, cfg))
    assert len(recs) == len(rows)
    return rows, tasks, recs


def _needs_chromium():
    if not Path(EvalConfig().browser.executable_path).exists():
        pytest.skip("no Chromium at the configured path")


@pytest.fixture(scope="module")
def default_records():
    """Records as `python -m evaluators score` writes them with its default config."""
    _needs_chromium()
    return _score(EvalConfig())


@pytest.fixture(scope="module")
def all_rubric_records():
    """Every probe run even after a gate failed, with limits generous enough for a loaded host."""
    _needs_chromium()
    cfg = EvalConfig()
    relaxed = {"hang_timeout_ms": 20_000, "liveness_timeout_ms": 20_000, "pages_per_worker": 4,
               "probe_time_limit_ms": 60_000}
    fields = {f.name for f in dataclasses.fields(cfg.browser)}
    browser = dataclasses.replace(cfg.browser, **{k: v for k, v in relaxed.items() if k in fields})
    # The bundled rows whose gates fail, where running every probe changes the record.
    models = {"JS syntax error", "throws on load", "click handler throws", "schema-test variant"}
    return _score(dataclasses.replace(cfg, browser=browser, run_rubrics_after_gate_failure=True),
                  models)


def _check_records(validator, scored) -> dict:
    rows, tasks, recs = scored
    problems = {}
    for row, rec in zip(rows, recs):
        found = _problems(validator, rec) + _invariants(rec, row, tasks.get(row["task_id"]))
        if found:
            problems[row.get("model")] = found
    assert problems == {}
    return {row["model"]: rec for row, rec in zip(rows, recs)}


def _diags(rec: dict, kind: str) -> list[dict]:
    return [d for d in rec["diagnostics"] if d["kind"] == kind]


@pytest.mark.browser
def test_default_records_validate(validator, default_records):
    by_model = _check_records(validator, default_records)
    # The outcomes that do not depend on timing: gates F and S, the unknown task.
    no_code = by_model["no code"]
    assert (no_code["gate"], no_code["reward"], no_code["extraction"]) == ("format", 0.0, None)
    assert [d["kind"] for d in no_code["diagnostics"]] == ["no_app"]
    assert all(r.get("ran") is False for r in no_code["rubrics"])
    syntax = by_model["JS syntax error"]
    assert syntax["gate"] == "source" and syntax["reward"] == 0.0
    (err,) = [d for d in _diags(syntax, "syntax_error") if d["lang"] == "javascript"]
    start, end = err["span"]
    assert syntax["response"][start:end] == ")"  # "unexpected ')'": response coordinates
    unknown = by_model["unknown task"]
    assert unknown["status"] == "error" and unknown["reward"] is None and unknown["rubrics"] == []
    # The typed contract: a gate failed by an exception names it, and V8's report is parsed.
    load = by_model["throws on load"]
    (gate,) = _diags(load, "runtime_failure")
    assert gate["reason"] == "uncaught_at_load"
    thrown = load["diagnostics"][gate["caused_by"]]
    assert (thrown["kind"], thrown["reason"]) == ("page_error", "uncaught_at_load")
    click = by_model["click handler throws"]
    errs = _diags(click, "page_error")
    assert errs and all(e["reason"] == "uncaught_in_step" for e in errs)
    err = errs[0]
    assert (err["exception"]["name"], err["exception"]["unbound_name"]) == (
        "ReferenceError", "renderCount")
    for rec in by_model.values():
        for d in rec["diagnostics"]:
            if "caused_by" in d:
                assert rec["diagnostics"][d["caused_by"]]["kind"] == "page_error"
    for model, rec in by_model.items():
        if model != "unknown task":
            assert rec["status"] == "ok", (model, rec.get("error"))


@pytest.mark.browser
def test_all_rubric_records_validate(validator, all_rubric_records):
    by_model = _check_records(validator, all_rubric_records)
    variant = by_model["schema-test variant"]
    css = _diags(variant, "syntax_error")
    assert css and all((d["lang"], d["severity"]) == ("css", "minor") for d in css)
    for d in css:
        assert variant["response"][d["span"][0]:d["span"][1]] in "#3d-canvas { color: red; }"
    malformed = next(r for r in variant["rubrics"] if r["id"] == "malformed")
    assert (malformed["verdict"], malformed["error_source"]) == ("error", "probe")
    # With every probe run, gate S failing no longer skips the probes.
    syntax = by_model["JS syntax error"]
    assert syntax["gate"] == "source" and not any("ran" in r for r in syntax["rubrics"])


# --- (c) records that break the contract ----------------------------------------------------


def _valid_record() -> dict:
    """A hand-made record using most kinds; it must validate for (c) to mean anything."""
    response = "Here:\n```html\n<html><script>let x = ;</script></html>\n```\n"
    rubric = {"id": "r1", "verdict": "fail", "importance": "core", "kind": "dynamic",
              "severity": "moderate", "failed_step": 1, "message": "expected 1", "duration_ms": 12.5,
              "runtime_error": False}
    step = {"expect": "text", "locator": "#count", "value": "1"}
    return {
        "task_id": "t", "response": response, "model": "input field", "reward": 0.7, "gate": None,
        "status": "ok",
        "rubrics": [
            rubric,
            {"id": "r2", "verdict": "pass", "importance": "behavior", "kind": "initial",
             "severity": None, "failed_step": None, "message": None, "duration_ms": 3.0,
             "runtime_error": False},
            {"id": "r3", "verdict": "unjudged", "importance": "rendering", "kind": "initial",
             "severity": None, "failed_step": None, "message": "no probe"},
            {"id": "r4", "verdict": "error", "importance": "rendering", "kind": "initial",
             "severity": None, "failed_step": 0, "message": "malformed probe: x",
             "error_source": "probe"},
        ],
        "rubric_counts": {"pass": 1, "fail": 1, "error": 1, "unjudged": 1},
        "diagnostics": [
            {"kind": "syntax_error", "reason": "source_error", "stage": "source", "severity": "minor", "message": "css", "rubric_id": None,
             "lang": "css", "span": [20, 21]},
            {"kind": "page_error", "reason": "uncaught_in_step", "stage": "rubric",
             "severity": "severe", "rubric_id": "r1",
             "message": "uncaught TypeError: x", "step_index": 1, "interaction_index": 0,
             "exception": {"name": "TypeError", "message": "x", "null_read": False,
                           "read_property": None, "null_name": None, "undefined_item": None,
                           "unbound_name": None, "stack_overflow": False,
                           "rejected_call": None, "thrown": ["TypeError: x", "x"]},
             "frames": [{"function": "f", "url": "http://app.rcca.local/index.html", "line": 1,
                         "column": 15, "in_app": True, "offset": 28},
                        {"function": "<anonymous>", "url": "https://cdn.example/lib.js",
                         "line": 3, "column": 9, "in_app": False, "offset": None}],
             "excerpt": "<html><script>let x = ;</script></html>"},
            {"kind": "probe_failure", "reason": "wrong_value", "stage": "rubric",
             "severity": "moderate", "rubric_id": "r1",
             "message": "expected 1", "step_index": 1, "step": step, "locator": "#count",
             "selector": "#count", "expected": "1", "actual": "0",
             "after_action": {"step_index": 0, "step": {"do": "click", "locator": "#inc"},
                              "locator": "#inc", "selector": "#inc"},
             "coverage": {"functions": [{"name": "render", "start": 28, "end": 36, "count": 2}],
                          "since": "load"}},
            {"kind": "blocked_request", "reason": "refused_request", "stage": "runtime", "severity": "info", "rubric_id": None,
             "message": "blocked request: https://x.test/", "url": "https://x.test/",
             "resource_type": "fetch"},
            {"kind": "navigation_blocked", "reason": "refused_request", "stage": "rubric", "severity": "info", "rubric_id": "r1",
             "message": "navigation blocked: https://x.test/", "url": "https://x.test/"},
            {"kind": "cdn_fallback", "reason": "cdn_fallback", "stage": "runtime", "severity": "info", "rubric_id": None,
             "message": "cdn fallback: u", "url": "https://cdn.example/p@9/p.js", "package": "p",
             "requested": "9", "served": "1.0.0"},
            {"kind": "dialog", "reason": "dialog", "stage": "runtime", "severity": "info", "rubric_id": None,
             "message": "alert dialog answered: hi", "step_index": None},
            {"kind": "popup_blocked", "reason": "refused_request", "stage": "rubric", "severity": "info", "rubric_id": "r1",
             "message": "window.open blocked: about:blank", "url": "about:blank"},
        ],
        "extraction": {"start": 14, "end": 53, "method": "fenced"},
        "timings": {"format_ms": 0.1, "source_ms": 1.0, "runtime_ms": 300.0, "rubrics_ms": 900.0,
                    "total_ms": 1201.2},
        "schema_version": 2, "attempts": 2,
        "faults": [{"attempt": 1, "message": "evaluator fault: the browser died"}],
    }


def _gated_record(gate: str = "runtime") -> dict:
    rec = _valid_record()
    rec["gate"] = gate
    rec["reward"] = 0.1
    rec["rubrics"] = [{**{k: r[k] for k in ("id", "importance", "kind")},
                       "verdict": "unjudged" if r["id"] == "r3" else "fail", "severity": None,
                       "failed_step": None, "message": f"not run: the {gate} gate failed", "ran": False}
                      for r in rec["rubrics"]]
    rec["rubric_counts"] = {"pass": 0, "fail": 3, "error": 0, "unjudged": 1}
    rec["diagnostics"] = [{"kind": "runtime_failure", "reason": "crash", "stage": "runtime",
                           "severity": "severe", "rubric_id": None,
                           "message": "the renderer crashed"}]
    return rec


def _error_record() -> dict:
    return {"task_id": "t", "response": "r", **error_record(None, "evaluator fault: x"), "attempts": 0}


def test_hand_made_records_are_valid(validator):
    for rec in (_valid_record(), _gated_record("runtime"), _error_record()):
        assert _problems(validator, rec) == []
    assert _invariants(_valid_record(), {"task_id": "t", "model": "input field"}) == []


def _diag(rec: dict, kind: str) -> dict:
    return next(d for d in rec["diagnostics"] if d["kind"] == kind)


def _set(path: str, value):
    def mutate(rec):
        *parents, last = path.split(".")
        obj = rec
        for p in parents:
            obj = obj[int(p)] if p.isdigit() else obj[p]
        obj[int(last) if last.isdigit() else last] = value
    return mutate


def _drop(path: str):
    def mutate(rec):
        *parents, last = path.split(".")
        obj = rec
        for p in parents:
            obj = obj[int(p)] if p.isdigit() else obj[p]
        del obj[last]
    return mutate


def _in_diag(kind: str, fn):
    return lambda rec: fn(_diag(rec, kind))


INVALID = {
    # top level
    "missing task_id": (_valid_record, _drop("task_id")),
    "missing diagnostics": (_valid_record, _drop("diagnostics")),
    "reward above 1": (_valid_record, _set("reward", 1.5)),
    "reward negative": (_valid_record, _set("reward", -0.1)),
    "reward null on status ok": (_valid_record, _set("reward", None)),
    "reward as a string": (_valid_record, _set("reward", "0.7")),
    "unknown gate": (_valid_record, _set("gate", "compile")),
    "unknown status": (_valid_record, _set("status", "skipped")),
    "schema_version 3": (_valid_record, _set("schema_version", 3)),
    "schema_version 1": (_valid_record, _set("schema_version", 1)),
    "without attempts": (_valid_record, _drop("attempts")),
    "attempts 0": (_valid_record, _set("attempts", 0)),
    "faults empty": (_valid_record, _set("faults", [])),
    "fault without its message": (_valid_record, _set("faults", [{"attempt": 1}])),
    "fault of attempt 0": (_valid_record, _set("faults", [{"attempt": 0, "message": "x"}])),
    "timing not a number": (_valid_record, _set("timings.total_ms", "1s")),
    "rubric_counts without unjudged": (_valid_record, _drop("rubric_counts.unjudged")),
    "extraction method guessed": (_valid_record, _set("extraction.method", "guessed")),
    "extraction without end": (_valid_record, _drop("extraction.end")),
    "gate null but a runtime_failure": (
        _gated_record, _set("gate", None)),
    "gate source without a severe syntax_error": (_gated_record, _set("gate", "source")),
    "gate format with an extraction": (
        _gated_record, lambda r: (r.update(gate="format"),
                                  r["diagnostics"].append({"kind": "no_app", "reason": "no_app",
                                                           "stage": "format",
                                                           "severity": "severe", "rubric_id": None,
                                                           "message": "no app"}))),
    # status error
    "status error without error": (_error_record, _drop("error")),
    "status error with a reward": (_error_record, _set("reward", 0.0)),
    "status error with a gate": (_error_record, _set("gate", "runtime")),
    "status error with diagnostics": (
        _error_record, _set("diagnostics", [{"kind": "runtime_failure", "reason": "crash",
                                             "stage": "runtime",
                                             "severity": "severe", "rubric_id": None,
                                             "message": "x"}])),
    "status error with a passing rubric": (
        _error_record, _set("rubrics", [_valid_record()["rubrics"][1]])),
    # rubrics
    "verdict maybe": (_valid_record, _set("rubrics.0.verdict", "maybe")),
    "rubric without id": (_valid_record, _drop("rubrics.0.id")),
    "rubric with an unknown field": (_valid_record, _set("rubrics.0.score", 1)),
    "importance critical": (_valid_record, _set("rubrics.0.importance", "critical")),
    "severity info on a rubric": (_valid_record, _set("rubrics.0.severity", "info")),
    "failed rubric that ran without severity": (_valid_record, _set("rubrics.0.severity", None)),
    "pass with a severity": (_valid_record, _set("rubrics.1.severity", "minor")),
    "pass without duration_ms": (_valid_record, _drop("rubrics.1.duration_ms")),
    "failed_step negative": (_valid_record, _set("rubrics.0.failed_step", -1)),
    "failed_step as a string": (_valid_record, _set("rubrics.0.failed_step", "1")),
    "error verdict without error_source": (_valid_record, _drop("rubrics.3.error_source")),
    "error_source on a pass": (_valid_record, _set("rubrics.1.error_source", "probe")),
    "error_source unknown": (_valid_record, _set("rubrics.3.error_source", "browser")),
    "decided_by unknown": (_valid_record, _set("rubrics.1.decided_by", "oracle")),
    "probe-decided pass without its duration": (
        _valid_record, lambda r: (_set("rubrics.1.decided_by", "probe")(r),
                                  _drop("rubrics.1.duration_ms")(r))),
    "judge verdict unknown": (_valid_record, _set("rubrics.1.judge", {"verdict": "maybe"})),
    "ran true": (_gated_record, _set("rubrics.0.ran", True)),
    "not-run rubric with a severity": (_gated_record, _set("rubrics.0.severity", "severe")),
    # diagnostics
    "unknown diagnostic kind": (_valid_record, _set("diagnostics.0.kind", "lint")),
    "diagnostic without message": (_valid_record, _drop("diagnostics.3.message")),
    "diagnostic without rubric_id": (_valid_record, _drop("diagnostics.3.rubric_id")),
    "diagnostic with an unknown field": (_valid_record, _set("diagnostics.3.note", "x")),
    "severity fatal": (_valid_record, _set("diagnostics.3.severity", "fatal")),
    "stage rubric without rubric_id": (_valid_record, _set("diagnostics.4.rubric_id", None)),
    "syntax_error without span": (_valid_record, _in_diag("syntax_error", lambda d: d.pop("span"))),
    "syntax_error without lang": (_valid_record, _in_diag("syntax_error", lambda d: d.pop("lang"))),
    "syntax_error span of three": (_valid_record, _set("diagnostics.0.span", [20, 21, 22])),
    "syntax_error span of one": (_valid_record, _set("diagnostics.0.span", [20])),
    "syntax_error span of floats": (_valid_record, _set("diagnostics.0.span", [20.5, 21])),
    "syntax_error lang python": (_valid_record, _set("diagnostics.0.lang", "python")),
    "javascript syntax_error that is minor": (_valid_record, _set("diagnostics.0.lang", "javascript")),
    "syntax_error at stage runtime": (_valid_record, _set("diagnostics.0.stage", "runtime")),
    "syntax_error with frames": (_valid_record, _set("diagnostics.0.frames", [])),
    "page_error without frames": (_valid_record, _in_diag("page_error", lambda d: d.pop("frames"))),
    "page_error without excerpt": (_valid_record, _in_diag("page_error", lambda d: d.pop("excerpt"))),
    "frame without in_app": (_valid_record, _in_diag("page_error", lambda d: d["frames"][0].pop("in_app"))),
    "frame offset as a string": (_valid_record, _set("diagnostics.1.frames.0.offset", "28")),
    "frame line 0": (_valid_record, _set("diagnostics.1.frames.0.line", 0)),
    "offset on a frame outside the app": (_valid_record, _set("diagnostics.1.frames.1.offset", 3)),
    "page_error at stage rubric without interaction": (
        _valid_record, _set("diagnostics.1.interaction_index", None)),
    "page_error at load with a rubric_id": (_valid_record, _set("diagnostics.1.stage", "runtime")),
    "probe_failure without after_action": (
        _valid_record, _in_diag("probe_failure", lambda d: d.pop("after_action"))),
    "probe_failure without expected": (
        _valid_record, _in_diag("probe_failure", lambda d: d.pop("expected"))),
    "probe_failure with severity info": (_valid_record, _set("diagnostics.2.severity", "info")),
    "coverage function without count": (
        _valid_record, _in_diag("probe_failure", lambda d: d["coverage"]["functions"][0].pop("count"))),
    "coverage as a list": (_valid_record, _set("diagnostics.2.coverage", [])),
    "after_action without step_index": (
        _valid_record, _in_diag("probe_failure", lambda d: d["after_action"].pop("step_index"))),
    "blocked_request without url": (_valid_record, _drop("diagnostics.3.url")),
    "blocked_request severity severe": (_valid_record, _set("diagnostics.3.severity", "severe")),
    "navigation_blocked without url": (_valid_record, _drop("diagnostics.4.url")),
    "cdn_fallback without served": (_valid_record, _drop("diagnostics.5.served")),
    "dialog at load with a rubric_id": (_valid_record, _set("diagnostics.6.rubric_id", "r1")),
    "dialog without step_index": (_valid_record, _drop("diagnostics.6.step_index")),
    "popup_blocked without url": (_valid_record, _drop("diagnostics.7.url")),
    "no_app with a rubric_id": (
        _gated_record, lambda r: r["diagnostics"].append(
            {"kind": "no_app", "reason": "no_app", "stage": "format", "severity": "severe",
             "rubric_id": "r1", "message": "no app"})),
    # the typed contract (evaluators.contract)
    "diagnostic without reason": (_valid_record, _drop("diagnostics.2.reason")),
    "reason of another kind": (_valid_record, _set("diagnostics.2.reason", "dialog")),
    "reason unknown": (_valid_record, _set("diagnostics.2.reason", "slow")),
    "page_error without exception": (_valid_record, _drop("diagnostics.1.exception")),
    "exception without unbound_name": (_valid_record, _drop("diagnostics.1.exception.unbound_name")),
    "caused_by as a string": (_gated_record, _set("diagnostics.0.caused_by", "0")),
}


@pytest.mark.parametrize("name", sorted(INVALID))
def test_invalid_record_is_rejected(validator, name):
    make, mutate = INVALID[name]
    rec = make()
    # The record must be valid before the mutation, or the test proves nothing.
    assert _problems(validator, rec) == []
    before = copy.deepcopy(rec)
    mutate(rec)
    assert rec != before, "the mutation changed nothing"
    assert _problems(validator, rec) != [], f"{name}: accepted"


def test_input_fields_are_allowed(validator):
    rec = {**_valid_record(), "prompt_tokens": [1, 2], "meta": {"anything": None}}
    assert _problems(validator, rec) == []


def test_documented_example_is_valid(validator):
    """The example in docs/result-record.md validates and its numbers are right."""
    from evaluators.config import RewardConfig
    from evaluators.checks.reward import gated_reward

    text = (REPO_ROOT / "docs" / "result-record.md").read_text(encoding="utf-8")
    block = text.split("## Example", 1)[1].split("```json\n", 1)[1].split("\n```", 1)[0]
    rec = json.loads(block)
    assert _problems(validator, rec) == []
    assert _invariants(rec, {"task_id": rec["task_id"], "model": rec["model"]}) == []
    assert rec["reward"] == round(gated_reward(rec["gate"], rec["rubrics"], RewardConfig()), 6)
