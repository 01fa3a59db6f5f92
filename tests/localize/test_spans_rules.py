"""Localization rules for exceptions without a usable stack, unset state, handlers bound to
the wrong element, delegated events and hiding styles: exact spans on small apps."""

from __future__ import annotations

from evaluators.localize.api import localize_diagnostics
from evaluators.localize.graph import build_graph
from evaluators.localize.spans import localize, merge_spans
from tests.localize.diags import plain, page_error as error, probe_failure, span


UNSET = """<script>
let pointA, pointB, pointC;
let canvas, ready = false;
const shape = {};
function update() {
  pointA = {x: 1};
  pointB = {x: 2};
  ready = true;
}
function setup() {
  init();
  canvas.parent('c');
  shape.top = {x: 0};
  shape.left = {x: 1};
}
function draw() {
  update();
  line(pointA.x, pointB.x, pointC.x);
  line(shape.top.x, shape.bottom.x);
}
</script>"""


def test_read_of_state_no_code_assigns_blames_where_the_assignment_belongs():
    g = build_graph(UNSET)
    at = span("line(", UNSET)[0]
    loc = localize(g, error("uncaught TypeError: Cannot read properties of undefined "
                            "(reading 'x')", [{"in_app": True, "offset": at}]))
    assert loc.s_dir == (
        span("pointA = {x: 1};\n  pointB = {x: 2};", UNSET),  # pointA and pointB, declared
        span("ready = true;", UNSET),  # with pointC, are set here, then comes this statement
        span("update();", UNSET),  # runs just before the read
        span("line(pointA.x, pointB.x, pointC.x);", UNSET))  # the top frame
    whys = {e["why"] for e in loc.evidence if e["set"] == "dir"}
    assert "sets the state set with pointC, which no code sets" in whys
    # `canvas` is declared with `ready`, set off the stack in update (the missing assignment
    # may come just before it or just after: the statement before is blamed too), and read
    # in setup just after init(); setup is context.
    at = span("canvas.parent", UNSET)[0]
    loc = localize(g, error("uncaught TypeError: Cannot read properties of undefined "
                            "(reading 'parent')", [{"in_app": True, "offset": at}]))
    assert loc.s_dir == (span("pointB = {x: 2};", UNSET), span("ready = true;", UNSET),
                         span("init();", UNSET), span("canvas.parent('c');", UNSET))
    assert {"span": list(span("pointB = {x: 2};", UNSET)), "set": "dir", "by": "stack",
            "why": "sets the state set with canvas, which no code sets (the statement before "
                   "them)"} in plain(loc.evidence)
    assert {"span": list(g.functions_named("setup")[0].span), "set": "ctx",
            "why": "function of the top frame", "by": "stack"} in plain(loc.evidence)
    # `shape` is only ever `{}` and nothing sets shape.bottom: among the other properties.
    at = span("line(shape", UNSET)[0]
    loc = localize(g, error("uncaught TypeError: Cannot read properties of undefined "
                            "(reading 'x')", [{"in_app": True, "offset": at}]))
    assert span("shape.top = {x: 0};\n  shape.left = {x: 1};", UNSET) in loc.s_dir


LIBRARY = """<input id="s"><canvas id="c"></canvas><script>
function start() {
  const canvas = document.getElementById('s');
  renderer = new THREE.WebGLRenderer({ canvas: canvas });
}
start();
</script>"""


def test_type_error_inside_a_library_blames_the_elements_handed_to_it():
    g = build_graph(LIBRARY)
    frames = [{"in_app": False, "offset": None},
              {"in_app": True, "offset": span("renderer =", LIBRARY)[0]},
              {"in_app": True, "offset": span("start();", LIBRARY)[0]}]
    loc = localize(g, error("uncaught TypeError: e.getContext is not a function", frames))
    assert loc.s_dir == (span("const canvas = document.getElementById('s');", LIBRARY),
                         span("renderer = new THREE.WebGLRenderer({ canvas: canvas });",
                              LIBRARY))


THROWS = """<button id="go">Go</button><script>
function check(v) { if (v > 3) throw "too big"; return v; }
function other() { throw 7; }
function third() { throw new Error('x'); }
document.getElementById('go').addEventListener('click', () => check(5));
</script>"""


def test_stackless_throw_blames_the_throw_of_that_value():
    g = build_graph(THROWS)
    too_big = span('throw "too big";', THROWS)
    assert localize(g, error("uncaught Error: too big", [])).s_dir == (too_big,)
    assert localize(g, error("uncaught Uncaught 7", [])).s_dir == (span("throw 7;", THROWS),)
    # No value matches: the throws of plain values, all (few) of them.
    assert localize(g, error("uncaught Error: [object Object]", [])).s_dir == (
        too_big, span("throw 7;", THROWS))


def test_stackless_throw_in_a_probe_uses_the_coverage_of_its_rubric():
    check = build_graph(THROWS).functions_named("check")[0].span
    rec = {"response": THROWS, "extraction": {"start": 0, "end": len(THROWS)},
           "rubrics": [{"id": "r", "verdict": "fail"}], "diagnostics": [
               probe_failure({"expect": "text", "locator": "#go", "value": "1"},
                             {"do": "click", "locator": "#go"}, coverage={"functions": [
                                 {"name": "check", "start": check[0], "end": check[1],
                                  "count": 1}]}),
               {**error("uncaught Error: [object Object]", []), "stage": "rubric",
                "rubric_id": "r"}]}
    thrown = localize_diagnostics(rec)[1]
    assert thrown["s_dir"] == [list(span('throw "too big";', THROWS))]


def test_load_failure_blames_the_exception_that_failed_it():
    message = "uncaught TypeError: Cannot read properties of undefined (reading 'parent')"
    at = span("canvas.parent", UNSET)[0]
    rec = {"response": UNSET, "extraction": {"start": 0, "end": len(UNSET)}, "rubrics": [],
           "gate": "runtime", "diagnostics": [
               {"kind": "runtime_failure", "stage": "runtime", "severity": "severe",
                "rubric_id": None, "message": "uncaught exception during load: " + message},
               error(message, [{"in_app": True, "offset": at}])]}
    gate, thrown = localize_diagnostics(rec)
    assert gate["s_dir"] == thrown["s_dir"] != [] and gate["s_ctx"] == thrown["s_ctx"]
    assert gate["weighted"] and gate["evidence"][0]["why"].startswith(
        "the load failed on this exception: ")


ELSEWHERE = """<div><button id="b1">1</button><button id="b2">2</button></div>
<input id="speed" type="range"><span id="out"></span>
<script>
function pick(v) { document.getElementById('out').textContent = v; }
document.getElementById('b1').addEventListener('click', () => pick(1));
document.getElementById('speed').addEventListener('click', () => pick(2));
</script>"""


def test_unbound_actor_blames_registrations_whose_handlers_update_the_checked_element():
    g = build_graph(ELSEWHERE)
    diag = probe_failure({"expect": "text", "locator": "#out", "value": "2"},
                         {"do": "click", "locator": "#b2"})
    loc = localize(g, diag, "text")
    wrong = span("document.getElementById('speed').addEventListener('click', ", ELSEWHERE)
    like = span("document.getElementById('b1').addEventListener('click', ", ELSEWHERE)
    assert wrong in loc.s_dir and like in loc.s_dir
    whys = {(e["why"], tuple(e["span"])) for e in loc.evidence if e["set"] == "dir"}
    assert ("binds a handler that updates #out on #speed, while #b2 has none", wrong) in whys


DELEGATED = """<div id="bar"><button id="x1">A</button></div><span id="out"></span>
<script>
function onBar(e) { document.getElementById('out').textContent = e.target.id; }
document.getElementById('bar').addEventListener('click', onBar);
</script>"""


def test_listener_on_an_ancestor_handles_the_action():
    g = build_graph(DELEGATED)
    diag = probe_failure({"expect": "text", "locator": "#out", "value": "x1"},
                         {"do": "click", "locator": "#x1"})
    loc = localize(g, diag, "text")
    assert loc.s_dir == tuple(merge_spans([
        span("function onBar(e) { document.getElementById('out').textContent = e.target.id; }",
             DELEGATED),
        span("document.getElementById('bar').addEventListener('click', onBar)", DELEGATED)]))
    assert not any("has no handler" in e["why"] for e in loc.evidence)


HIDDEN = """<style>
#wrap { display: none; color: red; }
#box { width: 10px; }
</style>
<div id="wrap"><div id="box"><label>Step</label></div></div>"""


def test_hiding_declaration_of_an_ancestor_is_blamed_directly():
    g = build_graph(HIDDEN)
    hide = span("display: none;", HIDDEN)
    rule = span("#wrap { display: none; color: red; }", HIDDEN)
    loc = localize(g, probe_failure({"expect": "visible", "locator": "label"}, None), "text")
    assert hide in loc.s_dir and rule[0] in {s for s, _ in loc.s_ctx}
    assert span("#box { width: 10px; }", HIDDEN) not in loc.s_dir + loc.s_ctx
    # A canvas made by script inside #box: the containers its locator names.
    step = {"mouse": "move", "at": {"box": "#box canvas", "fx": 0.5, "fy": 0.5}}
    diag = probe_failure(step, step, message="#box canvas has no bounding box (not visible)")
    assert localize(g, diag, "text").s_dir == (hide,)


CALLEES = """<button id="go">Go</button><span id="out"></span>
<script>
let flag = true;
function a() { return 1; }
function b() { return 2; }
function h() { document.getElementById('out').textContent = 1; if (flag) a(); else b(); }
document.getElementById('go').addEventListener('click', h);
</script>"""


def test_context_leaves_out_callees_that_did_not_run():
    g = build_graph(CALLEES)
    cover = [{"name": n, "start": g.functions_named(n)[0].span[0],
              "end": g.functions_named(n)[0].span[1], "count": 1} for n in ("h", "a")]
    diag = probe_failure({"expect": "text", "locator": "#out", "value": "2"},
                         {"do": "click", "locator": "#go"}, coverage={"functions": cover})
    grounded = localize(g, diag, "grounded")
    a, b = g.functions_named("a")[0].span, g.functions_named("b")[0].span
    assert a in grounded.s_ctx and b not in grounded.s_ctx
    assert b in localize(g, diag, "text").s_ctx  # without coverage, every callee


ENTRY = """<script>
let center;
let points = {a: {pos: {}}};
function setup() {
  createCanvas(10, 10);
  for (const k in points) {
    place(points[k]);
  }
}
function place(p) {
  p.pos.x = center.x;
}
</script>"""


def test_unset_state_read_under_a_start_up_function_blames_what_it_ran_before():
    g = build_graph(ENTRY)
    frames = [{"in_app": True, "offset": span("p.pos.x", ENTRY)[0]},
              {"in_app": True, "offset": span("place(points[k])", ENTRY)[0]}]
    loc = localize(g, error("uncaught TypeError: Cannot read properties of undefined "
                            "(reading 'x')", frames))
    setup = g.functions_named("setup")[0].span
    assert {"span": list(setup), "set": "ctx", "by": "stack",
            "why": "start-up function on the stack, where center is not set"} in plain(loc.evidence)
    # What setup ran before its frame's loop is where center should have been set.
    assert loc.s_dir == (span("createCanvas(10, 10);", ENTRY), span("p.pos.x = center.x;", ENTRY))
    assert {"span": list(span("createCanvas(10, 10);", ENTRY)), "set": "dir", "by": "stack",
            "why": "start-up code that ran before the read of center (in setup) and does not "
                   "set it"} in plain(loc.evidence)


def test_load_failure_blames_the_exception_it_names_as_its_cause():
    """Version 2: the gate failure names its exception by index (``caused_by``); a gate
    failure that names none (a hang) does not take an exception's spans."""
    message = "uncaught TypeError: Cannot read properties of undefined (reading 'parent')"
    at = span("canvas.parent", UNSET)[0]
    thrown = error(message, [{"in_app": True, "offset": at}])

    def rec(gate: dict) -> dict:
        return {"response": UNSET, "extraction": {"start": 0, "end": len(UNSET)}, "rubrics": [],
                "gate": "runtime", "schema_version": 2, "diagnostics": [
                    {"kind": "runtime_failure", "stage": "runtime", "severity": "severe",
                     "rubric_id": None, "message": "the load failed", **gate}, thrown]}

    gate, blamed = localize_diagnostics(rec({"reason": "uncaught_at_load", "caused_by": 1}))
    assert gate["s_dir"] == blamed["s_dir"] != []
    hang, _ = localize_diagnostics(rec({"reason": "hang"}))
    assert hang["s_dir"] != blamed["s_dir"]
