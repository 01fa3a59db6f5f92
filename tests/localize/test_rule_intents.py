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
from tests.localize import rows_origins
from tests.localize.diags import page_error, probe_failure, rules_of
from tests.localize.test_spans_forward import PROBE as READINGS, SCENE


@dataclasses.dataclass(frozen=True)
class Row:
    """One intent: in ``app``, ``diagnostic`` makes ``rule`` blame ``direct`` in S_dir (and
    ``context`` in S_dir or S_ctx), ``rule`` moves what another rule blamed directly in
    ``demoted`` to the context, removes the blame of exactly ``dropped``, and nothing blames
    ``spared`` directly. A rule that ``narrows`` replaces broader blame by its own: switched
    off, ``spared`` is blamed. ``probe`` is the rubric's probe, when the step compares
    readings it saved."""

    app: str
    rule: str
    diagnostic: dict
    direct: tuple[str, ...] = ()
    context: tuple[str, ...] = ()
    spared: tuple[str, ...] = ()
    demoted: tuple[str, ...] = ()
    dropped: tuple[str, ...] = ()
    method: str = "grounded"
    narrows: bool = False  # the rule replaces broader blame: off, ``spared`` is blamed
    probe: dict | None = None


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

# A write through an item of a row: the inner index runs past the row's end.
CELLS = """<canvas id="c"></canvas>
<script>
const N = 3;
let grid = [];
function build() {
  grid = [];
  for (let i = 0; i < N; i++) {
    const row = [];
    for (let j = 0; j < N; j++) { row.push({g: 0}); }
    grid.push(row);
  }
}
function clearCosts() {
  const total = N * N;
  for (let i = 0; i < N; i++) {
    for (let j = 0; j <= N; j++) {
      grid[i][j].g = Infinity;
    }
  }
  return total;
}
build();
clearCosts();
</script>"""

# The drawing context and a coordinate handed over in each other's places.
SWAPPED = """<canvas id="c"></canvas>
<script>
const pen = document.getElementById('c').getContext('2d');
function figure(g, x, y) {
  g.save();
  g.translate(x, y);
  g.fillRect(0, 0, 4, 8);
  g.restore();
}
function scene() {
  const h = 10;
  figure(0, pen, h);
}
scene();
</script>"""

# A number handed where a function belongs.
NOT_CALLABLE = """<span id="out"></span>
<script>
function twice(n) { return 2 * n; }
function run(fn, n) {
  const label = 'result';
  return fn(n);
}
document.getElementById('out').textContent = run(3, twice);
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

MISSPELLED = """<input id="speed" value="5"><span id="out">0</span><button id="go">go</button>
<script>
const speed = document.getElementById('speed');
const out = document.getElementById('out');
const log = {values: []};
function onGo() {
  const v = Number(speed.value);
  log.values.push(v);
  out.innerhtml = v * 2;
}
document.getElementById('go').addEventListener('click', onGo);
</script>"""

CUT_SHORT = """<span id="out">0</span><button id="go">go</button>
<script>
let n = 0;
function pick(k) {
  switch (k) { case 1: return 'one'; case 2: return 'two'; }
  return 'many';
}
function onGo() {
  n += 1;
  console.log('go');
  return;
  document.getElementById('out').textContent = pick(n);
}
document.getElementById('go').addEventListener('click', onGo);
</script>"""

# The loop that fills the list compares the wrong way: 0 > 3 is false, its body never runs.
NEVER_LOOPS = """<ul id="out"></ul><button id="go">go</button>
<script>
const n = 3;
function onGo() {
  const out = document.getElementById('out');
  out.innerHTML = '';
  console.log('go');
  for (let i = 0; i > 3; i++) {
    out.innerHTML += '<li>' + i + '</li>';
  }
  for (let j = 0; j < n; j++) { console.log(j); }
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


CANVASES = """<canvas id="canvas-3d"></canvas><canvas id="canvas-2d"></canvas>
<script>
const gl3 = document.getElementById('canvas-3d');
const canvas2d = document.getElementById('canvas-3d');
const pen = canvas2d.getContext('2d');
function render() {
  new THREE.WebGLRenderer({canvas: gl3});
}
const speed = 2;
render();
</script>"""

UNDEFINED = """<script>
const limit = 3;
function boom() {
  return missing.value;
}
boom();
</script>"""

CONTAINER = """<ul id="list"></ul><button id="add">add</button>
<script>
const box = document.getElementById('list');
const title = 'x';
function addItem() { box.append(document.createElement('p')); }
document.getElementById('add').addEventListener('click', addItem);
</script>"""

CLASSED = """<p id="label" class="big">hi</p>
<script>const size = 1;</script>"""

START_UP = """<canvas id="c"></canvas>
<script>
let grid = null;
let width = 0, height = 0;
const label = 'demo';
function draw() {
  for (const cell of grid.cells) { width += cell; }
}
function setup() {
  width = 8;
  height = 4;
  draw();
}
setup();
</script>"""

BUILT = """<script>
let geometry = null;
const tag = 'demo';
function build() {
  const shape = new Path2D();
  shape.moveTo(0, 0);
  shape.lineTo(1, 1);
  const count = 3;
  console.log(count);
  geometry.scale(count);
}
build();
</script>"""

ECHOED = """<input id="a"><input id="b"><button id="reset">reset</button>
<script>
const speed = 1;
function resetB() { document.getElementById('b').value = 0.5; }
function setA() { document.getElementById('a').value = 1; }
function onReset() { setA(); resetB(); }
document.getElementById('reset').addEventListener('click', onReset);
</script>"""

ELSEWHERE = """<button id="inc">+</button><div><a id="dec">-</a></div><span id="out">0</span>
<script>
let n = 0;
const theme = 'dark';
function show() { document.getElementById('out').textContent = n; }
function onInc() { n += 1; show(); }
document.getElementById('inc').addEventListener('click', onInc);
</script>"""

UNUSED_READ = SCENE.replace("  group.rotation.x = xDeg * (Math.PI * 180);\n", "")


def _readings(app: str) -> dict:
    """The failed ``assert`` of ``READINGS`` (two canvas snapshots equal after a fill of #rx),
    with ``redraw`` run."""
    return {**probe_failure(READINGS["steps"][3], READINGS["steps"][1],
                            coverage=_ran(app, "redraw"), message="assert failed"),
            "step_index": 3}


def _library(app: str, message: str, *codes: str) -> dict:
    """An exception raised inside a library called at ``codes[0]``."""
    return page_error(message, [{"in_app": False, "offset": None}, *_frames(app, *codes)])


RETURNS = """<canvas id="c"></canvas><script>
function makeShape(r) {
  if (r > 10) return;
  return {position: {x: r}};
}
function place(r) {
  const shape = makeShape(r);
  shape.position.x += 1;
}
place(20);
</script>"""

GUARDED_BINDING = """<input id="s" type="range"><span id="out">0</span>
<script>
function wire() {
  const s = document.getElementById('s');
  if (!s.dataset.ready) return;
  s.addEventListener('input', () => { document.getElementById('out').textContent = s.value; });
}
document.addEventListener('DOMContentLoaded', wire);
</script>"""

# The binding is made in wire(); start() can return before it calls wire().
CALLER_CUT = """<input id="s" type="range"><span id="out">0</span>
<script>
function wire() {
  const s = document.getElementById('s');
  s.addEventListener('input', () => { document.getElementById('out').textContent = s.value; });
}
function start() {
  if (!document.body.dataset.ready) return;
  wire();
}
document.addEventListener('DOMContentLoaded', start);
</script>"""

# The handler is bound to items of a list the graph cannot resolve to #s.
LIST_CUT = """<input id="s" type="range"><span id="out">0</span>
<script>
function wire(list) {
  list.forEach((c) => {
    if (!c.dataset.ready) return;
    c.addEventListener('input', () => { document.getElementById('out').textContent = c.value; });
  });
}
wire(Array.from(document.getElementsByTagName('input')));
</script>"""

# The binding is made in a callback of forEach; wire() can return before it makes the callback.
AROUND_CUT = """<input id="s" class="c" type="range"><span id="out">0</span>
<script>
function wire() {
  if (!document.body.dataset.ready) return;
  document.querySelectorAll('.c').forEach((c) => {
    c.addEventListener('input', () => { document.getElementById('out').textContent = c.value; });
  });
}
wire();
</script>"""

# Every write of group sits after a return in build(): the read in draw() finds it unset.
DEAD_WRITER = """<canvas id="c"></canvas><script>
let group;
function build() {
  return;
  group = new Set();
}
function draw() {
  group.clear();
}
build();
draw();
</script>"""

# model() can return nothing, and show() destructures what it gave.
DESTRUCTURED = """<span id="out"></span><script>
function model(n) {
  if (n > 10) return;
  return {total: n};
}
function show(n) {
  const { total } = model(n);
  document.getElementById('out').textContent = total;
}
show(20);
</script>"""

# draw() reads its parameter, which is what items() gave: nothing.
PASSED_NOTHING = """<canvas id="c"></canvas><script>
function items(n) {
  if (n > 10) return;
  return new Array(n).fill(1);
}
function draw(list) {
  for (let i = 0; i < list.length; i++) {}
}
draw(items(20));
</script>"""

# The same, read by index (`ys[i]`): the message names the index read ('0'), not the variable.
ITEM_OF_NOTHING = """<canvas id="c"></canvas><script>
function smooth(v) {
  if (v.length > 2) return;
  return v.map((x) => x / 2);
}
function plot(ys) {
  const g = document.getElementById('c').getContext('2d');
  for (let i = 0; i < 3; i++) g.fillRect(i, ys[i], 1, 1);
}
const raw = [1, 2, 3];
const soft = smooth(raw);
plot(soft);
</script>"""

# shape() calls one of SHAPES by key; the one asked for returns nothing. `line` gives its
# expression (an arrow without braces): not a function that returns nothing.
BY_KEY = """<canvas id="c"></canvas><script>
const SHAPES = {
  dot: (r) => { return; },
  line: (r) => ({x: r}),
};
function place(kind) {
  const p = SHAPES[kind](3);
  p.x += 1;
}
place('dot');
</script>"""

REFUSED = """<span id="out"></span><script>
function wire() {
  document.addEventListener((e) => {
    document.getElementById('out').textContent = 'up';
  }, 'pointerup');
}
wire();
</script>"""

LOOKUP = """<span id="out"></span><script>
const PALETTES = {warm: ['red']};
let palette = null;
function choose(name) {
  palette = PALETTES[name];
}
function paint() {
  document.getElementById('out').textContent = palette.length;
}
choose('cold');
paint();
</script>"""

CHECK = {"expect": "text", "locator": "#out", "value": "1"}
# #out is wrong after a fill of #s, and no code ran after the fill.
FILLED_UNHANDLED = {**probe_failure({"expect": "text", "locator": "#out", "value": "5"},
                                    {"do": "fill", "locator": "#s", "value": "5"}),
                    "coverage": {"functions": []}}
ROWS = {
    "a return before the binding of the acted-on element's handler": Row(
        GUARDED_BINDING, "probe.binding_cut_short", FILLED_UNHANDLED,
        direct=("return;",), context=("if (!s.dataset.ready)",)),
    "a property read on what a lookup of a missing key gave": Row(
        LOOKUP, "errors.undefined_lookup",
        page_error("uncaught TypeError: Cannot read properties of undefined (reading "
                   "'length')", _frames(LOOKUP, "document.getElementById('out').textContent",
                                        "paint();")),
        direct=("palette = PALETTES[name];",), spared=("const PALETTES = {warm: ['red']};",)),
    "a value read from a call that returned nothing": Row(
        RETURNS, "errors.returned_nothing",
        page_error("uncaught TypeError: Cannot read properties of undefined (reading "
                   "'position')", _frames(RETURNS, "shape.position.x += 1", "place(20)")),
        direct=("return;",), spared=("return {position: {x: r}};",)),
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
    "a write through an item of a row, past the row's end": Row(
        CELLS, "errors.undefined_items",
        page_error("uncaught TypeError: Cannot set properties of undefined (setting 'g')",
                   _frames(CELLS, "grid[i][j].g = Infinity;", "clearCosts();")),
        direct=("for (let j = 0; j <= N; j++)",),
        spared=("const total = N * N;",)),
    "a method of a parameter that is not there: the caller handed the wrong value": Row(
        SWAPPED, "errors.wrong_argument",
        page_error("uncaught TypeError: g.save is not a function",
                   _frames(SWAPPED, "g.save();", "figure(0, pen, h);", "scene();\n</script>")),
        direct=("figure(0, pen, h);",), spared=("const h = 10;", "g.translate(x, y);")),
    "a parameter called that is not a function": Row(
        NOT_CALLABLE, "errors.wrong_argument",
        page_error("uncaught TypeError: fn is not a function",
                   _frames(NOT_CALLABLE, "return fn(n);", "run(3, twice)")),
        direct=("document.getElementById('out').textContent = run(3, twice);",),
        spared=("const label = 'result';",)),
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
    "an element property misspelled in a function that ran": Row(
        MISSPELLED, "smells.misspelled_property",
        probe_failure({"expect": "text", "locator": "#out", "value": "10"},
                      {"do": "click", "locator": "#go"}, coverage=_ran(MISSPELLED, "onGo")),
        direct=("out.innerhtml = v * 2;",), spared=("log.values.push(v);",), narrows=True,
        demoted=(MISSPELLED[MISSPELLED.index("function onGo"):MISSPELLED.index("\n}") + 2],)),
    "a return that leaves the rest of its block unreachable": Row(
        CUT_SHORT, "smells.unreachable_code",
        probe_failure({"expect": "text", "locator": "#out", "value": "one"},
                      {"do": "click", "locator": "#go"},
                      coverage=_ran(CUT_SHORT, "onGo")),
        direct=("return;",), spared=("console.log('go');", "return 'one';", "return 'many';"),
        narrows=True,
        demoted=(CUT_SHORT[CUT_SHORT.index("function onGo"):CUT_SHORT.index("\n}\ndoc") + 2],)),
    "a loop whose condition is false for its counter's first value": Row(
        NEVER_LOOPS, "smells.loop_never_runs",
        probe_failure({"expect": "count", "locator": "#out li", "value": 3},
                      {"do": "click", "locator": "#go"},
                      coverage=_ran(NEVER_LOOPS, "onGo")),
        direct=("for (let i = 0; i > 3; i++)",),
        spared=("console.log('go');", "for (let j = 0; j < n; j++)"), narrows=True,
        demoted=(NEVER_LOOPS[NEVER_LOOPS.index("function onGo"):
                             NEVER_LOOPS.index("\n}\ndoc") + 2],)),
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
    "another lookup of the element a failing library got, named after another element": Row(
        CANVASES, "errors.shared_elements",
        _library(CANVASES, "uncaught Error: context taken", "new THREE.WebGLRenderer",
                 "render();"),
        direct=("const canvas2d = document.getElementById('canvas-3d');",),
        spared=("const speed = 2;",)),
    "the statement of the exception's top in-app frame": Row(
        UNDEFINED, "errors.page_error_stack",
        page_error("uncaught ReferenceError: missing is not defined",
                   _frames(UNDEFINED, "missing.value", "boom();")),
        direct=("return missing.value;",), context=("boom();",), spared=("const limit = 3;",)),
    "the line an exception report quotes, without a stack": Row(
        UNDEFINED, "errors.page_error_text",
        page_error("uncaught ReferenceError: missing is not defined", [],
                   excerpt="return missing.value;"),
        direct=("return missing.value;",), spared=("const limit = 3;",), method="text"),
    "the baseline for an exception: the function of the top frame": Row(
        UNDEFINED, "errors.page_error_naive",
        page_error("uncaught ReferenceError: missing is not defined",
                   _frames(UNDEFINED, "missing.value", "boom();")),
        direct=("function boom() {\n  return missing.value;\n}",),
        spared=("const limit = 3;",), method="naive"),
    "the baseline for a syntax error: the function around it": Row(
        BROKEN, "errors.syntax_naive",
        {"kind": "syntax_error", "reason": "source_error", "stage": "source",
         "severity": "severe", "message": "syntax error", "lang": "javascript",
         "span": [BROKEN.index("*;"), BROKEN.index("*;") + 2]},
        direct=("function area(r) {\n  return Math.PI * r *;\n}",), spared=("const ok = 1;",),
        method="naive"),
    "a long function whose statements a slice blamed is context, not blamed whole": Row(
        SCENE, "flow.replace_long_functions", _readings(SCENE), probe=READINGS,
        demoted=(SCENE[SCENE.index("function redraw"):SCENE.index("\n}\nObject") + 2],)),
    "the statements the value of the input acted on reaches": Row(
        SCENE, "forward.follow_actor_value", _readings(SCENE), probe=READINGS,
        direct=("const xDeg = parseFloat(controls.rx.value);",
                "group.rotation.x = xDeg * (Math.PI * 180);"),
        spared=("ctx.strokeRect(5, 5, 290, 140);",)),
    "a value read from the input acted on that nothing uses": Row(
        UNUSED_READ, "forward.dead_value", _readings(UNUSED_READ), probe=READINGS,
        direct=("group.rotation.z = zDeg * (Math.PI / 180);",),
        spared=("ctx.strokeRect(5, 5, 290, 140);",)),
    "the baseline for a judge finding: the function around the quote": Row(
        CALLER, "judge.naive",
        {"kind": "judge_finding", "reason": "judge_finding", "stage": "rubric",
         "severity": "severe", "message": "doubles the total", "rubric_id": "r",
         "evidence_code": "textContent = total * 2", "evidence_line": 6},
        direct=("function show() { document.getElementById('out').textContent = total * 2; }",),
        spared=("const colour = 'red';",), method="naive"),
    "the HTML of the element acted on": Row(
        CALLER, "probe.actor_handlers",
        probe_failure(CHECK, {"do": "click", "locator": "#go"}),
        context=('<button id="go">go</button>',), method="text"),
    "the attribute that holds the checked state at load": Row(
        CLASSED, "probe.element_html",
        probe_failure({"expect": "class", "locator": "#label", "value": "small"}, None),
        direct=('class="big"',), spared=("const size = 1;",), method="text"),
    "the code rendering into the container of a missing element": Row(
        CONTAINER, "probe.missing_container",
        probe_failure({"expect": "visible", "locator": "#list li"},
                      {"do": "click", "locator": "#add"}, reason="missing_element", actual=None),
        direct=("box.append(document.createElement('p'));",), context=('<ul id="list">',),
        spared=("const title = 'x';",), method="text"),
    "start-up statements that ran before a read of state nothing set": Row(
        START_UP, "unset.start_up_before",
        page_error("uncaught TypeError: Cannot read properties of null (reading 'cells')",
                   _frames(START_UP, "grid.cells", "draw();", "setup();")),
        direct=("width = 8;",), spared=("const label = 'demo';",)),
    "a local built and never used before the failing read": Row(
        BUILT, "unset.unconsumed_locals",
        page_error("uncaught TypeError: Cannot read properties of null (reading 'scale')",
                   _frames(BUILT, "geometry.scale", "build();")),
        direct=("const count = 3;",), spared=("const tag = 'demo';",)),
    "the expected value written to another element": Row(
        ECHOED, "wiring.expected_written_elsewhere",
        probe_failure({"expect": "value", "locator": "#a", "value": "0.5"},
                      {"do": "click", "locator": "#reset"},
                      coverage=_ran(ECHOED, "onReset", "setA", "resetB")),
        direct=("document.getElementById('b').value = 0.5;",), spared=("const speed = 1;",)),
    "a handler updating the checked element bound to another element": Row(
        ELSEWHERE, "wiring.writers_bound_elsewhere",
        probe_failure({"expect": "text", "locator": "#out", "value": "-1"},
                      {"do": "click", "locator": "#dec"}),
        direct=("document.getElementById('inc').addEventListener('click', ",),
        spared=("const theme = 'dark';",), method="text"),
    "a return in the caller before the call that makes the handler's binding": Row(
        CALLER_CUT, "probe.binding_cut_short", FILLED_UNHANDLED,
        direct=("return;",), context=("if (!document.body.dataset.ready)",)),
    "a return before a binding on a target no lookup resolves": Row(
        LIST_CUT, "probe.binding_cut_short", FILLED_UNHANDLED,
        direct=("return;",), context=("if (!c.dataset.ready)",)),
    "a return before the statement that makes the callback holding the binding": Row(
        AROUND_CUT, "probe.binding_cut_short", FILLED_UNHANDLED,
        direct=("return;",), context=("if (!document.body.dataset.ready)",)),
    # Thrown in a step, not at load: at load `smells.unreachable_code` blames the jump too.
    "a null read of state whose only write can never run": Row(
        DEAD_WRITER, "smells.dead_writers",
        page_error("uncaught TypeError: Cannot read properties of undefined (reading 'clear')",
                   _frames(DEAD_WRITER, "group.clear();", "draw();"), reason="uncaught_in_step"),
        direct=("return;",)),
    "a destructuring of what a call returned, which was nothing": Row(
        DESTRUCTURED, "errors.returned_nothing",
        page_error("uncaught TypeError: Cannot destructure property 'total' of 'model(...)' as "
                   "it is undefined.", _frames(DESTRUCTURED, "const { total }", "show(20);")),
        direct=("return;",)),
    "a parameter read unset, passed from a call that returned nothing": Row(
        PASSED_NOTHING, "errors.missing_argument",
        page_error("uncaught TypeError: Cannot read properties of undefined (reading 'length')",
                   _frames(PASSED_NOTHING, "list.length", "draw(items(20));")),
        direct=("return;", "draw(items(20));")),
    "an item of a parameter read unset, passed from a call that returned nothing": Row(
        ITEM_OF_NOTHING, "errors.missing_argument",
        page_error("uncaught TypeError: Cannot read properties of undefined (reading '0')",
                   _frames(ITEM_OF_NOTHING, "ys[i]", "plot(soft);")),
        direct=("return;", "plot(soft);"), spared=("const raw = [1, 2, 3];",)),
    "a value read from a call by key that returned nothing": Row(
        BY_KEY, "errors.returned_nothing",
        page_error("uncaught TypeError: Cannot read properties of undefined (reading 'x')",
                   _frames(BY_KEY, "p.x += 1;", "place('dot');")),
        direct=("return;",), spared=("line: (r) => ({x: r}),",)),
    "a call a web API refused, its arguments included": Row(
        REFUSED, "errors.rejected_call",
        page_error("uncaught TypeError: Failed to execute 'addEventListener' on 'EventTarget': "
                   "parameter 2 is not of type 'Object'.",
                   _frames(REFUSED, "addEventListener((e)", "wire();")),
        # The statement's head stops at the callback; the refused order ends after it.
        direct=("'pointerup'", "document.getElementById('out').textContent = 'up';")),
}

# Two buttons share show(); the failing probe clicked #b, the passing one #a. Names say
# nothing here: only which code each probe's path ran.
SPECTRUM = """<span id="n">0</span><span id="m">0</span>
<button id="a">a</button><button id="b">b</button>
<script>
let n = 0, m = 0;
function show() { document.getElementById('n').textContent = n; document.getElementById('m').textContent = m; }
document.getElementById('a').addEventListener('click', () => { n += 1; show(); });
document.getElementById('b').addEventListener('click', () => { m -= 1; show(); });
</script>"""


def _path(app: str, *starts: str) -> dict:
    """Coverage in which the functions starting with each text ran once."""
    g = build_graph(app)
    spans = [next(f.span for f in g.functions if f.span[0] == app.index(t)) for t in starts]
    return {"functions": [{"start": a, "end": b, "count": 1} for a, b in spans], "skipped": []}


ROWS["what only the failing probe's path ran"] = Row(
    SPECTRUM, "probe.spectrum",
    {**probe_failure({"expect": "text", "locator": "#m", "value": "1"},
                     {"do": "click", "locator": "#b"}),
     "coverage": _path(SPECTRUM, "function show", "() => { m -= 1"),
     "spectrum": {"failing": [_path(SPECTRUM, "function show", "() => { m -= 1")],
                  "passing": [_path(SPECTRUM, "function show", "() => { n += 1")]}},
    direct=("m -= 1;",), context=("document.getElementById('m').textContent = m;",),
    spared=("n += 1;", "document.getElementById('m').textContent = m;"), method="sbfl")

# The page's recorded writes of the checked element (trace_writers): nothing in the code names
# the element; only the write's stack leads to it.
WRITTEN = """<span id="total">0</span><button id="go">go</button>
<script>
const slot = () => document.querySelectorAll('span')[0];
function put(el, k, v) { el[k] = v; }
function paint(el, k, v) { el.style[k] = v; }
function refresh() { put(slot(), 'textContent', 5); paint(slot(), 'display', 'none'); }
document.querySelector('button').addEventListener('click', refresh);
</script>"""


def _write(kind: str, *codes: str) -> dict:
    return {"kind": kind, "where": "self", "frames": _frames(WRITTEN, *codes)}


ROWS["the latest write of what the failed check read"] = Row(
    WRITTEN, "probe.writers",
    {**probe_failure({"expect": "visible", "locator": "#total"}, {"do": "click", "locator": "#go"}),
     "writers": [_write("text", "el[k] = v;", "put(slot(), 'textContent', 5);"),
                 _write("style", "el.style[k] = v;", "paint(slot(), 'display', 'none');")]},
    direct=("el.style[k] = v;",), spared=("el[k] = v;",))

# The recorded write starts a slice that follows what flowed into it: the value came back
# from `cost`, which no stack of the write shows and nothing names after the element.
FLOWED = """<span id="total">0</span><button id="go">go</button>
<script>
let price = 3;
const slot = () => document.querySelectorAll('span')[0];
function put(el, k, v) { el[k] = v; }
function cost(q) {
  const base = q * price;
  console.log('pricing', q);
  // padding: a function this long is narrowed to its slice instead of blamed whole.......
  // padding: a function this long is narrowed to its slice instead of blamed whole.......
  // padding: a function this long is narrowed to its slice instead of blamed whole.......
  // padding: a function this long is narrowed to its slice instead of blamed whole.......
  return base - 1;
}
function refresh() { const t = cost(2); put(slot(), 'textContent', t); }
document.querySelector('button').addEventListener('click', refresh);
</script>"""

ROWS["what flowed into the recorded write"] = Row(
    FLOWED, "flow.traced_slice",
    {**probe_failure({"expect": "text", "locator": "#total", "value": "6"},
                     {"do": "click", "locator": "#go"}),
     "coverage": _ran(FLOWED, "refresh", "cost", "put", "slot"),
     "writers": [{"kind": "text", "where": "self",
                  "frames": _frames(FLOWED, "el[k] = v;", "put(slot(), 'textContent', t);")}]},
    direct=("const base = q * price;", "return base - 1;"),
    spared=("console.log('pricing', q);",), narrows=True)

# A write of the checked element that its function skipped: block coverage says which block
# did not run; what made it skip is to blame, not the write.
EARLY = """<span id="out">0</span><button id="go">go</button>
<script>
let n = 0;
function bump() {
  n += 1;
  // padding: a function this long is narrowed to its slice instead of blamed whole.......
  // padding: a function this long is narrowed to its slice instead of blamed whole.......
  // padding: a function this long is narrowed to its slice instead of blamed whole.......
  // padding: a function this long is narrowed to its slice instead of blamed whole.......
  // padding: a function this long is narrowed to its slice instead of blamed whole.......
  while (n > 0) {
    if (n < 9) break;
    document.getElementById('out').textContent = n;
  }
}
document.getElementById('go').addEventListener('click', bump);
</script>"""


def _skipping(fn: str, after: str, until: str) -> dict:
    """Coverage in which ``fn`` ran and the code from the end of ``after`` to the end of
    ``until`` (both in that function) did not."""
    g = build_graph(EARLY)
    f = next(f for f in g.functions if f.name == fn)
    a = EARLY.index(after, f.span[0]) + len(after)
    return {"functions": [{"name": fn, "start": f.span[0], "end": f.span[1], "count": 1}],
            "skipped": [[a, EARLY.index(until, a) + len(until)]]}


# A `return` or `throw` before the write is in its slice (`flow.FlowGraph.slice`); a `break`
# or `continue` that skipped it is this rule's alone.
ROWS["a jump that skipped the element's write"] = Row(
    EARLY, "flow.skipped_by",
    {**probe_failure({"expect": "text", "locator": "#out", "value": "1"},
                     {"do": "click", "locator": "#go"}),
     "coverage": _skipping("bump", "break;", "textContent = n;\n")},
    direct=("break;",))

_BUG = SPECTRUM.index("m -= 1;")
ROWS["the bug injected into the task's SFT reference"] = Row(
    SPECTRUM, "oracle.injected_bug",
    {**probe_failure({"expect": "text", "locator": "#m", "value": "1"},
                     {"do": "click", "locator": "#b"}),
     "sft_bug": {"kind": "operator", "before": SPECTRUM[_BUG - 12:_BUG + 2], "new": "-",
                 "after": SPECTRUM[_BUG + 3:_BUG + 14]}},
    direct=("-",), spared=("n += 1;", "show();"), method="oracle")

ROWS.update(rows_origins.rows(Row))

# One option short: the writer the trace blames is right, the loop around it runs once too few.
SHORT_OPTIONS = """<select id="size"></select>
<script>
const sel = document.getElementById('size');
const unit = ' px';
for (let v = 1; v < 8; v++) {
  const o = document.createElement('option');
  o.textContent = v + unit;
  sel.appendChild(o);
}
</script>"""

ROWS["the loop around a statement blamed directly"] = Row(
    SHORT_OPTIONS, "context.enclosing_loops",
    {**probe_failure({"expect": "count", "locator": "#size option", "value": 8}, None),
     "writers": [{"kind": "child", "where": "self",
                  "frames": _frames(SHORT_OPTIONS, "sel.appendChild(o);")}]},
    context=("for (let v = 1; v < 8; v++)",), spared=("const unit = ' px';",))

# A handler blamed whole (it ran on the click), bound in a loop that stops one button short.
SHORT_BINDING = """<button class="m">a</button><button class="m">b</button><span id="out"></span>
<script>
const buttons = document.querySelectorAll('.m');
const sep = ': ';
function pick(e) { document.getElementById('out').textContent = e.target.textContent; }
for (let i = 0; i < buttons.length - 1; i++) {
  buttons[i].addEventListener('click', pick);
}
</script>"""

ROWS["the loop around the call site of a function blamed whole"] = Row(
    SHORT_BINDING, "context.enclosing_loops",
    probe_failure({"expect": "text", "locator": "#out", "value": "b"},
                  {"do": "click", "locator": ".m >> nth=1"}),
    context=("for (let i = 0; i < buttons.length - 1; i++)",), spared=("const sep = ': ';",))

# Rules that blame nothing themselves: they run other rules (a chain's step, or a gate on
# the diagnostic). Each is stated by a rule it runs: on, that rule blames; off, it does not.
DISPATCH = {
    "probe.probe_rules": (CALLER, probe_failure(CHECK, {"do": "click", "locator": "#go"}),
                          "text", "probe.failed_check"),
    "probe.probe_naive": (CALLER, probe_failure(CHECK, {"do": "click", "locator": "#go"}),
                          "naive", "probe.naive_queries"),
    "errors.runtime_failure": (LOOPING, {"kind": "runtime_failure", "reason": "hang",
                                         "message": "h"}, "grounded", "errors.loops"),
    "unset.unset_state": (UNSET, ROWS["state read as null that no code sets"].diagnostic,
                          "grounded", "unset.unset_state_at"),
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
    loc = localize(build_graph(row.app), row.diagnostic, row.method, row.probe)
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
    for text in row.dropped:
        assert not _exactly(loc, _code(row.app, text)), f"{name}: {text!r} still blamed"


def _exactly(loc, code) -> bool:
    """Whether some rule's blame of exactly ``code`` is left."""
    return any(tuple(e["span"]) == code for e in loc.evidence)


def _demoted(loc, code) -> set[str]:
    """The rules that demoted the blame of exactly ``code`` (absent: not demoted)."""
    return {e.get("demoted_by") for e in loc.evidence if tuple(e["span"]) == code
            and e["set"] == "ctx" and e.get("demoted_by")}


@pytest.mark.parametrize("name", sorted(ROWS))
def test_each_row_needs_its_rule(name):
    """With the row's rule off, what the row must blame directly is no longer blamed
    directly by any rule other than a declared fallback."""
    row = ROWS[name]
    off = localize(build_graph(row.app), row.diagnostic, row.method, row.probe,
                   cfg=LocalizeConfig({row.rule}))
    assert not any(row.rule in rules_of(e) for e in off.evidence)
    for text in row.dropped:
        assert _exactly(off, _code(row.app, text)), f"{name}: {text!r} not blamed when off"
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


@pytest.mark.parametrize("name", sorted(DISPATCH))
def test_a_dispatching_rule_runs_its_rules(name):
    app, diagnostic, method, inner = DISPATCH[name]
    on = localize(build_graph(app), diagnostic, method)
    off = localize(build_graph(app), diagnostic, method, cfg=LocalizeConfig({name}))
    assert any(inner in rules_of(e) for e in on.evidence), name
    assert not any(inner in rules_of(e) for e in off.evidence), name
    assert not any(name in rules_of(e) for e in on.evidence), f"{name} blames itself"


def test_every_rule_states_its_intent():
    """Every registered rule has a row here or in `test_rule_table.py`, runs others, or (for
    a rule over a record's diagnostics) has its own test module."""
    import inspect

    from evaluators.localize.rules import RULES
    from tests.localize import test_rule_table

    table = inspect.getsource(test_rule_table)
    stated = {r.rule for r in ROWS.values()} | set(DISPATCH)
    # Rules over a record's diagnostics rather than one case, each with a module of intents.
    from tests.localize import test_corroborate

    assert test_corroborate.test_a_handler_only_named_is_context_when_execution_blames_other_code
    stated |= {"judge.corroborate"}
    from tests.localize import test_rank

    assert test_rank.test_where_independent_facts_meet_is_direct_and_the_rest_context
    stated |= {"probe.rank"}
    stated |= {rid for rid in RULES if f'"{rid}"' in table}
    assert sorted(set(RULES) - stated) == []


def test_an_exception_name_with_its_report_prefix_reads_as_the_constructor_name():
    # Records written before names were normalised hold Chromium's prefix for errors it
    # could not take apart (a TypeError thrown inside a library): the rule still sees one.
    row = ROWS["an element of the wrong kind handed to a library"]
    old = dict(row.diagnostic, exception={**row.diagnostic["exception"],
                                          "name": "Uncaught TypeError"})
    box = _code(row.app, "const box = document.getElementById('n');")
    for diag in (row.diagnostic, old):
        loc = localize(build_graph(row.app), diag, row.method)
        assert _overlaps(box, _by(loc, "errors.library_arguments", "dir"))


def test_a_record_written_before_a_field_of_the_exception_existed_reads_the_same():
    # `rejected_call` came after records were scored: the reader takes it from the report
    # with the contract's parser, so an older record is localized like a new one.
    row = ROWS["a call a web API refused, its arguments included"]
    old = dict(row.diagnostic, exception={k: v for k, v in row.diagnostic["exception"].items()
                                          if k != "rejected_call"})
    refused = _code(row.app, "'pointerup'")
    for diag in (row.diagnostic, old):
        loc = localize(build_graph(row.app), diag, row.method)
        assert _overlaps(refused, _by(loc, "errors.rejected_call", "dir"))


def test_a_record_read_before_a_widened_field_reads_the_same():
    # `undefined_item` took only reads when earlier records were scored: their null for a
    # write's report is taken from the report, so they are localized like new ones.
    row = ROWS["a write through an item of a row, past the row's end"]
    assert row.diagnostic["exception"]["undefined_item"] == "g"
    old = dict(row.diagnostic, exception={**row.diagnostic["exception"], "undefined_item": None})
    head = _code(row.app, "for (let j = 0; j <= N; j++)")
    for diag in (row.diagnostic, old):
        loc = localize(build_graph(row.app), diag, row.method)
        assert _overlaps(head, _by(loc, "errors.undefined_items", "dir"))


def test_a_dead_write_beside_a_live_one_is_not_blamed():
    # `group` is also set where nothing stops it: the dead write does not explain the read.
    app = DEAD_WRITER.replace("function draw() {", "function reset() { group = new Set(); }\n"
                              "function draw() {")
    loc = localize(build_graph(app), page_error(
        "uncaught TypeError: Cannot read properties of undefined (reading 'clear')",
        _frames(app, "group.clear();", "draw();")), "grounded", None)
    assert not any("smells.dead_writers" in rules_of(e) for e in loc.evidence)


def test_an_arrow_that_gives_its_expression_is_not_said_to_return_nothing():
    loc = localize(build_graph(BY_KEY), page_error(
        "uncaught TypeError: Cannot read properties of undefined (reading 'x')",
        _frames(BY_KEY, "p.x += 1;", "place('dot');")), "grounded", None)
    line = _code(BY_KEY, "(r) => ({x: r})")
    assert not any("returns nothing" in e["why"] and _overlaps(line, [tuple(e["span"])])
                   for e in loc.evidence)


def test_a_missing_item_of_a_parameter_does_not_blame_the_call_that_passed_it():
    # `ys[i].y` names 'y': ys came, one of its items did not (an index past the end).
    app = ITEM_OF_NOTHING.replace("ys[i], 1, 1", "ys[i].y, 1, 1").replace(
        "return v.map((x) => x / 2);", "return v.map((x) => ({y: x / 2}));").replace(
        "if (v.length > 2) return;\n", "").replace("i < 3", "i <= 3")
    loc = localize(build_graph(app), page_error(
        "uncaught TypeError: Cannot read properties of undefined (reading 'y')",
        _frames(app, "ys[i].y", "plot(soft);")), "grounded", None)
    assert not any("errors.missing_argument" in rules_of(e) for e in loc.evidence)
