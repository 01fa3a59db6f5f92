"""Localization rules that trace a bad value to where it came from: a lookup whose variable
names another element, a handler bound to the wrong element, an array item never filled or
read past its end, values handed to a library that failed on them, a parameter no caller
passed, state set beside an empty object, the expected value written elsewhere, an ancestor's
content replaced, a local built and never used, a recursion that never ended: exact spans on
small apps."""

from __future__ import annotations

from evaluators.localize.graph import build_graph
from evaluators.localize.spans import localize
from tests.localize.diags import plain, page_error as error, probe_failure, ran, span


# `input` should hold #input-t; it holds the slider's group. The lookup runs at load, before
# the probe's coverage counts.
WORDS = """<div id="slider-group"><input id="slider-t" type="range">
<input id="input-t" type="number"></div>
<script>
function init() {
  const slider = document.getElementById('slider-t');
  const input = document.getElementById('slider-group');
  slider.addEventListener('input', function onSlide() {
    input.value = slider.value;
  });
}
init();
</script>"""


def test_a_lookup_named_after_another_element_stays_direct_blame_though_it_ran_at_load():
    text = WORDS
    g = build_graph(text)
    diag = probe_failure({"expect": "value", "locator": "#input-t", "value": "2"},
                         {"do": "fill", "locator": "#slider-t", "value": "2"},
                         coverage=ran(g, "onSlide"))
    query = span("const input = document.getElementById('slider-group');", text)
    for method in ("text", "grounded"):
        loc = localize(g, diag, method)
        assert query in loc.s_dir, method
        assert {"span": list(query), "set": "dir", "by": "graph",
                "why": "input is named after #input-t but looks up 'slider-group'"} \
            in plain(loc.evidence)
    # `slider` shares its word with the id it looks up: not misdirected (the slice blames it
    # for what it holds).
    assert not any(e["why"].startswith("slider is named") for e in loc.evidence)


# Handlers that write their own element (`this`).
SELF = """<button id="btn-2d" class="active">2D</button><button id="btn-3d">3D</button>
<div id="plot"></div>
<script>
document.getElementById('plot').addEventListener('click', function () {
  this.classList.add('active');
  document.getElementById('btn-2d').classList.remove('active');
});
document.getElementById('btn-2d').addEventListener('click', function () {
  this.classList.add('active');
  document.getElementById('btn-3d').classList.remove('active');
});
document.getElementById('btn-2d').addEventListener('focus', function () {
  this.classList.add('active');
});
</script>"""


def test_writes_through_this_resolve_to_the_elements_the_handler_is_bound_to():
    g = build_graph(SELF)
    own = [w for w in g.element_writes if w.target_text == "this"]
    assert [[g.elements[i].id for i in w.elements] for w in own] == [["plot"], ["btn-2d"],
                                                                      ["btn-2d"]]


# The loop filling `p` starts at 1 (it should start at 0): p[6] is read undefined.
ITEMS = """<script>
function tile(center) {
  const p = [];
  p[0] = makeVector(0, 0);
  for (let i = 1; i < 6; i++) {
    p[i + 1] = makeVector(i, 0);
  }
  const q = [1, 2];
  for (let i = 0; i < 7; i++) {
    const c = add(center, p[i].rotate(60));
    draw(c, q[0]);
  }
}
tile(makeVector(1, 1));
</script>"""


def test_an_array_item_read_undefined_blames_the_loops_that_fill_and_read_it():
    text = ITEMS
    g = build_graph(text)
    frames = [{"in_app": True, "offset": span("p[i].rotate", text)[0]},
              {"in_app": True, "offset": span("tile(makeVector(1, 1))", text)[0]}]
    loc = localize(g, error("uncaught TypeError: Cannot read properties of undefined "
                            "(reading 'rotate')", frames))
    assert loc.s_dir == (
        span("p[0] = makeVector(0, 0);", text),
        span("for (let i = 1; i < 6; i++)", text),
        span("p[i + 1] = makeVector(i, 0);", text),
        span("for (let i = 0; i < 7; i++)", text),
        span("const c = add(center, p[i].rotate(60));", text))
    assert {"span": list(span("for (let i = 1; i < 6; i++)", text)), "set": "dir",
            "by": "stack", "why": "loop that decides which items of p are filled"} \
        in plain(loc.evidence)
    # Another message (a null, not an item) does not trace the array.
    loc = localize(g, error("uncaught TypeError: add is not a function", frames))
    assert span("p[0] = makeVector(0, 0);", text) not in loc.s_dir


# The row's spans are made by script into `cipherRow`, which looks up the slider instead of
# #cipher-row: no write resolves to the row.
NAMED = """<input id="shift" type="range"><div id="cipher-row"></div>
<script>
const cipherRow = document.getElementById('shift');
function letters(k) {
  let out = '';
  for (let i = 0; i < 26; i++) {
    out += '<span>' + String.fromCharCode(65 + (i + k) % 26) + '</span>';
  }
  return out;
}
function update() {
  const k = parseInt(document.getElementById('shift').value, 10);
  const started = Date.now();
  let total = 0;
  for (let j = 0; j < 10; j++) {
    total += j * k;
  }
  const html = letters(k);
  cipherRow.innerHTML = html;
  console.log('shift', k, 'checksum', total, 'took', Date.now() - started, 'ms');
  console.log('letters written to the cipher row, one span for each of the 26 letters');
}
document.getElementById('shift').addEventListener('input', update);
update();
</script>"""


def test_writes_through_a_variable_named_like_the_container_seed_the_slice_by_target():
    text = NAMED
    g = build_graph(text)
    diag = probe_failure({"expect": "text", "locator": "#cipher-row span >> nth=0",
                          "value": "B"}, {"do": "fill", "locator": "#shift", "value": "1"},
                         coverage=ran(g, "update", "letters"),
                         message="no element matches #cipher-row span >> nth=0",
                         reason="missing_element")
    loc = localize(g, diag, "grounded")
    write = span("cipherRow.innerHTML = html;", text)
    query = span("const cipherRow = document.getElementById('shift');", text)
    assert write in loc.s_dir and query in loc.s_dir
    # Only where the write went matters: the letters it wrote are not direct blame.
    for code in ("const html = letters(k);", "out += '<span>'"):
        assert not any(s <= span(code, text)[0] < e for s, e in loc.s_dir), code
    # update ran; it is not blamed whole, nor what it computes besides.
    assert g.functions_named("update")[0].span not in loc.s_dir
    assert not any(s <= span("total += j * k;", text)[0] < e for s, e in loc.s_dir)


UNITS = """<button id="btn-units-plus">+</button><input id="radio-poly-7" type="radio">
<span id="units-count-label">3</span>
<script>
const controls = {
  units: document.getElementById('radio-poly-7'),
  label: document.getElementById('units-count-label')
};
controls.units.addEventListener('input', function () {
  controls.label.textContent = controls.units.value;
});
</script>"""


def test_a_variable_with_every_word_of_an_id_looking_up_an_id_with_none_is_misdirected():
    # `units` is neither spelled like `units-count-label` or `btn-units-plus` (similar_names
    # says no) nor their topic (`units count`, `units plus`), but is one of their words, and
    # the id it looks up has none of its words.
    text = UNITS
    loc = localize(build_graph(text),
                   probe_failure({"expect": "text", "locator": "#units-count-label",
                                  "value": "5"},
                                 {"do": "click", "locator": "#btn-units-plus"}),
                   "text")
    query = span("units: document.getElementById('radio-poly-7')", text)
    assert query in loc.s_dir
    assert {"span": list(query), "set": "dir", "by": "graph",
            "why": "controls.units is named after #units-count-label but looks up "
                   "'radio-poly-7'"} in plain(loc.evidence)
    # `label` has its word in that id too, but looks up that very element.
    assert not any(s <= span("label: document", text)[0] < e for s, e in loc.s_dir)


# `points` is only ever `{}` and none of its properties is set: it was set with
# `derived`, declared beside it, in setup (the assignment is missing there).
BESIDE = """<script>
let points = {};
let derived = {};
let center;
function setup() {
  center = {x: 1, y: 2};
  derived = {a: {x: 0}};
}
function draw() {
  const a = points.B.angle;
}
</script>"""


def test_an_object_no_code_fills_is_set_where_the_state_declared_beside_it_is():
    text = BESIDE
    g = build_graph(text)
    frames = [{"in_app": True, "offset": span("points.B.angle", text)[0]}]
    loc = localize(g, error("uncaught TypeError: Cannot read properties of undefined "
                            "(reading 'angle')", frames))
    assert loc.s_dir == (span("center = {x: 1, y: 2};", text),
                         span("derived = {a: {x: 0}};", text),
                         span("const a = points.B.angle;", text))
    assert {"span": list(span("derived = {a: {x: 0}};", text)), "set": "dir", "by": "stack",
            "why": "sets the state set with points.B, which no code sets"} in plain(loc.evidence)
    # Once some property of points is set, that property is the sibling, not the state
    # declared beside points (blamed now only as the statement before points.A's).
    filled = text.replace("  derived = {a: {x: 0}};", "  derived = {a: {x: 0}};\n  points.A = 1;")
    loc = localize(build_graph(filled), error(
        "uncaught TypeError: Cannot read properties of undefined (reading 'angle')",
        [{"in_app": True, "offset": span("points.B.angle", filled)[0]}]))
    whys = {tuple(e["span"]): e["why"] for e in loc.evidence if e["set"] == "dir"}
    assert whys[span("points.A = 1;", filled)] == \
        "sets the state set with points.B, which no code sets"
    assert whys[span("derived = {a: {x: 0}};", filled)].endswith("(the statement before them)")


# Reset writes the value the probe expects on #amount (0.5) to #reset instead.
EXPECTED = """<input id="slider" type="range"><input id="amount" type="number">
<button id="reset">Reset</button>
<script>
const slider = document.getElementById('slider');
const amount = document.getElementById('amount');
slider.addEventListener('input', function onSlide() {
  amount.value = slider.value;
});
document.getElementById('reset').addEventListener('click', function onReset() {
  slider.value = 0.5;
  document.getElementById('reset').value = 0.5;
  document.getElementById('reset').value = 1;
});
</script>"""


def test_the_expected_value_written_to_another_element_by_code_that_ran_is_blamed():
    text = EXPECTED
    g = build_graph(text)
    diag = probe_failure({"expect": "value", "locator": "#amount", "value": "0.5"},
                         {"do": "click", "locator": "#reset"},
                         coverage=ran(g, "onSlide", "onReset"))
    loc = localize(g, diag, "grounded")
    wrong = span("document.getElementById('reset').value = 0.5;", text)
    assert {"span": list(wrong), "set": "dir", "by": "coverage",
            "why": "ran before the failure and writes '0.5', the value expected on #amount, "
                   "to #reset"} in plain(loc.evidence)
    assert {"span": list(span("slider.value = 0.5;", text)), "set": "dir", "by": "coverage",
            "why": "ran before the failure and writes '0.5', the value expected on #amount, "
                   "to #slider"} in plain(loc.evidence)
    # Another value written there is not the expected one.
    other = span("document.getElementById('reset').value = 1;", text)
    assert not any(tuple(e["span"]) == other and "expected" in e["why"] for e in loc.evidence)
    # Without coverage nothing is known to have run.
    assert not any("the value expected" in e["why"]
                   for e in localize(g, diag, "text").evidence)


# init is registered for 'load' by mistake in place of start: the browser calls it with the
# event alone, and `target` is undefined.
ARGUMENT = """<script>
function init(u, v, target) {
  const x = u * 2;
  target.set(x, v);
}
function start() {
  init(1, 2, {set() {}});
}
function broken() {
  init(1, 2);
}
window.addEventListener('load', init);
</script>"""


def test_a_parameter_read_as_undefined_blames_the_registration_or_the_call():
    text = ARGUMENT
    g = build_graph(text)
    message = "uncaught TypeError: Cannot read properties of undefined (reading 'set')"
    top = {"in_app": True, "offset": span("target.set", text)[0]}
    loc = localize(g, error(message, [top]))
    binding = span("window.addEventListener('load', init)", text)
    assert loc.s_dir == (span("target.set(x, v);", text), binding)
    assert {"span": list(binding), "set": "dir", "by": "stack",
            "why": "registers init as a handler of 'load': it is called with the event alone, "
                   "no target"} in plain(loc.evidence)
    # Called from broken(): that call is blamed instead.
    loc = localize(g, error(message, [top, {"in_app": True,
                                            "offset": span("init(1, 2);", text)[0]}]))
    assert loc.s_dir == (span("target.set(x, v);", text), span("init(1, 2);", text))
    # A read of a local, not a parameter, blames no caller.
    loc = localize(g, error("uncaught TypeError: Cannot read properties of undefined "
                            "(reading 'x')", [top]))
    assert binding not in loc.s_dir


# The elimination loop starts one row too early: augmented[-1] is undefined.
INDEX = """<script>
function solve(matrix) {
  const n = matrix.length;
  const augmented = matrix.map(row => [...row]);
  for (let i = 0; i < n; i++) {
    for (let k = i - 1; k < n; k++) {
      const factor = augmented[k][i] / augmented[i][i];
      augmented[k][0] -= factor;
    }
  }
  return augmented;
}
solve([[1, 2], [3, 4]]);
</script>"""


def test_an_index_past_the_end_blames_the_loop_that_sets_it():
    text = INDEX
    g = build_graph(text)
    frames = [{"in_app": True, "offset": span("const factor", text)[0]},
              {"in_app": True, "offset": span("solve([[1", text)[0]}]
    loc = localize(g, error("uncaught TypeError: Cannot read properties of undefined "
                            "(reading '0')", frames))
    loop = span("for (let k = i - 1; k < n; k++)", text)
    assert loc.s_dir == (loop, span("const factor = augmented[k][i] / augmented[i][i];", text))
    assert {"span": list(loop), "set": "dir", "by": "stack",
            "why": "loop whose index reads augmented[k]"} in plain(loc.evidence)


# `out` looks up the page's main container instead of #result: writing it wipes the controls.
WIPED = """<div id="main"><div class="controls"><select id="method"><option>a</option></select>
</div><div id="result"></div></div>
<script>
const out = document.getElementById('main');
function render() {
  out.innerHTML = '<p>42</p>';
  document.getElementById('method').title = 'method';
}
render();
</script>"""


def test_a_static_element_gone_at_probe_time_blames_writes_replacing_an_ancestors_content():
    text = WIPED
    g = build_graph(text)
    diag = probe_failure({"expect": "visible", "locator": "#method"}, None, severity="severe",
                         actual=None, message="no element matches #method: element(s) not found",
                         reason="missing_element")
    loc = localize(g, diag, "text")
    write = span("out.innerHTML = '<p>42</p>';", text)
    assert write in loc.s_dir
    assert {"span": list(write), "set": "dir", "by": "graph",
            "why": "replaces the content of #main, which holds #method"} in plain(loc.evidence)
    # A write to the element itself is not a replacement of an ancestor.
    assert not any(e["why"].startswith("replaces the content") and tuple(e["span"]) != write
                   for e in loc.evidence)


# The geometry is never made from `shape` (the statement is missing after the loop), so
# `geometry` is still null when the mesh is built.
BUILT = """<script>
let geometry = null;
function redraw(n) {
  const shape = new Shape();
  for (let i = 0; i < n; i++) {
    shape.lineTo(i, i * 2);
  }
  const color = pick(n);
  const mesh = new Mesh(geometry, color);
}
redraw(3);
</script>"""


def test_a_local_built_and_never_used_before_an_unset_read_blames_the_statement_after_it():
    text = BUILT
    g = build_graph(text)
    frames = [{"in_app": False, "offset": None},
              {"in_app": True, "offset": span("new Mesh", text)[0]},
              {"in_app": True, "offset": span("redraw(3)", text)[0]}]
    loc = localize(g, error("uncaught TypeError: Cannot read properties of null (reading "
                            "'isBufferGeometry')", frames))
    after = span("const color = pick(n);", text)
    assert after in loc.s_dir
    assert {"span": list(after), "set": "dir", "by": "stack",
            "why": "follows the last use of shape, which is built and never used: its use, "
                   "which may set geometry, is missing here"} in plain(loc.evidence)
    # Once shape is passed on, it is used: no blame for a missing use.
    used = text.replace("  const color = pick(n);", "  draw(shape);\n  const color = pick(n);")
    frames = [{"in_app": False, "offset": None},
              {"in_app": True, "offset": span("new Mesh", used)[0]}]
    loc = localize(build_graph(used), error("uncaught TypeError: Cannot read properties of "
                                            "null (reading 'isBufferGeometry')", frames))
    assert not any("built and never used" in e["why"] for e in loc.evidence)


# `steps` is never set (its assignment, with `zoom`'s, is missing), so the recursion's base
# case `level === 0` is never reached.
RECURSION = """<script>
let steps, zoom;
function draw() {
  zoom = true;
  tile(steps, 10);
}
function tile(level, size) {
  if (level === 0) {
    rect(0, 0, size, size);
    return;
  }
  tile(level - 1, size / 2);
}
draw();
</script>"""


def test_runaway_recursion_blames_its_base_case_and_the_call_starting_it():
    text = RECURSION
    g = build_graph(text)
    frames = [{"in_app": True, "offset": span("tile(level - 1", text)[0]}] * 3
    loc = localize(g, error("uncaught RangeError: Maximum call stack size exceeded", frames))
    base = (span("if (level === 0)", text)[0], span("rect(0, 0", text)[0])  # up to its body
    start = span("tile(steps, 10);", text)
    assert base in loc.s_dir and start in loc.s_dir
    assert {"span": list(base), "set": "dir", "by": "stack",
            "why": "base case of the recursion of tile, which did not stop it"} in plain(loc.evidence)
    # steps, passed to it, is declared with zoom and never set: zoom's assignment is blamed.
    assert {"span": list(span("zoom = true;", text)), "set": "dir", "by": "stack",
            "why": "sets the state set with steps, which no code sets"} in plain(loc.evidence)
    # Another error in the same place is not a runaway recursion.
    loc = localize(g, error("uncaught TypeError: x is not a function", frames))
    assert base not in loc.s_dir


# The 2D context is taken on the WebGL canvas through a lookup named after the 2D one.
SHARED = """<canvas id="canvas-2d"></canvas><canvas id="canvas-3d"></canvas>
<script>
const canvas2D = document.getElementById('canvas-3d');
const ctx = canvas2D.getContext('2d');
function init3D() {
  const canvas = document.getElementById('canvas-3d');
  renderer = new THREE.WebGLRenderer({ canvas: canvas });
}
init3D();
</script>"""


def test_an_element_handed_to_a_failing_library_and_looked_up_under_another_name():
    text = SHARED
    g = build_graph(text)
    frames = [{"in_app": False, "offset": None},
              {"in_app": True, "offset": span("renderer =", text)[0]},
              {"in_app": True, "offset": span("init3D();", text)[0]}]
    loc = localize(g, error("uncaught Error: Error creating WebGL context.", frames))
    wrong = span("const canvas2D = document.getElementById('canvas-3d');", text)
    assert wrong in loc.s_dir
    assert {"span": list(wrong), "set": "dir", "by": "stack",
            "why": "canvas2D is named after #canvas-2d but looks up 'canvas-3d', the element "
                   "handed to the failing library"} in plain(loc.evidence)
    # The lookup handed to the library is named for what it holds: not blamed for its name.
    assert not any(e["why"].startswith("canvas is named") for e in loc.evidence)
