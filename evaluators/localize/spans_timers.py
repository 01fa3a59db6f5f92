"""A state that should change as time passes and did not (``evaluators.localize.spans``).

A probe that reads an element, waits with nothing done, and finds it unchanged (two readings
compared across a ``wait_ms``; or a check after an action and a wait) says the update that should have run
again while it waited did not: the timer or animation frame that repeats it was never
requested, requested once, or requested with the wrong callback. The update itself ran (the
page recorded its write, with its stack), so what is missing sits where it ran from: a
repeated update is started right after its first run (``draw(); requestAnimationFrame(loop);``,
``tick(); setInterval(tick, 1000);``). The statement after each in-app frame of the latest
write, in that frame's own block, is blamed directly; so are the timer requests whose
callback is a function on that stack (the one request that ran may name the wrong callback
or be a one-shot). It reads no names: only the probe's steps, the recorded stack and which
functions the timer calls were handed.

The other way an update can fail to start: a check right after load finds an element that
code does write, but no write of it ran (none recorded) and no code that runs at load (called
from top-level code or a load handler, or handed to a timer there) can reach any of its
writers. The call, or the timer request, that starts them is missing from the start-up code:
the last statements of each start-up body (a script's top level, a load handler, and the
function such a body calls last) are blamed directly, where starting calls are made.
"""

from __future__ import annotations

import re

from evaluators.checks.steps import compared_saves, flat_steps
from evaluators.localize.graph import CodeGraph
from evaluators.localize.model import Span
from evaluators.localize.rules import rule
from evaluators.localize.spans_common import Ops, _Case, _fn_at, _write_keys, _writes
from evaluators.localize.spans_flow import load_functions
from evaluators.localize.spans_common import neighbour_statement as _neighbour
from evaluators.localize.spans_writers import _in_app, relevant_writes

# Statements blamed at the end of each start-up body (where starting calls are made): the
# last few that are not declarations.
START_STATEMENTS = 3
_DECLARATION = re.compile(r"(?:export\s+)?(?:async\s+)?(?:function|class)\b")
_VARIABLES = re.compile(r"(?:let|const|var)\s")
_LOAD_EVENTS = frozenset(("load", "domcontentloaded", "readystatechange", "pageshow"))
# The calls that run a function later; the callback is their first argument.
_TIMER = re.compile(r"\b(?:setInterval|setTimeout|requestAnimationFrame)\s*\(\s*")


def _is_action(step) -> bool:
    return isinstance(step, dict) and ("do" in step or "mouse" in step)


def waited_unchanged(probe: dict | None, d: dict) -> bool:
    """Whether the failed step checked what time alone should have changed: time was let
    pass (a ``wait_ms`` step) after the last action, and, for an ``assert`` comparing saved
    readings, nothing was done between the first of them and the comparison. A wait before
    any action, then a check, is a page let settle: not counted."""
    steps = probe.get("steps") if isinstance(probe, dict) else None
    index, step = d.get("step_index"), d.get("step")
    if not isinstance(steps, list) or not isinstance(index, int) or not isinstance(step, dict):
        return False
    if not 0 <= index < len(steps) or "retry" in step:
        return False
    before = steps[:index]
    start = max((k + 1 for k, s in enumerate(before) if _is_action(s)), default=0)
    if "assert" in step:
        saves = compared_saves(steps, step, index)
        first = min((k for k, s in enumerate(before) if s in saves or (
            isinstance(s, dict) and "retry" in s
            and any(x in saves for x in flat_steps(s["retry"])))), default=None)
        if first is None or first < start:
            return False
        start = first
    elif start == 0:  # a wait before anything was done lets the page settle: no change due
        return False
    return any(isinstance(s, dict) and "wait_ms" in s for s in before[start:])


def scheduled(g: CodeGraph) -> list[tuple[Span, set[int]]]:
    """Each timer request in the app's code: its statement and the functions it hands over
    to run later (a function named or written as the first argument; a callback written
    there counts with the functions it calls)."""
    out = []
    for sc in g.scripts:
        for m in _TIMER.finditer(g.text, sc.span[0], sc.span[1]):
            at = m.end()
            stmt = g.enclosing_statement(m.start())
            if stmt is None:
                continue
            given = {t for call in g.calls_from(_fn_at(g, at)) if call.kind == "reference"
                     and call.span[0] == at for t in call.targets}
            for fn in g.functions:
                if fn.span[0] == at:
                    given.add(fn.index)
                    given |= {t for call in g.calls_from(fn.index) for t in call.targets}
            out.append((stmt, given))
    return out


@rule("probe.unrepeated_update")
def unrepeated_update(c: _Case) -> Ops:
    """A check that time alone should have changed found the element as it was: the
    statement after each in-app frame of its latest write (where the repeat is requested),
    and the timer requests that hand over a function on that stack."""
    if c.d.get("reason") == "missing_element" or not waited_unchanged(c.probe, c.d):
        return
    writes = relevant_writes(c.d, c.failure.checks) if c.d.get("writers") else []
    if not writes:
        return
    g = c.g
    frames = _in_app(writes[-1])
    why = "the element's latest write ran here and was not repeated while the probe waited"
    for k, off in enumerate(frames):
        stmt = g.enclosing_statement(off)
        after = None if stmt is None else _neighbour(g, stmt, True)
        if after is not None and after[1] - after[0] <= c.cfg.path_limit:
            yield from c.add("dir", after, f"{why}: runs just after frame {k}, where a repeat "
                             "is requested", "stack", _fn_at(g, after[0]))
    stack = {fn for off in frames if (fn := _fn_at(g, off)) is not None}
    for stmt, given in scheduled(g):
        if given & stack and stmt[1] - stmt[0] <= c.cfg.path_limit:
            yield from c.add("dir", stmt, f"{why}: requests a later run of a function on the "
                             "stack of that write", "stack", _fn_at(g, stmt[0]))


def started_at_load(g: CodeGraph) -> set[int]:
    """``spans_flow.load_functions`` with what timers requested by that code run later, and
    what those call, to the end."""
    found = load_functions(g)
    while True:
        more = {t for stmt, given in scheduled(g) if _fn_at(g, stmt[0]) in found | {None}
                for t in given} - found
        more |= {t for fi in more for call in g.calls_from(fi) for t in call.targets} - found
        if not more:
            return found
        found |= more


def _start_up_bodies(g: CodeGraph) -> list[tuple[int | None, list[Span]]]:
    """(function, its own top-level statements in order) for each start-up body: each
    script's top level (None), each load handler, and the app function each of those calls
    in its last call statement."""
    flow = g.flow
    own = lambda fn: [st.span for st in flow.statements  # noqa: E731
                      if st.function == fn and st.parent is None]
    bodies: list[tuple[int | None, list[Span]]] = []
    for sc in g.scripts:
        top = [sp for sp in own(None) if sc.span[0] <= sp[0] < sc.span[1]]
        if top:
            bodies.append((None, top))
    handlers = {b.handler for b in g.event_bindings if b.handler is not None
                and b.global_target and (b.event or "").lower() in _LOAD_EVENTS}
    bodies += [(fn, own(fn)) for fn in sorted(handlers)]
    for fn, stmts in list(bodies):
        calls = [st for st in flow.statements if st.function == fn and st.parent is None
                 and st.calls and st.span in stmts]
        if calls:
            last = max(calls, key=lambda st: st.span[0])
            bodies += [(t, own(t)) for t in sorted(last.calls) if t not in handlers]
    return [(fn, stmts) for fn, stmts in bodies if stmts]


@rule("probe.unstarted_writers")
def unstarted_writers(c: _Case) -> Ops:
    """A check right after load finds an element whose writers no start-up code reaches and
    none of whose writes ran: the last statements of each start-up body, where the call or
    timer request that would start them is missing."""
    f, g = c.failure, c.g
    if not f.initial or f.missing or not f.targets or c.d.get("writers"):
        return
    writes = _writes(g, f.targets, _write_keys(f))
    reach = started_at_load(g) | (c.ran or set())  # what coverage saw run counts as reached
    if not writes or any(w.function is None or w.function in reach for w in writes):
        return
    why = "start-up code, which never starts the code that writes the checked element"
    for fn, stmts in _start_up_bodies(g):
        for span in _starting_places(g, stmts)[-START_STATEMENTS:]:
            if span[1] - span[0] <= c.cfg.path_limit:
                yield from c.add("dir", span, f"{why}: a starting call belongs here", "graph", fn)


def _starting_places(g: CodeGraph, stmts: list[Span]) -> list[Span]:
    """Of a body's statements, those where a starting call can be: not a declaration of a
    function or class, nor of variables unless it calls app code; a statement that makes a
    function (a registration with its handler written inline) by its part before that
    function's body."""
    flow, out = g.flow, []
    for sp in stmts:
        k = flow.statement_at(sp[0])
        calls = flow.statements[k].calls if k is not None else set()
        if _DECLARATION.match(g.text, sp[0]) or (
                _VARIABLES.match(g.text, sp[0]) and not calls):
            continue
        made = [f for f in g.functions if sp[0] <= f.span[0] and f.span[1] <= sp[1]]
        first = min(made, key=lambda f: f.span[0]) if made else None
        out.append(sp if first is None else (sp[0], first.body[0] + 1))
    return out
