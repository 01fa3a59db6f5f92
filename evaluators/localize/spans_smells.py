"""Definite bugs on a failing path (``evaluators.localize.spans``).

Some code is wrong whatever the app means by it: reading ``.value`` of an element that has no
value (``document.getElementById('control-panel').value`` for a ``<div>``: always
``undefined``, so every number computed from it is ``NaN``), or ``.checked`` of one that is
no checkbox. When such a read sits in a function that ran on the failing path, it is blamed
directly, and a function that was blamed whole only because it ran moves to the context:
a certain fault in it explains the failure better than the rest of its code.

Two more such bugs are blamed the same way: an element property misspelled
(``out.innerhtml = s`` adds a property nothing reads; ``input.values`` is undefined), and a
``return`` (``throw``, ``break``, ``continue``) followed in its block by code that can never
run. Neither depends on how the app names things. Nor does a change undone where it was made:
a function that changes a global and, as its last touch of it, writes a constant over it
(``score += 1; show(); score = 0;``) leaves nothing of the change for other code to see.
"""

from __future__ import annotations

import functools
import re

from evaluators.localize.rules import rule
from evaluators.localize.flow import _DECLARATION
from evaluators.localize.graph import CodeGraph
from evaluators.localize.model import DomQuery, Span
from evaluators.localize.spans_common import (
    _Case, _describe, _fn_at, _write_keys, _writes, Ops, exception_of, lexical_scope,
)

# Elements with a ``value`` property, and those with ``checked``.
_VALUED = frozenset(("input", "select", "textarea", "button", "option", "output", "meter",
                     "progress", "li", "data", "param"))
_CHECKABLE = frozenset(("input",))
# Elements whose ``value`` is their ``value`` attribute, '' without one (an <option>'s falls
# back to its text, an <input>'s to what is typed).
_ATTRIBUTE_VALUED = frozenset(("button", "data", "param"))
_READ = re.compile(r"\s*(?:\?\.|\.)\s*(value|valueAsNumber|checked|selectedIndex)\b(?!\s*=[^=])")


def _bad_reads(g: CodeGraph, q: DomQuery) -> list[tuple[int, str]]:
    """(offset, property) of the reads of ``q``'s element's ``value``/``checked`` that the
    element cannot answer; none when the lookup is not exact or finds several elements."""
    if not q.exact or len(q.elements) != 1:
        return []
    tag = g.elements[q.elements[0]].tag
    empty = tag in _ATTRIBUTE_VALUED and _value_never_set(g, q.elements[0])
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
        if tag not in allowed or (empty and prop == "value"):
            out.append((at, prop))
    return out


def _value_never_set(g: CodeGraph, x: int) -> bool:
    """Whether element ``x`` has no ``value`` attribute in the HTML and no code sets one: its
    ``.value`` is then always ''."""
    return g.elements[x].attr("value") is None and not any(
        x in w.elements or not w.elements for w in g.element_writes
        if w.kind == "value" or (w.kind == "attribute" and w.detail.lower() == "value"))


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
            reader = g.enclosing_function(at)  # a global lookup is read in other functions
            fn = None if reader is None else reader.index
            if fn is not None and fn not in ran:
                continue
            what = _describe(g, list(q.elements))
            tag = g.elements[q.elements[0]].tag
            why = (f"reads .{prop} of {what}, a <{tag}> without a value attribute that no code "
                   "sets: the value is always ''" if tag in _VALUED and prop == "value" else
                   f"reads .{prop} of {what}, which has none (it is a <{tag}>): the value is "
                   "undefined")
            yield from c.statement("dir", (at, at + 1), why, fn, "coverage")
            yield from c.statement("dir", q.span, f"looks up {what}, whose .{prop} the code reads",
                                   q.function, "coverage")
            hit_functions |= {fn} - {None}
    yield from c.demote(lambda i: i.fn in hit_functions and i.span == g.functions[i.fn].span,
                        "; narrowed to the value read that cannot work")


# Properties and methods of elements (DOM and HTML standards) that scripts commonly use.
_ELEMENT_NAMES = frozenset((
    "textContent", "innerHTML", "innerText", "outerHTML", "className", "classList", "style",
    "id", "title", "hidden", "value", "valueAsNumber", "checked", "disabled", "selected",
    "selectedIndex", "options", "min", "max", "step", "type", "placeholder", "src", "href",
    "alt", "width", "height", "dataset", "children", "childNodes", "firstChild", "lastChild",
    "firstElementChild", "lastElementChild", "parentNode", "parentElement", "nextSibling",
    "previousSibling", "nextElementSibling", "previousElementSibling", "offsetWidth",
    "offsetHeight", "offsetLeft", "offsetTop", "clientWidth", "clientHeight", "scrollTop",
    "scrollLeft", "scrollWidth", "scrollHeight", "tabIndex", "readOnly", "required", "name",
    "htmlFor", "files", "multiple", "appendChild", "removeChild", "replaceChildren",
    "replaceChild", "insertBefore", "insertAdjacentHTML", "append", "prepend", "remove",
    "setAttribute", "getAttribute", "removeAttribute", "toggleAttribute", "hasAttribute",
    "addEventListener", "removeEventListener", "querySelector", "querySelectorAll",
    "getContext", "getBoundingClientRect", "focus", "blur", "click", "closest", "contains",
    "dispatchEvent", "scrollIntoView", "cloneNode", "onclick", "oninput", "onchange",
    "onsubmit", "onkeydown", "onkeyup", "onmousedown", "onmouseup", "onmousemove",
))
# Other members of elements, never misspellings themselves (``scrollTo`` is one edit from
# ``scrollTop``).
_OTHER_MEMBERS = frozenset((
    "scrollTo", "scrollBy", "scroll", "clientTop", "clientLeft", "offsetParent", "tagName",
    "nodeName", "nodeType", "nodeValue", "labels", "form", "ownerDocument", "isConnected",
    "matches", "animate", "checkValidity", "reportValidity", "setCustomValidity", "validity",
    "validationMessage", "selectionStart", "selectionEnd", "select", "setSelectionRange",
    "stepUp", "stepDown", "valueAsDate", "defaultValue", "defaultChecked", "indeterminate",
    "accept", "autofocus", "maxLength", "minLength", "pattern", "size", "length", "item", "add",
    "text", "label", "index", "toDataURL", "toBlob", "play", "pause", "currentTime",
    "duration", "paused", "volume", "muted", "loop", "naturalWidth", "naturalHeight",
    "complete", "contentEditable", "isContentEditable", "draggable", "lang", "dir", "before",
    "after", "replaceWith", "getElementsByTagName", "getElementsByClassName", "attributes",
    "shadowRoot", "attachShadow", "requestFullscreen", "onload", "onerror", "oninvalid",
    "onmouseover", "onmouseout", "onmouseenter", "onmouseleave", "onwheel", "onkeypress",
))
# Those no plain object is likely to have: a spelling that differs only in case is a typo
# whatever the object is (``out.innerhtml = s`` adds a property nobody reads).
_ELEMENT_ONLY = frozenset(n for n in _ELEMENT_NAMES if len(n) >= 9 and n.lower() != n)
_BY_LOWER = {n.lower(): n for n in _ELEMENT_NAMES}


def _one_edit_index(names) -> tuple[dict, dict]:
    """``(one letter left out -> name, (one letter left out, where) -> name)`` over ``names``
    of 5 letters or more, the first name in sorted order winning: what ``_one_edit_of``
    looks up."""
    dropped, at = {}, {}
    for n in sorted(names):
        if len(n) >= 5:
            for i in range(len(n)):
                dropped.setdefault(n[:i] + n[i + 1:], n)
                at.setdefault((n[:i] + n[i + 1:], i), n)
    return dropped, at


_DROPPED, _DROPPED_AT = _one_edit_index(_ELEMENT_NAMES)
_LONG_NAMES = frozenset(n for n in _ELEMENT_NAMES if len(n) >= 5)


def _one_edit_of(name: str) -> str | None:
    """An element name (5 letters or more) that ``name`` becomes by one insertion, deletion
    or substitution, or None."""
    found = [_DROPPED[name]] if name in _DROPPED else []  # a letter too few
    for i in range(len(name)):
        rest = name[:i] + name[i + 1:]
        if rest in _LONG_NAMES:  # a letter too many
            found.append(rest)
        if (rest, i) in _DROPPED_AT:  # a letter changed
            found.append(_DROPPED_AT[(rest, i)])
    return min(found) if found else None


@functools.lru_cache(maxsize=4096)
def _meant(name: str, on_element: bool) -> str | None:
    """The element property ``name`` misspells, or None: one differing only in case (on any
    object for the names only elements have), or, on an element, one edit away."""
    if name in _ELEMENT_NAMES or name in _OTHER_MEMBERS:
        return None
    same = _BY_LOWER.get(name.lower())
    if same is not None and (on_element or same in _ELEMENT_ONLY):
        return same
    if on_element and len(name) >= 5:
        return _one_edit_of(name)
    return None


def _element_holders(g: CodeGraph) -> dict[str, set[int | None]]:
    """Variables (and paths) holding one exactly known element -> the functions whose lookup
    stored it there (None: top level, visible everywhere)."""
    out: dict[str, set[int | None]] = {}
    for q in g.dom_queries:
        if q.exact and len(q.elements) == 1 and q.variable:
            out.setdefault(q.variable, set()).add(q.function)
    return out


def _on_element(g: CodeGraph, holders, obj: tuple[int, int], fn: int | None) -> bool:
    text = g.text[obj[0]:obj[1]]
    if any(q.span == obj and q.exact for q in g.dom_queries):
        return True
    # Held in the lookup's function, one around it (a closure sees it) or at the top level.
    return bool(lexical_scope(g, fn) & set(holders.get(text, ())))


@rule("smells.misspelled_property")
def misspelled_properties(c: _Case, ran: set[int] | None) -> Ops:
    """Blames a misspelled element property (``el.innerhtml``, ``input.values``) in a function
    that ran: the write goes nowhere, the read is undefined, silently. Whole-function blame of
    that function moves to the context."""
    if not ran:
        return
    g, holders, hit = c.g, _element_holders(c.g), set()
    for name, span, obj in g.properties:
        if _meant(name, on_element=True) is None:  # most names: nothing to look up
            continue
        fn = g.enclosing_function(span[0])
        index = fn.index if fn is not None else None
        if index is not None and index not in ran:
            continue
        meant = _meant(name, _on_element(g, holders, obj, index))
        if meant is None:
            continue
        yield from c.statement("dir", span, f".{name} is not an element property (.{meant} "
                               "is): the code meant it and silently does something else",
                               index, "graph")
        if index is not None:
            hit.add(index)
    yield from c.demote(lambda i: i.fn in hit and i.span == g.functions[i.fn].span,
                        "; narrowed to the misspelled property")


@rule("smells.unreachable_code")
def unreachable_code(c: _Case, ran: set[int] | None) -> Ops:
    """Blames a ``return`` (``throw``, ``break``, ``continue``) in a function that ran when
    code after it in the same block can never run. Whole-function blame of that function
    moves to the context."""
    if not ran:
        return
    g, hit = c.g, set()
    for span in g.dead_ends:
        fn = g.enclosing_function(span[0])
        index = fn.index if fn is not None else None
        if index is not None and index not in ran:
            continue
        yield from c.add("dir", span, "ends its block before the code after it, which can "
                         "never run", "graph", index)
        if index is not None:
            hit.add(index)
    yield from c.demote(lambda i: i.fn in hit and i.span == g.functions[i.fn].span,
                        "; narrowed to the statement that makes code unreachable")


@rule("smells.dead_writers")
def dead_writers(c: _Case, stmt: Span, by: str) -> Ops:
    """A null read at ``stmt`` of state (a variable, or a property path such as
    ``vertices.A`` read as ``vertices.A.x``) whose every write is code that can never run
    (after a ``return`` or ``throw`` in the same block): that statement is blamed directly,
    the writes it cuts off as context. No name is consulted: the value is unset because
    nothing that sets it can run."""
    if not exception_of(c.d).get("null_read"):
        return
    g = c.g
    prop = exception_of(c.d).get("read_property")
    read = {u.name for u in g.state_vars if any(stmt[0] <= a < stmt[1] for a, _ in u.reads)}
    for name, writes, read_here in _written_state(g, stmt):
        # `vertices.A.x` read where `vertices.A` is undefined: the property path is the state.
        if not (read_here or (name in read if "." not in name else f"{name}.{prop}" in read)):
            continue
        # Assignments only: a mutating call (`group.clear()`) neither sets nor unsets it.
        sets = [w for w in writes if _assignment_to(name).match(g.text, w[0], w[1])]
        cut = [_dead_end_before(g, w[0]) for w in sets]
        if not sets or None in cut:
            continue
        for k in sorted(set(cut)):
            yield from c.add("dir", g.dead_ends[k], f"ends its block before every write of "
                             f"{name}, which the failing statement reads unset", by,
                             _fn_at(g, g.dead_ends[k][0]))
        for w in sets:
            yield from c.add("ctx", w, f"sets {name}, but can never run", by,
                             _fn_at(g, w[0]))


def _written_state(g: CodeGraph, stmt: Span) -> list[tuple[str, list[Span], bool]]:
    """(name, write spans, read by ``stmt`` for certain) of the program state
    (``state_vars``: whether ``stmt`` reads it is told by its reads), then of the other
    ``let``/``var`` variables statement ``stmt`` reads, such as one captured from an
    enclosing function (a sketch's ``let`` set in its ``p.setup``): their writes are the
    statements that set them, declarations without a value left out."""
    out = [(v.name, list(v.writes), False) for v in g.state_vars]
    k = g.flow.statement_at(stmt[0])
    if k is None:
        return out
    known = {name for name, _, _ in out}
    for v in sorted(g.flow.statements[k].uses):
        var = g.variables[v]
        if var.name in known or var.is_global or var.kind not in ("let", "var"):
            continue
        sets = [st.span for st in g.flow.statements if v in st.defs
                and not (var.decl and st.span[0] <= var.decl[0] < st.span[1])]
        out.append((var.name, sets, True))
    return out


@functools.lru_cache(maxsize=256)
def _assignment_to(name: str) -> re.Pattern:
    """Matches an assignment to ``name`` (``=``, ``+=``, ``??=``...) or its update."""
    return re.compile(rf"(?:\+\+|--)?\s*{re.escape(name)}\s*(?:[-+*/%&|^?<>]*=(?!=)|\+\+|--)")


@rule("smells.dead_element_writes")
def dead_element_writes(c: _Case) -> Ops:
    """A failed check of an element, one of whose writes of what the check reads sits after a
    ``return`` or ``throw`` in its block: that write can never run, so the jump is blamed
    directly and the write as context. Needs no coverage (a check right after load has none
    of the start-up code) and reads no names."""
    f, g = c.failure, c.g
    if f.missing or not f.targets:
        return
    for w in _writes(g, f.targets, _write_keys(f)):
        k = _dead_end_before(g, w.span[0])
        if k is None:
            continue
        yield from c.add("dir", g.dead_ends[k], f"ends its block before the {w.kind} write of "
                         "the checked element, which can never run", "graph",
                         _fn_at(g, g.dead_ends[k][0]))
        yield from c.add("ctx", w.span, "writes the checked element, but can never run",
                         "graph", w.function)


def _dead_end_before(g: CodeGraph, at: int) -> int | None:
    """The index of the dead end whose unreachable code holds offset ``at``, if any."""
    return next((k for k, (s, e) in enumerate(g.dead_code) if s <= at < e), None)


# `for (let i = 0; i > 7; i++)`: a counter compared with a number, both literal at the start.
_FOR_HEAD = re.compile(r"for\s*\(\s*(?:let|var)?\s*([A-Za-z_$][\w$]*)\s*=\s*(-?\d+(?:\.\d+)?)\s*;"
                       r"\s*\1\s*(<=|>=|<|>)\s*(-?\d+(?:\.\d+)?)\s*;")
_COMPARE = {"<": float.__lt__, "<=": float.__le__, ">": float.__gt__, ">=": float.__ge__}


@rule("smells.loop_never_runs")
def loop_never_runs(c: _Case, ran: set[int] | None) -> Ops:
    """Blames the head of a ``for`` loop in a function that ran whose condition is false for
    the counter's first value (``for (let i = 0; i > 7; i++)``): its body can never run.
    Whole-function blame of that function moves to the context."""
    if not ran:
        return
    g, hit = c.g, set()
    for st in g.flow.statements:
        if st.function is not None and st.function not in ran:
            continue
        m = _FOR_HEAD.match(g.text, st.head[0], st.head[1])
        if m is None or _COMPARE[m.group(3)](float(m.group(2)), float(m.group(4))):
            continue
        yield from c.add("dir", st.head, f"{m.group(1)} starts at {m.group(2)}, so "
                         f"{m.group(1)} {m.group(3)} {m.group(4)} is false at once and the "
                         "loop's body never runs", "graph", st.function)
        if st.function is not None:
            hit.add(st.function)
    yield from c.demote(lambda i: i.fn in hit and i.span == g.functions[i.fn].span,
                        "; narrowed to the loop that never runs")


# A constant or empty value written over a variable (`score = 0`, `points = []`).
_RESET = re.compile(r"([A-Za-z_$][\w$]*)\s*=\s*(?:-?\d+(?:\.\d+)?|true|false|null|undefined|''|"
                    r"\"\"|\[\s*\]|\{\s*\})\s*;?\s*$")


def _updates(name: str) -> re.Pattern:
    """A statement that changes variable ``name``: assigns it, steps it or fills it (by a
    method, or an item at a time: ``grid[r][c] = 0``)."""
    n = re.escape(name)
    return re.compile(rf"(?<![\w$.]){n}\s*(?:\[[^\]]*\]\s*)*(?:[-+*/%]?=(?!=)|\+\+|--|\.\s*"
                      rf"(?:push|unshift|splice|set|add)\s*\()|(?:\+\+|--)\s*{n}(?![\w$])")


def undone_updates(g: CodeGraph, fn: int) -> list[tuple[Span, list[Span]]]:
    """Statements of function ``fn``'s own body that write a constant over a global its code
    changed earlier (other than by a constant), with nothing of the function reading or
    writing it afterwards: the change is undone before anything outside sees it. Each with
    the changes it undoes."""
    flow, out = g.flow, []
    own = [st for st in flow.statements if st.function == fn]
    for st in own:
        m = _RESET.match(g.text, st.span[0], st.span[1]) if st.parent is None else None
        var = [v for v in st.defs if m and g.variables[v].name == m.group(1)
               and g.variables[v].is_global]
        if not var or any(o.span[0] >= st.span[1] and var[0] in o.defs | o.uses for o in own):
            continue
        changes = _updates(m.group(1))
        # A change in code of its own: not a nested function's declaration, and not another
        # constant (`running = false; ...; running = true` sets a flag, undoes nothing).
        earlier = [o.span for o in own if o.span[1] <= st.span[0]
                   and changes.search(g.text, o.span[0], o.span[1])
                   and not _DECLARATION.match(g.text, o.span[0])
                   and not _RESET.match(g.text, o.span[0], o.span[1])]
        if earlier:
            out.append((st.span, earlier))
    return out


@rule("smells.undone_update")
def undone_update(c: _Case, ran: set[int] | None) -> Ops:
    """In a function that ran, a constant written over a global after the function changed
    it, as its last touch of it (``score += 1; show(); score = 0;``): the reset is blamed
    directly, the changes it undoes as context, and whole-function blame of that function
    moves to the context."""
    g, hit = c.g, set()
    for fn in sorted(ran or ()):
        for reset, changes in undone_updates(g, fn):
            hit.add(fn)
            name = g.text[reset[0]:reset[1]].split("=")[0].strip()
            yield from c.add("dir", reset, f"resets {name} after its function changed it, "
                             "undoing the change before any other code reads it", "graph", fn)
            for span in changes[-2:]:
                yield from c.add("ctx", span, f"the change of {name} that the reset undoes",
                                 "graph", fn)
    yield from c.demote(lambda i: i.fn in hit and i.span == g.functions[i.fn].span,
                        "; narrowed to the reset that undoes its change")
