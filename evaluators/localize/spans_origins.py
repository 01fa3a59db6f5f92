"""Where a bad value came from (``evaluators.localize.spans``): data flow back from a read.

An exception at a statement is often only where a bad value arrived: the statement that made
it is elsewhere, one or more calls away. ``trace_expression``, ``trace_returns`` and
``trace_variable`` follow a value back through the app's own code by its data flow alone (no
names are consulted): a variable to the statements that set it, a call's result to the
``return`` statements of the function called, recursively. ``blame_sources`` blames what ends
the paths: a ``return`` that gives nothing directly, a lookup (``table[key]``) that gives
undefined for a missing key directly when no such return was found, and the statements on the
way as context. ``errors.returned_nothing`` and ``errors.missing_argument`` (``spans_errors``)
start these walks from a variable set by a call and from the argument a caller passed.

Three rules live here. ``errors.skipped_settings``: a local read unset whose every setting sits
under a condition (``switch (kind)`` cases, ``if`` branches) was left unset because no branch
ran, so the conditions are blamed. ``errors.library_parameters``: a library that threw on a
parameter of the calling function got it from that function's caller, whose call is blamed.
``errors.guard_of_other``: a null read inside ``if (y)`` that tests another value blames the
test. All three are called from ``spans_errors``' stack rule with the statement of the top in-app frame.
"""

from __future__ import annotations

import dataclasses
import re

from evaluators.localize.rules import rule
from evaluators.localize.spans_calls import _arguments
from evaluators.localize.spans_common import Ops, _Case, exception_of

Span = tuple[int, int]
# How many hops a value is followed back, and how many statements end its paths, at most:
# past that the paths fan out over the app and blame nothing in particular.
MAX_DEPTH = 4
MAX_ENDS = 4
_NAME = r"[A-Za-z_$][\w$]*"
_EMPTY = re.compile(r"return\s*(?:(?:null|undefined|void\s+0)\s*)?;?\s*$")
_CALL = re.compile(rf"\s*(?:await\s+)?({_NAME}(?:\s*\.\s*{_NAME})*)\s*\(")
_LOOKUP = re.compile(rf"\s*{_NAME}(?:\s*\.\s*{_NAME})*\s*(?:\[[^\]]+\]|\.\s*{_NAME})\s*;?\s*$")
_IDENT = re.compile(rf"\s*({_NAME})\s*;?\s*$")
_BRANCH = re.compile(r"(?:if|switch|for|while)\b")


@dataclasses.dataclass
class Sources:
    """Where a value followed back can have come from (spans with why and function).

    Attributes:
        definite: ``return`` statements that give nothing.
        possible: lookups (``table[key]``) that give undefined for a missing key.
        passed: the statements the value went through on the way.
        silent: app functions whose result was taken that have no ``return`` at all.
    """

    definite: list = dataclasses.field(default_factory=list)
    possible: list = dataclasses.field(default_factory=list)
    passed: list = dataclasses.field(default_factory=list)
    silent: list = dataclasses.field(default_factory=list)
    seen: set = dataclasses.field(default_factory=set)

    def full(self) -> bool:
        return len(self.definite) + len(self.possible) >= MAX_ENDS


def trace_expression(g, expr: str, k: int, what: str, out: Sources, depth: int = 1) -> None:
    """Follows the value of ``expr``, an expression of flow statement ``k``, into ``out``:
    a call of an app function to its returns, a variable to its settings, a lookup ends."""
    if depth > MAX_DEPTH or out.full():
        return
    st = g.flow.statements[k]
    call = _CALL.match(expr)
    if call:
        name = re.split(r"\s*\.\s*", call.group(1))[-1]
        for t in sorted(st.calls):
            if g.functions[t].name == name:
                trace_returns(g, t, what, out, depth + 1)
        return
    if _LOOKUP.match(expr):
        out.possible.append((st.span, f"{what} comes from a lookup here, which gives "
                             "undefined for a missing key", st.function))
        return
    ident = _IDENT.match(expr)
    if ident:
        trace_variable(g, ident.group(1), k, what, out, depth + 1)


def trace_returns(g, fn: int, what: str, out: Sources, depth: int = 1) -> None:
    """Follows the values app function ``fn`` returns (those that can run) into ``out``."""
    if ("fn", fn) in out.seen or depth > MAX_DEPTH:
        return
    out.seen.add(("fn", fn))
    name, found = g.functions[fn].qualname or "the function", False
    for j, st in enumerate(g.flow.statements):
        if st.function != fn or not st.returns or any(
                s <= st.span[0] < e for s, e in g.dead_code):  # after a `return`: never runs
            continue
        found, text = True, g.text[st.span[0]:st.span[1]]
        if _EMPTY.match(text):
            out.definite.append((st.span, f"returns no value from {name}, whose result "
                                 f"becomes {what}", fn))
            continue
        out.passed.append((st.span, f"returns the value of {name} that becomes {what}", fn))
        trace_expression(g, text[len("return"):], j, what, out, depth)
    if not found and g.text.startswith("{", g.functions[fn].body[0]):  # `x => x * 2`: a value
        out.silent.append(fn)


def trace_variable(g, name: str, k: int, what: str, out: Sources, depth: int = 1) -> None:
    """Follows variable ``name`` as flow statement ``k`` reads it into ``out``: the
    statements that set it in the same function (anywhere, for a global)."""
    st = g.flow.statements[k]
    set_by = re.compile(rf"(?<![\w$.]){re.escape(name)}\s*=(?!=)\s*")
    for v in sorted(v for v in st.uses if g.variables[v].name == name):
        if ("var", v) in out.seen:
            continue
        out.seen.add(("var", v))
        for j, other in enumerate(g.flow.statements):
            if j == k or v not in other.defs or not (
                    g.variables[v].is_global or other.function in (st.function, None)):
                continue
            m = set_by.search(g.text, other.span[0], other.span[1])
            if m is not None:
                out.passed.append((other.span, f"sets {name}, which becomes {what}",
                                   other.function))
                trace_expression(g, g.text[m.end():other.span[1]], j, what, out, depth)


def gives_nothing(c: _Case, callee: int, reader: str, by: str) -> Ops:
    """What makes app function ``callee`` return nothing, followed through the calls and
    variables it returns (``blame_sources``)."""
    out = Sources()
    trace_returns(c.g, callee, reader, out)
    yield from blame_sources(c, out, by)


def passed_values(c: _Case, frames: list[dict], fn, index: int, reader: str, by: str) -> Ops:
    """What the call of ``fn`` on the stack's next frame (``frames[1]``) passed as its
    ``index``-th argument, followed back (``blame_sources``); an argument that is itself a
    parameter of the caller is followed to the caller's caller, down the stack."""
    g, out = c.g, Sources()
    for depth in range(1, len(frames)):
        passed = _passed_argument(c, frames[depth]["offset"], fn, index)
        if not passed:
            break
        k, expr = passed
        caller = g.flow.statements[k].function
        ident = _IDENT.match(expr)
        params = g.functions[caller].params if caller is not None else []
        if ident is None or ident.group(1) not in params or depth + 1 >= len(frames):
            trace_expression(g, expr, k, reader, out)
            break
        out.passed.append((g.flow.statements[k].span, f"passes on {ident.group(1)}, which "
                           f"becomes {reader}", caller))
        fn, index = g.functions[caller], params.index(ident.group(1))
    yield from blame_sources(c, out, by)


def blame_sources(c: _Case, out: Sources, by: str) -> Ops:
    """Blames what ends the paths: the returns that give nothing directly, the lookups
    directly only when no such return was found (else as context: they may give a value),
    the functions that return nothing at all as context, and, when something ended a path,
    the statements on the way as context."""
    ends = out.definite or out.possible
    for span, why, fn in ends[:MAX_ENDS]:
        yield from c.add("dir", span, why, by, fn)
    for fn in out.silent:
        yield from c.function("ctx", fn, f"{c.g.functions[fn].qualname or 'the function'} "
                              "returns nothing, and its result is read", by)
    if not ends:
        return
    for span, why, fn in (out.possible if out.definite else []) + out.passed:
        yield from c.add("ctx", span, why, by, fn)


def _named(c: _Case, stmt: Span) -> set[str]:
    """The variables an exception at ``stmt`` names: the one called (``f is not a
    function``), or those whose property it could not read (``x.prop``, ``x?.prop``)."""
    exc = exception_of(c.d)
    unbound = exc.get("unbound_name") or ""
    if re.fullmatch(_NAME, unbound):
        return {unbound}
    prop = exc.get("read_property")
    if not exc.get("null_read") or not prop:
        return set()
    code = c.g.text[stmt[0]:stmt[1]]
    return set(re.findall(rf"(?<![\w$.])({_NAME})\s*\??\.\s*{re.escape(prop)}(?![\w$])", code))


def _param_reads(c: _Case, k: int) -> list[tuple[str, int]]:
    """The parameters of statement ``k``'s function that it reads, with their positions."""
    g = c.g
    st = g.flow.statements[k]
    fn = None if st.function is None else g.functions[st.function]
    if fn is None:
        return []
    names = {g.variables[v].name for v in st.uses if g.variables[v].kind == "param"}
    return [(p, i) for i, p in enumerate(fn.params) if p in names]


def _passed_argument(c: _Case, at: int, fn, index: int) -> tuple[int, str] | None:
    """The flow statement at ``at`` (a caller's frame) and the text of the ``index``-th
    argument of its call of ``fn``."""
    g = c.g
    k = g.flow.statement_at(at)
    if k is None or not fn.name:
        return None
    st = g.flow.statements[k]
    m = re.compile(r"(?<![\w$])" + re.escape(fn.name) + r"\s*\(").search(
        g.text, st.span[0], st.span[1])
    args = _arguments(g.text, m.end(), st.span[1]) if m else []
    return (k, args[index]) if index < len(args) else None


@rule("errors.skipped_settings")
def skipped_settings(c: _Case, stmt: Span, by: str) -> Ops:
    """A local read unset (``f is not a function``, a property of undefined) whose every
    setting in its function sits under a condition: no branch that sets it ran, so the
    heads of those conditions are blamed directly and the settings as context."""
    k = c.g.flow.statement_at(stmt[0])
    named = _named(c, stmt)
    if k is None or not named:
        return
    g = c.g
    st = g.flow.statements[k]
    if st.function is None:
        return
    for v in sorted(st.uses):
        var = g.variables[v]
        if var.name not in named or var.is_global or var.kind not in ("let", "var"):
            continue
        decl = g.text[var.decl[0]:var.decl[1]] if var.decl else ""
        if "=" in decl:  # declared with a value: not unset
            continue
        sets = [j for j, other in enumerate(g.flow.statements)
                if j != k and v in other.defs and other.function == st.function
                and not other.span[0] <= var.decl[0] < other.span[1]]
        heads = {_condition_of(g, j, k) for j in sets}
        if not sets or None in heads:
            continue
        for h in sorted(heads):
            yield from c.add("dir", g.flow.statements[h].head, f"decides whether {var.name} "
                             "is set; no branch that sets it ran", by, st.function)
        for j in sets:
            yield from c.add("ctx", g.flow.statements[j].span, f"sets {var.name}, but did "
                             "not run", by, st.function)


def _condition_of(g, j: int, k: int) -> int | None:
    """The outermost compound statement around statement ``j`` that does not hold statement
    ``k`` (the read): the condition that decides whether ``j`` runs before ``k``."""
    flow = g.flow
    p, found = flow.statements[j].parent, None
    while p is not None:
        s, e = flow.statements[p].span
        if s <= flow.statements[k].span[0] < e:
            break
        found = p
        p = flow.statements[p].parent
    if found is None or not _BRANCH.match(g.text, flow.statements[found].span[0]):
        return None
    return found


@rule("errors.library_parameters")
def library_parameters(c: _Case, stmt: Span, frames: list[dict], by: str) -> Ops:
    """An exception raised inside a library called by a statement that hands it parameters
    of its function: the values came from the caller, so the caller's call (the next in-app
    frame) is blamed directly, and the arguments it passed are followed back."""
    raw = c.d.get("frames") or ()
    g = c.g
    k = g.flow.statement_at(stmt[0])
    if not raw or raw[0].get("in_app") or len(frames) < 2 or k is None:
        return
    st = g.flow.statements[k]
    params = _param_reads(c, k)
    if st.function is None or not params:
        return
    caller = frames[1]["offset"]
    passed = [(name, _passed_argument(c, caller, g.functions[st.function], index))
              for name, index in params]
    passed = [(name, p) for name, p in passed if p]
    if not passed:  # not a call of the function by name (a callback): no caller to blame
        return
    ck = passed[0][1][0]
    names = ", ".join(name for name, _ in passed)
    yield from c.add("dir", g.flow.statements[ck].head, f"passes {names}, which the failing "
                     "library call received", by, g.flow.statements[ck].function)
    out = Sources()
    for name, (j, expr) in passed:
        trace_expression(g, expr, j, f"the {name} handed to the library", out)
    yield from blame_sources(c, out, by)


_GUARD = re.compile(rf"if\s*\(\s*({_NAME}(?:\s*\.\s*{_NAME})*)\s*\)")


@rule("errors.guard_of_other")
def guard_of_other(c: _Case, stmt: Span, by: str) -> Ops:
    """A null read at ``stmt`` inside an ``if (y)`` that tests only whether another value is
    set: the block is guarded on ``y`` but reads the null ``x``, so the test of ``y`` (meant
    for ``x``) is blamed directly."""
    g = c.g
    k = g.flow.statement_at(stmt[0])
    named = _named(c, stmt) if exception_of(c.d).get("null_read") else set()
    if k is None or not named:
        return
    p = g.flow.statements[k].parent
    while p is not None:
        head = g.flow.statements[p].head
        m = _GUARD.fullmatch(g.text, head[0], head[1])
        if m is not None:
            tested = re.split(r"\s*\.\s*", m.group(1))[0]
            if tested not in named:
                yield from c.add("dir", head, f"tests {m.group(1)}, but the block it guards "
                                 f"reads {', '.join(sorted(named))}, which was not set", by,
                                 g.flow.statements[p].function)
            return
        p = g.flow.statements[p].parent
