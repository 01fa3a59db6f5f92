"""Rule-intent rows (``test_rule_intents.Row``) for where a bad value came from
(``evaluators.localize.spans_origins``): values followed back through calls, returns,
settings and the stack; and what failed right after load: the code the start-up ran before any
probe's coverage began, and code after a ``return`` that should have set what was read.
"""

from __future__ import annotations

from tests.localize.diags import page_error, probe_failure


def _frames(app: str, *codes: str) -> list[dict]:
    return [{"in_app": True, "offset": app.index(c)} for c in codes]


# A charting library is handed the colour `shade` gives for a value past its range: none.
UNSHADED = """<canvas id="c"></canvas><script>
const SHADES = ['#111', '#eee'];
function shade(v) {
  if (v > 1) { return; }
  return SHADES[Math.round(v)];
}
function paint(v) {
  const color = shade(v);
  const size = v * 2;
  chart.fill(color, size);
}
paint(3);
</script>"""

# `draw` reads a list its caller took from `pick`, which returned what `fresh` returned.
TWO_CALLS_DEEP = """<canvas id="c"></canvas><script>
const BANK = {1: [1]};
function fresh(n) { return; }
function pick(n) {
  if (n > 5) { return fresh(n); }
  return BANK[n];
}
function draw(list) { list.forEach((x) => x); }
function show() {
  const list = pick(9);
  draw(list);
}
show();
</script>"""

# The list comes from a table under a key it does not have.
MISSING_KEY = """<canvas id="c"></canvas><script>
const SIZES = {small: [1, 2]};
function sizes(name) { return SIZES[name]; }
function draw(list) { list.forEach((x) => x); }
function show() {
  const list = sizes('large');
  draw(list);
}
show();
</script>"""

# `cell` reads colors that `row` only passed on from `grid`, which looked them up by a key
# the table lacks.
PASSED_DOWN = """<script>
const PALETTES = {warm: ['red']};
let mode = 'cold';
function cell(n, colors) { return colors.length * n; }
function row(n, colors) { return cell(n, colors); }
function grid() {
  const colors = PALETTES[mode];
  return row(3, colors);
}
grid();
</script>"""

# The loop runs one past the end of the points it destructures.
PAST_END = """<canvas id="c"></canvas><script>
const pts = [[0, 1], [2, 3]];
function plot(x, y) { return x + y; }
function draw() {
  for (let i = 0; i <= pts.length; i++) {
    const [x, y] = pts[i];
    plot(x, y);
  }
}
draw();
</script>"""

# A setting read from a call that passed on what another call returned: null.
PASSED_ON = """<script>
function empty() { return null; }
function load(key) { return empty(); }
function run() {
  const cfg = load('a');
  cfg.size += 1;
}
run();
</script>"""

# p5 calls `setup`, which returns before it sets the vertices `draw` reads.
CUT_SETUP = """<script src="https://cdn.example/p5.js"></script><script>
let vertices = {};
function setup() { return;
  vertices.A = {x: 1, y: 2};
}
function draw() {
  line(0, 0, vertices.A.x, vertices.A.y);
}
</script>"""

# A p5 sketch in instance mode: `setup` returns before it looks up the input `draw` reads.
CUT_SKETCH = """<input id="n" value="3"><script src="https://cdn.example/p5.js"></script><script>
const sketch = (p) => {
  let input;
  p.setup = function () { return;
    input = document.getElementById('n');
  };
  p.draw = function () {
    const n = parseInt(input.value, 10);
    p.circle(0, 0, n);
  };
};
new p5(sketch);
</script>"""

# The items are drawn by a callback, run later by a timer, that returns before it appends
# anything.
CUT_CALLBACK = """<div id="steps"></div><script>
const stepsEl = document.getElementById('steps');
function later(items, fn) { items.forEach((item) => setTimeout(() => fn(item), 0)); }
function show(steps) {
  stepsEl.innerHTML = '';
  later(steps, (step) => { return;
    const p = document.createElement('p');
    p.textContent = step;
    stepsEl.appendChild(p);
  });
}
show(['one', 'two']);
</script>"""

# Start-up code reads `.values` of a slider (always undefined): the total shows NaN at once.
AT_START = """<input id="n" type="range" value="3"><span id="total"></span><script>
const READS = {3: [1, 2, 3]};
function update() {
  const n = document.getElementById('n').values;
  document.getElementById('total').textContent = Number(n) * 2;
}
function list() {
  const key = document.getElementById('n').values;
  const items = READS[key];
  return items.length;
}
update();
</script>"""

# A ball made with its geometry and material swapped: three.js throws later, while it renders
# the scene the ball was added to. The flag set on the ball is not what broke it.
SCENE = """<canvas id="c"></canvas><script src="https://cdn.example/three.js"></script><script>
let scene, camera, renderer;
const SIZE = 8;
function build() {
  const geometry = new THREE.SphereGeometry(1, SIZE, SIZE);
  const material = new THREE.MeshBasicMaterial({color: 0xff0000});
  const ball = new THREE.Mesh(material, geometry);
  ball.visible = true;
  scene.add(ball);
}
function init() {
  scene = new THREE.Scene();
  camera = new THREE.PerspectiveCamera(60, 1, 0.1, 100);
  renderer = new THREE.WebGLRenderer({canvas: document.getElementById('c')});
  build();
}
function animate() {
  const label = 'frame';
  renderer.render(scene, camera);
}
init();
animate();
</script>"""

# A closure reads the palette its maker looked up under a key the table lacks.
CLOSURE_LOOKUP = """<canvas id="c"></canvas><script>
const SCHEMES = {warm: ['red', 'orange']};
let scheme = 'warm';
function drawAll() {
  const palette = SCHEMES[scheme + 's'];
  function cell(i) { return palette[i % palette.length]; }
  cell(1);
}
drawAll();
</script>"""

# A plotting library draws into #plot from data a model computed; the model's loop stops
# after one step, so the line has a single point and is drawn hidden.
PLOTTED = """<div id="plot"></div><span id="note">model</span>
<script>
const steps = 10;
function model(n) {
  const ys = [];
  for (let t = 0; t <= 0; t++) { ys.push(t * t); }
  return ys;
}
function draw() {
  const ys = model(steps);
  const trace = {y: ys, mode: 'lines'};
  document.getElementById('note').textContent = 'drawn';
  Plotly.react('plot', [trace], {title: 'model'});
}
document.addEventListener('DOMContentLoaded', draw);
</script>"""

# The same, handed to the library through a lookup of the container.
PLOTTED_BY_ELEMENT = PLOTTED.replace(
    "Plotly.react('plot', [trace], {title: 'model'});",
    "const box = document.getElementById('plot');\n  Plotly.newPlot(box, [trace]);")

# The mode is read from the second slider, a copy of the line above left unchanged; the
# output is written in a `forEach` callback, which runs at load with `update`.
COPIED_READ = """<input id="a" type="range" value="2"><input id="b" type="range" value="3">
<select id="mode"><option value="sum">sum</option><option value="product">product</option>
</select><div id="out"></div>
<script>
const first = document.getElementById('a');
const second = document.getElementById('b');
const mode = document.getElementById('mode');
function update() {
  const x = parseFloat(first.value);
  const y = parseFloat(second.value);
  const how = second.value;
  const lines = [];
  if (how === 'sum') {
    lines.push('sum: ' + (x + y));
  } else {
    lines.push('product: ' + x * y);
  }
  const out = document.getElementById('out');
  lines.forEach((line) => {
    const p = document.createElement('p');
    p.textContent = line;
    out.appendChild(p);
  });
}
update();
</script>"""

# Start-up returns before it sets the depth: the recursion never reaches its base case.
CUT_START = """<script>
let depth;
function setup() { return;
  depth = 4;
}
function grow(n) { if (n === 0) { return 0; } return 1 + grow(n - 1); }
setup();
console.log(grow(depth));
</script>"""


# The points are filled, then emptied at the end of the same start-up function: the drawing
# reads a point that is gone.
UNDONE = """<script>
let pts = new Array();
function setup() {
  pts.push({x: 1});
  pts.push({x: 2});
  pts = [];
}
function draw() {
  const p = pts[1];
  console.log(p.x);
}
setup();
draw();
</script>"""


# The loop hands a function an item one past the end: the function reads a property of it.
PAST_END_PASSED = """<script>
const pts = [{x: 1}, {x: 2}];
function mark(p) {
  console.log(p.x);
}
function drawAll() {
  const n = pts.length;
  for (let i = 0; i <= n; i++) {
    mark(pts[i]);
  }
}
drawAll();
</script>"""

# The index is a parameter: the loop that sets it is around the call, one frame down.
INDEX_PASSED = """<script>
const pts = [{x: 1}, {x: 2}];
function mark(i) {
  const p = pts[i];
  console.log(p.x);
}
function drawAll() {
  const n = pts.length;
  for (let k = 0; k <= n; k++) {
    mark(k);
  }
}
drawAll();
</script>"""
ITEM_PASSED = INDEX_PASSED.replace("const p = pts[i];\n  console.log(p.x);",
                                  "console.log(pts[i].x);")

# The same, the grid filled an item at a time.
UNDONE_ITEMS = """<script>
let cells = new Array();
function build() {
  for (let r = 0; r < 3; r++) {
    cells[r] = [];
    for (let c = 0; c < 3; c++) { cells[r][c] = 0; }
  }
  cells[1][1] = 1;
  cells = [];
}
function count() {
  let n = 0;
  for (let r = 0; r < 3; r++) { if (cells[r][0]) { n += 1; } }
  return n;
}
build();
console.log(count());
</script>"""

# The loop reads one point past the end, through a variable: the lookup gives undefined, and
# the loop's bound decides the index.
PAST_END_LOOKUP = """<script>
const pts = [{x: 1}, {x: 2}];
function draw() {
  for (let i = 0; i <= pts.length; i++) {
    const p = pts[i];
    console.log(p.x);
  }
}
draw();
</script>"""


# A global array filled one item short at load, read in full later: its fill's loop (not on
# the failing stack) is context, with the write (which no rule blames directly here).
SHORT_FILL = """<script>
const N = 3;
let pts = new Array(N);
function init() {
  for (let i = 0; i < N - 1; i++) { pts[i] = {x: i}; }
}
function draw() {
  let total = 0;
  for (let j = 0; j < N; j++) { total += pts[j].x; }
  return total;
}
init();
draw();
</script>"""


# A variable only a switch's cases assign: the loop around runs one stage past the last case,
# and `amps` is still undefined when it is read.
UNASSIGNED_CASE = """<script>
const N = 4;
function draw() {
  for (let stage = 0; stage <= 2; stage++) {
    let amps;
    switch (stage) {
      case 0: amps = new Array(N).fill(1); break;
      case 1: amps = new Array(N).fill(2); break;
    }
    for (let i = 0; i < N; i++) { console.log(amps[i]); }
  }
}
draw();
</script>"""

# A variable an if's arms assign, neither when the value is 0; one assigned before its branch
# (`label`) is no such variable.
UNASSIGNED_ARMS = """<script>
function describe(v) {
  let color;
  let label = 'value';
  if (v > 0) { color = 'red'; label = 'up'; } else if (v < 0) { color = 'blue'; }
  return label + ': ' + color.toUpperCase();
}
describe(0);
</script>"""


# A property holding rows (`eig.vectors`), read one row past its end by the loop around.
PROPERTY_ROWS = """<script>
const eig = {vectors: [[1, 0], [0, 1]]};
const modes = [];
function collect() {
  for (let i = 0; i < 2; i++) {
    const mode = [];
    for (let j = 0; j <= 2; j++) { mode.push(eig.vectors[j][i]); }
    modes.push(mode);
  }
}
collect();
</script>"""


def rows(Row) -> dict:
    """The rows, built with ``test_rule_intents.Row``."""
    return {
        "an item of a property's rows read past the end, at an index its loop sets": Row(
            PROPERTY_ROWS, "errors.undefined_items",
            page_error("uncaught TypeError: Cannot read properties of undefined (reading '0')",
                       _frames(PROPERTY_ROWS, "mode.push(eig", "collect();\n</script>")),
            direct=("for (let j = 0; j <= 2; j++)",),
            spared=("for (let i = 0; i < 2; i++)",)),
        "the loop around a write of the state the failing statement reads": Row(
            SHORT_FILL, "errors.null_sources",
            page_error("uncaught TypeError: Cannot read properties of undefined (reading 'x')",
                       _frames(SHORT_FILL, "total += pts[j].x;", "draw();\n</script>")),
            context=("i < N - 1; i++)",),
            spared=("const N = 3;",)),
        "a variable only a switch's cases assign, read when no case ran": Row(
            UNASSIGNED_CASE, "errors.unassigned_branches",
            page_error("uncaught TypeError: Cannot read properties of undefined (reading '0')",
                       _frames(UNASSIGNED_CASE, "console.log(amps[i]);", "draw();\n</script>")),
            direct=("switch (stage)", "for (let stage = 0; stage <= 2; stage++)"),
            spared=("for (let i = 0; i < N; i++)", "const N = 4;")),
        "a variable only an if's arms assign, read when neither ran": Row(
            UNASSIGNED_ARMS, "errors.unassigned_branches",
            page_error("uncaught TypeError: Cannot read properties of undefined (reading "
                       "'toUpperCase')",
                       _frames(UNASSIGNED_ARMS, "return label + ", "describe(0);\n</script>")),
            direct=("if (v > 0)", "if (v < 0)"), spared=("let label = 'value';",)),
        "a lookup past the end, at an index its loop sets": Row(
            PAST_END_LOOKUP, "errors.lookup_index_loop",
            page_error("uncaught TypeError: Cannot read properties of undefined (reading 'x')",
                       _frames(PAST_END_LOOKUP, "console.log(p.x);", "draw();\n</script>")),
            direct=("for (let i = 0; i <= pts.length; i++)",),
            spared=("const pts = [{x: 1}, {x: 2}];",)),
        "an item past the end handed to a function, at an index its loop sets": Row(
            PAST_END_PASSED, "errors.lookup_index_loop",
            page_error("uncaught TypeError: Cannot read properties of undefined (reading 'x')",
                       _frames(PAST_END_PASSED, "console.log(p.x);", "mark(pts[i]);",
                               "drawAll();\n</script>")),
            direct=("for (let i = 0; i <= n; i++)",),
            spared=("const n = pts.length;",)),
        "a lookup past the end, at an index a loop down the stack passed in": Row(
            INDEX_PASSED, "errors.lookup_index_loop",
            page_error("uncaught TypeError: Cannot read properties of undefined (reading 'x')",
                       _frames(INDEX_PASSED, "console.log(p.x);", "mark(k);",
                               "drawAll();\n</script>")),
            direct=("for (let k = 0; k <= n; k++)",), spared=("const n = pts.length;",)),
        "an item past the end, at an index a loop down the stack passed in": Row(
            ITEM_PASSED, "errors.undefined_items",
            page_error("uncaught TypeError: Cannot read properties of undefined (reading 'x')",
                       _frames(ITEM_PASSED, "console.log(pts[i].x)", "mark(k);",
                               "drawAll();\n</script>")),
            direct=("for (let k = 0; k <= n; k++)",), spared=("const n = pts.length;",)),
        "a change undone at the end of the function that made it": Row(
            UNDONE, "smells.undone_update",
            page_error("uncaught TypeError: Cannot read properties of undefined (reading 'x')",
                       _frames(UNDONE, "console.log(p.x);", "draw();\n</script>")),
            direct=("pts = [];",), context=("pts.push({x: 2});",)),
        "a grid filled item by item, then emptied at the end of the function that filled it":
            Row(UNDONE_ITEMS, "smells.undone_update",
                page_error("uncaught TypeError: Cannot read properties of undefined (reading '0')",
                           _frames(UNDONE_ITEMS, "if (cells[r][0])", "console.log(count());")),
                direct=("cells = [];",), spared=("let n = 0;",)),
        "start-up code cut off by a return, and the load threw": Row(
            CUT_START, "smells.unreachable_code",
            page_error("uncaught RangeError: Maximum call stack size exceeded",
                       _frames(CUT_START, "if (n === 0)", "grow(n - 1)", "grow(n - 1)",
                               "console.log(grow(depth));")),
            direct=("return;",)),
        "a closure reads what its maker looked up under a missing key": Row(
            CLOSURE_LOOKUP, "errors.undefined_lookup",
            page_error("uncaught TypeError: Cannot read properties of undefined (reading "
                       "'length')", _frames(CLOSURE_LOOKUP, "return palette[i % palette.length];",
                                            "cell(1);", "drawAll();\n</script>")),
            direct=("const palette = SCHEMES[scheme + 's'];",),
            spared=("const SCHEMES = {warm: ['red', 'orange']};",)),
        "a library drew what the check read into a container the app handed it": Row(
            PLOTTED, "probe.library_render",
            probe_failure({"expect": "visible", "locator": {"css": "#plot .trace path",
                                                           "nth": "first"}}, None,
                          coverage={"functions": [], "skipped": []}),
            direct=("Plotly.react('plot', [trace], {title: 'model'});",),
            context=("for (let t = 0; t <= 0; t++)", "const trace = {y: ys, mode: 'lines'};"),
            spared=("document.getElementById('note').textContent = 'drawn';",)),
        "a library drew into a container handed to it by a lookup": Row(
            PLOTTED_BY_ELEMENT, "probe.library_render",
            probe_failure({"expect": "visible", "locator": {"css": "#plot .trace path",
                                                           "nth": "first"}}, None,
                          coverage={"functions": [], "skipped": []}),
            direct=("Plotly.newPlot(box, [trace]);",),
            context=("for (let t = 0; t <= 0; t++)",),
            spared=("document.getElementById('note').textContent = 'drawn';",)),
        "a check right after load follows the data into an array method's callback": Row(
            COPIED_READ, "flow.narrow_to_slice",
            probe_failure({"expect": "contains_text", "locator": "#out", "value": "sum"}, None,
                          coverage={"functions": [], "skipped": []}),
            direct=("const how = second.value;", "if (how === 'sum')",
                    "lines.push('sum: ' + (x + y));")),
        "what built the objects a library threw on while reading them": Row(
            SCENE, "errors.library_inputs",
            page_error("uncaught TypeError: Cannot read properties of undefined (reading "
                       "'attributes')", [{"in_app": False, "offset": None},
                                         *_frames(SCENE, "renderer.render(scene, camera);",
                                                  "animate();\n</script>")]),
            context=("const ball = new THREE.Mesh(material, geometry);",
                     "const geometry = new THREE.SphereGeometry(1, SIZE, SIZE);"),
            spared=("const label = 'frame';", "const SIZE = 8;")),
        "a library call handed what an app function returned without a value": Row(
            UNSHADED, "errors.library_got_nothing",
            page_error("uncaught Error: undefined is not a valid color",
                       [{"in_app": False, "offset": None},
                        *_frames(UNSHADED, "fill(color, size);", "paint(3);\n</script>")]),
            direct=("return;",),
            spared=("return SHADES[Math.round(v)];", "const size = v * 2;",
                    "const SHADES = ['#111', '#eee'];")),
        # Thrown in a later frame's step (at load `smells.unreachable_code` blames the return
        # too: `setup` runs at load).
        "a property of state every write of which comes after a return": Row(
            CUT_SETUP, "smells.dead_writers",
            page_error("uncaught TypeError: Cannot read properties of undefined (reading 'x')",
                       _frames(CUT_SETUP, "line(0, 0, vertices.A.x, vertices.A.y);"),
                       reason="uncaught_in_step"),
            direct=("return;",), context=("vertices.A = {x: 1, y: 2}",)),
        "a sketch's variable every setting of which comes after a return": Row(
            CUT_SKETCH, "smells.dead_writers",
            page_error("uncaught TypeError: Cannot read properties of undefined (reading "
                       "'value')", _frames(CUT_SKETCH, "const n = parseInt(input.value, 10);"),
                       reason="uncaught_in_step"),
            direct=("return;",), spared=("p.circle(0, 0, n);",)),
        "the checked element's write placed after a return": Row(
            CUT_CALLBACK, "smells.dead_element_writes",
            probe_failure({"expect": "contains_text", "locator": "#steps", "value": "one"},
                          None, coverage={"functions": [], "skipped": []}),
            direct=("return;",)),
        "a misspelled property in start-up code that made the load throw": Row(
            AT_START.replace("update();", "list();"), "smells.misspelled_property",
            page_error("uncaught TypeError: Cannot read properties of undefined (reading "
                       "'length')", _frames(AT_START.replace("update();", "list();"),
                                            "return items.length;", "list();")),
            direct=("const key = document.getElementById('n').values;",)),
        "a value passed from a call that returned what another returned: nothing": Row(
            TWO_CALLS_DEEP, "errors.missing_argument",
            page_error("uncaught TypeError: Cannot read properties of undefined (reading "
                       "'forEach')", _frames(TWO_CALLS_DEEP, "list.forEach", "draw(list);",
                                             "show();\n</script>")),
            direct=("return;", "draw(list);"), context=("const list = pick(9);",
                                                        "return fresh(n);"),
            spared=("return BANK[n];", "const BANK = {1: [1]};")),
        "a value passed from a lookup under a key the table lacks": Row(
            MISSING_KEY, "errors.missing_argument",
            page_error("uncaught TypeError: Cannot read properties of undefined (reading "
                       "'forEach')", _frames(MISSING_KEY, "list.forEach", "draw(list);",
                                             "show();\n</script>")),
            direct=("return SIZES[name];",), context=("const list = sizes('large');",),
            spared=("const SIZES = {small: [1, 2]};",)),
        "a value passed on down the stack from a lookup under a missing key": Row(
            PASSED_DOWN, "errors.missing_argument",
            page_error("uncaught TypeError: Cannot read properties of undefined (reading "
                       "'length')", _frames(PASSED_DOWN, "colors.length", "return cell(n, colors);",
                                            "return row(3, colors);", "grid();\n</script>")),
            direct=("const colors = PALETTES[mode];",),
            spared=("const PALETTES = {warm: ['red']};",)),
        "an item destructured one past the end of its array": Row(
            PAST_END, "errors.undefined_items",
            page_error("uncaught TypeError: undefined is not iterable (cannot read property "
                       "Symbol(Symbol.iterator))",
                       _frames(PAST_END, "const [x, y] = pts[i];", "draw();\n</script>")),
            direct=("for (let i = 0; i <= pts.length; i++)",),
            spared=("const pts = [[0, 1], [2, 3]];",)),
        "a value read from a call that passed on another call's null": Row(
            PASSED_ON, "errors.returned_nothing",
            page_error("uncaught TypeError: Cannot read properties of null (reading 'size')",
                       _frames(PASSED_ON, "cfg.size += 1;", "run();\n</script>")),
            direct=("return null;",), context=("return empty();",)),
    }
