"""Values followed back (``evaluators.localize.spans_origins``): what they must leave alone;
and how a check right after load counts the start-up code as run."""

from __future__ import annotations

from evaluators.localize.graph import build_graph
from evaluators.localize.rules import LocalizeConfig
from evaluators.localize.spans import localize
from tests.localize.diags import page_error, probe_failure, rules_of, span
from tests.localize.rows_origins import AT_START, SCENE, TWO_CALLS_DEEP, _frames


def _blamed_by(loc, rule: str) -> list[dict]:
    return [e for e in loc.evidence if rule in rules_of(e)]


def test_a_return_after_a_return_is_not_followed():
    # The code after `return;` never runs: its `return points;` gives nothing to follow.
    app = TWO_CALLS_DEEP.replace("function fresh(n) { return; }",
                                 "function fresh(n) { return; const points = []; "
                                 "return points; }")
    loc = localize(build_graph(app), page_error(
        "uncaught TypeError: Cannot read properties of undefined (reading 'forEach')",
        _frames(app, "list.forEach", "draw(list);", "show();\n</script>")), "grounded")
    dead = span("return points;", app)
    assert not any(dead[0] <= e["span"][0] < dead[1]
                   for e in _blamed_by(loc, "errors.missing_argument"))
    assert any(tuple(e["span"]) == span("return;", app) and e["set"] == "dir"
               for e in _blamed_by(loc, "errors.missing_argument"))


def test_a_check_right_after_load_counts_the_start_up_code_as_run():
    # The probe's coverage begins after load: empty for a check with no action before it,
    # although `update` ran at load and read the misspelled `.values`.
    diag = probe_failure({"expect": "text", "locator": "#total", "value": "6"}, None,
                         coverage={"functions": [], "skipped": []})
    loc = localize(build_graph(AT_START), diag, "grounded")
    bad = span("const n = document.getElementById('n').values;", AT_START)
    assert any(tuple(e["span"]) == bad and e["set"] == "dir"
               for e in _blamed_by(loc, "smells.misspelled_property"))
    # After an action, the coverage is the probe's path: `update` did not run on it.
    acted = probe_failure({"expect": "text", "locator": "#total", "value": "6"},
                          {"do": "fill", "locator": "#n", "value": "3"},
                          coverage={"functions": [], "skipped": []})
    loc = localize(build_graph(AT_START), acted, "grounded")
    assert _blamed_by(loc, "smells.misspelled_property") == []


def test_what_built_a_library_call_s_inputs_is_followed_through_constructions_first():
    from evaluators.localize import spans_origins

    def built(app: str) -> list[str]:
        g = build_graph(app)
        k = g.flow.statement_at(app.index("renderer.render(scene, camera);"))
        return [app[s:e] for (s, e), _, _ in spans_origins.built_objects(g, k)]

    texts = built(SCENE)
    # Two hops from the call: the scene, the ball added to it, what the ball was made of.
    assert "const ball = new THREE.Mesh(material, geometry);" in texts
    assert "const geometry = new THREE.SphereGeometry(1, SIZE, SIZE);" in texts
    # A local of `animate` the call does not read is not followed.
    assert "const label = 'frame';" not in texts
    # Flags set on the scene before the ball was added fill the budget only after the walk
    # through what was handed: the ball's construction is still reached.
    crowded = SCENE.replace("  scene.add(ball);", "".join(
        f"  scene.userData.k{i} = {i};\n" for i in range(60)) + "  scene.add(ball);")
    texts = built(crowded)
    assert len(texts) == spans_origins.MAX_BUILT
    assert "const ball = new THREE.Mesh(material, geometry);" in texts


# The loop runs its index one past the end of the list it indexes.
LOOP_PAST_END = """<canvas id="c"></canvas><script>
const corners = [{x: 0}, {x: 1}, {x: 2}];
function edges() {
  const label = 'edges';
  for (let e = 0; e <= corners.length; e++) {
    const a = corners[e], b = corners[(e + 1) % corners.length];
    console.log(label, a.x + b.x);
  }
}
edges();
</script>"""


def test_a_long_function_keeps_the_heads_of_the_loops_around_the_failure_as_context():
    # Cut to its head and the statements around the failing one, the function still keeps
    # what decides how that statement runs: the loop that made the key of the lookup.
    error = page_error("uncaught TypeError: Cannot read properties of undefined (reading 'x')",
                       _frames(LOOP_PAST_END, "console.log(label, a.x + b.x);", "edges();\n<"))
    loc = localize(build_graph(LOOP_PAST_END), error, "grounded",
                   cfg=LocalizeConfig(long_context=10, around=1))
    head = span("for (let e = 0; e <= corners.length; e++)", LOOP_PAST_END)
    assert any(s <= head[0] and head[1] <= e for s, e in loc.s_ctx + loc.s_dir)
    assert any(tuple(e["span"]) == head and e["set"] == "ctx"
               for e in _blamed_by(loc, "errors.page_error_stack"))
    # Only the head: the loop's whole body is not context for it.
    body = span("const a = corners[e]", LOOP_PAST_END)
    assert not any(s <= body[0] and e >= head[1] + 40 for s, e in loc.s_ctx)


def test_branches_with_an_arm_for_every_case_are_not_blamed_for_an_unassigned_variable():
    # Both arms assign `shape`: the undefined came from what `pick` returned, not from a path
    # that left it unassigned (and with the `else` gone, the `if` is blamed).
    app = """<script>
function pick(n) { if (n > 2) { return {sides: n}; } }
function draw(n) {
  let shape;
  if (n > 0) { shape = pick(n); } else { shape = {sides: 0}; }
  return shape.sides;
}
draw(1);
</script>"""
    diag = page_error("uncaught TypeError: Cannot read properties of undefined (reading 'sides')",
                      _frames(app, "return shape.sides;", "draw(1);\n</script>"))
    head = span("if (n > 0)", app)
    loc = localize(build_graph(app), diag, "grounded")
    assert not any(tuple(e["span"]) == head for e in _blamed_by(loc, "errors.unassigned_branches"))
    bare = app.replace(" else { shape = {sides: 0}; }", "")
    loc = localize(build_graph(bare), {**diag, "frames": _frames(
        bare, "return shape.sides;", "draw(1);\n</script>")}, "grounded")
    assert any(tuple(e["span"]) == span("if (n > 0)", bare) and e["set"] == "dir"
               for e in _blamed_by(loc, "errors.unassigned_branches"))
