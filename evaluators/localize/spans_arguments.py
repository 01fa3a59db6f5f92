"""Exceptions on a parameter's value: the caller handed the function nothing, or a value
of the wrong kind (``evaluators.localize.spans_errors`` runs these on an exception's stack).

The call on the stack's next frame made the value; the function that failed only read it.
"""

from __future__ import annotations

import re

from evaluators.localize.rules import rule
from evaluators.localize.model import Span
from evaluators.localize.spans_common import (
    _Case, _line_at, _statement_head, Ops, exception_of,
)
from evaluators.localize.spans_origins import _passed_argument, passed_values

# An argument that is an item of an array (`pts[i]`): an index past the end gives undefined.
_ITEM = re.compile(r"\s*[A-Za-z_$][\w$.]*\s*\[[^\[\]]+\]\s*$")


def _caller(c: _Case, frames: list[dict]) -> tuple[int, Span]:
    """The offset of the call on the stack's next frame and the statement (or line) holding it."""
    off = frames[1]["offset"]
    return off, _statement_head(c.g, off) or _line_at(c.g.text, off)


_SUBSCRIPTED = re.compile(r"(?<![\w$.])([A-Za-z_$][\w$]*)\s*(?:\?\.)?\s*\[")


@rule("errors.missing_argument")
def missing_argument(c: _Case, stmt: Span, frames: list[dict], by: str) -> Ops:
    """A null read of a parameter of the top frame's function: its caller passed no value.
    The call on the next frame, and what it passed followed back to the return or lookup that
    gave nothing (``spans_origins.passed_values``), or with no in-app frame below, the
    registrations of the function as an event handler (the browser passes the event alone),
    are blamed. Returns the call's span when what it passed is an item of an array (``f(a[i])``,
    whose index the loops around the call may run past the end), else None."""
    exc = exception_of(c.d)
    fn = c.g.enclosing_function(stmt[0])
    if not exc.get("null_read") or fn is None or not fn.params:
        return
    prop = exc.get("read_property") or ""
    code = c.g.text[stmt[0]:stmt[1]]
    read = {r.group(1) for r in re.finditer(r"(?<![\w$.])([A-Za-z_$][\w$]*)\s*\??\.\s*"
                                            + re.escape(prop) + r"(?![\w$])", code)}
    if not read and not re.search(r"\.\s*" + re.escape(prop) + r"(?![\w$])", code):
        # `p[i]` of undefined: the message names the key read ('0'), not the subscript's text
        # (while `p[i].x` names 'x': then the item is what is missing, not p).
        read = set(_SUBSCRIPTED.findall(code))
    missing = [p for p in fn.params if p in read or p == exc.get("null_name")]
    if not missing:
        return
    why = f"calls {fn.name or 'the function'} without a value for {missing[0]}"
    if len(frames) > 1:
        off, call = _caller(c, frames)
        yield from c.add("dir", call, why, by)
        index = fn.params.index(missing[0])
        yield from passed_values(c, frames, fn, index,
                                 f"the {missing[0]} {fn.name or 'the function'} reads", by)
        passed = _passed_argument(c, off, fn, index)
        return call if passed and _ITEM.match(passed[1]) else None
    for b in c.g.event_bindings:
        if b.handler == fn.index:
            yield from c.add(
                "dir", b.span, f"registers {fn.name or 'the function'} as a handler of "
                f"'{b.event}': it is called with the event alone, no {missing[0]}", by)


@rule("errors.wrong_argument")
def wrong_argument(c: _Case, stmt: Span, frames: list[dict], by: str) -> Ops:
    """``p is not a function`` or ``p.m is not a function`` for a parameter ``p`` of the top
    frame's function: its caller handed it a value of the wrong kind (arguments swapped or out
    of place, the wrong value passed). The call on the next frame is blamed directly."""
    exc = exception_of(c.d)
    name = exc.get("unbound_name") or ""
    fn = c.g.enclosing_function(stmt[0])
    if fn is None or len(frames) < 2 or not name:  # a parameter is never "not defined"
        return
    param = name.split(".")[0]
    code = c.g.text[stmt[0]:stmt[1]]
    if param not in fn.params or not re.search(
            r"(?<![\w$.])" + re.escape(name).replace(r"\.", r"\s*\??\.\s*") + r"(?![\w$])", code):
        return
    method = name.partition(".")[2]
    wanted = f"an object with {method}()" if method else "a function"
    yield from c.add("dir", _caller(c, frames)[1],
                     f"calls {fn.name or 'the function'} with a value for {param} that is not "
                     f"{wanted}, as it expects", by)
