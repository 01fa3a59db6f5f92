"""Rubric-to-code localization on a hand-written app: exact S_dir / S_ctx per diagnostic kind.

Diagnostics are written by hand in the evaluator's format; expected spans are computed with
``str.index`` on the response, so every offset is exact.
"""

from __future__ import annotations

import pytest

from evaluators.checks.extract import extract_app
from evaluators.localize.graph import build_graph
from evaluators.localize.spans import (
    METHODS, localize, merge_spans, ran_functions, similar_names, spans_from_text_evidence,
    subtract_spans,
)
from evaluators.checks.source import source_diagnostics
from tests.localize.diags import exception

APP = """Here is the app.

```html
<!DOCTYPE html>
<html>
<head>
<style>
#out { color: black; }
.hidden { display: none; }
.positive { color: green; }
</style>
</head>
<body>
<div id="panel" class="hidden"><span id="out">0</span></div>
<p id="score-display">-</p>
<button id="inc">+</button>
<button id="reset">Reset</button>
<button id="toggle">Toggle</button>
<script>
let count = 0;
let step = 1;
const out = document.getElementById('out');
const panel = document.getElementById('panel');
function render() {
  out.textContent = count;
  out.classList.toggle('positive', count > 0);
}
function onInc() {
  count += step;
  render();
}
function onReset() {
  count = 0;
  out.textContent = '0';
}
document.getElementById('inc').addEventListener('click', onInc);
document.getElementById('reset').addEventListener('click', onReset);
document.getElementById('toggle').addEventListener('click', () => {
  panel.classList.toggle('hidden');
});
const label = document.getElementById('scoreDisplay');
function show(data) {
  label.textContent = data.value;
}
function refresh() {
  show({ value: count });
}
</script>
</body>
</html>
```
"""


def span(sub: str, nth: int = 0, text: str = APP) -> tuple[int, int]:
    """Span of the nth occurrence of ``sub``."""
    start = -1
    for _ in range(nth + 1):
        start = text.index(sub, start + 1)
    return start, start + len(sub)


def function(name: str) -> tuple[int, int]:
    start = APP.index(f"function {name}(")
    return start, APP.index("\n}", start) + 2


@pytest.fixture(scope="module")
def g():
    ext = extract_app(APP)
    return build_graph(APP, (ext.start, ext.end))


def probe_failure(step: dict, action: dict | None = None, **kw) -> dict:
    """A probe_failure diagnostic as ``score._failure_diagnostic`` writes it."""
    after = None if action is None else {
        "step_index": 0, "step": action, "locator": action.get("locator"),
        "selector": action.get("locator")}
    loc = step.get("locator", step.get("from"))
    return {"kind": "probe_failure", "reason": kw.get("reason", "wrong_value"), "stage": "rubric",
            "severity": kw.get("severity", "moderate"),
            "rubric_id": "r", "message": kw.get("message", "expect failed"), "step_index": 1,
            "step": step, "locator": loc, "selector": loc, "expected": step.get("value"),
            "actual": kw.get("actual", "x"), "after_action": after,
            "coverage": kw.get("coverage")}


CLICK_INC = {"do": "click", "locator": "#inc"}
TEXT_AFTER_INC = probe_failure({"expect": "text", "locator": "#out", "value": "1"}, CLICK_INC)
INC_BINDING = "document.getElementById('inc').addEventListener('click', onInc)"


def test_failed_text_after_action_text_method(g):
    loc = localize(g, TEXT_AFTER_INC, "text")
    assert loc.s_dir == tuple(merge_spans([
        span("out.textContent = count;"), span("out.textContent = '0';"),  # writers of #out
        function("onInc"), span(INC_BINDING)]))  # the handler bound to #inc, and its binding
    ctx = merge_spans([
        function("render"), function("onReset"),  # functions writing #out
        span('<span id="out">0</span>'), span('<button id="inc">+</button>'),  # X and Y
        span("count = 0"), span("step = 1"), span("out = document.getElementById('out')"),
        span("count = 0;", 1),  # state the blamed functions use, and its other writes
        span(INC_BINDING + ";"),  # where the blamed functions are called or passed
        span("document.getElementById('reset').addEventListener('click', onReset);"),
    ])
    assert loc.s_ctx == tuple(subtract_spans(ctx, loc.s_dir))
    whys = {(e["set"], tuple(e["span"])): e["why"] for e in loc.evidence}
    assert whys[("dir", function("onInc"))] == "handler bound to #inc (listener 'click')"
    assert whys[("dir", span("out.textContent = count;"))] == "writes textContent of #out"


def test_coverage_narrows_and_extends_direct_set(g):
    cover = {"functions": [
        {"name": "onInc", "start": function("onInc")[0], "end": function("onInc")[1], "count": 1},
        {"name": "render", "start": function("render")[0] + 9, "end": function("render")[1],
         "count": 2}]}
    assert ran_functions(g, cover) == {g.functions_named("onInc")[0].index,
                                       g.functions_named("render")[0].index}
    diag = {**TEXT_AFTER_INC, "coverage": cover}
    loc = localize(g, diag, "grounded")
    # onReset's write did not run: it moves to the context; render ran and writes #out, and
    # the statements whose values reach the write join (short functions stay whole).
    assert loc.s_dir == tuple(merge_spans([
        function("render"), function("onInc"), span(INC_BINDING), span("let count = 0;"),
        span("let step = 1;"), span("const out = document.getElementById('out');")]))
    assert span("out.textContent = '0';")[0] in {s for s, _ in loc.s_ctx} or any(
        s <= span("out.textContent = '0';")[0] < e for s, e in loc.s_ctx)
    moved = [e for e in loc.evidence if e["span"] == list(span("out.textContent = '0';"))]
    assert moved[0]["set"] == "ctx" and moved[0]["by"] == "coverage"
    assert "did not run" in moved[0]["why"]
    # Without coverage, grounded is the text method.
    assert localize(g, TEXT_AFTER_INC, "grounded") == localize(g, TEXT_AFTER_INC, "text")


def test_coverage_where_nothing_direct_ran_keeps_everything(g):
    other = g.functions_named("refresh")[0].span
    diag = {**TEXT_AFTER_INC, "coverage": {"functions": [
        {"name": "refresh", "start": other[0], "end": other[1], "count": 1}]}}
    assert localize(g, diag, "grounded").s_dir == localize(g, TEXT_AFTER_INC, "text").s_dir


def test_class_assertion_blames_the_toggle_and_class_rules(g):
    diag = probe_failure({"expect": "class", "locator": "#out",
                          "value": {"regex": "\\bpositive\\b"}}, CLICK_INC, severity="minor")
    loc = localize(g, diag, "text")
    assert loc.s_dir == (span("out.classList.toggle('positive', count > 0);"),)
    assert span(".positive { color: green; }") in loc.s_ctx
    assert span("<button id=\"inc\">+</button>") in loc.s_ctx  # Y's HTML
    assert span("function onInc() {\n  count += step;\n  render();\n}") in loc.s_ctx


def test_visibility_assertion_blames_rules_that_hide_and_class_writes(g):
    diag = probe_failure({"expect": "visible", "locator": "#panel"},
                         {"do": "click", "locator": "#toggle"}, severity="moderate")
    loc = localize(g, diag, "text")
    assert loc.s_dir == tuple(merge_spans([
        span(".hidden { display: none; }"), span("panel.classList.toggle('hidden');"),
        span('class="hidden"')]))
    toggle = span("() => {\n  panel.classList.toggle('hidden');\n}")
    binding = span("document.getElementById('toggle')")[0]
    assert (binding, span("panel.classList")[0]) in loc.s_ctx  # the handler, around the write
    assert (span("panel.classList.toggle('hidden');")[1], toggle[1] + 1) in loc.s_ctx


def test_missing_element_blames_lookups_and_similar_names(g):
    diag = probe_failure({"expect": "visible", "locator": "#scoreDisplay"}, severity="severe",
                         actual=None, message="no element matches #scoreDisplay: timeout",
                         reason="missing_element")
    loc = localize(g, diag, "text")
    assert loc.s_dir == tuple(merge_spans([
        span("const label = document.getElementById('scoreDisplay');"),
        span('<p id="score-display">')]))
    assert span("<body>") in loc.s_ctx  # the parent of the similarly named element
    whys = [e["why"] for e in loc.evidence if e["set"] == "dir"]
    assert whys == ["looks up #scoreDisplay",
                    "element #score-display is named like the missing scoreDisplay"]


def test_uncaught_exception_uses_the_stack(g):
    frames = [{"function": "show", "in_app": True, "offset": span("data.value")[0]},
              {"function": "refresh", "in_app": True, "offset": span("show({")[0]},
              {"function": "x", "in_app": False, "offset": None}]
    diag = {"kind": "page_error", "reason": "uncaught_in_step", "stage": "rubric",
            "severity": "severe", "rubric_id": "r", "message": "uncaught TypeError",
            "exception": exception("TypeError: Cannot set properties of null (setting "
                                   "'textContent')"), "step_index": 1, "interaction_index": 0,
            "frames": frames, "excerpt": "label.textContent = data.value;"}
    loc = localize(g, diag, "grounded")
    assert loc.s_dir == (span("const label = document.getElementById('scoreDisplay');"),
                         span("label.textContent = data.value;"))
    assert loc.s_ctx == tuple(merge_spans(subtract_spans(
        [function("show")], loc.s_dir) + [span("show({ value: count });")]))
    assert {e["by"] for e in loc.evidence} == {"stack"}
    # The text method finds the quoted line instead of using the frame offsets.
    text = localize(g, diag, "text")
    assert span("label.textContent = data.value;") in text.s_dir
    # The naive baseline blames the whole function of the top frame.
    assert localize(g, diag, "naive").s_dir == (function("show"),)


def test_not_defined_points_at_similar_names(g):
    at = span("render();")[0]
    diag = {"kind": "page_error", "reason": "uncaught_in_step", "stage": "rubric",
            "exception": exception("ReferenceError: rendr is not defined"), "frames": [{"in_app": True, "offset": at}]}
    loc = localize(g, diag, "grounded")
    assert loc.s_dir == (span("render();"),)
    assert function("render") in loc.s_ctx


def test_syntax_error_from_the_source_gate():
    response = APP.replace("  count += step;", "  count += step +;")
    (diag,) = [d for d in source_diagnostics(extract_app(response)) if d["lang"] == "javascript"]
    g = build_graph(response, (extract_app(response).start, extract_app(response).end))
    loc = localize(g, diag)
    assert loc.s_dir == (tuple(diag["span"]),)
    stmt = span("count += step +;", text=response)
    assert loc.s_ctx == tuple(subtract_spans([stmt], loc.s_dir))


def test_zero_width_syntax_error_is_widened():
    response = "<script>\nfunction f() {\n  let a = (1 + 2;\n}\n</script>"
    g = build_graph(response)
    at = response.index(";")
    loc = localize(g, {"kind": "syntax_error", "span": [at, at], "message": "missing ')'"})
    assert loc.s_dir == ((at - 1, at + 1),)


def test_hang_blames_the_endless_loop():
    response = "<script>\nlet i = 0;\nwhile (true) { i++; }\nwhile (i < 3) i++;\n</script>"
    diag = {"kind": "runtime_failure", "reason": "hang", "message": "the page stopped"}
    loc = localize(build_graph(response), diag)
    assert loc.s_dir == (span("while (true) { i++; }", text=response),)
    assert loc.s_ctx == (span("while (i < 3) i++;", text=response),)
    thrown = {"kind": "runtime_failure", "reason": "uncaught_at_load", "message": "stopped"}
    assert localize(build_graph(response), thrown).s_dir == ()


def test_failed_assert_traces_saved_readings_with_the_probe(g):
    probe = {"steps": [{"save": "before", "from": "#out", "read": "text"},
                       {"do": "click", "locator": "#reset"},
                       {"assert": "not_equal", "left": {"var": "before"}, "right": "0"}]}
    diag = {**probe_failure(probe["steps"][2], {"do": "click", "locator": "#reset"}),
            "step_index": 2}
    with_probe = localize(g, diag, "text", probe)
    assert with_probe.s_dir == tuple(merge_spans([
        span("out.textContent = count;"), function("onReset"),  # writers of #out (the saved
        span("document.getElementById('reset').addEventListener('click', onReset)")]))  # text)
    assert span('<span id="out">0</span>') in with_probe.s_ctx
    without = localize(g, diag, "text")
    assert without.s_dir == (function("onReset"), span(
        "document.getElementById('reset').addEventListener('click', onReset)"))


def test_naive_blames_functions_querying_the_element(g):
    loc = localize(g, TEXT_AFTER_INC, "naive")
    assert loc.s_dir == (span("const out = document.getElementById('out');"),)
    assert loc.s_ctx == ()


def test_role_and_text_locators(g):
    diag = probe_failure({"expect": "text", "locator": "#out", "value": "0"},
                         {"do": "click", "locator": {"role": "button", "name": "Reset"}})
    assert function("onReset") in localize(g, diag, "text").s_dir
    diag = probe_failure({"expect": "text", "locator": "#out", "value": "0"},
                         {"do": "click", "locator": {"text": "Reset", "exact": True}})
    assert function("onReset") in localize(g, diag, "text").s_dir


def test_unlocalized_kinds_and_unknown_method(g):
    assert localize(g, {"kind": "dialog", "severity": "info"}).s_dir == ()
    assert localize(g, {"kind": "no_app"}).evidence == ()
    with pytest.raises(KeyError):
        localize(g, TEXT_AFTER_INC, "guess")
    assert set(METHODS) == {"text", "grounded", "ranked", "naive", "sbfl", "oracle"}


def test_text_evidence(g):
    judge = ("The counter never resets: `out.textContent = '0'` runs but count  stays, and "
             "onReset is never wired to #reset. Also the line\n"
             "label.textContent = data.valu;\nlooks wrong.")
    loc = spans_from_text_evidence(g, judge)
    assert span("out.textContent = '0'") in [tuple(e["span"]) for e in loc.evidence]
    assert function("onReset") in loc.s_dir  # a function named in the text
    assert span("label.textContent = data.value;") in loc.s_dir  # fuzzy line match
    assert span('<button id="reset">') in loc.s_ctx  # a selector named in the text
    assert {e["by"] for e in loc.evidence} == {"text"}


def test_span_helpers():
    assert merge_spans([(5, 7), (0, 2), (2, 3), (6, 9), (4, 4)]) == [(0, 3), (5, 9)]
    assert subtract_spans([(0, 10), (12, 20)], [(2, 4), (8, 14)]) == [(0, 2), (4, 8), (14, 20)]
    assert similar_names("score-display", "scoreDisplay")
    assert similar_names("resetBtn", "reset-btn")
    assert not similar_names("speed", "output")


WIRED = """<button id="b1">1</button><button id="b2">2</button><span id="n">0</span>
<script>
let n = 0;
function show() { document.getElementById('n').textContent = n; }
function init() {
  for (let i = 1; i <= 2; i++) {
    document.getElementById('b' + i).addEventListener('click', () => { n = i; show(); });
  }
}
window.addEventListener('load', init);
</script>"""


def test_loop_that_binds_handlers_is_blamed_with_them():
    g = build_graph(WIRED)
    diag = probe_failure({"expect": "text", "locator": "#n", "value": "2"},
                         {"do": "click", "locator": "#b2"})
    loc = localize(g, diag, "text")
    handler = span("() => { n = i; show(); }", text=WIRED)
    assert loc.s_dir == tuple(merge_spans([
        span("for (let i = 1; i <= 2; i++)", text=WIRED),
        span("document.getElementById('b' + i).addEventListener('click', "
             "() => { n = i; show(); })", text=WIRED),
        span("document.getElementById('n').textContent = n;", text=WIRED)]))
    assert handler[0] > loc.s_dir[0][0]


def test_no_code_ran_after_the_action_blames_the_wiring():
    g = build_graph(WIRED)
    diag = probe_failure({"expect": "text", "locator": "#n", "value": "2"},
                         {"do": "click", "locator": "#b2"}, coverage={"functions": []})
    loc = localize(g, diag, "grounded")
    assert span("window.addEventListener('load', init)", text=WIRED) in loc.s_dir
    write = span("document.getElementById('n').textContent = n;", text=WIRED)
    assert not any(s <= write[0] < e for s, e in loc.s_dir)  # it did not run: context
    assert any(s <= write[0] < e for s, e in loc.s_ctx)
    init = g.functions_named("init")[0].span
    assert any(e["span"] == list(init) and e["set"] == "ctx" for e in loc.evidence)


def test_undefined_read_points_at_the_state_it_reads():
    text = ("<script>\nlet items = [];\nfunction fill() { items = [1]; }\n"
            "function use() { return items[0].x; }\n</script>")
    at = text.index("return items")
    diag = {"kind": "page_error", "reason": "uncaught_at_load",
            "exception": exception("TypeError: Cannot read properties of undefined (reading "
                                   "'x')"), "frames": [{"in_app": True, "offset": at}]}
    loc = localize(build_graph(text), diag)
    assert loc.s_dir == (span("return items[0].x;", text=text),)
    assert span("items = []", text=text) in loc.s_ctx
    assert span("items = [1];", text=text) in loc.s_ctx


SWAPPED = """<div class="bar"><button id="btn-a">A</button><button id="btn-b">B</button>
<button id="btn-c">C</button></div><span id="out"></span>
<script>
const out = document.getElementById('out');
const btnA = document.getElementById('btn-b');
btnA.addEventListener('click', () => { out.textContent = 'A'; });
document.getElementById('btn-c').addEventListener('click', () => { out.textContent = 'C'; });
</script>"""


def test_lookup_named_after_one_element_returning_another():
    g = build_graph(SWAPPED)
    diag = probe_failure({"expect": "text", "locator": "#out", "value": "A"},
                         {"do": "click", "locator": "#btn-a"})
    loc = localize(g, diag, "text")
    query = span("const btnA = document.getElementById('btn-b');", text=SWAPPED)
    assert query in loc.s_dir
    whys = {e["why"] for e in loc.evidence if e["set"] == "dir"}
    assert "btnA is named after #btn-a but looks up 'btn-b'" in whys
    # #btn-a has no handler while its siblings have: their registrations are blamed.
    assert span("document.getElementById('btn-c').addEventListener('click', ",
                text=SWAPPED) in loc.s_dir
    assert "binds click on elements like #btn-a, which has no handler" in whys


def test_type_error_names_the_variable_holding_the_wrong_element():
    text = ("<span id='s'></span><canvas id='c'></canvas><script>\n"
            "const canvas = document.getElementById('s');\n"
            "const ctx = canvas.getContext('2d');\n</script>")
    diag = {"kind": "page_error", "reason": "uncaught_at_load",
            "exception": exception("TypeError: canvas.getContext is not a function"),
            "frames": [{"in_app": True, "offset": text.index("canvas.getContext")}]}
    loc = localize(build_graph(text), diag)
    assert loc.s_dir == tuple(merge_spans([
        span("const canvas = document.getElementById('s');", text=text),
        span("const ctx = canvas.getContext('2d');", text=text)]))


def test_form_event_bound_on_an_element_that_never_fires_it():
    text = ("<input id='speed' type='range'><p id='out'></p><script>\n"
            "const out = document.getElementById('out');\n"
            "document.getElementById('out').addEventListener('input', () => { out.textContent = 1; "
            "});\n</script>")
    diag = probe_failure({"expect": "text", "locator": "#out", "value": "1"},
                         {"do": "fill", "locator": "#speed", "value": "3"})
    loc = localize(build_graph(text), diag, "text")
    binding = text.index("document.getElementById('out').addEventListener")
    assert any(s <= binding < e for s, e in loc.s_dir)
    assert any("never fires it" in e["why"] for e in loc.evidence)


CALC = """<button id="go">Go</button><span id="out"></span>
<script>
const out = document.getElementById('out');
function calc(x) { return x * 3; }
function onGo() { out.textContent = calc(2); }
document.getElementById('go').addEventListener('click', onGo);
</script>"""


def test_functions_that_ran_under_a_blamed_handler_join_the_direct_set():
    g = build_graph(CALC)
    calc, on_go = g.functions_named("calc")[0].span, g.functions_named("onGo")[0].span
    diag = probe_failure({"expect": "text", "locator": "#out", "value": "6"},
                         {"do": "click", "locator": "#go"})
    assert calc in localize(g, diag, "text").s_ctx  # a callee: context for the text method
    ran = {"functions": [{"name": n, "start": s, "end": e, "count": 1}
                         for n, (s, e) in (("calc", calc), ("onGo", on_go))]}
    grounded = localize(g, {**diag, "coverage": ran}, "grounded")
    # onGo wrote #out: of calc, the slice of that write keeps the value it returns.
    assert span("return x * 3;", text=CALC) in grounded.s_dir
    assert any(e["by"] == "flow" and e["why"] == "returns a value the slice uses (calc)"
               for e in grounded.evidence)
    # No code writes the value the check reads: the functions that ran are blamed whole.
    value = probe_failure({"expect": "value", "locator": "#out", "value": "6"},
                          {"do": "click", "locator": "#go"})
    whole = localize(g, {**value, "coverage": ran}, "grounded")
    assert calc in whole.s_dir
    assert any(e["by"] == "coverage" and e["why"] == "ran before the failure, called by onGo"
               for e in whole.evidence)
