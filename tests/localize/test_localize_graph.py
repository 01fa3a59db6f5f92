"""Code graph of small hand-written apps: exact records and spans."""

from __future__ import annotations

import pytest

from evaluators.localize.graph import build_graph, find_html_region

# Multi-byte characters (2, 3 and 4 UTF-8 bytes) come before all the code, so any byte offset
# leaking out of tree-sitter would shift every span below.
APP = """<!DOCTYPE html>
<html>
<head>
<title>Café ☕ 日本 😀</title>
<style>
#panel > button.primary { color: red; }
.row span { margin: 0; }
#panel button:hover, #speed { outline: none }
li:first-child { x: 1 }
</style>
<script type="text/x-shader">void main() { function fake() {} }</script>
<script type="application/json">{"a": 1}</script>
</head>
<body>
<div id="panel" class="row main">
  <button id="go" class="primary" onclick="step(1); render()">Go ▶</button>
  <button id="reset">Reset</button>
  <input id="speed" type="range" min="1" max="9">
  <span id="out">0</span>
</div>
<ul id="list"><li class="item">a</li><li class="item">b</li></ul>
<script>
let count = 0;
const state = { speed: 1, label: 'é' };
const out = document.getElementById('out');
const ui = { speed: document.querySelector('#speed') };
function step(k) {
  count += k;
  state.speed = k * 2;
  out.textContent = `n=${count}`;
}
const render = () => {
  out.style.color = state.speed > 1 ? 'red' : 'blue';
};
const helpers = {
  clamp: function (v) { return Math.min(v, 9); },
  twice(v) { return 2 * v; },
};
helpers.reset = function () { count = 0; render(); };
class Sim {
  tick = () => { step(1); };
  run() { this.tick(); }
}
document.getElementById('reset').addEventListener('click', helpers.reset);
ui.speed.addEventListener('input', (e) => { state.speed = Number(e.target.value); render(); });
document.querySelectorAll('.item').forEach(li => li.addEventListener('click', () => li.classList.toggle('on')));
window.onresize = render;
</script>
<script type="module">
import { x } from './m.js';
export function boot() { new Sim().run(); }
</script>
</body>
</html>
"""

# Element indices, in document order.
HTML, HEAD, TITLE, STYLE, SHADER, JSON_SCRIPT, BODY = range(7)
PANEL, GO, RESET, SPEED, OUT, LIST, LI1, LI2, SCRIPT, MODULE = range(7, 17)


def span(text: str, sub: str, nth: int = 0) -> tuple[int, int]:
    """Span of the nth occurrence of ``sub`` in ``text``."""
    start = -1
    for _ in range(nth + 1):
        start = text.index(sub, start + 1)
    return start, start + len(sub)


@pytest.fixture(scope="module")
def g():
    return build_graph(APP)


def test_elements(g):
    assert [e.tag for e in g.elements] == [
        "html", "head", "title", "style", "script", "script", "body", "div", "button", "button",
        "input", "span", "ul", "li", "li", "script", "script"]
    panel = g.elements[PANEL]
    assert (panel.id, panel.classes, panel.parent, panel.children) == (
        "panel", ("row", "main"), BODY, (GO, RESET, SPEED, OUT))
    assert panel.start_tag == span(APP, '<div id="panel" class="row main">')
    go = g.elements[GO]
    assert go.span == span(APP, '<button id="go" class="primary" onclick="step(1); render()">'
                                'Go ▶</button>')
    assert go.attr("onclick").value_span == span(APP, "step(1); render()")
    assert g.elements[SPEED].attr("max").value == "9"
    assert g.element_by_id("out").index == OUT
    assert g.enclosing_element(span(APP, "Go ▶")[0]).index == GO


def test_scripts_skip_non_javascript_types(g):
    assert [(s.element, s.module) for s in g.scripts] == [(SCRIPT, False), (MODULE, True)]
    assert not g.functions_named("fake")
    assert [st.element for st in g.styles] == [STYLE]


def test_inline_handler(g):
    (handler,) = g.elements[GO].handlers
    assert handler.event == "click"
    assert handler.code_span == span(APP, "step(1); render()")
    assert handler.attribute_span == span(APP, 'onclick="step(1); render()"')
    f = g.functions[handler.function]
    assert (f.kind, f.name, f.span) == ("inline_handler", "onclick", handler.code_span)
    callees = [(c.callee, [g.functions[t].name for t in c.targets])
               for c in g.calls_from(handler.function)]
    assert callees == [("step", ["step"]), ("render", ["render"])]


def test_function_names_kinds_and_spans(g):
    got = [(f.name, f.qualname, f.kind) for f in g.functions]
    assert got == [
        ("onclick", "onclick", "inline_handler"),
        ("step", "step", "declaration"),
        ("render", "render", "arrow"),
        ("clamp", "helpers.clamp", "expression"),
        ("twice", "helpers.twice", "method"),
        ("reset", "helpers.reset", "expression"),
        ("tick", "Sim.tick", "arrow"),
        ("run", "Sim.run", "method"),
        (None, None, "arrow"),  # the 'input' listener
        (None, None, "arrow"),  # li => ...
        (None, None, "arrow"),  # () => li.classList.toggle('on')
        ("boot", "boot", "declaration"),
    ]
    step = g.functions_named("step")[0]
    assert step.span == span(APP, "function step(k) {\n  count += k;\n  state.speed = k * 2;\n"
                                  "  out.textContent = `n=${count}`;\n}")
    assert step.params == ("k",)
    inner = g.functions[10]
    assert inner.span == span(APP, "() => li.classList.toggle('on')")
    assert g.functions[inner.parent].span == span(
        APP, "li => li.addEventListener('click', () => li.classList.toggle('on'))")
    assert g.functions[8].params == ("e",)


def test_event_bindings(g):
    got = [(b.event, b.kind, b.elements, b.global_target,
            None if b.handler is None else g.functions[b.handler].span, b.handler_text)
           for b in g.event_bindings]
    reset_fn = g.functions_named("helpers.reset")[0].span
    assert got == [
        ("click", "attribute", (GO,), None, span(APP, "step(1); render()"), "step(1); render()"),
        ("click", "listener", (RESET,), None, reset_fn, "helpers.reset"),
        ("input", "listener", (SPEED,), None,
         span(APP, "(e) => { state.speed = Number(e.target.value); render(); }"),
         "(e) => { state.speed = Number(e.target.value); render(); }"),
        ("click", "listener", (LI1, LI2), None, span(APP, "() => li.classList.toggle('on')"),
         "() => li.classList.toggle('on')"),
        ("resize", "property", (), "window", g.functions_named("render")[0].span, "render"),
    ]
    assert g.event_bindings[1].span == span(
        APP, "document.getElementById('reset').addEventListener('click', helpers.reset)")
    assert g.event_bindings[4].span == span(APP, "window.onresize = render")
    assert [b.kind for b in g.bindings_for_element(LI2)] == ["listener"]


def test_dom_queries(g):
    got = [(q.method, q.argument, q.selector, q.elements, q.exact, q.variable)
           for q in g.dom_queries]
    assert got == [
        ("getElementById", "out", "#out", (OUT,), True, "out"),
        ("querySelector", "#speed", "#speed", (SPEED,), True, "ui.speed"),
        ("getElementById", "reset", "#reset", (RESET,), True, None),
        ("querySelectorAll", ".item", ".item", (LI1, LI2), True, None),
    ]
    assert g.dom_queries[0].span == span(APP, "document.getElementById('out')")
    assert g.dom_queries[0].function is None


def test_element_writes(g):
    got = [(w.kind, w.detail, w.target_text, w.elements, w.span) for w in g.element_writes]
    step = g.functions_named("step")[0].index
    assert got == [
        ("textContent", "", "out", (OUT,), span(APP, "out.textContent = `n=${count}`")),
        ("style", "color", "out", (OUT,),
         span(APP, "out.style.color = state.speed > 1 ? 'red' : 'blue'")),
        ("classList", "toggle:on", "li", (LI1, LI2), span(APP, "li.classList.toggle('on')")),
    ]
    assert g.element_writes[0].function == step
    assert g.writes_to_element(OUT) == g.element_writes[:2]


def test_state_vars(g):
    count = g.state_var("count")
    assert count.decl == span(APP, "count = 0", 0)
    assert count.reads == (span(APP, "count", 2),)  # inside `n=${count}`
    assert count.writes == (span(APP, "count += k"), span(APP, "count = 0", 1))
    speed = g.state_var("state.speed")
    assert (speed.root, speed.decl) == ("state", span(APP, "speed: 1"))
    assert speed.reads == (span(APP, "state.speed", 1),)  # in render
    assert speed.writes == (span(APP, "state.speed = k * 2"),
                            span(APP, "state.speed = Number(e.target.value)"))
    assert g.state_var("state").decl == span(APP, "state = { speed: 1, label: 'é' }")
    assert g.state_var("render") is None  # functions are not state
    assert g.state_var("out.textContent") is None  # `out` holds an element
    names = [v.name for v in g.state_vars]
    assert names[:4] == ["count", "state", "state.speed", "out"]


def test_call_edges(g):
    def edges(fn_name):
        f = g.functions_named(fn_name)[0]
        return [(c.callee, c.kind, tuple(g.functions[t].qualname for t in c.targets))
                for c in g.calls_from(f.index)]

    assert edges("helpers.reset") == [("render", "call", ("render",))]
    assert edges("Sim.run") == [("tick", "call", ("Sim.tick",))]
    assert edges("Sim.tick") == [("step", "call", ("step",))]
    assert edges("boot") == [("Sim", "new", ()), ("run", "call", ("Sim.run",))]
    assert edges("helpers.clamp") == [("min", "call", ())]  # Math.min is not user code
    assert [c.caller for c in g.calls_to(g.functions_named("step")[0].index)] == [0, 6]


def test_css_rules(g):
    got = [(r.selector, r.elements, r.exact) for r in g.css_rules]
    assert got == [
        ("#panel > button.primary", (GO,), True),
        (".row span", (OUT,), True),
        ("#panel button:hover, #speed", (GO, RESET, SPEED), True),
        ("li:first-child", (LI1, LI2), False),  # superset: :first-child is not evaluated
    ]
    rule = g.css_rules[0]
    assert rule.block == span(APP, "{ color: red; }")
    assert rule.selector_span == span(APP, "#panel > button.primary")
    assert [(d.property, d.value, d.span) for d in rule.declarations] == [
        ("color", "red", span(APP, "color: red;"))]
    assert g.rules_for_element(SPEED) == (g.css_rules[2],)
    assert g.enclosing_rule(span(APP, "margin: 0")[0]) == g.css_rules[1]


def test_enclosing_function_and_statement(g):
    at = span(APP, "k * 2")[0]
    assert g.enclosing_function(at).name == "step"
    assert g.enclosing_statement(at) == span(APP, "state.speed = k * 2;")
    toggle = span(APP, "toggle('on')")[0]
    assert g.enclosing_function(toggle).span == span(APP, "() => li.classList.toggle('on')")
    assert g.enclosing_statement(span(APP, "let count")[0]) == span(APP, "let count = 0;")
    assert g.enclosing_function(span(APP, "let count")[0]) is None
    assert g.enclosing_statement(span(APP, "<ul")[0]) is None


def test_select(g):
    assert [e.index for e in g.select("#panel span, ul > li.item")] == [OUT, LI1, LI2]
    assert g.match("li + li") == ((LI2,), True)
    assert g.match("button ~ span") == ((OUT,), True)


VARIANTS = """<button id="b1">1</button><button id="b2">2</button><input id="s">
<div id="box"><p class="t">x</p></div><p class="t">y</p>
<script>
const b = document.getElementById('b1');
b.addEventListener('click', onB);
function onB() {}
['b1', 'b2'].forEach(id => document.getElementById(id).onclick = () => {});
for (let i = 1; i <= 2; i++) document.getElementById('b' + i).disabled = true;
const box = document.getElementById('box');
box.querySelector('.t').textContent = 'in';
let slider;
function setup() { slider = createSlider(0, 1); slider.input(onSlide); select('#s').changed(onB); }
function onSlide() {}
</script>"""


def test_binding_forms():
    g = build_graph(VARIANTS)
    ids = {e.id: e.index for e in g.elements if e.id}
    got = [(b.event, b.kind, b.target_text, b.elements,
             None if b.handler is None else g.functions[b.handler].name)
           for b in g.event_bindings]
    assert got == [
        ("click", "listener", "b", (ids["b1"],), "onB"),
        ("click", "property", "document.getElementById(id)", (ids["b1"], ids["b2"]), None),
        ("input", "p5", "slider", (), "onSlide"),
        ("changed", "p5", "select('#s')", (ids["s"],), "onB"),
    ]
    assert [(q.argument, q.elements, q.exact) for q in g.dom_queries] == [
        ("b1", (ids["b1"],), True),
        (None, (ids["b1"], ids["b2"]), True),  # ids from the literal array
        (None, (ids["b1"], ids["b2"]), False),  # 'b' + i, i a number: ids matching b<n>
        ("box", (ids["box"],), True),
        (".t", (g.select("#box .t")[0].index,), True),  # scoped to #box
        ("#s", (ids["s"],), True),
    ]
    writes = [(w.kind, w.elements) for w in g.element_writes]
    assert writes == [("disabled", (ids["b1"], ids["b2"])),
                      ("textContent", (g.select("#box .t")[0].index,))]
    handler = g.functions[g.event_bindings[1].handler]
    assert handler.span == span(VARIANTS, "() => {}")


def test_non_ascii_offsets_in_scripts():
    text = "<p id='é'>😀</p><script>const s = '日本'; function f() { return s; }</script>"
    g = build_graph(text)
    (f,) = g.functions
    assert f.span == span(text, "function f() { return s; }")
    read = text.index("return s;") + len("return ")
    assert g.state_var("s").reads == ((read, read + 1),)
    assert g.element_by_id("é").span == span(text, "<p id='é'>😀</p>")


def test_region_of_fenced_response():
    response = "Here it is:\n```html\n<p id='a'>é</p>\n<script>let x = 1;</script>\n```\nDone."
    region = find_html_region(response)
    assert response[region[0]:region[1]] == "<p id='a'>é</p>\n<script>let x = 1;</script>\n"
    g = build_graph(response, region)
    assert g.element_by_id("a").span == span(response, "<p id='a'>é</p>")
    assert g.state_var("x").decl == span(response, "x = 1")
    assert find_html_region("<p>bare</p>") == (0, 11)
    assert find_html_region("```html\n<p>cut") == (8, 14)


def test_deep_expression_and_garbage_do_not_crash():
    deep = "<script>let v = " + " + ".join(["1"] * 20000) + ";</script>"
    g = build_graph(deep)
    assert g.state_var("v").decl[0] == deep.index("v =")
    for junk in ["", "<", "<script>", "<script>function (", "<div><<>>", "\x00\xff",
                 "<style>{{{</style><button onclick='(('>"]:
        build_graph(junk)


WRITES = """<div id="box" class="c"></div><input name="q"><ul><li>x</li></ul>
<script>
const box = document.getElementById('box');
function paint(obj, el) {
  box.setAttribute('title', 'x');
  box.innerHTML += '<b>';
  box.className = 'k';
  box.dataset.userId = '7';
  document.body.appendChild(el);
  el.textContent = 'unknown target, still a DOM write';
  obj.value = 3;
  document.getElementsByName('q')[0].value = 'v';
  document.getElementsByClassName('c')[0].style.setProperty('--w', '2px');
  document.getElementsByTagName('LI')[0].remove();
}
</script>"""


def test_element_write_forms():
    g = build_graph(WRITES)
    box, q, body, li = (g.element_by_id("box").index, g.select("input")[0].index,
                        g.select("body"), g.select("li")[0].index)
    got = [(w.kind, w.detail, w.target_text, w.elements) for w in g.element_writes]
    assert got == [
        ("attribute", "title", "box", (box,)),
        ("innerHTML", "", "box", (box,)),
        ("className", "", "box", (box,)),
        ("attribute", "data-user-id", "box", (box,)),
        ("children", "appendChild", "document.body", ()),  # no <body> tag in this document
        ("textContent", "", "el", ()),
        ("value", "", "document.getElementsByName('q')[0]", (q,)),  # obj.value is not a write
        ("style", "--w", "document.getElementsByClassName('c')[0]", (box,)),
        ("children", "remove", "document.getElementsByTagName('LI')[0]", (li,)),
    ]
    assert body == ()
    assert all(w.function == g.functions_named("paint")[0].index for w in g.element_writes)
    assert g.element_writes[1].span == span(WRITES, "box.innerHTML += '<b>'")


def test_state_writes_through_mutation_and_indices():
    text = ("<script>const state = { items: [] }; let grid = [[0]];\n"
            "function add(x) { state.items.push(x); grid[0][0] = x; let state2 = state; }\n"
            "function shadow(grid) { grid[0] = 1; }</script>")
    g = build_graph(text)
    assert g.state_var("state.items").writes == (span(text, "state.items.push(x)"),)
    assert g.state_var("state.items").decl == span(text, "items: []")
    assert g.state_var("grid").writes == (span(text, "grid[0][0] = x"),)  # not the parameter's
    assert g.state_var("state").reads == (span(text, "state", 1), span(text, "state", 3))
    assert g.state_var("state2") is None  # a local


def test_variables_and_their_references():
    text = ("<span id='o'></span><script>let n = 1; const el = document.getElementById('o');\n"
            "function f(n) { el.textContent = n; n += 1; return n; }\n"
            "const state = {};\nfunction g() { n++; state.x = n; }</script>")
    g = build_graph(text)
    names = [(v.name, v.kind, v.is_global) for v in g.variables]
    assert names[:4] == [("n", "let", True), ("el", "const", True), ("f", "function", True),
                         ("n", "param", False)]
    assert g.variables[0].decl == span(text, "n = 1")
    assert g.variables[3].function == g.functions_named("f")[0].index
    refs = [(g.variables[r.variable].name, g.variables[r.variable].kind, text[r.span[0]:r.span[1]],
             r.write, text[r.site[0]:r.site[1]]) for r in g.var_refs]
    assert refs == [
        ("el", "const", "el", False, "el"),  # a property of an element: not a write of el
        ("n", "param", "n", False, "n"),
        ("n", "param", "n", True, "n += 1"),
        ("n", "param", "n", False, "n"),
        ("n", "let", "n", True, "n++"),
        ("state", "const", "state", False, "state"),
        ("state", "const", "state.x", True, "state.x = n"),
        ("n", "let", "n", False, "n"),
    ]


def test_dead_ends_are_jumps_with_code_after_them_in_their_block():
    text = ("<script>\nfunction a() { return; foo(); }\n"
            "function b(x) { switch (x) { case 1: return 2; case 2: return 3; }\n"
            "  if (x) return 1; else bar();\n  for (;;) { if (x) break; baz(); } }\n"
            "function c() { return helper(); function helper() { return 1; } }\n"
            "function d() { for (;;) { continue; qux(); } throw new Error('x'); // end\n}\n"
            "</script>")
    g = build_graph(text)
    assert [text[s:e] for s, e in g.dead_ends] == ["return;", "continue;"]
    assert [text[s:e].strip() for s, e in g.dead_code] == ["foo();", "qux();"]


def test_properties_name_every_member_access_with_its_object():
    text = ("<div id='o'></div><script>\nconst o = document.getElementById('o');\n"
            "function a() { o.innerhtml = 1; document.getElementById('o').textContent = 2;\n"
            "  state.a.b = o.value; grid[i].x = 3; }\n</script>")
    g = build_graph(text)
    got = [(name, text[s:e], text[os:oe]) for name, (s, e), (os, oe) in g.properties]
    assert got == [("innerhtml", "innerhtml", "o"),
                   ("textContent", "textContent", "document.getElementById('o')"),
                   ("a", "a", "state"), ("b", "b", "state.a"), ("value", "value", "o"),
                   ("x", "x", "grid[i]")]


def test_misspelled_element_properties_are_told_from_real_members():
    from evaluators.localize.spans_smells import _meant

    assert _meant("innerhtml", on_element=False) == "innerHTML"  # only elements have it
    assert _meant("values", on_element=True) == "value"
    assert _meant("values", on_element=False) is None  # `Object.values`, `data.values`
    assert _meant("Title", on_element=False) is None  # a plain object's own field
    for real in ("scrollTo", "value", "textContent", "tagName", "onmouseover"):
        assert _meant(real, on_element=True) is None, real


def _one_edit(a: str, b: str) -> bool:
    """Brute force: ``a`` becomes ``b`` by one insertion, deletion or substitution."""
    if abs(len(a) - len(b)) > 1 or a == b:
        return False
    a, b = sorted((a, b), key=len)
    i = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), len(a))
    return a[i + (len(a) == len(b)):] == b[i + 1:]


def test_the_one_edit_index_finds_what_brute_force_finds():
    import random
    import string

    from evaluators.localize.spans_smells import _ELEMENT_NAMES, _one_edit_of

    rng, names = random.Random(0), sorted(n for n in _ELEMENT_NAMES if len(n) >= 5)
    queries = ["oclick", "xyzzyq"]
    for n in names:
        for _ in range(10):
            i, c = rng.randrange(len(n)), rng.choice(string.ascii_letters)
            queries += [n[:i] + c + n[i:], n[:i] + n[i + 1:], n[:i] + c + n[i + 1:]]
    for q in queries:
        if len(q) >= 5 and q not in _ELEMENT_NAMES:
            assert _one_edit_of(q) == next((n for n in names if _one_edit(q, n)), None), q


def test_a_call_by_computed_key_may_reach_any_function_member_of_its_object():
    text = ("<script>\nconst FNS = {'a1': (u) => { return; }, b2: function (u) { return u; },\n"
            "  c3(u) { return u * 2; }};\nconst other = {d4: () => 1};\n"
            "function run(k) { return FNS[k](1); }\nfunction z(i) { return list[i](); }\n"
            "run('a1');\n</script>")
    g = build_graph(text)
    by = {c.callee_text: sorted(g.functions[t].qualname for t in c.targets) for c in g.calls}
    assert by["FNS[k]"] == ["FNS.a1", "FNS.b2", "FNS.c3"]
    assert by["list[i]"] == []  # not a binding of the app: nothing to resolve it to


def test_a_misspelled_property_of_an_element_a_closure_sees_is_blamed():
    from evaluators.localize.spans import localize
    from tests.localize.diags import probe_failure, ran, rules_of

    # `inputN` is looked up in the load handler; the function made inside it writes `.values`.
    app = """<input id="n" type="number" value="1"><input id="s" type="range" value="1">
<script>
window.onload = function () {
  const slider = document.getElementById('s');
  const inputN = document.getElementById('n');
  function sync(val) {
    slider.value = val;
    inputN.values = val;
  }
  slider.addEventListener('input', (e) => sync(e.target.value));
};
</script>"""
    g = build_graph(app)
    diag = probe_failure({"expect": "value", "locator": "#n", "value": "10"},
                         {"do": "fill", "locator": "#s", "value": "10"},
                         coverage=ran(g, "sync"))
    loc = localize(g, diag, "grounded")
    bad = app.index("inputN.values = val;")
    assert any("smells.misspelled_property" in rules_of(e) and e["set"] == "dir"
               and e["span"][0] <= bad < e["span"][1] for e in loc.evidence)


TABLE = """<input id="a" type="range"><span id="a-val"></span>
<input id="b" type="range"><span id="b-val"></span><span id="c-val"></span>
<script>
const rows = [{id: 'a', out: 'a-val'}, {id: 'b', 'out': "b-val"}];
rows.forEach(r => {
  const input = document.getElementById(r.id);
  input.addEventListener('input', () => { document.getElementById(r.out).textContent = input.value; });
});
for (const r of [{id: 'a'}, {id: 'b', note: 1}]) document.getElementById(r.id).disabled = true;
[{id: 'a'}, {name: 'x'}].forEach(r => document.getElementById(r.id).title = 't');
</script>"""


def test_ids_from_a_table_of_objects():
    """`rows.forEach(r => getElementById(r.id))` over literal objects reaches their ids."""
    g = build_graph(TABLE)
    ids = {e.id: e.index for e in g.elements if e.id}
    assert [(q.elements, q.exact) for q in g.dom_queries] == [
        ((ids["a"], ids["b"]), True),
        ((ids["a-val"], ids["b-val"]), True),
        ((ids["a"], ids["b"]), True),
        # An object without the field: its value is unknown, as before.
        ((), False),
    ]
    assert [b.elements for b in g.event_bindings] == [(ids["a"], ids["b"])]
