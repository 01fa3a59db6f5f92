"""Exception, syntax-error and runtime-failure strategies of localization.

Part of ``evaluators.localize.spans``. Holds the rules for ``page_error`` diagnostics (the
statements of an exception's in-app stack frames, or the line its report quotes; queries for
elements that do not exist behind a null read; the returns without a value of the function
whose result was read as undefined; the code filling an array whose item was read
undefined, and the loops deciding which items; the call or handler registration that passed
no value for a parameter read as undefined; the base case of a recursion that never ended and
the calls starting it; state no code sets (``spans_unset``); the elements and the local
values handed to a library that failed on them, and other lookups of those elements named
after another element; declarations named like a missing name;
for an exception without a stack, the ``throw`` of the reported value), for
``syntax_error`` and ``runtime_failure`` (hangs: loops that cannot end) diagnostics, and
``spans_from_text_evidence``, the spans a free-text verdict (a judge's evidence) points at.
"""

from __future__ import annotations

import difflib
import re

from evaluators.localize.rules import rule
from evaluators.localize.graph import CodeGraph
from evaluators.localize.model import Span
from evaluators.contract import UNCAUGHT
from evaluators.localize.spans_arguments import missing_argument, wrong_argument
from evaluators.localize.spans_common import (
    _SELECTOR_NAME, _Case, _fn_at, _line_at, _statement_head, Localization, Ops, exception_of,
    lexical_scope, ran_functions, similar_names,
)
from evaluators.localize.spans_calls import (
    _library_arguments, _rejected_call,
)
from evaluators.localize.spans_loops import (
    caller_index_loop, index_loop_head, loop_heads, statement_index_head, unassigned_branches,
)
from evaluators.localize.spans_origins import (
    gives_nothing, library_got_nothing, library_inputs,
)
from evaluators.localize.spans_smells import dead_writers
from evaluators.localize.spans_unset import _unset_state, unset_state_at

_LOAD_EVENTS = frozenset(("load", "domcontentloaded", "readystatechange", "pageshow"))
# Functions p5 calls by their names (global mode): entry points like load handlers.
_P5_HOOKS = frozenset((
    "preload", "setup", "draw", "windowResized", "mousePressed", "mouseReleased",
    "mouseClicked", "mouseMoved", "mouseDragged", "mouseWheel", "doubleClicked", "keyPressed",
    "keyReleased", "keyTyped", "touchStarted", "touchMoved", "touchEnded", "deviceMoved",
    "deviceTurned", "deviceShaken"))
_INFINITE_LOOP = re.compile(r"(?:while\s*\(\s*(?:true|1)\s*\)|for\s*\(\s*;\s*;\s*\))")
_IDENT = re.compile(r"[A-Za-z_$][\w$]{2,}")


# -- exceptions, syntax errors, runtime failures -----------------------------------------------

@rule("errors.null_sources")
def _null_sources(c: _Case, stmt: Span, by: str) -> Ops:
    """A null/undefined read at ``stmt``: a query for an element that does not exist."""
    if not exception_of(c.d).get("null_read"):
        return
    code = c.g.text[stmt[0]:stmt[1]]
    for q in c.g.dom_queries:
        if q.elements or not q.exact:
            continue
        inside = stmt[0] <= q.span[0] < stmt[1]
        if inside or (q.variable and re.search(r"(?<![\w$.])" + re.escape(q.variable)
                                               + r"(?![\w$])", code)):
            yield from c.statement(
                "dir", q.span, f"query for {q.selector or q.argument!r} finds no "
                "element: the null the statement reads", q.function, by)
    for v in c.g.state_vars:  # or program state that was never (or wrongly) set
        if "." not in v.name and any(stmt[0] <= a < stmt[1] for a, _ in v.reads):
            yield from c.add("ctx", v.decl, f"declares {v.name}, read by the failing statement", by)
            for w in v.writes:
                yield from c.statement(
                    "ctx", w, f"writes {v.name}, read by the failing statement", None,
                    by)
                # and how often it writes (`for (...) pts.push(p)` one item short).
                fn = c.g.enclosing_function(w[0])
                for head in loop_heads(c.g, w[0], fn.span if fn is not None else c.g.region):
                    yield from c.add("ctx", head, f"loop around a write of {v.name}, read by "
                                     "the failing statement", by)


def _receivers(c: _Case, stmt: Span) -> tuple[int | None, set[int], bool]:
    """For a null/undefined read at ``stmt``: (its statement, the variables read there whose
    property the report names, whether they were found by that name). When the read
    happened in a library (the property is not in the statement), every variable the
    statement reads."""
    flow = c.g.flow
    exc = exception_of(c.d)
    k = flow.statement_at(stmt[0])
    if not exc.get("null_read") or k is None:
        return k, set(), False
    prop, code = exc.get("read_property"), c.g.text[stmt[0]:stmt[1]]
    names = set()
    if prop:
        p = re.escape(prop)
        names = set(re.findall(r"([A-Za-z_$][\w$]*)\s*\??\.\s*" + p + r"(?![\w$])", code))
        names |= set(re.findall(r"([A-Za-z_$][\w$]*)\s*\[\s*['\"]" + p, code))
    uses = flow.statements[k].uses
    named = {v for v in uses if c.g.variables[v].name in names}
    return (k, named, True) if named else (k, set(uses), False)


def _definitions(c: _Case, k: int, variables: set[int]) -> list:
    """The statements other than ``k`` that set ``variables``: anywhere for a global, else in
    statement ``k``'s function, the functions around it (a closure's variables) or at the top
    level."""
    flow = c.g.flow
    scope = lexical_scope(c.g, flow.statements[k].function)
    shared = {v for v in variables if c.g.variables[v].is_global}
    return [st for j, st in enumerate(flow.statements) if j != k and variables & st.defs
            and (shared & st.defs or st.function in scope)]


@rule("errors.returned_nothing")
def _returned_nothing(c: _Case, stmt: Span, by: str) -> Ops:
    """A null/undefined read at ``stmt`` of a variable set from a call of an app function:
    the undefined came back from it. Its returns are followed back through the calls and
    variables they return (``spans_origins.gives_nothing``): the returns that give no value
    (``return;``, ``return null``) or, failing those, the lookups are blamed directly; a
    callee with no return at all, as context."""
    g = c.g
    k, read, _ = _receivers(c, stmt)
    if not read:
        return
    callees = {t for st in _definitions(c, k, read) for t in st.calls}
    # `const {a} = f(...)`: V8 names the call whose result it could not destructure.
    named = exception_of(c.d).get("destructured") or ""
    if named.endswith("(...)"):
        callees |= {t for t in g.flow.statements[k].calls
                    if g.functions[t].name == named[:-5].split(".")[-1]}
    for callee in sorted(callees):
        yield from gives_nothing(c, callee, "the failing statement reads", by)


_LOOKUP = re.compile(r"=\s*[A-Za-z_$][\w$.]*\s*(?:\[[^\]]+\]|\.[A-Za-z_$][\w$]*)\s*;?\s*$")


@rule("errors.undefined_lookup")
def _undefined_lookup(c: _Case, stmt: Span, by: str) -> Ops:
    """A property read on null/undefined, of a variable the report names, that an
    assignment sets from a lookup (``x = table[key]``, ``x = obj.prop``): a key or name
    missing there gives undefined, so each such assignment is blamed directly."""
    k, read, named = _receivers(c, stmt)
    if not named:
        return
    text = c.g.text
    for st in _definitions(c, k, read):
        if not st.calls and _LOOKUP.search(text, st.span[0], st.span[1]):
            names = ", ".join(sorted(c.g.variables[v].name for v in read & st.defs))
            yield from c.add("dir", st.span, f"sets {names} from a lookup, which gives undefined "
                             "for a missing key; the failing statement reads a property of it",
                             by, st.function)
            yield from _index_loop(c, st.span, by)


@rule("errors.lookup_index_loop")
def _index_loop(c: _Case, stmt: Span, by: str) -> Ops:
    """The innermost loop around ``stmt`` whose head sets an index ``stmt`` subscripts with
    (``v = pts[i]`` in ``for (let i = 0; i <= n; i++)``): an index past the end, or short of
    it, is decided there."""
    head = statement_index_head(c, stmt)
    yield from c.add("dir", head, "loop whose index the lookup that gave undefined reads", by)


@rule("errors.runaway_recursion")
def _runaway_recursion(c: _Case, top: int, by: str) -> Ops:
    """``Maximum call stack size exceeded`` in a function that calls itself: its base case
    did not stop it. The ``if`` of the function that returns on a test of a parameter (the
    base case), and the calls from outside that start the recursion, with the state they
    pass that no code sets, are blamed."""
    if not exception_of(c.d).get("stack_overflow"):
        return
    g = c.g
    fn = _fn_at(g, top)
    if fn is None or not any(call.caller == fn for call in g.calls_to(fn)):
        return
    f = g.functions[fn]
    for s, e in g.statements:
        head = g.text[s:min(e, s + 200)]
        if f.body[0] < s < f.body[1] and _fn_at(g, s) == fn and head.startswith("if") and \
                re.search(r"(?<![\w$])return(?![\w$])", g.text[s:e]) and any(
                    re.search(r"(?<![\w$.])" + re.escape(p) + r"(?![\w$])", head.split("{")[0])
                    for p in f.params):
            yield from c.add(
                "dir", _statement_head(g, s) or (s, e), f"base case of the recursion of "
                f"{f.name or 'the function'}, which did not stop it", by)
    for call in g.calls_to(fn):
        if call.caller != fn and call.kind != "reference":
            stmt = g.enclosing_statement(call.span[0])
            yield from c.add(
                "dir", _statement_head(g, call.span[0]) or call.span, f"starts the recursion "
                f"of {f.name or 'the function'}, which never ended", by)
            if stmt is not None:
                yield from unset_state_at(c, stmt, [call.span[0]], by)


_ITERATED = re.compile(r"(?:\]\s*=|\bof)\s*([A-Za-z_$][\w$]*)\s*\[([^\[\]]+)\]")


@rule("errors.undefined_items")
def _undefined_items(c: _Case, stmt: Span, by: str) -> Ops:
    """``Cannot read properties of undefined (reading 'k')`` at ``a[i].k`` (or ``a[i][j]``;
    ``setting`` for a write, ``a[i].k = v``), or ``undefined is not iterable`` at ``[x, y] =
    a[i]`` (``of a[i]``): an item of the array ``a`` (which may be an item itself, ``g[r]``)
    that was never filled, or an index past its end (a loop filling it, or reading it, with
    the wrong bounds): the statements that fill ``a`` in its scope and the loops around them,
    and the innermost loop around the failing read whose head sets the index, are blamed."""
    exc = exception_of(c.d)
    item = exc.get("undefined_item")
    if item is not None:
        after = r"\??\.?\s*\[" if not re.fullmatch(r"[A-Za-z_$][\w$]*", item) else (
            r"\??\.\s*" + re.escape(item) + r"(?![\w$])")  # a number: read by subscript
        # The array may itself be an item (`grid[i][j].g`: the row `grid[i]` is short), or
        # a property (`eig.E.x[j][i]`).
        read = re.compile(r"(?<![\w$.])([A-Za-z_$][\w$]*(?:\s*\.\s*[A-Za-z_$][\w$]*)*"
                          r"(?:\s*\[[^\[\]]+\])*)\s*\[([^\[\]]+)\]\s*" + after)
    elif exc.get("not_iterable"):  # `[a, b] = rows[i]`, `of rows[i]`
        read = _ITERATED
    else:
        return
    g = c.g
    fn = g.enclosing_function(stmt[0])
    scope = fn.span if fn is not None else g.region
    for base, index in dict.fromkeys(r.groups() for r in read.finditer(g.text, *stmt)):
        fills = re.compile(r"(?<![\w$.])" + re.escape(base) + r"\s*(?:\[[^\]]*\]\s*=(?!=)|"
                           r"\.\s*(?:push|unshift|splice)\s*\()")
        found = [w.start() for w in fills.finditer(g.text, scope[0], scope[1])][:c.cfg.fills]
        why = f"fills {base}, whose item the failing statement reads as undefined"
        for at in found:
            fill = g.enclosing_statement(at)
            if fill is not None and fill[1] - fill[0] <= c.cfg.fill_limit:
                yield from c.add("dir", fill, why, by)
            for head in loop_heads(g, at, scope):
                yield from c.add(
                    "dir", head, f"loop that decides which items of {base} are filled", by)
        head = index_loop_head(g, stmt[0], scope, index) or caller_index_loop(c, stmt[0], index)
        if head is not None:
            yield from c.add("dir", head, f"loop whose index reads {base}[{index.strip()}]", by)


def reachable_functions(g: CodeGraph) -> set[int]:
    """Functions something can run: called or referenced from top-level code, event handlers,
    p5's hooks, functions named anywhere but in their own declaration (a conservative
    stand-in for dynamic calls), and whatever those call."""
    found = {t for call in g.calls if call.caller is None for t in call.targets}
    found |= {b.handler for b in g.event_bindings if b.handler is not None}
    found |= {f.index for f in g.functions if f.parent is None and f.name in _P5_HOOKS}
    for f in g.functions:
        if f.name and f.index not in found:
            uses = len(re.findall(r"(?<![\w$.])" + re.escape(f.name) + r"(?![\w$])",
                                  g.text[g.region[0]:g.region[1]]))
            if uses > 1 + sum(1 for call in g.calls if f.index in call.targets):
                found.add(f.index)  # named somewhere no call edge explains
    frontier = set(found)
    while frontier:
        frontier = {t for fi in frontier for call in g.calls_from(fi) for t in call.targets}
        frontier -= found
        found |= frontier
    return found


@rule("errors.unreached_writers")
def _unreached_writers(c: _Case, stmt: Span, stack: list[int], by: str) -> Ops:
    """A null read of state that only code nothing can run sets (``init`` that no load
    handler calls any more): the start-up bindings that should run it are blamed, the code
    that never ran is context. Not when a function on the stack looks unreachable too: then
    the app is run in a way the graph does not see, and nothing can be concluded."""
    if not exception_of(c.d).get("null_read"):
        return
    g = c.g
    reachable = None
    for v in g.state_vars:
        if "." in v.name or not v.writes or not any(stmt[0] <= a < stmt[1] for a, _ in v.reads):
            continue
        writers = {_fn_at(g, w[0]) for w in v.writes}
        reachable = reachable_functions(g) if reachable is None else reachable
        if None in writers or writers & reachable:
            continue
        if any(fn is not None and fn not in reachable for fn in (_fn_at(g, o) for o in stack)):
            return
        for b in g.event_bindings:
            if b.global_target and (b.event or "").lower() in _LOAD_EVENTS:
                yield from c.add(
                    "dir", b.span, f"start-up binding ({b.target_text} '{b.event}'): only "
                    f"code nothing runs sets {v.name}, so this does not run it", by)
        for fi in _roots_above(g, writers):
            yield from c.function(
                "ctx", fi, f"sets {v.name} (itself or through its calls), but nothing "
                "runs it", by)


def _roots_above(g: CodeGraph, functions: set[int], depth: int = 4) -> set[int]:
    """The functions with no callers from which ``functions`` are called (themselves if
    nothing calls them)."""
    roots, frontier, seen = set(), set(functions), set(functions)
    for _ in range(depth):
        nxt = set()
        for fi in frontier:
            callers = {call.caller for call in g.calls_to(fi)} - {None}
            if not callers:
                roots.add(fi)
            nxt |= callers - seen
        seen |= nxt
        frontier = nxt
    return roots | frontier


@rule("errors.named_in_message")
def _named_in_message(c: _Case, by: str) -> Ops:
    """``x is not defined`` / ``not a function``: declarations with a similar name."""
    name = exception_of(c.d).get("unbound_name")
    if not name:
        return
    root = name.split(".")[0]
    for q in c.g.dom_queries:  # `canvas.getContext is not a function`: the wrong element
        if q.variable and q.variable.split(".")[-1] == root and "." in name:
            yield from c.statement("dir", q.span, f"{q.variable} holds the element looked up here, "
                                   f"which lacks what the code calls on it", q.function, by)
    name = name.split(".")[-1]
    for fn in c.g.functions:
        if fn.name and fn.name != name and similar_names(fn.name, name, c.cfg.similar_ratio):
            yield from c.add(
                "ctx", fn.span, f"function {fn.name} is named like the missing {name}", by,
                fn.index)
    for v in c.g.state_vars:
        if v.decl and v.name != name and similar_names(v.name.split(".")[-1], name,
                                                       c.cfg.similar_ratio):
            yield from c.add("ctx", v.decl, f"{v.name} is named like the missing {name}", by)


@rule("errors.thrown_values")
def _thrown_values(c: _Case) -> Ops:
    """An exception without a stack (``throw 1``, ``throw "x"``): the app's ``throw``s.

    Those whose literal value is the reported message are blamed directly; without one, the
    others that could have thrown (in functions that ran, per the probe's coverage, when
    known) are blamed directly if few, as context otherwise.
    """
    g = c.g
    said = set(exception_of(c.d).get("thrown") or ())
    throws = [(s, e) for s, e in g.statements if re.match(r"throw(?![\w$])", g.text[s:e])]
    matched = [t for t in throws if _throw_matches(g.text[t[0] + 5:t[1]], said)]
    for t in matched:
        yield from c.statement("dir", t, "throws the reported value", _fn_at(g, t[0]), "text")
    if matched or not throws:
        return
    cov = c.d.get("coverage")
    if isinstance(cov, dict) and isinstance(cov.get("functions"), list):
        ran = ran_functions(g, cov)
        throws = [t for t in throws if _fn_at(g, t[0]) in ran or _fn_at(g, t[0]) is None]
    plain = [t for t in throws if not re.match(r"throw\s+new\s", g.text[t[0]:t[1]])]
    for t in plain or throws:
        yield from c.statement(
            "dir" if len(plain or throws) <= 3 else "ctx", t, "throw that may have "
            "raised the stackless exception", _fn_at(g, t[0]), "coverage")


def _throw_matches(expr: str, said: set[str]) -> bool:
    """Whether a thrown literal (number, string, template) prints as one of ``said``."""
    expr = expr.strip().rstrip(";").strip()
    if re.fullmatch(r"-?\d+(?:\.\d+)?", expr):
        return any(x == expr or x == f"{float(expr):g}" for x in said)
    m = re.fullmatch(r"(['\"])(.*)\1", expr, re.S)
    if m:
        return m.group(2) in said
    m = re.fullmatch(r"`(.*)`", expr, re.S)
    if m:  # `bad ${x}`: the static parts, anything in between
        parts = re.split(r"\$\{[^}]*\}", m.group(1))
        pattern = ".*".join(re.escape(p) for p in parts)
        return any(re.fullmatch(pattern, x, re.S) for x in said)
    return False


@rule("errors.page_error_stack")
def _page_error_stack(c: _Case) -> Ops:
    """An uncaught exception with a stack: the statement of the top in-app frame, the calls
    below it, and the rules for what the exception says (null reads, unbound names...)."""
    frames = [f for f in c.d.get("frames") or ()
              if f.get("in_app") and isinstance(f.get("offset"), int)]
    if not frames:
        yield from _page_error_text(c)
        return
    g, top = c.g, frames[0]["offset"]
    head = _statement_head(g, top) or _line_at(g.text, top)
    yield from c.add("dir", head, "statement at the top in-app frame of the exception", "stack")
    yield from c.function("ctx", _fn_at(g, top), "function of the top frame", "stack", near=top)
    for k, frame in enumerate(frames[1:], 1):
        off = frame["offset"]
        yield from c.add("ctx", _statement_head(g, off) or _line_at(g.text, off),
                         f"call on the stack (frame {k})", "stack")
    yield from _null_sources(c, head, "stack")
    yield from _returned_nothing(c, head, "stack")
    yield from _undefined_lookup(c, head, "stack")
    yield from unassigned_branches(c, head, "stack")
    yield from _runaway_recursion(c, top, "stack")
    yield from _undefined_items(c, head, "stack")
    item_call = yield from missing_argument(c, head, frames, "stack")
    if item_call is not None:  # `f(pts[i])` handed f nothing: the loop setting i may overrun
        yield from _index_loop(c, item_call, "stack")
    yield from wrong_argument(c, head, frames, "stack")
    yield from _unreached_writers(c, head, [f["offset"] for f in frames], "stack")
    yield from dead_writers(c, head, "stack")
    yield from _unset_state(c, head, [f["offset"] for f in frames], "stack")
    yield from _library_arguments(c, head, "stack")
    yield from library_inputs(c, head, "stack")
    yield from library_got_nothing(c, top, "stack")
    yield from _rejected_call(c, top, "stack")
    yield from _named_in_message(c, "stack")


@rule("errors.page_error_text")
def _page_error_text(c: _Case) -> Ops:
    """An uncaught exception without execution facts: the statements matching the excerpt of
    the failing line, and the rules for what the exception says."""
    excerpt = (c.d.get("excerpt") or "").strip()
    lo, hi = c.g.region
    hits = []
    while excerpt and len(hits) < 3:
        at = c.g.text.find(excerpt, hits[-1][1] if hits else lo, hi)
        if at < 0:
            break
        hits.append((at, at + len(excerpt)))
    for span in hits:
        yield from c.add("dir", span, "line quoted by the exception report", "text")
        yield from c.function(
            "ctx", _fn_at(c.g, span[0]), "function containing the quoted line", "text",
            near=span[0])
        yield from _null_sources(c, span, "text")
        yield from _unset_state(c, span, [span[0]], "text")
    if not hits:
        exc = exception_of(c.d)
        report = f"{exc.get('name', '')}: {exc.get('message', '')}" if exc else ""
        for item in spans_from_text_evidence(c.g, report).evidence:
            yield from c.add("ctx", tuple(item["span"]), item["why"], "text")
    if not hits and not c.d.get("frames"):  # no stack at all: a thrown non-Error value
        yield from _thrown_values(c)
    yield from _named_in_message(c, "text")


@rule("errors.page_error_naive")
def _page_error_naive(c: _Case) -> Ops:
    """The baseline for an exception: the whole function around the top frame."""
    frames = [f for f in c.d.get("frames") or () if isinstance(f.get("offset"), int)]
    if frames:
        top = frames[0]["offset"]
        fn = _fn_at(c.g, top)
        if fn is None:
            yield from c.add(
                "dir", _statement_head(c.g, top) or _line_at(c.g.text, top), "top frame")
        yield from c.function("dir", fn, "function of the top frame")


def _syntax_span(c: _Case) -> Span | None:
    span = c.d.get("span")
    if not (isinstance(span, (list, tuple)) and len(span) == 2):
        return None
    s, e = int(span[0]), int(span[1])
    if e <= s:  # a missing token: the last character before it and the next one
        p = s - 1
        while p > c.g.region[0] and c.g.text[p].isspace():
            p -= 1
        s, e = max(p, 0), min(len(c.g.text), s + 1)
    return s, e


@rule("errors.syntax_error")
def _syntax_error(c: _Case) -> Ops:
    """A syntax error from the source gate: its span directly, its statement as context."""
    span = _syntax_span(c)
    if span is None:
        return
    yield from c.add("dir", span, str(c.d.get("message", "syntax error")))
    stmt = c.g.enclosing_statement(span[0])
    fn = c.g.enclosing_function(span[0])
    around = stmt or (fn.span if fn else None) or _line_at(c.g.text, span[0])
    yield from c.add("ctx", around, "statement around the syntax error")


@rule("errors.syntax_naive")
def _syntax_naive(c: _Case) -> Ops:
    """The baseline for a syntax error: the whole function around it."""
    span = _syntax_span(c)
    if span is not None:
        fn = c.g.enclosing_function(span[0])
        yield from c.add("dir", fn.span if fn else (c.g.enclosing_statement(span[0]) or span),
                         "code around the syntax error")


@rule("errors.runtime_failure")
def _runtime_failure(c: _Case) -> Ops:
    """Hangs and crashes: loops that cannot end, then other ``while`` loops."""
    if c.d.get("reason") not in {r.value for r in UNCAUGHT}:
        yield from _loops(c)  # an exception's own page_error diagnostic carries its location


@rule("errors.loops")
def _loops(c: _Case) -> Ops:
    """Loops whose head cannot end (``while (true)``, ``for (;;)``) directly, other
    ``while`` loops as context."""
    for s, e in c.g.statements:
        head = c.g.text[s:min(e, s + 40)]
        if _INFINITE_LOOP.match(head):
            yield from c.add(
                "dir", (s, e), "loop without an exit condition (the page hung or crashed)")
        elif head.startswith(("while", "do")):
            yield from c.add("ctx", (s, e), "loop that may not end (the page hung or crashed)")


# -- judge evidence ----------------------------------------------------------------------------

def _excerpts(text: str) -> list[str]:
    quoted = re.findall(r"```[\w-]*\n?(.*?)```|`([^`\n]+)`", text, re.S)
    parts = [a or b for a, b in quoted]
    lines = [ln for p in parts for ln in p.splitlines()]
    lines += [ln for ln in text.splitlines() if re.search(r"[;{}()=<>]", ln)]
    return [" ".join(ln.split()) for ln in lines if len(ln.strip()) >= 6]


def _find_code(g: CodeGraph, excerpt: str) -> list[Span]:
    """Where ``excerpt`` occurs in the app, white space ignored; else its closest lines."""
    lo, hi = g.region
    pattern = re.compile(r"\s*".join(re.escape(t) for t in excerpt.split(" ")))
    found = [m.span() for m in pattern.finditer(g.text, lo, hi)][:3]
    if found or len(excerpt) < 12:
        return found
    best, spans = 0.8, []
    pos = lo
    for line in g.text[lo:hi].split("\n"):
        stripped = line.strip()
        if stripped and abs(len(stripped) - len(excerpt)) < len(excerpt):
            ratio = difflib.SequenceMatcher(None, " ".join(stripped.split()), excerpt).ratio()
            if ratio > best + 1e-9:
                best, spans = ratio, []
            if ratio >= best:
                start = pos + line.index(stripped[0])
                spans.append((start, start + len(stripped)))
        pos += len(line) + 1
    return spans[:3]


def spans_from_text_evidence(graph: CodeGraph, text: str) -> Localization:
    """Spans a free-text verdict (a judge's evidence) points at.

    Code excerpts (backquoted, or lines that look like code) are found in the app ignoring
    white space, or as the most similar lines (fuzzy); functions named in the text are blamed
    whole; ``#id`` and ``.class`` selectors give the elements' tags and their style rules as
    context.

    Args:
        graph: The app's graph.
        text: The evidence.

    Returns:
        The localization: excerpts and named functions in S_dir, selectors in S_ctx.
    """
    c = _Case(graph, {}, None)
    c.blame.run(_text_evidence(c, text))
    return c.result()


def _text_evidence(c: _Case, text: str) -> Ops:
    """The blame of ``spans_from_text_evidence``."""
    graph = c.g
    for excerpt in dict.fromkeys(_excerpts(text)):
        for span in _find_code(graph, excerpt):
            yield from c.add("dir", span, f"quoted code {excerpt[:40]!r}", "text")
    names = set(_IDENT.findall(text))
    for fn in graph.functions:
        if fn.name in names and fn.kind != "inline_handler":
            yield from c.add(
                "dir", fn.span, f"function {fn.name} named in the text", "text", fn.index)
    for kind, name in _SELECTOR_NAME.findall(text):
        attr_ok = (lambda e: e.id == name) if kind == "#" else (lambda e: name in e.classes)
        for e in graph.elements:
            if attr_ok(e):
                yield from c.add(
                    "ctx", e.start_tag, f"element {kind}{name} named in the text", "text")
        for r in graph.css_rules:
            if re.search(re.escape(kind + name) + r"(?![-\w])", r.selector):
                yield from c.add("ctx", r.span, f"style rule for {kind}{name}", "text")
