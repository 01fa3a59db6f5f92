"""Forward data flow from the acted-on element's value (``evaluators.localize.spans``).

When a probe acts on an input Y (a slider, a select, a checkbox) and what it checks
afterwards did not change as expected, the fault lies on the path from Y's new value to
what is shown. The backward slice of X's writes (``spans_flow``) follows that path from its
end; a canvas or WebGL scene has no writes of X to start from, so this module follows it
from its start: the statements, in functions that ran, that read Y's ``value`` (``checked``,
``selectedIndex``...) and, up to a few steps on, the statements that use the variables those
define. Only plain definitions are followed (``const a = f(y)``, ``a = ...``): a property
write (``obj.p = y``) would lead to every use of ``obj``.

A variable defined from Y's value that nothing uses means its use is missing (a removed
``group.rotation.x = rx``): it belongs where the values read beside it (``rz`` of the
next control, read in the same run of statements) are used, so the first use of those
siblings, and the statement just before it, are blamed.
"""

from __future__ import annotations

import re

from evaluators.localize.rules import rule
from evaluators.localize.graph import CodeGraph
from evaluators.localize.spans_common import (
    _bindings_for, _Case, _describe, _Failure, name_words, neighbour_statement, Ops,
)
from evaluators.localize.spans_flow import replace_long_functions

_VALUE = re.compile(r"\s*(?:\?\.|\.)\s*(?:value|valueAsNumber|checked|selectedIndex|files)\b"
                    r"(?!\s*=[^=])")
_SELF = re.compile(r"(?<![\w$.])(?:this|[\w$]+\s*\.\s*(?:target|currentTarget))")
_PLAIN = re.compile(r"\s*\)*\s*=(?!=)")


def _value_sites(g: CodeGraph, f: _Failure) -> list[int]:
    """Offsets just after the expressions that hold Y, where Y's value is read."""
    actors = set(f.actors)
    sites = []
    for q in g.dom_queries:
        if not q.exact or not q.elements or not set(q.elements) <= actors:
            continue
        sites.append(q.span[1])
        if not q.variable:
            continue
        local = q.function is not None and "." not in q.variable
        lo, hi = g.functions[q.function].span if local else g.region
        pattern = re.compile(r"(?<![\w$.])" + re.escape(q.variable) + r"(?=\s*\??\.)")
        sites += [m.end() for m in pattern.finditer(g.text, lo, hi)]
    for b in _bindings_for(g, f.actors, f.action):
        if b.handler is not None and actors.intersection(b.elements):
            lo, hi = g.functions[b.handler].span
            sites += [m.end() for m in _SELF.finditer(g.text, lo, hi)]
    return [at for at in sites if _VALUE.match(g.text, at)]


def _plain_defs(g: CodeGraph, k: int) -> set[int]:
    """Variables statement ``k`` declares or assigns as a whole (not through a property)."""
    st = g.flow.statements[k]
    s, e = st.span
    out = set()
    for v in st.defs:
        decl = g.variables[v].decl
        if decl is not None and s <= decl[0] < e and g.variables[v].kind != "function":
            out.add(v)
        elif any(r.write and s <= r.span[0] < e and _PLAIN.match(g.text, r.span[1])
                 and g.text[r.span[0]:r.span[1]] == g.variables[v].name  # not `v.p = `
                 for r in g.flow.refs_of(v)):
            out.add(v)
    return out


@rule("forward.follow_actor_value", off=False)
def follow_actor_value(c: _Case, f: _Failure, ran: set[int]) -> Ops:
    """For a failure that compared readings (a canvas snapshot, an evaluated value) after an
    action, blames the statements that read Y's value and those its value reaches, in
    functions that ran (or top-level code); True when some read was found."""
    if not f.action or not f.actors or not f.checks or \
            not all(check.startswith("read:") for check, _ in f.checks):
        return False  # a DOM check has X's writes to start from, or their absence to blame
    g = c.g
    flow = g.flow
    allowed = lambda fn: fn is None or fn in ran  # noqa: E731
    actor = _describe(g, f.actors, f.actor_label)
    reached: dict[int, str] = {}
    for at in _value_sites(g, f):
        k = flow.statement_at(at)
        if k is not None and allowed(flow.statements[k].function):
            reached.setdefault(k, f"reads the value of {actor}, the element acted on")
    if not reached:
        return False
    for k in list(reached):
        yield from _dead_value(c, k, actor, allowed)
    frontier = list(reached)
    for _ in range(c.cfg.hops):
        nxt = []
        for k in frontier:
            for v in sorted(_plain_defs(g, k)):
                for j in flow.uses_of(v):
                    if j not in reached and len(reached) < c.cfg.forward_limit and \
                            allowed(flow.statements[j].function):
                        reached[j] = (f"uses {g.variables[v].name}, computed from the value "
                                      f"of {actor}")
                        nxt.append(j)
        frontier = nxt
    touched = set()
    for k, why in reached.items():
        spans = flow.blame(k)
        big = sum(e - s for s, e in spans) > c.cfg.big
        for span in spans:
            yield from c.add(
                "ctx" if big else "dir", span, why, "flow", flow.statements[k].function)
        touched.add(flow.statements[k].function)
    yield from replace_long_functions(c, touched)
    return True


def _value_definitions(g: CodeGraph, k: int, after: bool, siblings: int
                       ) -> list[tuple[int, int]]:
    """(statement, variable) of the plain definitions from an input's value in the run of
    statements next to statement ``k``, nearest first."""
    flow, out = g.flow, []
    at = flow.statements[k].span
    for _ in range(siblings):
        at = neighbour_statement(g, at, after)
        j = None if at is None else flow.statement_at(at[0], flow.statements[k].function)
        if j is None or flow.statements[j].span != at or not _VALUE.search(
                g.text, at[0], at[1]):
            break
        out += [(j, v) for v in sorted(_plain_defs(g, j))]
    return out


@rule("forward.dead_value")
def _dead_value(c: _Case, k: int, actor: str, allowed) -> Ops:
    """A variable statement ``k`` defines from Y's value that nothing uses: the first uses of
    the values defined beside it (those named most like it), and the statement just before
    each, are where its use is missing."""
    g = c.g
    flow = g.flow
    for v in sorted(_plain_defs(g, k)):
        if flow.uses_of(v):
            continue
        name = g.variables[v].name
        words = set(name_words(name))
        siblings = [(j, u) for after in (False, True)
                    for j, u in _value_definitions(g, k, after, c.cfg.siblings)
                    if flow.uses_of(u)]
        if not siblings:
            continue
        best = max(len(words & set(name_words(g.variables[u].name))) for _, u in siblings)
        chosen = [u for _, u in siblings
                  if len(words & set(name_words(g.variables[u].name))) == best]
        for u in chosen[:1] if best else chosen[:2]:
            j = next((j for j in flow.uses_of(u) if allowed(flow.statements[j].function)), None)
            if j is None:
                continue
            why = (f"uses {g.variables[u].name}, read beside {name} (from the value of "
                   f"{actor}), which nothing uses: its use is missing here")
            for span in flow.blame(j):
                yield from c.add("dir", span, why, "flow", flow.statements[j].function)
            prev = neighbour_statement(g, flow.statements[j].span, False)
            if prev is not None and prev[1] - prev[0] <= c.cfg.near_limit:
                yield from c.add("dir", prev, why + " (the statement before that use)", "flow",
                                 flow.statements[j].function)
