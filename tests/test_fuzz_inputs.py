"""Property-based fuzzing of the browser-free input path (issue 17): 10,000 inputs in all.

- responses (random text and mutated real answers: bad UTF-8, surrogates, NULs, giant
  lines, unbalanced fences, deep nesting) through extraction, gate S and the scorer up to
  the browser, then the record writer: nothing raises, every record validates against
  the schema and reads back as written;
- records holding values JSON has no form for, through the writer;
- probe steps: `check_probe` accepts or raises ProbeError, nothing else;
- task and response files: every line is accepted or rejected with file, line and field.

The profile is derandomized (the same inputs in every run, as CI needs) and has no
deadline (timings on a shared 2-core machine are noise, not failures).
"""

from __future__ import annotations

import asyncio
import json
import math
import tempfile
from pathlib import Path

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evaluators.config import EvalConfig
from evaluators.checks.extract import extract_app
from evaluators.records import dumps_record
from evaluators.checks.score import score_with_retries
from evaluators.checks.source import Deadline, SourceTimeout, source_diagnostics
from evaluators.checks.steps import ProbeError, check_probe
from evaluators.tasks import FormatError, load_responses, load_tasks, parse_task
from evaluators.checks.textindex import scrub_surrogates
from tests.test_evaluator_browser import BASE, TASKS
from tests.test_schema import SCHEMA_PATH

settings.register_profile(
    "rcca-fuzz", deadline=None, derandomize=True, database=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                           HealthCheck.filter_too_much])
FUZZ = settings.get_profile("rcca-fuzz")
# 10,000 inputs in all: 5,000 + 2,000 + 2,000 + 1,000.
N_RESPONSES, N_RECORDS, N_PROBES, N_FILES = 5000, 2000, 2000, 1000
VALIDATOR = jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text(encoding="utf-8")))
TASK = TASKS["examples/counter"]
CFG = EvalConfig()
SEEDS = [r["response"] for r in BASE.values()]
# One loop for every example: a new loop (and its thread pool) per input would cost more
# than the input.
LOOP = asyncio.new_event_loop()

any_char = st.characters(codec=None, exclude_categories=())  # surrogates and NULs included
SNIPPETS = st.sampled_from([
    "```", "```html\n", "~~~\n", "\n```\n", "<script>", "</script>", "<style>", "</style>",
    "<!DOCTYPE html>", "<html>", "</html>", "<!--", "-->", "(", ")", "{", "}", "[", "`", "'",
    '"', "\\", "\x00", "\ud800", "\udfff", "\ufeff", "\ufffe", "\r\n", "\u2028", "😀", "é",
    "<script type=module>", "<script src=x.js>", "<div>" * 3000, "(" * 3000, "[" * 2000,
    "x" * 200_000, "\n" * 5000, "</script>" * 50, "```html\n" * 100,
])


@st.composite
def bad_utf8(draw) -> str:
    """Random bytes read as a decoder might have: lone surrogates or U+FFFD."""
    raw = draw(st.binary(max_size=200))
    return raw.decode("utf-8", draw(st.sampled_from(["surrogateescape", "replace", "ignore"])))


@st.composite
def mutated(draw) -> str:
    """A real response with snippets inserted, ranges deleted and bytes garbled."""
    text = draw(st.sampled_from(SEEDS))
    for _ in range(draw(st.integers(1, 6))):
        at = draw(st.integers(0, len(text)))
        op = draw(st.sampled_from(["insert", "insert", "delete", "garble"]))
        if op == "insert":
            text = text[:at] + draw(st.one_of(SNIPPETS, bad_utf8(), st.text(any_char, max_size=20))) \
                + text[at:]
        elif op == "delete":
            text = text[:at] + text[at + draw(st.integers(1, 400)):]
        else:
            text = text[:at] + draw(bad_utf8()) + text[at + 1:]
    return text


responses = st.one_of(
    st.text(any_char, max_size=300),
    st.builds(lambda a, b, c: a + b + c, st.text(any_char, max_size=50), SNIPPETS,
              st.text(any_char, max_size=50)),
    st.builds(lambda body: f"```html\n{body}\n```", st.text(any_char, max_size=300)),
    mutated(), mutated(), mutated(),
)


def _check_response(response: str) -> dict:
    ex = extract_app(response)
    if ex is not None:
        assert 0 <= ex.start <= ex.end <= len(response)
        assert ex.code == scrub_surrogates(response[ex.start:ex.end])
        try:
            for d in source_diagnostics(ex, Deadline.after(CFG.source_time_limit_ms / 1000)):
                assert ex.start <= d["span"][0] <= d["span"][1] <= ex.end, d
        except SourceTimeout:
            pass
    # The scorer up to the browser; without one (None), a response that passes gate S
    # becomes an evaluator error record, which must be valid too.
    row = {"task_id": TASK.id, "response": response, "n": 1}
    return LOOP.run_until_complete(score_with_retries(None, TASK, row, CFG))


def _check_written(rec: dict) -> None:
    line = dumps_record(rec)
    assert "\n" not in line
    line.encode("utf-8")  # strict UTF-8: raises on a raw surrogate
    back = json.loads(line, parse_constant=lambda c: pytest.fail(f"{c} written"))
    problems = [f"{'/'.join(map(str, e.absolute_path))}: {e.message[:200]}"
                for e in VALIDATOR.iter_errors(back)]
    assert problems == []
    assert back["response"] == rec["response"]


@settings(FUZZ, max_examples=N_RESPONSES)
@given(responses)
def test_any_response_gets_a_valid_record(response):
    rec = _check_response(response)
    assert rec["status"] in ("ok", "error")
    if rec["status"] == "ok":
        assert rec["gate"] in ("format", "source") and rec["reward"] == 0.0
    else:
        # Only the missing browser may fail, never the scorer on the response itself.
        assert "NoneType" in rec["error"], rec["error"][-600:]
    _check_written(rec)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(any_char),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(any_char, max_size=8),
                                                                 inner, max_size=4),
    max_leaves=30)


@settings(FUZZ, max_examples=N_RECORDS)
@given(extra=json_values, actual=json_values, depth=st.integers(0, 3000))
def test_the_writer_takes_any_record(extra, actual, depth):
    rec = LOOP.run_until_complete(score_with_retries(
        None, TASK, {"task_id": TASK.id, "response": "no app \ud800", "extra": extra}, CFG))
    nested = actual
    for _ in range(depth):
        nested = [nested]
    rec["diagnostics"][0]["actual"] = nested  # as a probe's reading of the app would be
    line = dumps_record(rec)
    line.encode("utf-8")
    back = json.loads(line, parse_constant=lambda c: pytest.fail(f"{c} written"))
    # Input fields come back as given, except values JSON cannot hold.
    if isinstance(extra, float) and not math.isfinite(extra):
        assert back["extra"] in ("NaN", "Infinity", "-Infinity")
    elif _finite(extra):
        assert back["extra"] == extra


def _finite(value) -> bool:
    try:
        json.dumps(value, allow_nan=False)
        return True
    except ValueError:
        return False


steps = st.recursive(
    st.dictionaries(st.sampled_from(["do", "mouse", "wait_ms", "save", "expect", "assert",
                                     "locator", "value", "from", "read", "eval", "at", "name",
                                     "left", "right", "digits", "not", "target", "steps",
                                     "teleport"]),
                    json_values | st.sampled_from(["click", "fill", "text", "#x", "move",
                                                   "count", "equal", "close"]),
                    max_size=5),
    lambda inner: st.builds(lambda s, t: {"retry": s, "timeout_ms": t},
                            st.lists(inner, max_size=3), json_values),
    max_leaves=10)
REAL_STEPS = [s for t in TASKS.values() for r in t.rubrics if r.probe for s in r.probe["steps"]]


@settings(FUZZ, max_examples=N_PROBES)
@given(st.lists(st.one_of(steps, st.sampled_from(REAL_STEPS), json_values), max_size=6),
       json_values, st.sampled_from([0, 0, 0, 1, 2, 15, 16, 17, 3000]))
def test_check_probe_accepts_or_names_the_step(step_list, timeout, depth):
    probe = {"steps": step_list, "timeout_ms": timeout if timeout is not None else 1000}
    for _ in range(depth):  # now and then retry blocks nested, up to thousands deep
        probe = {"steps": [{"retry": probe["steps"] or [{"wait_ms": 1}]}]}
    try:
        check_probe(probe)
    except ProbeError as e:
        assert e.step_index is None or 0 <= e.step_index < len(probe["steps"])


GOOD_LINE = json.dumps(json.loads((Path(__file__).resolve().parents[1] / "evaluators" /
                                   "examples" / "tasks.jsonl").read_text().splitlines()[0]))
lines = st.one_of(
    st.just(GOOD_LINE),
    st.builds(lambda at, junk: (GOOD_LINE[:at] + junk + GOOD_LINE[at:]).encode("utf-8",
                                                                              "surrogatepass"),
              st.integers(0, len(GOOD_LINE)), st.text(any_char, max_size=5)),
    st.builds(lambda at, n: GOOD_LINE[:at] + GOOD_LINE[at + n:], st.integers(0, len(GOOD_LINE)),
              st.integers(1, 50)),
    st.builds(lambda v: json.dumps(v, allow_nan=True), json_values),
    st.binary(max_size=80),
    st.just("[" * 100_000 + "]" * 100_000),
    st.just('{"id": NaN}'),
)
TMP = Path(tempfile.mkdtemp(prefix="rcca-fuzz-"))


@settings(FUZZ, max_examples=N_FILES)
@given(st.lists(lines, min_size=1, max_size=4))
def test_task_and_response_files_are_read_or_rejected_by_line(file_lines):
    raw = [x if isinstance(x, bytes) else x.encode("utf-8", "surrogatepass") for x in file_lines]
    path = TMP / "tasks.jsonl"
    path.write_bytes(b"\n".join(r.replace(b"\n", b" ") for r in raw) + b"\n")
    for load in (load_tasks, load_responses):
        try:
            load(path)
        except FormatError as e:
            assert e.path == str(path) and 1 <= e.line <= len(raw) and e.field and e.reason
            assert str(e).startswith(f"{path}:{e.line}: field '{e.field}': ")


def test_the_reader_keeps_a_good_task_whole():
    # The control for the rejections above: the good line itself parses to the task.
    path = TMP / "one.jsonl"
    path.write_text(GOOD_LINE + "\n", encoding="utf-8")
    assert load_tasks(path)["examples/counter"] == parse_task(json.loads(GOOD_LINE))
