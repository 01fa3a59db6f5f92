"""Localization rules that follow the path that ran: where missing state should have been set,
start-up wiring that no longer runs the code setting it, lookups under names in another word
order, values kept from load, reads of a value an element does not have, the containers a
script-made element is built in, and long functions as context: exact spans on small apps."""

from __future__ import annotations

import re

from evaluators.localize.graph import build_graph
from evaluators.localize.spans import localize, similar_names
from tests.localize.diags import plain, exception, probe_failure, span

NULL_READ = "uncaught TypeError: Cannot read properties of undefined (reading '{}')"


def error(message: str, text: str, *frames: str) -> dict:
    return {"kind": "page_error", "reason": "uncaught_at_load", "stage": "runtime",
            "severity": "severe", "rubric_id": None, "message": message,
            "exception": exception(message),
            "frames": [{"in_app": True, "offset": span(f, text)[0]} for f in frames]}


def ran(g, *names: str) -> dict:
    """Coverage in which the named functions ran."""
    return {"functions": [{"name": n, "start": g.functions_named(n)[0].span[0],
                           "end": g.functions_named(n)[0].span[1], "count": 1} for n in names]}


SIBLINGS_ON_STACK = """<script>
let inputA, inputB, inputC;
function setup() {
  inputA = document.getElementById('a');
  inputC = document.getElementById('c');
  inputA.onchange = redraw;
  inputB.onchange = redraw;
}
function redraw() {}
</script>"""


def test_siblings_set_on_the_stack_before_the_read_hold_the_missing_assignment():
    text = SIBLINGS_ON_STACK
    loc = localize(build_graph(text), error(
        "uncaught TypeError: Cannot set properties of undefined (setting 'onchange')", text,
        "inputB.onchange"))
    # inputB is declared with inputA and inputC, which setup sets just before the read: the
    # run of their assignments (the gap where inputB's belongs), the statement after it, and
    # the statement just before the read, which is that same one.
    assert loc.s_dir == (
        span("inputA = document.getElementById('a');\n  inputC = document.getElementById('c');",
             text),
        span("inputA.onchange = redraw;", text), span("inputB.onchange = redraw;", text))


EARLIER_READ = """<script>
let group;
let scene = [];
function init3D() {
  scene = [];
  const light = 1;
  scene.push(group);
}
function update() {
  group.clear();
}
function init() {
  init3D();
  update();
}
init();
</script>"""


def test_the_first_read_that_passed_the_missing_value_on_is_blamed_with_the_statement_before():
    text = EARLIER_READ
    loc = localize(build_graph(text), error(NULL_READ.format("clear"), text,
                                            "group.clear", "update();", "init();\n<"))
    # init (frame 1) ran init3D before update: group was read there first, already missing.
    whys = {(e["why"], tuple(e["span"])) for e in loc.evidence if e["set"] == "dir"}
    assert ("reads group before it is set, on the path to the failing read (frame 1)",
            span("scene.push(group);", text)) in whys
    assert ("runs just before the first read of group (frame 1), where it should have been "
            "set", span("const light = 1;", text)) in whys
    # A function declaration before the top-level call runs nothing there: not blamed.
    assert loc.s_dir == (span("const light = 1;", text), span("scene.push(group);", text),
                         span("group.clear();", text), span("init3D();", text))


UNREACHED = """<script>
let camera;
function init() {
  camera = {aspect: 1};
}
function onResize() {
  camera.aspect = 2;
}
window.addEventListener('load', onResize);
</script>"""


def test_state_set_only_by_code_nothing_runs_blames_the_start_up_binding():
    text = UNREACHED
    g = build_graph(text)
    loc = localize(g, error("uncaught TypeError: Cannot set properties of undefined "
                            "(setting 'aspect')", text, "camera.aspect"))
    binding = span("window.addEventListener('load', onResize)", text)
    assert loc.s_dir == (span("camera.aspect = 2;", text), binding)
    assert {"span": list(g.functions_named("init")[0].span), "set": "ctx", "by": "stack",
            "why": "sets camera (itself or through its calls), but nothing runs it"} \
        in plain(loc.evidence)
    # Once the load handler runs init, nothing is concluded from reachability.
    wired = text.replace("'load', onResize", "'load', init")
    loc = localize(build_graph(wired), error("uncaught TypeError: Cannot set properties of "
                                             "undefined (setting 'aspect')", wired,
                                             "camera.aspect"))
    assert not any("nothing runs" in e["why"] for e in loc.evidence)


def test_names_with_the_same_words_in_another_order_are_similar():
    assert similar_names("trimSlider", "slider-trim")
    assert similar_names("btn_reset_all", "allResetBtn")
    assert not similar_names("trimSlider", "slider-width")
    assert not similar_names("trim", "trim-slider")  # one word: no reordering to speak of


WORD_ORDER = """<input id="slider-trim" type="range"><span id="label-trim">0.8</span>
<script>
const trimSlider = document.getElementById('label-trim');
const trimLabel = document.getElementById('label-trim');
trimSlider.addEventListener('input', function () {
  trimLabel.textContent = this.value;
});
</script>"""


def test_lookup_stored_under_the_acted_on_elements_name_in_another_word_order():
    text = WORD_ORDER
    loc = localize(build_graph(text),
                   probe_failure({"expect": "text", "locator": "#label-trim", "value": "0.7"},
                                 {"do": "fill", "locator": "#slider-trim", "value": "0.7"}),
                   "text")
    query = span("const trimSlider = document.getElementById('label-trim');", text)
    assert query in loc.s_dir
    assert {"span": list(query), "set": "dir", "by": "graph",
            "why": "trimSlider is named after #slider-trim but looks up 'label-trim'"} \
        in plain(loc.evidence)


CONTROL_MAP = """<input id="slider-trim" type="range"><input id="slider-width" type="range">
<input id="radio-y-2" type="radio"><span id="label-trim-value">0.8</span>
<script>
const controls = {
  width: document.getElementById('slider-width'),
  trim: document.getElementById('radio-y-2'),
  trimLabel: document.getElementById('label-trim-value')
};
controls.trim.addEventListener('input', function () {
  controls.trimLabel.textContent = this.value;
});
</script>"""


def test_lookup_stored_under_what_the_acted_on_element_controls():
    # `trim` names what #slider-trim controls (its id less the kind word `slider`), and the
    # lookup stored there returns the radio button.
    text = CONTROL_MAP
    loc = localize(build_graph(text),
                   probe_failure({"expect": "text", "locator": "#label-trim-value",
                                  "value": "0.7"},
                                 {"do": "fill", "locator": "#slider-trim", "value": "0.7"}),
                   "text")
    query = span("trim: document.getElementById('radio-y-2')", text)
    assert query in loc.s_dir
    # Both #slider-trim and #label-trim-value control `trim`; either names the variable.
    (why,) = [e["why"] for e in loc.evidence if tuple(e["span"]) == query]
    assert re.fullmatch(r"controls\.trim is named after #(slider-trim|label-trim-value) but "
                        r"looks up 'radio-y-2'", why), why
    # `width` names #slider-width, which the probe does not use, and finds it: not blamed.
    width = span("document.getElementById('slider-width')", text)
    assert not any(s <= width[0] < e for s, e in loc.s_dir)


NO_HANDLER = """<button id="b">B</button><select id="mode"><option>a</option></select>
<span id="out">0</span>
<script>
const out = document.getElementById('out');
function update() { out.textContent = '1'; }
document.getElementById('mode').addEventListener('change', update);
update();
</script>"""


def test_a_resolved_element_without_handlers_does_not_borrow_other_elements_handlers():
    text = NO_HANDLER
    g = build_graph(text)
    diag = probe_failure({"expect": "text", "locator": "#out", "value": "2"},
                         {"do": "click", "locator": "#b"}, coverage=ran(g, "update"))
    loc = localize(g, diag, "grounded")
    # update ran and is bound to #mode's change, which a click on #b does not fire.
    assert not any(e["why"].startswith("ran before the failure, bound to")
                   for e in loc.evidence)


STALE = """<button id="inc">+</button><span id="count">0</span>
<script>
let count = 0;
const el = document.getElementById('count');
function render() { el.textContent = count; }
function onInc() { count += 1; }
document.getElementById('inc').addEventListener('click', onInc);
render();
</script>"""


def test_a_value_kept_from_load_after_a_handler_that_ran_is_context():
    text = STALE
    g = build_graph(text)
    diag = probe_failure({"expect": "text", "locator": "#count", "value": "1"},
                         {"do": "click", "locator": "#inc"}, coverage=ran(g, "onInc"))
    loc = localize(g, diag, "grounded")
    # The handler ran and never re-rendered: it and its registration are to blame; the
    # load-time write of the count shows the old value and is context.
    assert g.functions_named("onInc")[0].span in loc.s_dir
    assert span("document.getElementById('inc').addEventListener('click', onInc)", text) \
        in loc.s_dir
    write = span("el.textContent = count;", text)
    assert not any(s <= write[0] < e for s, e in loc.s_dir)
    lookup = span("const el = document.getElementById('count');", text)
    assert lookup in loc.s_ctx and any(
        tuple(e["span"]) == lookup and e["why"].endswith("the value is the load's")
        for e in loc.evidence)


NO_VALUE = """<div id="panel"></div><input id="n" type="range" value="3"><canvas id="c"></canvas>
<script>
function redraw() {
  const n = parseFloat(document.getElementById('n').value);
  const angle = parseFloat(document.getElementById('panel').value);
  const turns = n * angle;
  document.getElementById('c').getContext('2d').fillRect(0, 0, turns, turns);
}
document.getElementById('n').addEventListener('input', redraw);
</script>"""


def test_reading_the_value_of_an_element_without_one_is_blamed_and_narrows_its_function():
    text = NO_VALUE
    g = build_graph(text)
    diag = probe_failure({"assert": "not_equal", "left": {"var": "after"},
                          "right": {"var": "before"}},
                         {"do": "fill", "locator": "#n", "value": "5"},
                         coverage=ran(g, "redraw"), message="assert not_equal failed")
    loc = localize(g, diag, "grounded")
    bad = span("const angle = parseFloat(document.getElementById('panel').value);", text)
    redraw = g.functions_named("redraw")[0].span
    # The bad read and the registration are direct; the rest of redraw is context.
    assert loc.s_dir == (bad, span("document.getElementById('n').addEventListener('input', "
                                   "redraw)", text))
    assert (redraw[0], bad[0]) in loc.s_ctx and (bad[1], redraw[1]) in loc.s_ctx
    assert any(e["why"] == "reads .value of #panel, which has none (it is a <div>): the value "
               "is undefined" for e in loc.evidence)



# The size is read from the sort button (no value attribute, none set: always ''), where the
# size slider was meant; the other button's value is in its HTML.
BUTTON_VALUE = """<input id="size" type="range" value="8"><button id="sort">sort</button>
<button id="fast" value="2">fast</button><span id="out">0</span>
<script>
const size = document.getElementById('size');
const sortBtn = document.getElementById('sort');
const fastBtn = document.getElementById('fast');
function onSort() {
  const n = parseInt(sortBtn.value);
  const speed = parseInt(fastBtn.value);
  document.getElementById('out').textContent = n * speed;
}
sortBtn.addEventListener('click', onSort);
</script>"""


def test_the_value_of_a_button_without_a_value_attribute_is_a_definite_bug():
    g = build_graph(BUTTON_VALUE)
    diag = probe_failure({"expect": "text", "locator": "#out", "value": "16"},
                         {"do": "click", "locator": "#sort"}, coverage=ran(g, "onSort"))
    loc = localize(g, diag, "grounded")
    smell = {tuple(e["span"]) for e in loc.evidence
             if "smells.blame_definite_bugs" in (e["rule"], *e.get("also", ()))}
    assert span("const n = parseInt(sortBtn.value);", BUTTON_VALUE) in smell
    assert span("const sortBtn = document.getElementById('sort');", BUTTON_VALUE) in smell
    assert not smell & {span("const speed = parseInt(fastBtn.value);", BUTTON_VALUE),
                        span("const fastBtn = document.getElementById('fast');", BUTTON_VALUE)}
    # Set by code, the button's value is not always '': nothing to blame.
    set_by_code = BUTTON_VALUE.replace("function onSort() {",
                                       "sortBtn.value = '4';\nfunction onSort() {")
    g = build_graph(set_by_code)
    loc = localize(g, probe_failure({"expect": "text", "locator": "#out", "value": "16"},
                                    {"do": "click", "locator": "#sort"},
                                    coverage=ran(g, "onSort")), "grounded")
    assert not any("smells.blame_definite_bugs" in (e["rule"], *e.get("also", ()))
                   for e in loc.evidence)

CONTAINER = """<div id="alphabet"></div><p id="key"></p><input id="shift" type="range">
<script>
const box = document.getElementById('alphabet');
const key = document.getElementById('key');
function update() {
  box.innerHTML = '';
  for (let i = 1; i < 26; i++) {
    const s = document.createElement('span');
    s.textContent = String.fromCharCode(65 + i);
    box.appendChild(s);
  }
  key.textContent = 'key';
}
document.getElementById('shift').addEventListener('input', update);
</script>"""


def test_an_element_made_by_script_is_traced_to_its_containers_writes_not_to_others():
    text = CONTAINER
    g = build_graph(text)
    diag = probe_failure({"expect": "text", "locator": {"css": "#alphabet span", "nth": "first"},
                          "value": "A"}, {"do": "fill", "locator": "#shift", "value": "1"})
    loc = localize(g, diag, "text")
    blamed = {tuple(e["span"]) for e in loc.evidence if e["set"] == "dir"
              and e["why"].startswith("the action's handler writes")}
    assert blamed == {span(x, text) for x in (
        "box.innerHTML = '';", "s.textContent = String.fromCharCode(65 + i);",
        "box.appendChild(s);")}  # not key.textContent: #key holds no span of #alphabet


def test_a_long_function_as_context_is_its_head_and_the_statements_around():
    filler = "\n".join(f"  const v{i} = {i} * 2;" for i in range(120))  # a whole app's worth
    text = ("<script>\nfunction main() {\n" + filler + "\n  const a = 1;\n  const b = a + 1;\n"
            "  missing.x = b;\n  const c = 3;\n  const d = 4;\n  const e = 5;\n}\nmain();\n"
            "</script>")
    g = build_graph(text)
    loc = localize(g, {"kind": "page_error", "reason": "uncaught_at_load",
                       "exception": exception("ReferenceError: missing is not defined"),
                       "frames": [{"in_app": True,
                                                  "offset": span("missing.x", text)[0]}]})
    main = g.functions_named("main")[0]
    assert main.span[1] - main.span[0] > 1500
    assert loc.s_dir == (span("missing.x = b;", text),)
    # `function main() {` and two statements on each side of the failing one.
    assert loc.s_ctx == ((main.span[0], main.body[0] + 1),) + tuple(
        span(x, text) for x in ("const a = 1;", "const b = a + 1;", "const c = 3;",
                                "const d = 4;"))
