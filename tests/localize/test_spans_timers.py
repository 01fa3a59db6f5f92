"""When a failed probe step waited for time alone to change what it read
(`spans_timers.waited_unchanged`), and which timer requests hand over which functions."""

from __future__ import annotations

from evaluators.localize.graph import build_graph
from evaluators.localize.spans_timers import scheduled, waited_unchanged

SAVE_A = {"save": "a", "from": "#t", "read": "text"}
SAVE_B = {"save": "b", "from": "#t", "read": "text"}
DIFFER = {"assert": "not_equal", "left": {"var": "a"}, "right": {"var": "b"}}
WAIT = {"wait_ms": 500}
CLICK = {"do": "click", "locator": "#go"}


def _failed(steps: list, index: int) -> dict:
    return {"step_index": index, "step": steps[index]}


def test_readings_compared_across_a_wait_with_nothing_done_between():
    steps = [SAVE_A, WAIT, SAVE_B, DIFFER]
    assert waited_unchanged({"steps": steps}, _failed(steps, 3))
    # A start action before the first reading does not matter; one between them does.
    steps = [CLICK, SAVE_A, WAIT, SAVE_B, DIFFER]
    assert waited_unchanged({"steps": steps}, _failed(steps, 4))
    steps = [SAVE_A, CLICK, WAIT, SAVE_B, DIFFER]
    assert not waited_unchanged({"steps": steps}, _failed(steps, 4))
    # No wait between the readings: nothing was left to time.
    steps = [SAVE_A, SAVE_B, DIFFER]
    assert not waited_unchanged({"steps": steps}, _failed(steps, 2))


def test_a_check_after_a_wait_and_a_check_right_after_an_action():
    expect = {"expect": "text", "locator": "#t", "value": "1", "not": True}
    steps = [CLICK, WAIT, expect]
    assert waited_unchanged({"steps": steps}, _failed(steps, 2))
    steps = [WAIT, CLICK, expect]
    assert not waited_unchanged({"steps": steps}, _failed(steps, 2))
    # A wait before anything is done lets the page settle (most probes start so).
    steps = [WAIT, expect]
    assert not waited_unchanged({"steps": steps}, _failed(steps, 1))
    # Without the probe, or with a step index that is not the probe's, nothing is assumed.
    assert not waited_unchanged(None, _failed([CLICK, WAIT, expect], 2))
    assert not waited_unchanged({"steps": [expect]}, _failed([CLICK, WAIT, expect], 2))


def test_timer_requests_hand_over_named_and_written_callbacks():
    app = """<script>
function tick() { draw(); }
function draw() {}
let id = setInterval(tick, 100);
setTimeout(() => { draw(); }, 10);
window.requestAnimationFrame(function frame() { tick(); });
</script>"""
    g = build_graph(app)
    name = {f.index: f.name for f in g.functions}
    found = {app[s:e]: {name[i] for i in fns} for (s, e), fns in scheduled(g)}
    assert found["let id = setInterval(tick, 100);"] == {"tick"}
    assert {"draw"} <= found["setTimeout(() => { draw(); }, 10);"]
    assert {"frame", "tick"} <= next(v for k, v in found.items() if "requestAnimation" in k)
