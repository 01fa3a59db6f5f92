"""Failed calls (``evaluators.localize.spans``): what the app handed a call that threw.

An exception raised inside a library, or a web API refusing its call (``Failed to execute
'addEventListener' on 'EventTarget'``), is the app's fault in what it handed the call: the
elements it looked up for it (the wrong one, or one also used as another), the local values
computed just before it, or the arguments themselves (their order, a callback where a name
belongs). Called from ``spans_errors``' stack rule with the statement of the top in-app frame.
"""

from __future__ import annotations

import re

from evaluators.localize.model import Span
from evaluators.localize.rules import rule
from evaluators.localize.spans_common import _Case, _norm, Ops, exception_of


@rule("errors.library_arguments")
def _library_arguments(c: _Case, stmt: Span, by: str) -> Ops:
    """An exception raised inside a library: what the app's statement handed it.

    When the top frames are the library's, the first in-app frame is the call into it; an
    element looked up for that call that is the wrong one (or none) makes the library fail
    with a TypeError.
    """
    frames = c.d.get("frames") or ()
    if not frames or frames[0].get("in_app"):
        return
    code = c.g.text[stmt[0]:stmt[1]]
    handed = [q for q in c.g.dom_queries if q.variable and re.search(
        r"(?<![\w$.])" + re.escape(q.variable) + r"(?![\w$])", code)]
    yield from _shared_elements(c, handed, by)
    if exception_of(c.d).get("name") != "TypeError":
        return
    for q in handed:
        yield from c.statement("dir", q.span, f"looks up the element {q.variable} that the failing "
                               f"library call receives ({q.argument!r})", q.function, by)


@rule("errors.shared_elements")
def _shared_elements(c: _Case, handed: list, by: str) -> Ops:
    """Other lookups of an element handed to a failing library, stored under the name of a
    different element (``canvas2D = getElementById('canvas-3d')``): the code using that
    element for something else (a 2D context on the WebGL canvas) may make the library fail."""
    g = c.g
    ids = {_norm(e.id): e.index for e in g.elements if e.id}
    elements = {x for q in handed for x in q.elements}
    for q in g.dom_queries:
        var = (q.variable or "").split(".")[-1]
        other = ids.get(_norm(var))
        if q not in handed and set(q.elements) & elements and other is not None and \
                other not in q.elements:
            yield from c.statement(
                "dir", q.span, f"{q.variable} is named after #{g.elements[other].id} "
                f"but looks up {q.argument!r}, the element handed to the failing "
                "library", q.function, by)


@rule("errors.rejected_call")
def _rejected_call(c: _Case, top: int, by: str) -> Ops:
    """A web API refused its call (``Failed to execute 'addEventListener' on ...``): the call
    at the top in-app frame, arguments and callbacks included, since what it was handed (or
    in which order) is what the browser refused; the statement's head alone leaves them out."""
    name = exception_of(c.d).get("rejected_call")
    calls = [k for k in c.g.calls if k.kind == "call" and k.span[0] <= top < k.span[1]
             and re.split(r"[.?\s]+", k.callee_text.strip())[-1] == name] if name else []
    if calls:
        call = min(calls, key=lambda k: k.span[1] - k.span[0])
        yield from c.add("dir", call.span, f"the call {name} refused", by)


def _arguments(text: str, start: int, end: int) -> list[str]:
    """The top-level arguments of a call whose ``(`` ends at ``start``, up to ``end``."""
    out, depth, at = [], 0, start
    for i in range(start, end):
        ch = text[i]
        if ch in "([{":
            depth += 1
        elif ch in ")]}" and depth:
            depth -= 1
        elif ch == ")" or (ch == "," and not depth):
            out.append(text[at:i])
            at = i + 1
            if ch == ")":
                return out
    return out
