"""Loops that decide an index or a count: the loop heads blamed for an off-by-one bound.

Part of ``evaluators.localize.spans``. An index read past the end of an array is set by the
head of a loop around the read (``for (let i = 0; i <= n; i++) pts[i]``) or by a loop around the
call that passed it in (found on the exception's stack). A variable that only branches assign
(``switch (stage)``'s cases), read as undefined, blames those branches and the loop setting what
they test (one stage past the last case).
"""

from __future__ import annotations

import re

from evaluators.localize.graph import CodeGraph
from evaluators.localize.model import Span
from evaluators.localize.rules import rule
from evaluators.localize.spans_common import Ops, _Case, exception_of
from evaluators.localize.spans_arguments import _SUBSCRIPTED
from evaluators.localize.spans_origins import _passed_argument

_NAME = re.compile(r"[A-Za-z_$][\w$]*")


def loop_heads(g: CodeGraph, offset: int, scope: Span) -> list[Span]:
    """Heads of the loops around ``offset`` inside ``scope``, innermost first."""
    flow = g.flow
    k = flow.statement_at(offset)
    out = []
    while k is not None:
        k = flow.statements[k].parent
        if k is None or not scope[0] <= flow.statements[k].span[0]:
            break
        st = flow.statements[k]
        if re.match(r"(?:for|while|do)\b", g.text[st.span[0]:st.span[0] + 6]):
            out.append(st.head)
    return out


def index_loop_head(g: CodeGraph, offset: int, scope: Span, index: str) -> Span | None:
    """The innermost loop head around ``offset`` inside ``scope`` that names a variable of
    the subscript ``index``: where that index is set; None if no loop does."""
    names = set(_NAME.findall(index))
    return next((head for head in loop_heads(g, offset, scope)
                 if names & set(_NAME.findall(g.text[head[0]:head[1]]))), None)


def caller_index_loop(c: _Case, offset: int, index: str) -> Span | None:
    """When the subscript ``index`` at ``offset`` names a parameter of a function on the
    exception's stack, the loop around that function's call on the next frame whose head names
    the argument passed for it (followed down while that argument is a parameter again): the
    index is set there (``for (k ...) draw(k)`` and ``pts[i]`` in ``draw(i)``)."""
    g = c.g
    frames = [f["offset"] for f in c.d.get("frames") or ()
              if f.get("in_app") and isinstance(f.get("offset"), int)]
    fn = g.enclosing_function(offset)
    depth = next((i for i, at in enumerate(frames) if g.enclosing_function(at) is fn), None)
    names = set(_NAME.findall(index))
    for at in frames[depth + 1:] if fn is not None and depth is not None else ():
        params = [p for p in fn.params if p in names]
        passed = _passed_argument(c, at, fn, fn.params.index(params[0])) if params else None
        if not passed:
            return None
        caller = g.enclosing_function(at)
        head = index_loop_head(g, at, caller.span if caller else g.region, passed[1])
        if head is not None or caller is None:
            return head
        fn, names = caller, set(_NAME.findall(passed[1]))
    return None


_SUBSCRIPT = re.compile(r"(?<![\w$.])[A-Za-z_$][\w$.]*\s*\[([^\[\]]+)\]")


def statement_index_head(c: _Case, stmt: Span) -> Span | None:
    """The innermost loop that sets an index ``stmt`` subscripts with: around ``stmt`` in its
    function, or around the call one frame down that passed it in (``caller_index_loop``)."""
    g = c.g
    fn = g.enclosing_function(stmt[0])
    index = " ".join(m.group(1) for m in _SUBSCRIPT.finditer(g.text, *stmt))
    if not index:
        return None
    return (index_loop_head(g, stmt[0], fn.span if fn is not None else g.region, index)
            or caller_index_loop(c, stmt[0], index))


# A read of a property of ``name`` (``name.prop``, ``name?.prop``).
_MEMBER = r"(?<![\w$.])([A-Za-z_$][\w$]*)\s*\??\.\s*{prop}(?![\w$])"
_BRANCH = re.compile(r"(?:switch|if)\s*\(")


def _branch_of(c: _Case, k: int, outside: Span) -> int | None:
    """The innermost ``switch`` or ``if`` around statement ``k`` in its function that does
    not hold ``outside``; None when no branch decides whether ``k`` runs."""
    flow = c.g.flow
    p = flow.statements[k].parent
    while p is not None:
        s, e = flow.statements[p].span
        if not s <= outside[0] < e and _BRANCH.match(c.g.text, s):
            return p
        p = flow.statements[p].parent
    return None


def _covers(c: _Case, b: int) -> bool:
    """Whether branch ``b`` has an arm for every case: a ``default:``, a plain ``else`` (its
    writes then leave no path unassigned; an undefined came from what they assigned)."""
    text = c.g.text[slice(*c.g.flow.statements[b].span)]
    return bool(re.search(r"(?<![\w$])(?:default\s*:|else(?!\s*if(?![\w$]))(?![\w$]))", text))


@rule("errors.unassigned_branches")
def unassigned_branches(c: _Case, stmt: Span, by: str) -> Ops:
    """A property read on undefined, of a variable declared without a value (``let amps;``)
    that only branches assign (a ``switch``'s cases, an ``if``'s arms): no branch assigned
    it on the run that failed. The heads of those branches (``switch (stage)``) are blamed
    directly, with the loop heads around them that set a variable they test (``for (let
    stage = 0; stage <= 4; stage++)``, a bound that runs one case past the last)."""
    exc = exception_of(c.d)
    g, flow = c.g, c.g.flow
    k = flow.statement_at(stmt[0])
    prop = exc.get("read_property") or ""
    if not exc.get("null_read") or k is None or not prop:
        return
    # V8 names the key read (`reading '0'`) for `amps[i]` of undefined: then any subscripted name.
    member = _SUBSCRIPTED if prop.isdigit() else re.compile(_MEMBER.format(prop=re.escape(prop)))
    names = set(member.findall(g.text, *stmt)) | {exc.get("null_name")}
    for v in sorted(flow.statements[k].uses):
        var = g.variables[v]
        if var.name not in names or var.kind not in ("let", "var") or var.decl is None \
                or "=" in g.text[var.decl[0]:var.decl[1]]:
            continue
        sets = [j for j in flow.definitions_of(v) if j != k
                and not flow.statements[j].span[0] <= var.decl[0] < flow.statements[j].span[1]]
        branches = [_branch_of(c, j, stmt) for j in sets]
        if not sets or None in branches or all(_covers(c, b) for b in branches):
            continue  # some write runs whatever the branches decide
        for b in dict.fromkeys(branches):
            head = flow.statements[b].head
            yield from c.add("dir", head, f"branches that assign {var.name}, none of which "
                             "ran before the failing statement read it", by)
            fn = flow.statements[b].function
            tested = " ".join(g.variables[u].name for u in flow.statements[b].uses)
            scope = g.functions[fn].span if fn is not None else g.region
            yield from c.add("dir", index_loop_head(g, head[0], scope, tested) if tested else None,
                             f"loop that sets what the branches assigning {var.name} test", by)


@rule("context.enclosing_loops")
def enclosing_loops(c: _Case) -> Ops:
    """The heads of the loops around each statement blamed directly, and around the call
    sites (in code that ran) of the function holding it, as context: a loop decides how
    often and for which items its body runs (a control dependence, followed one call up;
    it reads no names). An off-by-one bound leaves the body right and what it wrote one
    item short or long."""
    g, seen = c.g, set()
    for item in [i for i in c.items if i.set == "dir"]:
        fn = g.enclosing_function(item.span[0])
        sites = [item.span[0]]
        if fn is not None:
            sites += [call.span[0] for call in g.calls_to(fn.index)
                      if not c.ran or call.caller is None or call.caller in c.ran]
        for at in sites:
            around = g.enclosing_function(at)
            for head in loop_heads(g, at, around.span if around is not None else g.region):
                if head not in seen:
                    seen.add(head)
                    yield from c.add("ctx", head, "loop around what was blamed directly, or "
                                     "around its function's call: it decides how often and "
                                     "for which items that runs", "graph")
