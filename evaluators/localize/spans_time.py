"""Checks that waited for the page to change by itself.

A probe that waits (``wait_ms``) after acting before its failing check expects what it reads
to have moved on without being acted on again: a clock ticking, an animation running to its
end. That change comes from the page's timers (``setInterval``, ``setTimeout``, the next
animation frame), so when it did not happen, the code that starts them is a suspect, whatever
the app calls it. The timer functions are the platform's own vocabulary, like the DOM
properties the other rules know.
"""

from __future__ import annotations

import re

from evaluators.checks.steps import flat_steps
from evaluators.localize.rules import rule
from evaluators.localize.spans_common import Ops, Span, _Case
from evaluators.localize.spans_flow import load_functions

# What starts a timer, and what stops one (its argument holds the timer's handle).
_TIMERS = frozenset(("setInterval", "setTimeout", "requestAnimationFrame"))
_CLEARS = re.compile(r"(?<![\w$.])(?:clearInterval|clearTimeout|cancelAnimationFrame)\s*\(\s*"
                     r"([A-Za-z_$][\w$]*(?:\s*\.\s*[A-Za-z_$][\w$]*)*)\s*\)")
# Steps that read or wait; every other step acts on the page.
_PASSIVE = ("save", "expect", "assert", "wait_ms")


def _before(c: _Case) -> list[dict] | None:
    """The probe's steps before the failed one, flattened; None when unknown."""
    probe, index = c.probe, c.d.get("step_index")
    if not isinstance(probe, dict) or not isinstance(index, int):
        return None
    return [s for s in flat_steps(probe.get("steps", [])[:index]) if isinstance(s, dict)]


def waited_after_acting(c: _Case) -> bool:
    """Whether the probe waited between its last action (or its start) and the failed step."""
    before = _before(c)
    if not before:
        return False
    acts = [k for k, s in enumerate(before) if not any(p in s for p in _PASSIVE)]
    return any(s.get("wait_ms") for s in before[acts[-1] + 1 if acts else 0:])


def _handle_stores(g) -> list[int]:
    """Offsets of the assignments to a timer's handle: a variable (or property path) the app
    hands to ``clearInterval``, ``clearTimeout`` or ``cancelAnimationFrame``. Declarations
    (``let timer = null``) are left out: they only make the handle."""
    names = {re.sub(r"\s+", "", m.group(1)) for sc in g.scripts
             for m in _CLEARS.finditer(g.text, sc.span[0], sc.span[1])}
    out = []
    for name in names:
        store = re.compile(r"(?<![\w$.])(?<!let )(?<!var )(?<!const )"
                           + re.escape(name).replace(r"\.", r"\s*\.\s*") + r"\s*=(?!=)")
        out += [m.start() for sc in g.scripts for m in store.finditer(g.text, *sc.span)]
    return out


def timer_starts(g, functions: set[int | None]) -> list[Span]:
    """The statements of ``functions`` (None: top-level code) that start a timer, or store
    into a timer's handle (where a timer is started, even one that no longer is)."""
    at = [call.span[0] for call in g.calls if call.callee in _TIMERS and not call.targets]
    out = set()
    for off in at + _handle_stores(g):
        fn = g.enclosing_function(off)
        index = None if fn is None else fn.index
        k = g.flow.statement_at(off, index)
        if index in functions and k is not None:
            out.add(g.flow.statements[k].head)
    return sorted(out)


@rule("probe.timer_starts")
def timer_start_blame(c: _Case) -> Ops:
    """The probe waited after acting and the page did not get where it should have by
    itself: the statements that start timers in the code that ran (the action's handlers
    and what they called; with no action, the start-up code) are blamed directly, as where
    the timer that should have moved the page on is (or should be) started."""
    if not isinstance(c.d.get("coverage"), dict) or not waited_after_acting(c):
        return
    ran: set[int | None] = set(c.ran or ())
    if c.failure.initial:
        ran |= load_functions(c.g) | {None}
    for span in timer_starts(c.g, ran):
        yield from c.add("dir", span, "starts a timer (or keeps its handle) in code that ran "
                         "before a check that waited for the page to move on", "coverage")
