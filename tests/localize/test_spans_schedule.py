"""Updates nothing keeps running (`evaluators.localize.spans_schedule`): rows of intent over
small apps whose drawing should change after load and does not, and the cases it must leave
alone."""

from __future__ import annotations

import pytest

from evaluators.localize.graph import build_graph
from evaluators.localize.spans import localize
from tests.localize.diags import probe_failure, rules_of
from tests.localize.test_rule_intents import check_intent, check_needs_rule, Row

# Two snapshots of the canvas half a second apart, no action: they must differ.
OVER_TIME = {"steps": [{"save": "a", "from": "#sky", "read": "canvas"}, {"wait_ms": 500},
                       {"save": "b", "from": "#sky", "read": "canvas"},
                       {"assert": "not_equal", "left": {"var": "a"}, "right": {"var": "b"}}]}

# The loop ran once at load and never asked for another frame.
RAN_ONCE = """<canvas id="sky" width="200" height="100"></canvas><button id="reset">reset</button>
<script>
const canvas = document.getElementById('sky');
const ctx = canvas.getContext('2d');
let x = 0;
function drawBall() {
  ctx.clearRect(0, 0, 200, 100);
  ctx.beginPath();
  ctx.arc(x, 50, 10, 0, Math.PI * 2);
  ctx.fill();
}
function frame() {
  x = (x + 2) % 200;
  drawBall();
}
document.getElementById('reset').addEventListener('click', () => { x = 0; });
frame();
</script>"""

# Nothing starts the loop: start-up code draws once and ends.
NEVER_STARTED = RAN_ONCE.replace("frame();\n", "drawBall();\nconsole.log('ready');\n")

# The context is taken from a lookup of the canvas' id, and the loop is one function.
BY_ID = """<canvas id="sky"></canvas>
<script>
const pen = document.getElementById('sky').getContext('2d');
let t = 0;
function tick() { t += 1; pen.fillRect(t % 300, 10, 4, 4); }
tick();
</script>"""


def _over_time(coverage: dict | None = None, assertion: str = "not_equal") -> dict:
    step = {**OVER_TIME["steps"][3], "assert": assertion}
    return {**probe_failure(step, None, coverage=coverage or {"functions": []},
                            message=f"assert {assertion} failed"), "step_index": 3}


ROWS = {
    "a loop that ran once at load and never asked for another frame": Row(
        RAN_ONCE, "probe.unscheduled_writers", _over_time(),
        direct=("function frame() {\n  x = (x + 2) % 200;\n  drawBall();\n}",),
        context=("ctx.arc(x, 50, 10, 0, Math.PI * 2);",),
        spared=("ctx.arc(x, 50, 10, 0, Math.PI * 2);", "() => { x = 0; }"),
        probe=OVER_TIME),
    "a loop nothing starts": Row(
        NEVER_STARTED, "probe.unscheduled_writers", _over_time(),
        direct=("console.log('ready');",), context=("x = (x + 2) % 200;",),
        spared=("x = (x + 2) % 200;", "ctx.arc(x, 50, 10, 0, Math.PI * 2);"),
        probe=OVER_TIME),
    "a context taken from a lookup of the canvas' id": Row(
        BY_ID, "probe.unscheduled_writers", _over_time(),
        direct=("function tick() { t += 1; pen.fillRect(t % 300, 10, 4, 4); }",),
        probe=OVER_TIME),
}


@pytest.mark.parametrize("name", sorted(ROWS))
def test_rule_intent(name):
    check_intent(name, ROWS[name])


@pytest.mark.parametrize("name", sorted(ROWS))
def test_each_row_needs_its_rule(name):
    check_needs_rule(name, ROWS[name])


def _fired(app: str, diagnostic: dict) -> bool:
    loc = localize(build_graph(app), diagnostic, "grounded", OVER_TIME)
    return any("probe.unscheduled_writers" in rules_of(e) for e in loc.evidence)


def test_readings_expected_equal_say_nothing_of_a_loop():
    assert _fired(RAN_ONCE, _over_time())
    assert not _fired(RAN_ONCE, _over_time(assertion="equal"))


def test_a_writer_that_ran_after_load_is_not_a_loop_that_stopped():
    g = build_graph(RAN_ONCE)
    frame = g.functions_named("frame")[0]
    cov = {"functions": [{"name": "frame", "start": frame.span[0], "end": frame.span[1],
                          "count": 3}]}
    assert not _fired(RAN_ONCE, _over_time(cov))


def _after_click(app: str, *handlers: str) -> dict:
    """The readings compared after a click on #reset, with ``handlers`` (by their text) run."""
    spans = [(app.index(h), app.index(h) + len(h)) for h in handlers]
    cov = {"functions": [{"name": "", "start": s, "end": e, "count": 1} for s, e in spans]}
    return {**_over_time(cov), "after_action": {"step_index": 0, "step": {
        "do": "click", "locator": "#reset"}, "locator": "#reset"}}


def test_a_handler_that_leads_nowhere_near_the_writers_leaves_them_to_the_loop():
    """The click handler ran and only set state: redrawing is the loop's job, and the loop
    ran once at load."""
    loc = localize(build_graph(RAN_ONCE), _after_click(RAN_ONCE, "() => { x = 0; }"),
                   "grounded", OVER_TIME)
    frame = RAN_ONCE.index("function frame()")
    assert any(s <= frame < e for s, e in loc.s_dir)
    assert any("probe.unscheduled_writers" in rules_of(e) for e in loc.evidence)


def test_a_handler_that_calls_the_writers_is_not_waiting_for_a_loop():
    redraws = RAN_ONCE.replace("() => { x = 0; }", "() => { x = 0; drawBall(); }")
    assert not _fired(redraws, _after_click(redraws, "() => { x = 0; drawBall(); }"))


def test_an_action_that_ran_nothing_is_left_to_the_wiring():
    assert not _fired(RAN_ONCE, _after_click(RAN_ONCE))
