"""More localization rules stated as (app, diagnostic, must blame, must not blame) rows.

Each app is small and written for its row; a row names code by its text, never by offsets,
and says which rule must have blamed it, so a better implementation that keeps the rule's
intent still passes. `test_rule_table.py` holds the rows over one shared counter app.
"""

from __future__ import annotations

import dataclasses

import pytest

from evaluators.localize.graph import build_graph
from evaluators.localize.rules import LocalizeConfig
from evaluators.localize.spans import localize
from tests.localize.diags import page_error, probe_failure, rules_of


@dataclasses.dataclass(frozen=True)
class Row:
    """One intent: in ``app``, ``diagnostic`` makes ``rule`` blame ``direct`` in S_dir (and
    ``context`` in S_dir or S_ctx), ``rule`` moves what another rule blamed directly in
    ``demoted`` to the context, and nothing blames ``spared`` directly. A rule that
    ``narrows`` replaces broader blame by its own: switched off, ``spared`` is blamed."""

    app: str
    rule: str
    diagnostic: dict
    direct: tuple[str, ...] = ()
    context: tuple[str, ...] = ()
    spared: tuple[str, ...] = ()
    demoted: tuple[str, ...] = ()
    method: str = "grounded"
    narrows: bool = False  # the rule replaces broader blame: off, ``spared`` is blamed


def _frames(app: str, *codes: str) -> list[dict]:
    return [{"in_app": True, "offset": app.index(c)} for c in codes]


def _ran(app: str, *names: str) -> dict:
    g = build_graph(app)
    return {"functions": [{"name": f.name, "start": f.span[0], "end": f.span[1], "count": 1}
                          for n in names for f in g.functions_named(n)]}


HIDDEN = """<style>
#panel { display: none; }
#out { color: red; }
</style>
<div id="panel"><span id="out">0</span></div>
<script>document.getElementById('out').textContent = '1';</script>"""

STYLED = """<style>
.on { background: green; }
#lamp { width: 20px; }
</style>
<div id="lamp"></div><button id="sw">switch</button>
<script>
const lamp = document.getElementById('lamp');
function toggle() { lamp.classList.toggle('of'); }
document.getElementById('sw').addEventListener('click', toggle);
</script>"""

DANGLING = """<span id="total">0</span><button id="add">add</button>
<script>
let sum = 0;
const counter = document.getElementById('totl');
function add() { sum += 1; counter.textContent = sum; }
document.getElementById('add').addEventListener('click', add);
</script>"""

MISDIRECTED = """<span id="result">0</span><span id="status">idle</span>
<button id="run">run</button>
<script>
const resultEl = document.getElementById('status');
function run() { resultEl.textContent = 42; }
document.getElementById('run').addEventListener('click', run);
</script>"""

WIPED = """<div id="main"><p id="row"><span id="value">3</span></p><div id="log"></div></div>
<button id="clear">clear</button>
<script>
const log = document.getElementById('main');
function clearLog() { log.innerHTML = ''; }
document.getElementById('clear').addEventListener('click', clearLog);
</script>"""

RECURSION = """<canvas id="c"></canvas>
<script>
function depth(n) {
  if (n === 0) return 0;
  return 1 + depth(n + 1);
}
const d = depth(5);
</script>"""

ARGS = """<span id="name">-</span>
<script>
function show(user) {
  document.getElementById('name').textContent = user.name;
}
const users = [{name: 'a'}];
show();
</script>"""

ITEMS = """<ul id="list"></ul>
<script>
const rows = [{label: 'a'}, {label: 'b'}];
const list = document.getElementById('list');
for (let i = 0; i <= rows.length; i++) {
  list.append(rows[i].label);
}
</script>"""

THROWS = """<script>
function check(v) {
  if (v > 10) throw "too big";
  return v;
}
const color = 'red';
check(11);
</script>"""

WIRING = """<span id="out">0</span><button id="go">go</button>
<script>
let n = 0;
function onGo() { n += 1; document.getElementById('out').textContent = n; }
function start() {
  document.getElementById('go').addEventListener('clik', onGo);
}
window.addEventListener('load', start);
</script>"""

GROUNDED = """<span id="out">0</span><button id="go">go</button>
<script>
let n = 0;
function paint() { document.getElementById('out').textContent = n; }
function unused() { document.getElementById('out').textContent = 'x'; }
function onGo() { n -= 1; paint(); }
document.getElementById('go').addEventListener('click', onGo);
</script>"""

VALUELESS = """<div id="speed">5</div><span id="out">0</span><button id="go">go</button>
<script>
function onGo() {
  const v = Number(document.getElementById('speed').value);
  document.getElementById('out').textContent = v * 2;
}
document.getElementById('go').addEventListener('click', onGo);
</script>"""

UNSET = """<canvas id="c"></canvas>
<script>
let grid = null;
let size = 4;
function draw() {
  for (const cell of grid.cells) { size += cell; }
}
function setup() {
  size = 8;
  draw();
}
setup();
</script>"""

PLOT = """<input id="n"><div id="chart"></div>
<script>
function draw() {
  const box = document.getElementById('n');
  Plotly.newPlot(box, [{y: [1, 2]}]);
}
const title = 'growth';
draw();
</script>"""

NEVER_SET = """<script>
let scene;
function build() {
  scene = {items: []};
}
function tick() {
  scene.items.push(1);
}
const speed = 3;
window.addEventListener('load', tick);
</script>"""

THEMED = """<style>
.big { font-size: 10px; }
.small { font-size: 30px; }
#label { margin: 4px; }
</style>
<p id="label" class="big">hi</p>
<script>const unused = 1;</script>"""

CALLER = """<span id="out">0</span><button id="go">go</button>
<script>
let total = 0;
function add(x) { return x + 1; }
function onGo() { total = add(total); show(); }
function show() { document.getElementById('out').textContent = total * 2; }
const colour = 'red';
document.getElementById('go').addEventListener('click', onGo);
</script>"""

SLICED = """<span id="out">0</span><button id="go">go</button>
<script>
const names = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j', 'k', 'l', 'm'];
function onGo() {
  const label = names.join(',');
  let k = names.length;
  const factor = 3;
  const shown = k * factor - 1;
  console.log(label);
  console.log(names.slice(0, 2));
  console.log(names.slice(2, 4));
  console.log(names.slice(4, 6));
  console.log(names.slice(6, 8));
  console.log(names.slice(8, 10));
  console.log(names.slice(10, 12));
  console.log(names.slice(12));
  document.getElementById('out').textContent = shown;
}
document.getElementById('go').addEventListener('click', onGo);
</script>"""

BROKEN = """<script>
function area(r) {
  return Math.PI * r *;
}
const ok = 1;
</script>"""

LOOPING = """<script>
let t = 0;
function spin() {
  for (;;) { t += 1; }
}
while (t < 3) { t++; }
spin();
</script>"""

SIBLINGS = """<input id="a"><input id="b"><input id="c">
<script>
const note = 'x';
let boxA, boxB, boxC;
function wire() {
  boxA = document.getElementById('a');
  boxC = document.getElementById('c');
  boxA.onchange = update;
  boxB.onchange = update;
}
function update() {}
wire();
</script>"""

PASSED_ON = """<script>
const label = 'demo';
let mesh;
let parts = [];
function build() {
  parts = [];
  const size = 2;
  parts.push(mesh);
}
function paint() {
  mesh.reset();
}
function start() {
  build();
  paint();
}
start();
</script>"""

UNBOUND = """<button id="one">1</button><button id="two">2</button><span id="out">0</span>
<script>
let value = 0;
function pick1() { value = 1; document.getElementById('out').textContent = value; }
function pick2() { value = 2; document.getElementById('out').textContent = value; }
document.getElementById('one').addEventListener('click', pick1);
const theme = 'dark';
</script>"""


CHECK = {"expect": "text", "locator": "#out", "value": "1"}
ROWS = {
    "a style rule that hides an ancestor of the checked element": Row(
        HIDDEN, "probe.hiding_ancestors",
        probe_failure({"expect": "visible", "locator": "#out"}, None, actual=False),
        direct=("display: none;",), spared=("color: red;",), method="text"),
    "a class toggled under a name no style rule has": Row(
        STYLED, "probe.failed_check",
        probe_failure({"expect": "class", "locator": "#lamp", "value": "on"},
                      {"do": "click", "locator": "#sw"}),
        direct=("lamp.classList.toggle('of');",), spared=("#lamp { width: 20px; }",),
        method="text"),
    "a lookup of an id no element has, named like the checked one": Row(
        DANGLING, "wiring.dangling_queries",
        probe_failure({"expect": "text", "locator": "#total", "value": "1"},
                      {"do": "click", "locator": "#add"}),
        direct=("const counter = document.getElementById('totl');",), spared=("let sum = 0;",),
        method="text"),
    "a variable named after one element holding another": Row(
        MISDIRECTED, "wiring.misdirected_queries",
        probe_failure({"expect": "text", "locator": "#result", "value": "42"},
                      {"do": "click", "locator": "#run"}),
        direct=("const resultEl = document.getElementById('status');",), method="text"),
    "a write that replaces the content of the checked element's ancestor": Row(
        WIPED, "probe.ancestors_replaced",
        probe_failure({"expect": "text", "locator": "#value", "value": "3"},
                      {"do": "click", "locator": "#clear"}, reason="missing_element",
                      actual=None),
        direct=("log.innerHTML = '';",), method="text"),
    "a recursion whose step moves away from its base case": Row(
        RECURSION, "errors.runaway_recursion",
        page_error("uncaught RangeError: Maximum call stack size exceeded",
                   _frames(RECURSION, "depth(n + 1)", "depth(n + 1)", "depth(5)")),
        direct=("if (n === 0)",), spared=("<canvas",)),
    "a function called without the argument it reads": Row(
        ARGS, "errors.missing_argument",
        page_error("uncaught TypeError: Cannot read properties of undefined (reading 'name')",
                   _frames(ARGS, "user.name", "show();")),
        direct=("show();",), spared=("const users = [{name: 'a'}];",)),
    "an index that runs one past the end of the array it reads": Row(
        ITEMS, "errors.undefined_items",
        page_error("uncaught TypeError: Cannot read properties of undefined (reading 'label')",
                   _frames(ITEMS, "rows[i].label")),
        direct=("for (let i = 0; i <= rows.length; i++)",),
        spared=("const list = document.getElementById('list');",)),
    "a value thrown without a stack": Row(
        THROWS, "errors.thrown_values", page_error("uncaught Error: too big", []),
        direct=('throw "too big";',), spared=("const color = 'red';",)),
    "an action that ran no code because its binding never ran": Row(
        WIRING, "probe.nothing_ran",
        probe_failure(CHECK, {"do": "click", "locator": "#go"}, coverage={"functions": []}),
        direct=("window.addEventListener('load', start)",),
        demoted=("document.getElementById('out').textContent = n;",), spared=("n += 1;",)),
    "a handler that ran, and a writer of the same element that did not": Row(
        GROUNDED, "probe.ground",
        probe_failure({"expect": "text", "locator": "#out", "value": "1"},
                      {"do": "click", "locator": "#go"}, coverage=_ran(GROUNDED, "onGo", "paint")),
        demoted=("document.getElementById('out').textContent = 'x';",)),
    "the value of an element that has none": Row(
        VALUELESS, "smells.blame_definite_bugs",
        probe_failure({"expect": "text", "locator": "#out", "value": "10"},
                      {"do": "click", "locator": "#go"}, coverage=_ran(VALUELESS, "onGo")),
        demoted=(VALUELESS[VALUELESS.index("function onGo"):VALUELESS.index("\n}") + 2],)),
    "state read as null that no code sets": Row(
        UNSET, "unset.unset_state_at",
        page_error("uncaught TypeError: Cannot read properties of null (reading 'cells')",
                   _frames(UNSET, "grid.cells", "draw();", "setup();")),
        direct=("size = 8;",), spared=("<canvas",)),
    "an element of the wrong kind handed to a library": Row(
        PLOT, "errors.library_arguments",
        page_error("uncaught TypeError: t.getAttribute is not a function",
                   [{"in_app": False, "offset": None}, *_frames(PLOT, "Plotly.newPlot", "draw();")]),
        direct=("const box = document.getElementById('n');",),
        spared=("const title = 'growth';",)),
    "state only code that never runs sets": Row(
        NEVER_SET, "errors.unreached_writers",
        page_error("uncaught TypeError: Cannot read properties of undefined (reading 'items')",
                   _frames(NEVER_SET, "scene.items")),
        direct=("window.addEventListener('load', tick)",),
        context=("function build() {\n  scene = {items: []};\n}",), spared=("const speed = 3;",)),
    "a class whose style rule says the opposite": Row(
        THEMED, "probe.css_rules",
        probe_failure({"expect": "css", "locator": "#label", "property": "font-size",
                       "value": "30px"}, None),
        context=(".big { font-size: 10px; }",), spared=("#label { margin: 4px; }",),
        method="text"),
    "callers and callees of a blamed handler": Row(
        CALLER, "probe.context",
        probe_failure({"expect": "text", "locator": "#out", "value": "1"},
                      {"do": "click", "locator": "#go"}),
        context=("function add(x) { return x + 1; }",), spared=("const colour = 'red';",),
        method="text"),
    "the statements whose values reach the checked element": Row(
        SLICED, "flow.narrow_to_slice",
        probe_failure({"expect": "text", "locator": "#out", "value": "1"},
                      {"do": "click", "locator": "#go"}, coverage=_ran(SLICED, "onGo")),
        direct=("const shown = k * factor - 1;", "const factor = 3;", "let k = names.length;"),
        spared=("console.log(names.slice(4, 6));",), narrows=True),
    "a JavaScript syntax error": Row(
        BROKEN, "errors.syntax_error",
        {"kind": "syntax_error", "reason": "source_error", "stage": "source",
         "severity": "severe", "message": "syntax error", "lang": "javascript",
         "span": [BROKEN.index("*;"), BROKEN.index("*;") + 2]},
        direct=("*;",), spared=("const ok = 1;",)),
    "a loop without an exit on a page that hung": Row(
        LOOPING, "errors.loops", {"kind": "runtime_failure", "reason": "hang", "message": "h"},
        direct=("for (;;) { t += 1; }",), context=("while (t < 3) { t++; }",),
        spared=("let t = 0;",)),
    "the code a judge quoted": Row(
        CALLER, "judge.quoted_code",
        {"kind": "judge_finding", "reason": "judge_finding", "stage": "rubric",
         "severity": "severe", "message": "doubles the total", "rubric_id": "r",
         "evidence_code": "textContent = total * 2", "evidence_line": 6},
        direct=("document.getElementById('out').textContent = total * 2;",),
        spared=("total = add(total);",)),
    "a handler a judge named without a quote that is in the app": Row(
        CALLER, "judge.named_code",
        {"kind": "judge_finding", "reason": "judge_finding", "stage": "rubric",
         "severity": "severe", "message": "m", "rubric_id": "r",
         "evidence_code": "render(total);", "handler": "show"},
        direct=("function show() {",), spared=("const colour = 'red';",)),
    "siblings set beside the one left unset": Row(
        SIBLINGS, "unset.sibling_runs",
        page_error("uncaught TypeError: Cannot set properties of undefined (setting "
                   "'onchange')", _frames(SIBLINGS, "boxB.onchange", "wire();")),
        direct=("boxA = document.getElementById('a');",), spared=("const note = 'x';",)),
    "an earlier read that passed the missing value on": Row(
        PASSED_ON, "unset.earlier_reads",
        page_error("uncaught TypeError: Cannot read properties of undefined (reading 'reset')",
                   _frames(PASSED_ON, "mesh.reset()", "paint();", "start();")),
        direct=("parts.push(mesh);",), spared=("const label = 'demo';",)),
    "a button with no handler while its siblings have one": Row(
        UNBOUND, "wiring.unbound_actor",
        probe_failure({"expect": "text", "locator": "#out", "value": "2"},
                      {"do": "click", "locator": "#two"}),
        direct=("document.getElementById('one').addEventListener('click', ",),
        spared=("const theme = 'dark';",), method="text"),
}


def _code(app: str, text: str) -> tuple[int, int]:
    start = app.index(text)
    return start, start + len(text)


def _inside(span, spans) -> bool:
    return any(s <= span[0] and span[1] <= e for s, e in spans)


def _overlaps(span, spans) -> bool:
    return any(a < span[1] and span[0] < b for a, b in spans)


def _by(loc, rule: str, which: str | None = None) -> list[tuple[int, int]]:
    return [tuple(e["span"]) for e in loc.evidence if rule in rules_of(e)
            and (which is None or e["set"] == which)]


@pytest.mark.parametrize("name", sorted(ROWS))
def test_rule_intent(name):
    row = ROWS[name]
    loc = localize(build_graph(row.app), row.diagnostic, row.method)
    for text in row.direct:
        code = _code(row.app, text)
        assert _inside(code, loc.s_dir), f"{name}: {text!r} not blamed directly"
        assert _overlaps(code, _by(loc, row.rule)), f"{name}: {text!r} not blamed by {row.rule}"
    for text in row.context:
        code = _code(row.app, text)
        assert _inside(code, list(loc.s_dir) + list(loc.s_ctx)), f"{name}: {text!r}"
        assert _overlaps(code, _by(loc, row.rule)), f"{name}: {text!r} not blamed by {row.rule}"
    for text in row.spared:
        assert not _overlaps(_code(row.app, text), loc.s_dir), f"{name}: {text!r} blamed"
    for text in row.demoted:
        assert _demoted(loc, _code(row.app, text)) == {row.rule}, f"{name}: {text!r}"


def _demoted(loc, code) -> set[str]:
    """The rules that demoted the blame of exactly ``code`` (absent: not demoted)."""
    return {e.get("demoted_by") for e in loc.evidence if tuple(e["span"]) == code
            and e["set"] == "ctx" and e.get("demoted_by")}


@pytest.mark.parametrize("name", sorted(ROWS))
def test_each_row_needs_its_rule(name):
    """With the row's rule off, what the row must blame directly is no longer blamed
    directly by any rule other than a declared fallback."""
    row = ROWS[name]
    off = localize(build_graph(row.app), row.diagnostic, row.method,
                   cfg=LocalizeConfig({row.rule}))
    assert not any(row.rule in rules_of(e) for e in off.evidence)
    if row.narrows:
        assert any(_overlaps(_code(row.app, t), off.s_dir) for t in row.spared), name
        return
    for text in row.direct:
        code = _code(row.app, text)
        by = {r for e in off.evidence if e["set"] == "dir"
              and _overlaps(code, [tuple(e["span"])]) for r in rules_of(e)}
        assert by <= {"probe.naive_queries"}, f"{name}: {text!r} still blamed by {sorted(by)}"
    for text in row.context:
        code = _code(row.app, text)
        assert not any(_inside(code, [tuple(e["span"])]) for e in off.evidence), (
            f"{name}: {text!r} still blamed with {row.rule} off")
    for text in row.demoted:
        code = _code(row.app, text)
        assert any(tuple(e["span"]) == code and e["set"] == "dir" for e in off.evidence), (
            f"{name}: {text!r} is not direct blame when {row.rule} is off")
