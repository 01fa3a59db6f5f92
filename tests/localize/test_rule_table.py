"""Localization rules stated as a table: (app, diagnostic) -> what must be blamed, by which
rule, and what must not be. The rows state each rule's intent, not today's exact spans, so
they hold for any better implementation that keeps the intent."""

from __future__ import annotations

import pytest

from evaluators.localize.graph import build_graph
from evaluators.localize.spans import localize
from tests.localize.diags import page_error, probe_failure, rules_of

# A counter whose + button is bound to the reset handler, with a lookup of an element that
# does not exist, a loop that never ends and a misspelt call available to the rows below.
COUNTER = """<div id="panel"><span id="out">0</span></div>
<button id="inc">+</button><button id="reset">Reset</button>
<script>
let count = 0;
const out = document.getElementById('out');
function render() {
  out.textContent = count;
}
function onInc() {
  count -= 1;
  render();
}
function onReset() {
  count = 0;
  render();
}
document.getElementById('inc').addEventListener('click', onReset);
document.getElementById('reset').addEventListener('click', onReset);
const label = document.getElementById('scoreDisplay');
function show(data) {
  label.textContent = data.value;
}
function loop() {
  while (true) { count++; }
}
</script>"""


def _at(code: str) -> list[dict]:
    return [{"in_app": True, "offset": COUNTER.index(code)}]


# rule, diagnostic, blamed directly (by that rule), in context, never blamed directly
ROWS = {
    "a wrong handler bound to the clicked button": (
        "probe.binding",
        probe_failure({"expect": "text", "locator": "#out", "value": "1"},
                      {"do": "click", "locator": "#inc"}),
        ["document.getElementById('inc').addEventListener('click', onReset)"],
        [], ["const label = document.getElementById('scoreDisplay');"]),
    "an element no element matches": (
        "probe.missing_element",
        probe_failure({"expect": "visible", "locator": "#scoreDisplay"}, None, actual=None,
                      reason="missing_element", severity="severe", message="no element"),
        ["const label = document.getElementById('scoreDisplay');"],
        [], ["count -= 1;", "out.textContent = count;"]),
    "a property set on the null a lookup returned": (
        "errors.null_sources",
        {**page_error("uncaught TypeError: Cannot set properties of null (setting "
                      "'textContent')", _at("label.textContent")),
         "excerpt": "label.textContent = data.value;"},
        ["const label = document.getElementById('scoreDisplay');"],
        [], ["const out = document.getElementById('out');"]),
    "a page that stopped answering": (
        "errors.loops", {"kind": "runtime_failure", "reason": "hang", "message": "hung"},
        ["while (true) { count++; }"], [], ["out.textContent = count;"]),
    "a call of a name that is not defined": (
        "errors.named_in_message",
        page_error("uncaught ReferenceError: rendr is not defined", _at("render();")),
        [], ["function render() {\n  out.textContent = count;\n}"],
        ["out.textContent = count;"]),
}


def _inside(span, spans) -> bool:
    return any(s <= span[0] and span[1] <= e for s, e in spans)


def _code(text: str) -> tuple[int, int]:
    start = COUNTER.index(text)
    return start, start + len(text)


@pytest.mark.parametrize("name", sorted(ROWS))
def test_rule_intent(name):
    rule_id, diag, direct, context, spared = ROWS[name]
    loc = localize(build_graph(COUNTER), diag)
    by_rule = [tuple(e["span"]) for e in loc.evidence if rule_id in rules_of(e)]
    for text in direct:
        assert _inside(_code(text), loc.s_dir), f"{name}: {text!r} not blamed directly"
        assert _inside(_code(text), by_rule), f"{name}: {text!r} not blamed by {rule_id}"
    for text in context:
        assert _inside(_code(text), list(loc.s_dir) + list(loc.s_ctx)), f"{name}: {text!r}"
        assert _inside(_code(text), by_rule), f"{name}: {text!r} not blamed by {rule_id}"
    for text in spared:
        s, e = _code(text)
        assert not any(a < e and s < b for a, b in loc.s_dir), f"{name}: {text!r} blamed"


# Rules that stand in when the rules before them blamed nothing directly (spans.CHAINS).
FALLBACKS = {"probe.naive_queries"}


@pytest.mark.parametrize("name", sorted(ROWS))
def test_each_row_needs_its_rule(name):
    """Switched off, the row's rule blames nothing, and what the row says it must blame is
    then blamed by no rule but a declared fallback: the row exercises that rule."""
    from evaluators.localize.rules import LocalizeConfig

    rule_id, diag, direct, context, _ = ROWS[name]
    off = localize(build_graph(COUNTER), diag, cfg=LocalizeConfig({rule_id}))
    assert not any(rule_id in rules_of(e) for e in off.evidence)
    for text in direct + context:
        by = {r for e in off.evidence if _inside(_code(text), [tuple(e["span"])])
              for r in rules_of(e)}
        assert by <= FALLBACKS, f"{name}: {text!r} still blamed by {sorted(by - FALLBACKS)}"
