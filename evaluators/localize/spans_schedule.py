"""Updates that nothing keeps running (``evaluators.localize.spans``).

Part of the execution grounding of a probe failure (``spans_probe``). A probe that reads an
element twice and asserts the readings differ (a canvas snapshot before and after a wait, or
before and after moving a slider) expects the app to update that element. When no code that
writes the element, or calls such code, ran after load (only a handler of the action that
leads nowhere near it), the app leaves the updates to something that should keep running (an
animation frame loop, an interval, a chain of timeouts) and did not: the loop that ran once at
load and never asked for another frame, or the start-up code that never started it.
Nothing here depends on how the app names things; it reads the call graph, the writes of the
checked element and coverage.
"""

from __future__ import annotations

import re

from evaluators.localize.flow import _DECLARATION
from evaluators.localize.rules import rule
from evaluators.localize.spans_common import _Case, _describe, _Failure, _writes, Ops
from evaluators.localize.spans_errors import _LOAD_EVENTS, _P5_HOOKS, reachable_functions

# Asserts over two readings of one element that hold only if it changed between them.
_CHANGED = frozenset(("not_equal", "not_close", "greater", "less"))


def expects_change(c: _Case, f: _Failure) -> bool:
    """The failed step compares two readings of the checked element and holds only when
    they differ: the element should have changed, on its own after load, or after the
    action between them."""
    step = c.d.get("step") if isinstance(c.d.get("step"), dict) else {}
    return (step.get("assert") in _CHANGED and bool(f.checks)
            and all(check.startswith("read:") for check, _ in f.checks))


# `ctx = <canvas expression>.getContext(`: the drawing context of a canvas.
_CONTEXT = re.compile(r"(?<![\w$.])([A-Za-z_$][\w$]*)\s*=\s*([^=;\n]{1,120}?)\s*\.\s*getContext\s*\(")


def _drawing_functions(g, targets) -> set[int]:
    """Functions that draw on the 2D or WebGL context of a checked canvas: a context taken
    from a variable holding the canvas, or from a lookup of its id, then used by name. The
    graph records writes to elements, not draws, so a canvas has none without this."""
    holders = {q.variable for q in g.dom_queries
               if q.variable and set(q.elements) & set(targets)}
    ids = {g.elements[i].id for i in targets if g.elements[i].id}
    contexts = set()
    for m in _CONTEXT.finditer(g.text, *g.region):
        owner = m.group(2).strip()
        if owner in holders or any(re.search(r"['\"`]#?" + re.escape(i) + r"['\"`]", owner)
                                   for i in ids):
            contexts.add(m.group(1))
    found = set()
    for name in contexts:
        use = re.compile(r"(?<![\w$.])" + re.escape(name) + r"\s*\.\s*[A-Za-z_$]")
        for m in use.finditer(g.text, *g.region):
            fn = g.enclosing_function(m.start())
            if fn is not None:
                found.add(fn.index)
    return found


def _chain(g, writers: set[int], depth: int = 3) -> dict[int, int]:
    """``writers`` and the functions that call them, up to ``depth`` calls away, each with
    its distance from a writer (0 for a writer)."""
    found = {fi: 0 for fi in writers}
    frontier = set(writers)
    for hop in range(1, depth + 1):
        frontier = {call.caller for fi in frontier for call in g.calls_to(fi)} - {None}
        frontier -= set(found)
        found.update({fi: hop for fi in frontier})
    return found


def _start_up_tail(c: _Case) -> list[tuple[int, int]]:
    """The last statements of the code that runs at load, outside any function (top-level
    code) and directly in the body of each load handler, up to ``cfg.run_statements`` of
    them and ``cfg.run_limit`` characters per body, declarations of functions and classes
    left out: start-up code sets things up first and starts its loops and timers last."""
    g, flow = c.g, c.g.flow
    handlers = {b.handler for b in g.event_bindings
                if b.global_target and (b.event or "").lower() in _LOAD_EVENTS
                and b.handler is not None}
    bodies: dict[int | None, list[tuple[int, int]]] = {}
    for st in flow.statements:
        if st.parent is None and not _DECLARATION.match(g.text, st.span[0]) and (
                st.function is None or st.function in handlers):
            bodies.setdefault(st.function, []).append(st.span)
    out = []
    for spans in bodies.values():
        total = 0
        for span in sorted(spans, reverse=True)[:c.cfg.run_statements]:
            total += span[1] - span[0]
            if total > c.cfg.run_limit:
                break
            out.append(span)
    return out


@rule("probe.unscheduled_writers")
def unscheduled_writers(c: _Case, f: _Failure, ran: set[int]) -> Ops:
    """X was expected to change (``expects_change``) and no function that writes X, or calls
    one, ran after load (a handler of the action ran, and leads nowhere near them: the app
    leaves redrawing to a loop): short functions on the way to X's writers that ran only at load
    are blamed whole (a loop that ran once and never asked for the next frame, or the
    start-up function that should have started it); when nothing at all can run a writer,
    the last start-up statements are blamed, where starting it belongs. Longer functions on
    the way, and writers that other functions call, are context. Blamed without a function:
    they ran at load, which coverage does not count, so the demotion of functions that did
    not run must not move them."""
    if not expects_change(c, f) or (f.action and not ran):
        return  # an action that ran nothing is the wiring's fault (`probe.nothing_ran`)
    g = c.g
    writers = {w.function for w in _writes(g, f.targets, None)} - {None}
    writers |= _drawing_functions(g, f.targets)
    chain = _chain(g, writers)
    if not writers or set(chain) & ran:
        return  # a loop on the way to the writers kept running: the values are at fault
    what = _describe(g, f.targets, f.label)
    # Handlers of events other than load run when those fire, never on a clock.
    bound = {b.handler for b in g.event_bindings if b.handler is not None and not (
        b.global_target and (b.event or "").lower() in _LOAD_EVENTS)}
    reachable = reachable_functions(g)
    for fi, hop in sorted(chain.items()):
        if fi in ran or fi in bound:
            continue  # ran after load, or runs on an event, not on a clock
        fn = g.functions[fi]
        short = fn.span[1] - fn.span[0] <= c.cfg.whole
        # A writer called by another function on the way is what the loop runs, not the loop.
        called = hop == 0 and any(call.caller is not None for call in g.calls_to(fi))
        # p5 runs its hooks (setup, draw) itself: its loop is the library's, not the app's.
        hook = (fn.qualname or fn.name or "").split(".")[-1] in _P5_HOOKS
        which = "dir" if short and fi in reachable and not called and not hook else "ctx"
        how = "writes" if hop == 0 else f"leads to the writes of ({hop} calls away)"
        yield from c.add(which, fn.span, f"{how} {what}, expected to change after load, and "
                         "did not run after load", "coverage")
    if any(fi not in reachable for fi in chain):
        for span in _start_up_tail(c):
            yield from c.add("dir", span, f"end of the start-up code: nothing it starts runs "
                             f"the writers of {what}, which should keep changing after load",
                             "coverage")

