"""Statement-level data flow and the slices that narrow grounded blame: exact spans."""

from __future__ import annotations

from tests.localize.diags import plain
from evaluators.localize.graph import build_graph
from evaluators.localize.spans import localize, merge_spans
from evaluators.localize.spans_flow import load_functions

APP = """<button id="go">Go</button><span id="out"></span><ul id="list"></ul>
<script>
let total = 0, scale = 2;
let unused = 5;
const out = document.getElementById('out');
function fmt(v) {
  const k = v * scale;
  return 'n=' + k;
}
function render(limit) {
  if (total > limit) {
    out.textContent = fmt(total);
  }
  draw();
}
function draw() { let z = 1; }
function onGo() {
  for (let i = 0; i < 3; i++) { total += i; }
  [1, 2].forEach(x => { unused = x; });
  render(1);
}
document.getElementById('go').addEventListener('click', onGo);
</script>"""


def span(sub: str, text: str = APP) -> tuple[int, int]:
    start = text.index(sub)
    return start, start + len(sub)


def heads(g, found) -> set[str]:
    return {g.text[s:e] for k in found for s, e in g.flow.blame(k)}


def test_statements_own_their_reads_writes_and_calls():
    g = build_graph(APP)
    flow = g.flow
    loop = flow.statement_at(span("for (let i")[0])
    st = flow.statements[loop]
    assert g.text[st.head[0]:st.head[1]] == "for (let i = 0; i < 3; i++)"
    assert {g.variables[v].name for v in st.defs} == {"i"}  # the clauses belong to the loop
    body = flow.statements[flow.statement_at(span("total += i;")[0])]
    assert body.parent == loop
    assert {g.variables[v].name for v in body.defs} == {"total"}
    assert {g.variables[v].name for v in body.uses} == {"total", "i"}  # += reads as well
    write = flow.statements[flow.statement_at(span("out.textContent")[0])]
    assert {g.variables[v].name for v in write.uses} == {"out", "total"}
    assert write.defs == set()  # a property of an element is not the variable's value
    assert write.calls == {g.functions_named("fmt")[0].index}
    # A callback's statements are its own; its holder keeps the call that runs it.
    each = flow.statement_at(span("[1, 2].forEach")[0])
    assert flow.statement_at(span("unused = x")[0]) != each
    assert flow.blame(each) == [span("[1, 2].forEach(x => {"), span("});")]


def test_slice_follows_data_control_calls_and_parameters():
    g = build_graph(APP)
    flow = g.flow
    seed = flow.statement_at(span("out.textContent")[0])
    found = flow.slice({seed: "seed"}, lambda fn: True)
    assert heads(g, found) == {
        "out.textContent = fmt(total);",  # the seed
        "if (total > limit)",  # decides whether it runs; limit is render's parameter:
        "render(1);",  # the call that passes it
        "let total = 0, scale = 2;", "total += i;", "for (let i = 0; i < 3; i++)",  # total
        "const out = document.getElementById('out');",
        "return 'n=' + k;", "const k = v * scale;",  # what fmt returns, from its argument
    }
    assert found[flow.statement_at(span("return 'n='")[0])] == (
        "returns a value the slice uses (fmt)")
    # Functions that are not allowed (did not run) contribute nothing.
    on_go = g.functions_named("onGo")[0].index
    narrow = flow.slice({seed: "seed"}, lambda fn: fn != on_go)
    assert "total += i;" not in heads(g, narrow) and "render(1);" not in heads(g, narrow)


# A class keeps its state on `this`: what one method stores, another reads.
CLASSY = """<span id="out"></span><button id="go">go</button><script>
class Counter {
  constructor() { this.n = 0; this.label = 'n'; }
  add(k) {
    for (let i = 0; i < k; i++) { this.n += 1; }
  }
  show() { document.getElementById('out').textContent = this.n; }
}
class Other {
  constructor() { this.n = 5; }
}
const c = new Counter();
function unrelated() { const t = this.n; }
document.getElementById('go').onclick = () => { c.add(3); c.show(); };
</script>"""


def _sliced_from(app: str, seed: str) -> set[str]:
    """What the slice of the statement at ``seed`` blames, every function allowed."""
    g = build_graph(app)
    k = g.flow.statement_at(span(seed, app)[0])
    return heads(g, g.flow.slice({k: "seed"}, lambda fn: True))


def test_slice_follows_a_class_s_state_through_this_between_its_methods():
    found = _sliced_from(CLASSY, "document.getElementById('out')")
    assert {"this.n += 1;", "for (let i = 0; i < k; i++)", "this.n = 0;"} <= found
    # Another class's `this`, and a plain function's, are other objects.
    assert found.isdisjoint({"this.n = 5;", "const t = this.n;"})


GUARDED = """<span id="out"></span><script>
let n = 1;
function show() {
  if (n < 0) return;
  document.getElementById('out').textContent = n;
  if (n > 9) throw new Error('too big');
  return n;
}
show();
</script>"""


def test_slice_holds_the_returns_and_throws_that_can_end_the_function_first():
    found = _sliced_from(GUARDED, "document.getElementById('out')")
    assert {"return;", "if (n < 0)"} <= found  # the guard, and the condition it runs under
    assert found.isdisjoint({"throw new Error('too big');", "return n;"})  # only those before


def test_load_functions():
    text = ("<script>\nfunction a() { b(); }\nfunction b() {}\nfunction c() {}\n"
            "function setup() {}\nfunction h() { c(); }\na();\n"
            "window.addEventListener('load', h);\ndocument.body.onclick = c;\n</script>")
    g = build_graph(text)
    names = {g.functions[i].name for i in load_functions(g)}
    assert names == {"a", "b", "setup", "h", "c"}
    text = text.replace("function h() { c(); }", "function h() {}")
    assert "c" not in {g.functions[i].name for i in load_functions(build_graph(text))}


def test_load_functions_hold_the_callbacks_array_methods_run_on_the_spot():
    text = ("<script>\nfunction a(xs) { xs.forEach((x) => b(x)); xs.map(function m(x) "
            "{ return x; }); }\nfunction b() {}\nfunction c() {}\n"
            "function h() { setTimeout(() => c(), 5); }\n[1].filter((y) => y);\na([1]);\n"
            "h();\n</script>")
    g = build_graph(text)
    loaded = load_functions(g)
    names = {g.functions[i].name for i in loaded}
    assert {"a", "b", "m", "h"} <= names and "c" not in names
    kinds = sorted(g.functions[i].kind for i in loaded if not g.functions[i].name)
    assert kinds == ["arrow", "arrow"]  # forEach's and the top-level filter's, not the timer's


def test_load_functions_hold_an_instance_mode_sketch_s_setup():
    text = ("<script>\nfunction fill() {}\nfunction step() {}\nconst sketch = (p) => {\n"
            "  p.setup = function () { fill(); };\n  p.mousePressed = function () { step(); };\n"
            "};\nnew p5(sketch);\nnew p5((q) => { q.preload = () => step(); });\n</script>")
    g = build_graph(text)
    names = {g.functions[i].qualname for i in load_functions(g)}
    assert {"sketch", "p.setup", "fill", "q.preload", "step"} <= names
    assert "p.mousePressed" not in names


def probe(check: dict, action: dict, ran: list[str], g) -> dict:
    cover = [{"name": n, "start": f.span[0], "end": f.span[1], "count": 1}
             for n in ran for f in g.functions_named(n)]
    return {"kind": "probe_failure", "reason": "wrong_value", "stage": "rubric",
            "severity": "moderate", "rubric_id": "r", "message": "expect failed", "step_index": 1, "step": check,
            "locator": check.get("locator"), "expected": check.get("value"), "actual": "x",
            "after_action": {"step_index": 0, "step": action, "locator": action["locator"]},
            "coverage": {"functions": cover, "since": "load"}}


LONG = """<button id="go">Go</button><p id="a"></p><p id="b"></p><div id="box"></div>
<script>
const a = document.getElementById('a');
const b = document.getElementById('b');
const box = document.getElementById('box');
let mode = 1;
function update() {
  const x = mode * 7;
  const y = mode + 100;
  a.textContent = 'a=' + x;
  b.textContent = 'b=' + y;
  const item = document.createElement('i');
  item.textContent = x;
  box.appendChild(item);
  // padding so that the function is long enough to be narrowed by the slice..........
  // padding so that the function is long enough to be narrowed by the slice..........
  // padding so that the function is long enough to be narrowed by the slice..........
}
document.getElementById('go').addEventListener('click', update);
</script>"""


def test_grounded_blame_is_narrowed_to_the_slice_of_the_write():
    g = build_graph(LONG)
    go = {"do": "click", "locator": "#go"}
    loc = localize(g, probe({"expect": "text", "locator": "#a", "value": "a=14"}, go,
                            ["update"], g), "grounded")
    update = g.functions_named("update")[0].span
    assert update[1] - update[0] > 400
    assert loc.s_dir == tuple(merge_spans([
        span("const a = document.getElementById('a');", LONG), span("let mode = 1;", LONG),
        span("const x = mode * 7;", LONG), span("a.textContent = 'a=' + x;", LONG),
        span("document.getElementById('go').addEventListener('click', update)", LONG)]))
    assert not any(s <= update[0] and update[1] <= e for s, e in loc.s_ctx)  # replaced
    assert {"span": list(span("const x = mode * 7;", LONG)), "set": "dir",
            "why": "sets x, which the slice reads", "by": "flow"} in plain(loc.evidence)


def test_script_made_element_is_sliced_from_what_fills_its_container():
    g = build_graph(LONG)
    go = {"do": "click", "locator": "#go"}
    loc = localize(g, probe({"expect": "text", "locator": "#box i", "value": "14"}, go,
                            ["update"], g), "grounded")
    for part in ("box.appendChild(item);", "item.textContent = x;",
                 "const item = document.createElement('i');", "const x = mode * 7;"):
        assert span(part, LONG) in loc.s_dir or any(
            s <= span(part, LONG)[0] and span(part, LONG)[1] <= e for s, e in loc.s_dir)
    assert not any(s <= span("const y", LONG)[0] < e for s, e in loc.s_dir)


MISSED = """<button id="go">Go</button><p id="total"></p><p id="label"></p>
<script>
const TABLE = [""" + ", ".join(str(i) for i in range(300)) + """];
const totalEl = document.getElementById('label');
let n = 2;
function show() {
  const v = TABLE[n] * 3;
  totalEl.textContent = v;
}
show();
</script>"""


def test_when_no_code_writes_the_element_only_the_written_element_is_followed():
    g = build_graph(MISSED)
    # Checked before any action, and nothing ran during the probe: what ran at load.
    diag = probe({"expect": "text", "locator": "#total", "value": "6"},
                 {"do": "click", "locator": "#none"}, [], g)
    diag["after_action"] = None
    loc = localize(g, diag, "grounded")
    assert span("const totalEl = document.getElementById('label');", MISSED) in loc.s_dir
    assert span("totalEl.textContent = v;", MISSED) in loc.s_dir
    assert not any(s <= span("const v", MISSED)[0] < e for s, e in loc.s_dir)  # the value
    # A long statement the slice reaches is context (a data table rarely holds the fault).
    show = {"expect": "text", "locator": "#label", "value": "6"}
    diag = {**probe(show, {"do": "click", "locator": "#go"}, [], g), "after_action": None}
    loc = localize(g, diag, "grounded")
    table = span("const TABLE = [", MISSED)
    assert span("const v = TABLE[n] * 3;", MISSED) in loc.s_dir
    assert not any(s <= table[0] < e for s, e in loc.s_dir)
    assert any(s <= table[0] < e for s, e in loc.s_ctx)


BRANCHY = """<button id="go">Go</button><select id="mode"></select><p id="out"></p>
<script>
const out = document.getElementById('out');
const mode = document.getElementById('mode');
function render() {
  let steps = [];
  const m = mode.value;
  if (m === 'estimate') {
    steps.push('round: ' + Math.round(2.6));
    steps.push('estimate: ' + 3 * 4);
  } else {
    steps.push('exact: ' + 2.6 * 4);
  }
  out.textContent = steps.join(' ');
  // padding so that the function is long enough to be narrowed by the slice..........
  // padding so that the function is long enough to be narrowed by the slice..........
  // padding so that the function is long enough to be narrowed by the slice..........
}
document.getElementById('go').addEventListener('click', render);
</script>"""


def test_slice_statements_in_blocks_that_did_not_run_are_context():
    g = build_graph(BRANCHY)
    go = {"do": "click", "locator": "#go"}
    diag = probe({"expect": "text", "locator": "#out", "value": "exact: 10.4"}, go,
                 ["render"], g)
    taken = span("{\n    steps.push('round", BRANCHY)[0], span("3 * 4);\n  }", BRANCHY)[1]
    without = localize(g, diag, "grounded")
    assert span("steps.push('estimate: ' + 3 * 4);", BRANCHY) in without.s_dir
    diag["coverage"]["skipped"] = [list(taken)]  # the probe took the else branch
    loc = localize(g, diag, "grounded")
    for idle in ("steps.push('round: ' + Math.round(2.6));", "steps.push('estimate: ' + 3 * 4);"):
        a, b = span(idle, BRANCHY)
        assert span(idle, BRANCHY) not in loc.s_dir
        assert any(s <= a and b <= e for s, e in loc.s_ctx)
    for ran in ("steps.push('exact: ' + 2.6 * 4);", "if (m === 'estimate')",
                "out.textContent = steps.join(' ');", "let steps = [];"):
        assert span(ran, BRANCHY) in loc.s_dir
    assert {"span": list(span("steps.push('estimate: ' + 3 * 4);", BRANCHY)), "set": "ctx",
            "why": "sets steps, which the slice reads; in a block that did not run during the "
                   "probe", "by": "coverage"} in plain(loc.evidence)
    # When the checked write itself sits in a skipped block, it stays blamed.
    diag["coverage"]["skipped"] = [[span("out.textContent", BRANCHY)[0] - 1,
                                    span("steps.join(' ');", BRANCHY)[1]]]
    assert span("out.textContent = steps.join(' ');", BRANCHY) in localize(g, diag, "grounded").s_dir
