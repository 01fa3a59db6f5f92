"""Definite bugs on a failing path (``evaluators.localize.spans``).

Some code is wrong whatever the app means by it: reading ``.value`` of an element that has no
value (``document.getElementById('control-panel').value`` for a ``<div>``: always
``undefined``, so every number computed from it is ``NaN``), or ``.checked`` of one that is
no checkbox. When such a read sits in a function that ran on the failing path, it is blamed
directly, and a function that was blamed whole only because it ran moves to the context:
a certain fault in it explains the failure better than the rest of its code.
"""

from __future__ import annotations

import re

from evaluators.localize.rules import rule
from evaluators.localize.graph import CodeGraph
from evaluators.localize.model import DomQuery
from evaluators.localize.spans_common import _Case, _describe, Ops

# Elements with a ``value`` property, and those with ``checked``.
_VALUED = frozenset(("input", "select", "textarea", "button", "option", "output", "meter",
                     "progress", "li", "data", "param"))
_CHECKABLE = frozenset(("input",))
_READ = re.compile(r"\s*(?:\?\.|\.)\s*(value|valueAsNumber|checked|selectedIndex)\b(?!\s*=[^=])")


def _bad_reads(g: CodeGraph, q: DomQuery) -> list[tuple[int, str]]:
    """(offset, property) of the reads of ``q``'s element's ``value``/``checked`` that the
    element cannot answer; none when the lookup is not exact or finds several elements."""
    if not q.exact or len(q.elements) != 1:
        return []
    tag = g.elements[q.elements[0]].tag
    sites = [q.span[1]]
    if q.variable and "." not in q.variable:
        fn = g.functions[q.function].span if q.function is not None else g.region
        pattern = re.compile(r"(?<![\w$.])" + re.escape(q.variable) + r"(?=\s*\??\.)")
        sites += [m.end() for m in pattern.finditer(g.text, fn[0], fn[1])]
    out = []
    for at in sites:
        m = _READ.match(g.text, at)
        if not m:
            continue
        prop = m.group(1)
        allowed = _CHECKABLE if prop == "checked" else _VALUED
        if tag not in allowed:
            out.append((at, prop))
    return out


@rule("smells.blame_definite_bugs")
def blame_definite_bugs(c: _Case, ran: set[int] | None) -> Ops:
    """Blames value reads of elements without a value in functions that ran (``ran``, from
    coverage) or at load (top-level code), and moves whole-function blame of those functions
    to the context."""
    if not ran:
        return
    g = c.g
    hit_functions = set()
    for q in g.dom_queries:
        if q.function is not None and q.function not in ran:
            continue
        for at, prop in _bad_reads(g, q):
            what = _describe(g, list(q.elements))
            yield from c.statement(
                "dir", (at, at + 1), f"reads .{prop} of {what}, which has none (it is "
                f"a <{g.elements[q.elements[0]].tag}>): the value is undefined",
                q.function, "coverage")
            yield from c.statement("dir", q.span, f"looks up {what}, whose .{prop} the code reads",
                                   q.function, "coverage")
            if q.function is not None:
                hit_functions.add(q.function)
    yield from c.demote(lambda i: i.fn in hit_functions and i.span == g.functions[i.fn].span,
                        "; narrowed to the value read that cannot work")
