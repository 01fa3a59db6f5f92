"""The typed diagnostic contract (evaluators.contract): V8 reports taken apart, records of
version 1 read as version 2, bad diagnostics named, the generated schema up to date, and no
reader of diagnostics that branches on their prose."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import jsonschema
import pytest

from evaluators.contract import (SCHEMA_PATH, Diagnostic, JsException, Reason, main,
                                 read_record)

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name,message,want", [
    ("TypeError", "Cannot read properties of null (reading 'value')",
     {"null_read": True, "read_property": "value", "null_name": None, "undefined_item": None}),
    ("TypeError", "Cannot set properties of undefined (setting 'x')",
     {"null_read": True, "read_property": "x", "undefined_item": "x"}),
    ("TypeError", "Cannot set properties of null (setting 'x')", {"undefined_item": None}),
    ("TypeError", "Cannot read properties of undefined (reading '0')",
     {"null_read": True, "undefined_item": "0"}),
    ("TypeError", "el is null", {"null_read": True, "null_name": "el", "read_property": None}),
    ("ReferenceError", "rendr is not defined", {"unbound_name": "rendr", "null_read": False}),
    ("TypeError", "canvas.getContext is not a function", {"unbound_name": "canvas.getContext"}),
    ("RangeError", "Maximum call stack size exceeded", {"stack_overflow": True}),
    ("Error", "Uncaught 7", {"unbound_name": None, "stack_overflow": False}),
    ("TypeError", "Failed to execute 'addEventListener' on 'EventTarget': parameter 2 is not of "
     "type 'Object'.", {"rejected_call": "addEventListener", "null_read": False}),
    ("TypeError", "Cannot read properties of null (reading 'x')", {"rejected_call": None}),
    ("TypeError", "Cannot destructure property 'timeArray' of 'calculateModel(...)' as it is "
     "undefined.", {"destructured": "calculateModel(...)"}),
    ("TypeError", "Cannot destructure 'opts' as it is null.", {"destructured": "opts"}),
    ("TypeError", "Cannot read properties of null (reading 'x')", {"destructured": None}),
])
def test_v8_reports_are_taken_apart(name, message, want):
    exc = JsException.from_report(name, message)
    assert {k: getattr(exc, k) for k in want} == want


def test_an_exception_reads_back_what_it_writes():
    exc = JsException.from_report("TypeError", "Cannot read properties of null (reading 'x')")
    assert exc.to_json()["thrown"] == list(exc.thrown)
    assert JsException.from_json(exc.to_json()) == exc


def test_a_stackless_throw_names_its_value():
    assert "7" in JsException.from_report("Error", "Uncaught 7").thrown
    assert "too big" in JsException.from_report("Error", "too big").thrown


def test_diagnostics_reject_a_reason_or_field_of_another_kind():
    with pytest.raises(ValueError, match="'reason'.*'dialog'"):
        Diagnostic(kind="probe_failure", reason=Reason.DIALOG, stage="rubric",
                   severity="moderate", message="m", rubric_id="r")
    with pytest.raises(ValueError, match="'url'.*'no_app'"):
        Diagnostic(kind="no_app", reason=Reason.NO_APP, stage="format", severity="severe",
                   message="m", url="http://x")
    with pytest.raises(ValueError, match=r"diagnostics\[1\]: unknown field 'colour'"):
        read_record({"schema_version": 2, "diagnostics": [
            {"kind": "no_app", "reason": "no_app", "stage": "format", "severity": "severe",
             "message": "m", "rubric_id": None},
            {"kind": "no_app", "reason": "no_app", "stage": "format", "severity": "severe",
             "message": "m", "rubric_id": None, "colour": "red"}]})
    page = {"kind": "page_error", "reason": "uncaught_at_load", "stage": "runtime",
            "severity": "severe", "message": "m", "rubric_id": None}
    with pytest.raises(ValueError, match=r"diagnostics\[0\]: field 'exception': unknown "
                                         "field 'colour'"):
        read_record({"schema_version": 2, "diagnostics": [
            {**page, "exception": {"name": "Error", "message": "x", "colour": "red"}}]})
    with pytest.raises(ValueError, match=r"field 'exception': missing field 'message'"):
        read_record({"schema_version": 2, "diagnostics": [
            {**page, "exception": {"name": "Error"}}]})
    with pytest.raises(ValueError, match="'schema_version': unknown version 9"):
        read_record({"schema_version": 9, "diagnostics": []})


def _v1_record() -> dict:
    """A version-1 record as the evaluator wrote it before the contract (no reasons)."""
    thrown = {"kind": "page_error", "stage": "runtime", "severity": "severe", "rubric_id": None,
              "message": "uncaught TypeError: Cannot read properties of null (reading 'x')",
              "step_index": None, "interaction_index": None, "frames": [], "excerpt": None}
    return {
        "task_id": "t", "response": "r", "reward": 0.1, "gate": "runtime", "status": "ok",
        "schema_version": 1, "diagnostics": [
            {"kind": "runtime_failure", "stage": "runtime", "severity": "severe",
             "rubric_id": None, "message": "uncaught exception during load: "
                                           + thrown["message"]},
            thrown,
            {"kind": "probe_failure", "stage": "rubric", "severity": "severe", "rubric_id": "r",
             "message": "no element matches #a: the probe timed out after 8000 ms waiting for it",
             "step_index": 0, "step": {"expect": "visible", "locator": "#a"}, "locator": "#a",
             "selector": "#a", "expected": None, "actual": None, "after_action": None},
            {"kind": "probe_failure", "stage": "rubric", "severity": "moderate", "rubric_id": "q",
             "message": "assert eq failed", "step_index": 2, "step": {"assert": "eq"},
             "locator": None, "selector": None, "expected": "1", "actual": "0",
             "after_action": None},
            {"kind": "dialog", "stage": "runtime", "severity": "info", "rubric_id": None,
             "message": "alert dialog answered: hi", "step_index": None}]}


def test_version_1_records_are_read_as_version_2():
    old = _v1_record()
    rec = read_record(old)
    assert old["schema_version"] == 1 and "reason" not in old["diagnostics"][0]  # not changed
    gate, thrown, missing, wrong, dialog = rec["diagnostics"]
    assert rec["schema_version"] == 2
    assert (gate["reason"], gate["caused_by"]) == ("uncaught_at_load", 1)
    assert thrown["reason"] == "uncaught_at_load"
    assert (thrown["exception"]["name"], thrown["exception"]["read_property"]) == ("TypeError", "x")
    assert (missing["reason"], missing["limit_ms"]) == ("missing_element", 8000.0)
    assert (wrong["reason"], "limit_ms" in wrong) == ("wrong_value", False)
    assert dialog["reason"] == "dialog"


def test_the_schema_is_generated_from_the_contract():
    assert main(["--check"]) == 0, "run python -m evaluators.contract"
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    props = schema["$defs"]["diagnostic"]["properties"]
    assert props["reason"]["enum"] == [r.value for r in Reason]


def test_upgraded_records_validate_against_the_current_schema():
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    rec = read_record(_v1_record())
    rec.update(rubrics=[], rubric_counts={"pass": 0, "fail": 0, "error": 0, "unjudged": 0},
               extraction={"start": 0, "end": 1, "method": "fenced"}, attempts=1,
               timings={"format_ms": 0.1, "source_ms": 1.0, "runtime_ms": 1.0, "rubrics_ms": 1.0,
                        "total_ms": 3.1})
    rec["rubrics"] = [
        {"id": i, "verdict": "fail", "importance": "core", "kind": "initial", "severity": "severe",
         "failed_step": 0, "message": "x", "duration_ms": 1.0, "runtime_error": False}
        for i in ("r", "q")]
    rec["rubric_counts"]["fail"] = 2
    problems = [f"{'/'.join(map(str, e.absolute_path))}: {e.message[:200]}"
                for e in jsonschema.Draft202012Validator(schema).iter_errors(rec)]
    assert problems == []


# Reads of a key "message" the localizer keeps: a syntax error's text as the why of its span
# (never compared), and the thrown exception's own message (the app's text, as text evidence).
_MESSAGE_READS_ALLOWED = {("evaluators/localize/spans_errors.py", "_syntax_error"),
                          ("evaluators/localize/spans_errors.py", "_page_error_text")}


def _message_reads(path: Path) -> set[tuple[str, str]]:
    """(file, function) of every use of the string "message" as a key."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = set()
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(fn):
            if isinstance(node, ast.Constant) and node.value == "message":
                out.add((path.relative_to(REPO).as_posix(), fn.name))
    return out


def test_no_reader_of_diagnostics_branches_on_their_message():
    files = sorted((REPO / "evaluators" / "localize").glob("*.py")) + [
        REPO / "benchmarks" / "localization.py"]
    found = set().union(*(_message_reads(p) for p in files))
    assert found <= _MESSAGE_READS_ALLOWED, found - _MESSAGE_READS_ALLOWED


_TEXT_TESTS = frozenset(("search", "match", "fullmatch", "findall", "finditer", "sub", "split",
                         "startswith", "endswith", "find", "index", "count", "partition"))


def _message_of(node) -> bool:
    """Whether ``node`` reads a diagnostic's message: ``x["message"]``, ``x.get("message")``."""
    if isinstance(node, ast.Subscript):
        key = node.slice
        return isinstance(key, ast.Constant) and key.value == "message"
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
        node.func.attr == "get" and bool(node.args) and \
        isinstance(node.args[0], ast.Constant) and node.args[0].value == "message"


def _message_matches(source: str) -> list[int]:
    """Lines that compare a message or match it with a regular expression or a str method."""
    out = []
    for node in ast.walk(ast.parse(source)):
        parts = []
        if isinstance(node, ast.Compare):
            parts = [node.left, *node.comparators]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in _TEXT_TESTS:
            parts = [node.func.value, *node.args]
        if any(_message_of(n) for p in parts for n in ast.walk(p)):
            out.append(node.lineno)
    return out


def test_no_localizer_or_benchmark_matches_message_text():
    files = sorted((REPO / "evaluators" / "localize").glob("*.py")) + sorted(
        (REPO / "benchmarks").glob("*.py"))
    found = {p.relative_to(REPO).as_posix(): _message_matches(p.read_text(encoding="utf-8"))
             for p in files}
    assert {k: v for k, v in found.items() if v} == {}
    # The check sees each form of a match on the message.
    bad = ('import re\nif re.search("hang", d["message"]): pass\n'
           'if d.get("message") == "x": pass\n'
           'if d.get("message", "").startswith("uncaught"): pass\n'
           'if "no element" in d["message"]: pass\n'
           'why = d.get("message")\n')
    assert _message_matches(bad) == [2, 3, 4, 5]


def test_exception_names_drop_the_report_prefix():
    from evaluators.contract import JsException, exception_name

    assert exception_name("Uncaught TypeError") == "TypeError"
    assert exception_name("Uncaught (in promise) RangeError") == "RangeError"
    assert exception_name("ReferenceError") == "ReferenceError"
    assert exception_name(None) == exception_name("") == "Error"
    assert JsException.from_report("Uncaught TypeError", "e.f is not a function").name == \
        "TypeError"


def test_an_exception_written_before_a_field_existed_reads_it_from_its_message():
    report = "Failed to execute 'appendChild' on 'Node': parameter 1 is not of type 'Node'."
    new = JsException.from_report("TypeError", report).to_json()
    old = {k: v for k, v in new.items() if k != "rejected_call"}
    assert JsException.from_json(old) == JsException.from_json(new)
    assert JsException.from_json(old).rejected_call == "appendChild"
    # What a record holds is kept as written, never recomputed over.
    assert JsException.from_json({**new, "rejected_call": None}).rejected_call is None


def test_a_field_read_more_widely_now_is_taken_from_the_message_where_a_record_has_null():
    # `undefined_item` once took only reads: a record's null for a write is read as the
    # evaluator reads the report now; a value it holds is kept.
    new = JsException.from_report("TypeError", "Cannot set properties of undefined (setting 'g')")
    assert JsException.from_json({**new.to_json(), "undefined_item": None}).undefined_item == "g"
    assert JsException.from_json({**new.to_json(), "undefined_item": "h"}).undefined_item == "h"


def test_a_value_that_cannot_be_iterated_is_told_apart_for_old_records_too():
    report = "undefined is not iterable (cannot read property Symbol(Symbol.iterator))"
    new = JsException.from_report("TypeError", report).to_json()
    assert new["not_iterable"] and not new["null_read"]
    old = {k: v for k, v in new.items() if k != "not_iterable"}
    assert JsException.from_json(old).not_iterable
    assert not JsException.from_report("TypeError", "x is not a function").not_iterable
