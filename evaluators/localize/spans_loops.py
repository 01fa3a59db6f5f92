"""Loops that decide an index or a count: the loop heads blamed for an off-by-one bound.

Part of ``evaluators.localize.spans``. An index read past the end of an array is set by the
head of a loop around the read (``for (let i = 0; i <= n; i++) pts[i]``), by a loop around the
call that passed it in (found on the exception's stack), or, when the index crossed the page,
by the loop around what put it there: a data attribute written with it (``cell.dataset.row =
r`` in the loop that made the cells, read back as ``parseInt(cell.dataset.row)``) or the
elements whose position it is (``cells.forEach((cell, i) => ...)``), where no variable's data
flow follows it. A library handed such an item, and a checked element given one child too few
or too many, blame the loop the same way. A variable that only branches assign (``switch
(stage)``'s cases), read as undefined, blames those branches and the loop setting what they test
(one stage past the last case).
"""

from __future__ import annotations

import re

from evaluators.localize.graph import CodeGraph
from evaluators.localize.model import Span
from evaluators.localize.rules import rule
from evaluators.localize.spans_common import Ops, _Case, exception_of
from evaluators.localize.spans_origins import _passed_argument

_NAME = re.compile(r"[A-Za-z_$][\w$]*")
# A data attribute read: `el.dataset.row`, `el.dataset['row']`, `el.getAttribute('data-row')`.
_DATA_READ = re.compile(r"\.\s*dataset\s*(?:\.\s*([A-Za-z_$][\w$]*)|\[\s*['\"]([\w-]+)['\"]\s*\])"
                        r"|getAttribute\s*\(\s*['\"]data-([\w-]+)['\"]")
# Writes of a data attribute found in a script, per attribute: the value written is group 1.
_DATA_WRITES = (
    r"\.\s*dataset\s*(?:\.\s*{camel}|\[\s*['\"]{camel}['\"]\s*\])\s*=(?![=>])\s*([^;\n]+)",
    r"setAttribute\s*\(\s*['\"]data-{kebab}['\"]\s*,\s*([^)\n]+)\)",
    r"data-{kebab}\s*=\s*\\?['\"]?\$\{{([^}}]+)\}}",  # a template: data-row="${r}"
    r"data-{kebab}\s*=\s*\\?['\"]?['\"]\s*\+\s*([^+\n]+)\+",  # concatenated: '... data-row="' + r + '"'
)


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


def _data_keys(c: _Case, offset: int, index: str) -> set[str]:
    """The data attributes (``row`` for ``data-row``) that the subscript ``index`` at
    ``offset`` reads (``values[+cell.dataset.row]``), or the statements setting its variables
    do (``r = +cell.dataset.row``)."""
    g = c.g
    flow = g.flow
    k = flow.statement_at(offset)
    if k is None:
        return set()
    names = set(_NAME.findall(index))
    reads = list(_DATA_READ.finditer(index))
    for v in flow.statements[k].uses:
        if g.variables[v].name in names:
            reads += [m for j in flow.definitions_of(v)
                      for m in _DATA_READ.finditer(g.text, *flow.statements[j].span)]
    return {re.sub(r"[A-Z]", lambda u: "-" + u.group().lower(),
                   m.group(1) or m.group(2) or m.group(3)) for m in reads}


def _write_loops(c: _Case, at: int, value: str) -> list[Span]:
    """The loop around the write at ``at`` whose head names a variable of ``value``, or, when
    ``value`` names a parameter of the function writing, the loops around its calls whose heads
    name the argument passed for it."""
    g = c.g
    fn = g.enclosing_function(at)
    head = index_loop_head(g, at, fn.span if fn is not None else g.region, value)
    if head is not None or fn is None:
        return [head] if head is not None else []
    params = [p for p in fn.params if p in set(_NAME.findall(value))]
    out = []
    for call in g.calls_to(fn.index) if params else ():
        passed = _passed_argument(c, call.span[0], fn, fn.params.index(params[0]))
        caller = g.enclosing_function(call.span[0])
        found = passed and index_loop_head(g, call.span[0], caller.span if caller else g.region,
                                           passed[1])
        out += [found] if found else []
    return out


@rule("errors.data_index_loop")
def data_index_loop(c: _Case, offset: int, index: str, by: str) -> Ops:
    """An index read from an element's data attribute (``r = +cell.dataset.row`` before
    ``grid[r]`` gave undefined): the loops that wrote that attribute with the index, whose
    bounds made an element the array has no item for, are blamed directly."""
    g = c.g
    keys = _data_keys(c, offset, index)
    for key in sorted(keys):
        camel = re.sub(r"-([a-z])", lambda u: u.group(1).upper(), key)
        for pattern in _DATA_WRITES:
            write = re.compile(pattern.format(camel=re.escape(camel), kebab=re.escape(key)))
            for m in write.finditer(g.text, *g.region):
                for head in _write_loops(c, m.start(), m.group(1)):
                    yield from c.add("dir", head, f"loop that writes data-{key}, the element "
                                     "attribute the index of the undefined item is read from", by)


# Checks (and saved readings) whose failure can come from how many children were added: a
# count, a text made of the children, and an action (an option to choose never added).
_CHILD_CHECKS = frozenset(("count", "action", "text", "contains_text", "inner_text",
                           "inner_html", "empty", "visible"))


@rule("probe.child_loop")
def child_loop(c: _Case, checks, write_span: Span, fn: int | None, what: str) -> Ops:
    """A write that adds children to the checked element (``list.appendChild(li)``) inside
    a loop: the loop's head decides how many it adds (one too few or too many, when its
    bound is off by one), so it is blamed directly beside the write. ``checks`` are the
    failure's (``_Failure.checks``)."""
    if not any(check.removeprefix("read:") in _CHILD_CHECKS for check, _ in checks):
        return
    g = c.g
    scope = g.functions[fn].span if fn is not None else g.region
    heads = loop_heads(g, write_span[0], scope)
    if heads:
        yield from c.add("dir", heads[0], f"loop that decides how many children of {what} "
                         "the write adds", "graph", fn)


_SUBSCRIPT = re.compile(r"(?<![\w$.])[A-Za-z_$][\w$.]*\s*\[([^\[\]]+)\]")


def statement_index_head(c: _Case, stmt: Span) -> tuple[str, Span | None]:
    """The subscripts ``stmt`` indexes with (their texts joined) and the innermost loop that
    sets one of them: around ``stmt`` in its function, or around the call one frame down that
    passed it in (``caller_index_loop``)."""
    g = c.g
    fn = g.enclosing_function(stmt[0])
    index = " ".join(m.group(1) for m in _SUBSCRIPT.finditer(g.text, *stmt))
    if not index:
        return "", None
    return index, (index_loop_head(g, stmt[0], fn.span if fn is not None else g.region, index)
                   or caller_index_loop(c, stmt[0], index))


def page_index_loops(c: _Case, offset: int, index: str, by: str) -> Ops:
    """When no loop sets the index in the code around it, the loops that put it on the page:
    a data attribute written with it, or the elements whose position it is."""
    yield from data_index_loop(c, offset, index, by)
    yield from element_index_loop(c, offset, index, by)


@rule("errors.library_item_index")
def library_item_index(c: _Case, stmt: Span, by: str) -> Ops:
    """A library read a property of undefined, called from ``stmt`` (the top in-app frame)
    with an item at an index (``p.dist(points[v])``): the innermost loop setting that index
    (around the call, or around the call one frame down that passed it) may run past the
    end, so its head is blamed directly."""
    frames = c.d.get("frames") or ()
    if not frames or frames[0].get("in_app") or not exception_of(c.d).get("null_read"):
        return
    _, head = statement_index_head(c, stmt)
    yield from c.add("dir", head, "loop whose index picks the item handed to the library, "
                     "which read a property of undefined", by)


# A collection of elements found by a selector, or by class or tag name.
_QUERIED = re.compile(r"querySelectorAll\s*\(\s*['\"`]([^'\"`]+)['\"`]"
                      r"|getElementsByClassName\s*\(\s*['\"]([\w-]+)['\"]")
_FOR_EACH = re.compile(r"([A-Za-z_$][\w$]*(?:\s*\.\s*[A-Za-z_$][\w$]*)*(?:\s*\([^()]*\))?)"
                       r"\s*\.\s*forEach\s*\(\s*$")


def _position_params(c: _Case, offset: int, index: str) -> list[int]:
    """The variables of the subscript ``index`` at ``offset``, and those their definitions
    read (one step back), that are a ``forEach`` callback's second parameter: an element's
    position in the collection iterated (``cells.forEach((cell, i) => ...)``)."""
    g, flow = c.g, c.g.flow
    k = flow.statement_at(offset)
    names = set(_NAME.findall(index))
    found = {v for v in (flow.statements[k].uses if k is not None else ())
             if g.variables[v].name in names}
    found |= {u for v in found for j in flow.definitions_of(v) for u in flow.statements[j].uses}
    out = []
    for v in sorted(found):
        fn = g.variables[v].function
        if fn is not None and g.functions[fn].params[1:2] == (g.variables[v].name,):
            out.append(fn)
    return out


def _iterated_classes(c: _Case, fn: int) -> set[str]:
    """The class names selecting the elements whose ``forEach`` the callback ``fn`` is passed
    to: found in the receiver (``document.querySelectorAll('.cell').forEach``) or in the
    statements setting it (``const cells = ...querySelectorAll('.cell')``)."""
    g, flow = c.g, c.g.flow
    start = g.functions[fn].span[0]
    m = _FOR_EACH.search(g.text, max(g.region[0], start - 200), start)
    if m is None:
        return set()
    texts = [m.group(1)]
    k = flow.statement_at(m.start())
    for v in flow.statements[k].uses if k is not None else ():
        if g.variables[v].name == _NAME.match(m.group(1)).group():
            texts += [g.text[slice(*flow.statements[j].span)] for j in flow.definitions_of(v)]
    out = set()
    for q in (q for t in texts for q in _QUERIED.finditer(t)):
        out |= {q.group(2)} if q.group(2) else set(re.findall(r"\.([\w-]+)", q.group(1).split()[-1]))
    return out


@rule("errors.element_index_loop")
def element_index_loop(c: _Case, offset: int, index: str, by: str) -> Ops:
    """An index that is an element's position among those a selector finds (``cells.forEach(
    (cell, i) => grid[Math.floor(i / N)])``): the loops around the code giving elements that
    class (``el.className = 'cell'``, ``classList.add('cell')``, ``class="cell"`` in markup)
    decide how many there are, and their heads are blamed directly."""
    g = c.g
    classes = {name for fn in _position_params(c, offset, index)
               for name in _iterated_classes(c, fn)}
    for name in sorted(classes):
        word = r"(?<![\w-])" + re.escape(name) + r"(?![\w-])"
        made = re.compile(r"\.\s*className\s*=[^;\n]*" + word + r"|classList\s*\.\s*add\s*\("
                          r"[^)]*['\"]" + re.escape(name) + r"['\"]|class\s*=\s*\\?['\"][^'\"]*" + word)
        for m in made.finditer(g.text, *g.region):
            fn = g.enclosing_function(m.start())
            for head in loop_heads(g, m.start(), fn.span if fn is not None else g.region)[:2]:
                yield from c.add("dir", head, f"loop that makes the .{name} elements whose "
                                 "position the index of the undefined item is", by)


# A read of a property of ``name`` (``name.prop``, ``name?.prop``); a subscript ``name[...]``
# when the report names a key (V8 says `reading '0'` for `amps[i]` of undefined).
_MEMBER = r"(?<![\w$.])([A-Za-z_$][\w$]*)\s*(?:\?\.)?\s*(?:\.\s*{prop}(?![\w$])|\[)"
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
    member = _MEMBER.format(prop=re.escape(prop)) if not prop.isdigit() else \
        r"(?<![\w$.])([A-Za-z_$][\w$]*)\s*(?:\?\.)?\s*\["
    names = set(re.findall(member, g.text[stmt[0]:stmt[1]])) | {exc.get("null_name")}
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
            tested = {g.variables[u].name for u in flow.statements[b].uses}
            scope = g.functions[fn].span if fn is not None else g.region
            for loop in loop_heads(g, head[0], scope):
                if tested & set(_NAME.findall(g.text[loop[0]:loop[1]])):
                    yield from c.add("dir", loop, f"loop that sets what the branches assigning "
                                     f"{var.name} test", by)
