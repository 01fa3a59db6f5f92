"""Forward flow from the acted-on input's value when the check compares readings (a canvas
snapshot): exact spans on small apps."""

from __future__ import annotations

from evaluators.localize.graph import build_graph
from evaluators.localize.spans import localize
from tests.localize.diags import plain, probe_failure, ran, span

PROBE = {"steps": [{"save": "before", "from": "#c", "read": "screenshot"},
                   {"do": "fill", "locator": "#rx", "value": "30"},
                   {"save": "after", "from": "#c", "read": "screenshot"},
                   {"assert": "not_equal", "left": {"var": "after"}, "right": {"var": "before"}}]}

# The sliders are bound in a loop over an object of elements: no binding names #rx, so the
# handler that ran is not found by the element; the faulty statement is `* (Math.PI * 180)`.
SCENE = """<input id="rx" type="range"><input id="rz" type="range"><canvas id="c"></canvas>
<script>
const controls = {
  rx: document.getElementById('rx'),
  rz: document.getElementById('rz')
};
const group = { rotation: { x: 0, z: 0 } };
function redraw() {
  const ctx = document.getElementById('c').getContext('2d');
  ctx.clearRect(0, 0, 300, 150);
  ctx.fillStyle = '#336';
  ctx.fillRect(10, 10, 40, 40);
  ctx.fillRect(60, 10, 40, 40);
  ctx.fillRect(110, 10, 40, 40);
  ctx.fillRect(160, 10, 40, 40);
  ctx.strokeRect(5, 5, 290, 140);
  const xDeg = parseFloat(controls.rx.value);
  const zDeg = parseFloat(controls.rz.value);
  group.rotation.x = xDeg * (Math.PI * 180);
  group.rotation.z = zDeg * (Math.PI / 180);
  ctx.rotate(group.rotation.x + group.rotation.z);
  ctx.fillRect(0, 0, 10, 10);
}
Object.values(controls).forEach(el => el.addEventListener('input', redraw));
</script>"""


def _diag(g) -> dict:
    return {**probe_failure(PROBE["steps"][3], PROBE["steps"][1], coverage=ran(g, "redraw"),
                            message="assert not_equal failed"), "step_index": 3}


def test_the_value_of_the_input_acted_on_is_followed_to_the_statements_using_it():
    text = SCENE
    g = build_graph(text)
    loc = localize(g, _diag(g), "grounded", PROBE)
    read = span("const xDeg = parseFloat(controls.rx.value);", text)
    use = span("group.rotation.x = xDeg * (Math.PI * 180);", text)
    assert read in loc.s_dir and use in loc.s_dir
    whys = {tuple(e["span"]): e["why"] for e in loc.evidence if e["by"] == "flow"}
    assert whys[read] == "reads the value of #rx, the element acted on"
    assert whys[use] == "uses xDeg, computed from the value of #rx"
    # The other slider's value and the drawing code it does not reach are not direct blame,
    # and redraw (long) is no longer blamed whole.
    for other in ("const zDeg = parseFloat(controls.rz.value);",
                  "group.rotation.z = zDeg * (Math.PI / 180);", "ctx.fillRect(10, 10, 40, 40);"):
        assert not any(s <= span(other, text)[0] < e for s, e in loc.s_dir), other
    assert g.functions_named("redraw")[0].span not in loc.s_dir


def test_no_forward_flow_without_coverage_or_for_a_dom_check():
    text = SCENE
    g = build_graph(text)
    use = span("group.rotation.x = xDeg * (Math.PI * 180);", text)
    # The text method has no coverage: it does not know what ran.
    assert not any(e["by"] == "flow" for e in localize(g, _diag(g), "text", PROBE).evidence)
    # A DOM check of an element: its writes (or their absence) are what to blame.
    dom = probe_failure({"expect": "text", "locator": "#c", "value": "x"}, PROBE["steps"][1],
                        coverage=ran(g, "redraw"))
    loc = localize(g, dom, "grounded")
    assert not any(e["by"] == "flow" for e in loc.evidence)
    assert not any(tuple(e["span"]) == use for e in loc.evidence)


def test_a_value_read_from_the_input_that_nothing_uses_blames_where_its_siblings_are_used():
    # The rotation by #rx was removed: xDeg is read and never used. Its use belongs where
    # zDeg, read beside it, is used.
    text = SCENE.replace("  group.rotation.x = xDeg * (Math.PI * 180);\n", "")
    g = build_graph(text)
    loc = localize(g, _diag(g), "grounded", PROBE)
    use = span("group.rotation.z = zDeg * (Math.PI / 180);", text)
    before = span("const zDeg = parseFloat(controls.rz.value);", text)
    assert use in loc.s_dir and before in loc.s_dir
    assert {"span": list(use), "set": "dir", "by": "flow",
            "why": "uses zDeg, read beside xDeg (from the value of #rx), which nothing uses: "
                   "its use is missing here"} in plain(loc.evidence)
    # The drawing before the reads is not blamed.
    assert not any(s <= span("ctx.strokeRect", text)[0] < e for s, e in loc.s_dir)
    # With xDeg used, nothing is blamed for a missing use.
    loc = localize(build_graph(SCENE), _diag(build_graph(SCENE)), "grounded", PROBE)
    assert not any("nothing uses" in e["why"] for e in loc.evidence)
