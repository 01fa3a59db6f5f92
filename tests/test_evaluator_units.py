"""Pure parts of the evaluator: extraction, source gate, offsets, task format, steps, reward."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from evaluators.config import BrowserConfig, RewardConfig
from evaluators.checks.extract import extract_app
from evaluators.checks.probes import StepFailure, compare
from evaluators.checks.reward import gated_reward, rubric_reward
from evaluators.checks.source import check_source, source_diagnostics
from evaluators.checks.steps import ProbeError, check_probe, eval_locators, js_string
from evaluators.tasks import FormatError, load_responses, load_tasks
from evaluators.checks.textindex import TextIndex

DOC = "<!DOCTYPE html>\n<html><body><p>hi</p></body></html>"


# --- gate F ------------------------------------------------------------------

def test_extract_last_html_block_with_offsets():
    text = f"First try:\n```html\n<p>old</p>\n```\nBetter:\n```html\n{DOC}\n```\nDone."
    ex = extract_app(text)
    assert ex.method == "fenced" and ex.code == DOC
    assert text[ex.start:ex.end] == DOC
    assert ex.to_response(3) == ex.start + 3


def test_extract_ignores_other_languages_and_accepts_bare_documents():
    text = f"```css\np {{}}\n```\nAnd the page: {DOC} thanks"
    ex = extract_app(text)
    assert ex.method == "raw" and ex.code == DOC and text[ex.start:ex.end] == DOC


def test_extract_unlabelled_fence_with_a_document_and_unclosed_fence():
    assert extract_app(f"```\n{DOC}\n```").code == DOC
    truncated = f"```html\n{DOC[:30]}"
    assert extract_app(truncated).code == DOC[:30]


def test_extract_none_without_an_app():
    assert extract_app("I cannot do that.") is None
    assert extract_app("```python\nprint(1)\n```") is None


# --- gate S --------------------------------------------------------------------

def test_source_accepts_valid_document_and_skips_non_js_scripts():
    code = ("<html><head><script type='x-shader/x-vertex'>void main() { gl_Position = vec4(1); }</script>"
            "<script src='x.js'>not js at all (</script>"
            "<style>p { color: red; }</style></head><body><script>let a = 1;</script></body></html>")
    blocks, issues = check_source(code)
    assert [b.lang for b in blocks] == ["css", "javascript"]
    assert issues == []


def test_syntax_error_span_in_response_coordinates_with_multibyte_text():
    # Non-ASCII text before the error: tree-sitter's byte offsets must become characters.
    code = "<html><body><p>π ≈ 3.14 🎉</p><script>\nconst x = (1 + ;\n</script></body></html>"
    response = "Voilà — ```html\n" + code + "\n```"
    ex = extract_app(response)
    (diag,) = source_diagnostics(ex)
    start, end = diag["span"]
    line = "const x = (1 + ;"
    line_at = response.index(line)
    # A byte-offset leak would shift the span by the 9 extra UTF-8 bytes before it.
    assert line_at <= start < end <= line_at + len(line)
    assert response[start:end] == "= (1 +"
    assert diag["lang"] == "javascript" and "line 2" in diag["message"]


def test_css_error_is_reported_with_its_span():
    code = "<html><head><style>#3d-canvas { width: 100%; }</style></head></html>"
    _, issues = check_source(code)
    assert issues and all(i.lang == "css" for i in issues)
    assert code[issues[0].start:issues[0].end] in code[code.index("#3d"):code.index("{")]


# --- offsets -------------------------------------------------------------------

def test_textindex_v8_columns_are_utf16_units():
    text = "ab\n😀x = 1;\nlast"
    idx = TextIndex(text)
    # '😀' is two UTF-16 units: column 3 (1-based) is the 'x'.
    assert text[idx.from_v8(2, 3)] == "x"
    assert idx.from_v8(1, 1) == 0
    assert idx.from_v8(3, 1) == text.index("last")
    assert idx.from_v8(9, 1) is None
    assert idx.byte_to_char(len("ab\n😀".encode())) == 4
    assert idx.utf16_to_char(idx.char_to_utf16(5)) == 5
    assert idx.line_col(text.index("x")) == (2, 2)


# --- task format ---------------------------------------------------------------

def _write(tmp_path, name, lines):
    p = tmp_path / name
    p.write_text("\n".join(json.dumps(x) if not isinstance(x, str) else x for x in lines) + "\n")
    return p


GOOD_TASK = {"id": "t1", "prompt": "p", "rubrics": [
    {"id": "r", "text": "t", "kind": "initial", "importance": "core", "probe": None}]}


@pytest.mark.parametrize("bad, field", [
    ({**GOOD_TASK, "prompt": 3}, "prompt"),
    ({**GOOD_TASK, "rubrics": [{**GOOD_TASK["rubrics"][0], "importance": "vital"}]}, "rubrics[0].importance"),
    ({**GOOD_TASK, "rubrics": [{**GOOD_TASK["rubrics"][0], "kind": None}]}, "rubrics[0].kind"),
    ({**GOOD_TASK, "rubrics": [{**GOOD_TASK["rubrics"][0], "probe": {"steps": 3}}]}, "rubrics[0].probe.steps"),
    ({**GOOD_TASK, "rubrics": GOOD_TASK["rubrics"] * 2}, "rubrics[1].id"),
    ({k: v for k, v in GOOD_TASK.items() if k != "id"}, "id"),
])
def test_malformed_task_names_file_line_and_field(tmp_path, bad, field):
    p = _write(tmp_path, "tasks.jsonl", [GOOD_TASK | {"id": "t0"}, bad])
    with pytest.raises(FormatError) as e:
        load_tasks(p)
    assert (e.value.path, e.value.line, e.value.field) == (str(p), 2, field)
    assert f"{p}:2: field '{field}'" in str(e.value)


def test_invalid_json_and_unknown_task(tmp_path):
    p = _write(tmp_path, "tasks.jsonl", [GOOD_TASK, "{oops"])
    with pytest.raises(FormatError, match=r":2: field '<line>': invalid JSON"):
        load_tasks(p)
    tasks = load_tasks(_write(tmp_path, "t2.jsonl", [GOOD_TASK]))
    r = _write(tmp_path, "r.jsonl", [{"task_id": "t1", "response": "x", "model": "m"},
                                     {"task_id": "nope", "response": "x"}])
    with pytest.raises(FormatError, match=r"r.jsonl:2: field 'task_id': unknown task 'nope'"):
        load_responses(r, tasks)
    r2 = _write(tmp_path, "r2.jsonl", [{"task_id": "t1"}])
    with pytest.raises(FormatError, match=r":1: field 'response': missing"):
        load_responses(r2, tasks)


@pytest.mark.parametrize("line, reason", [
    (b'{"id": "t1", "prompt": "\xff\xfe"}', "not UTF-8: byte 25 of the line is 0xff"),
    (b'{"id": NaN}', "NaN is not JSON"),
    (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
], ids=["bad-utf8", "nan", "deep"])
def test_unreadable_lines_are_rejected_with_their_number(tmp_path, line, reason):
    # Found by tests/test_fuzz_inputs.py: these raised UnicodeDecodeError or RecursionError
    # (the CLI crashed with a traceback) or were taken (NaN).
    p = tmp_path / "tasks.jsonl"
    p.write_bytes(json.dumps(GOOD_TASK).encode() + b"\n" + line + b"\n")
    with pytest.raises(FormatError) as e:
        load_tasks(p)
    assert (e.value.line, e.value.field) == (2, "<line>") and reason in e.value.reason


def test_unknown_keys_are_kept():
    from evaluators.tasks import parse_task
    t = parse_task({**GOOD_TASK, "future": 1})
    assert t.raw["future"] == 1


# --- probe steps ---------------------------------------------------------------

def _nested_retry(depth: int) -> dict:
    step: dict = {"wait_ms": 1}
    for _ in range(depth):
        step = {"retry": [step]}
    return step


@pytest.mark.parametrize("steps, index, words", [
    ([{"wait_ms": 10}, {"teleport": "#x"}], 1, "exactly one of"),
    ([{"do": "smash", "locator": "#x"}], 0, "unknown action"),
    ([{"expect": "text", "locator": "#x"}], 0, "needs a value"),
    ([{"expect": "text", "locator": "#x", "value": {"var": "later"}}, {"save": "later", "from": "#x", "read": "text"}], 0, "unknown var"),
    ([{"expect": "text", "locator": "#x", "value": {"regex": "("}}], 0, "bad regex"),
    ([{"save": "v", "from": "#x", "read": "smell"}], 0, "unknown read"),
    ([{"retry": [{"assert": "roughly", "left": 1, "right": 2}]}], 0, "unknown assertion"),
    ([{"do": "click", "locator": {"xpath": "//a"}}], 0, "unknown locator keys"),
    # Found by tests/test_fuzz_inputs.py: each once raised TypeError, RecursionError or a
    # ValueError at run time instead of naming the step.
    ([{"expect": "text", "locator": "#x", "value": {"var": ["x"]}}], 0, "unknown var"),
    ([{"mouse": "move", "at": {"box": "#a", "fx": "left"}}], 0, "fx: not a number"),
    ([{"assert": "close", "left": 1, "right": 2, "digits": "2"}], 0, "digits"),
    ([{"expect": "count", "locator": "#x", "value": "three"}], 0, "whole number"),
    ([{"wait_ms": float("nan")}], 0, "non-negative number"),
    ([{"retry": [{"wait_ms": 1}], "timeout_ms": -1}], 0, "timeout_ms"),
    ([_nested_retry(3000)], 0, "nested more than 16 deep"),
])
def test_malformed_probes_are_errors(steps, index, words):
    with pytest.raises(ProbeError) as e:
        check_probe({"steps": steps})
    assert e.value.step_index == index and words in str(e.value)


def test_every_shared_probe_is_well_formed(interactscience):
    tasks = load_tasks(interactscience / "tasks.jsonl")
    n = 0
    for task in tasks.values():
        for r in task.rubrics:
            if r.probe is not None:
                check_probe(r.probe)
                n += 1
    assert n == 686


def test_eval_locators_name_the_elements_an_evaluated_reading_looks_up():
    assert eval_locators("() => document.getElementById('plot-container')._fullData[0].y") == [
        "#plot-container"]
    assert eval_locators('() => (sel => document.querySelector(sel).data)("#velocity-plot")') == [
        "#velocity-plot"]
    assert eval_locators("() => (window.Plotly.d3.select('#top').node() || {}).data") == ["#top"]
    assert eval_locators("() => [document.getElementById('a'), document.querySelector('.b i')]"
                         ) == ["#a", ".b i"]
    # Strings that are not selectors, and sources that are not strings, name nothing.
    assert eval_locators("() => window.state.mode === 'lines' ? '#' : 'x'") == []
    assert eval_locators(None) == []


def test_compare_semantics():
    assert compare("close", 0.301, 0.3, 2) and not compare("close", 0.306, 0.3, 2)
    assert compare("not_close", 1.0, 2.0)
    assert compare("greater", "3", 2) and compare("less", 1, 1.5)
    assert compare("contains", "a = 0.15 m", 0.15) and compare("contains", ["x", "y"], "y")
    assert compare("truthy", []) and compare("falsy", "") and compare("falsy", 0)
    assert compare("not_equal", "png-a", "png-b") and compare("equal", {"x": 1}, {"x": 1})
    with pytest.raises(StepFailure):
        compare("greater", "abc", 1)
    assert js_string(5.0) == "5" and js_string(0.5) == "0.5" and js_string(True) == "true"


# --- reward --------------------------------------------------------------------

def _v(verdict, importance, severity=None):
    return {"verdict": verdict, "importance": importance, "severity": severity}


def test_reward_formula_floor_and_ceiling():
    cfg = RewardConfig()
    assert rubric_reward([_v("pass", "core")], cfg) == 1.0
    assert rubric_reward([_v("fail", "behavior", "moderate"), _v("fail", "rendering", "minor")],
                         cfg) == pytest.approx(1 - 0.15 - 0.03)
    # Unjudged and error rubrics cost nothing.
    assert rubric_reward([_v("unjudged", "core"), _v("error", "core")], cfg) == 1.0
    # Floor.
    assert rubric_reward([_v("fail", "behavior", "severe")] * 5, cfg) == 0.2
    # A badly broken core requirement caps the score even when the sum is small.
    assert rubric_reward([_v("fail", "core", "severe")], cfg) == 0.4
    assert rubric_reward([_v("fail", "core", "moderate")], cfg) == pytest.approx(0.7)


def test_gates():
    cfg = RewardConfig()
    ok = [_v("pass", "core")]
    assert gated_reward("format", ok, cfg) == 0.0
    assert gated_reward("source", ok, cfg) == 0.0
    assert gated_reward("runtime", ok, cfg) == 0.1
    assert gated_reward(None, ok, cfg) == 1.0


@pytest.mark.parametrize("field", ["page_reuse", "reset_timeout_ms", "pages_per_worker"])
def test_browser_config_rejects_non_positive_limits(field):
    with pytest.raises(ValueError, match=f"BrowserConfig.{field} must be at least 1"):
        BrowserConfig(**{field: 0})


def test_machine_fleet_follows_cpus_and_memory():
    from evaluators.config import MAX_PAGES_PER_WORKER, machine_fleet
    assert machine_fleet(cpus=2, memory_gib=22) == (2, MAX_PAGES_PER_WORKER)
    assert machine_fleet(cpus=16, memory_gib=128) == (16, MAX_PAGES_PER_WORKER)
    # Memory-bound: 6 GiB hold 8 pages, so 2 workers of 4, not 8 workers.
    assert machine_fleet(cpus=8, memory_gib=6) == (4, 2)
    assert machine_fleet(cpus=2, memory_gib=3) == (2, 2)
    assert machine_fleet(cpus=1, memory_gib=0.5) == (1, 2)
    workers, pages = machine_fleet()
    assert workers >= 1 and 2 <= pages <= MAX_PAGES_PER_WORKER


def test_keep_priority_wraps_the_browser_only_where_it_could_raise_its_priority(
        monkeypatch, tmp_path):
    from evaluators.sandbox import processes

    browser = tmp_path / "my chromium"
    browser.write_text("#!/bin/sh\n")
    browser.chmod(0o700)

    monkeypatch.setattr(processes, "effective_caps", lambda: 0)
    assert processes.keep_priority_executable("/usr/lib/chromium/chromium") == (
        "/usr/lib/chromium/chromium")
    monkeypatch.setattr(processes, "effective_caps", lambda: 1 << 23 | 1 << 8)
    if shutil.which("setpriv"):
        path = processes.keep_priority_executable(str(browser))
        script = open(path).read()
        assert "--bounding-set=-sys_nice" in script and f"'{browser}' \"$@\"" in script
        assert os.access(path, os.X_OK)
        # A missing browser is launched as named, so that the launch error names it.
        assert processes.keep_priority_executable("/nonexistent/chromium") == (
            "/nonexistent/chromium")
    # Without setpriv, or without CAP_SETPCAP, the browser starts as it is (a warning).
    monkeypatch.setattr(processes, "effective_caps", lambda: 1 << 23)
    assert processes.keep_priority_executable("/usr/lib/chromium/chromium") == (
        "/usr/lib/chromium/chromium")
    monkeypatch.setattr(processes, "effective_caps", lambda: 1 << 23 | 1 << 8)
    monkeypatch.setattr(processes.shutil, "which", lambda name: None)
    assert processes.keep_priority_executable("/usr/lib/chromium/chromium") == (
        "/usr/lib/chromium/chromium")
