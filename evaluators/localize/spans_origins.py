"""Where a bad value came from (``evaluators.localize.spans``): data flow back from a read.

An exception at a statement is often only where a bad value arrived: the statement that made
it is elsewhere, one or more calls away. ``trace_expression``, ``trace_returns`` and
``trace_variable`` follow a value back through the app's own code by its data flow alone (no
names are consulted): a variable to the statements that set it, a call's result to the
``return`` statements of the function called, recursively. ``blame_sources`` blames what ends
the paths: a ``return`` that gives nothing directly, a lookup (``table[key]``) that gives
undefined for a missing key directly when no such return was found, and the statements on the
way as context. ``errors.returned_nothing`` and ``errors.missing_argument`` (``spans_errors``)
start these walks from a variable set by a call (``gives_nothing``) and from the argument a
caller passed, followed down the stack while it is the caller's own parameter
(``passed_values``). ``errors.library_inputs`` follows the other way, from a call into a
library that threw to the statements that built what it was handed (``built_objects``).
"""

from __future__ import annotations

import dataclasses
import re

from evaluators.localize.rules import rule
from evaluators.localize.spans_calls import _arguments
from evaluators.localize.spans_common import Ops, _Case, lexical_scope

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
# A construction, or a call handed a value: what builds an object a library reads.
_HANDS = re.compile(rf"\bnew\s+{_NAME}|{_NAME}\s*\(\s*[^)\s]")


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
    statements that set it in the same function or one around it (anywhere, for a
    global)."""
    st = g.flow.statements[k]
    scope = lexical_scope(g, st.function)
    set_by = re.compile(rf"(?<![\w$.]){re.escape(name)}\s*=(?!=)\s*")
    for v in sorted(v for v in st.uses if g.variables[v].name == name):
        if ("var", v) in out.seen:
            continue
        out.seen.add(("var", v))
        for j, other in enumerate(g.flow.statements):
            if j == k or v not in other.defs or not (
                    g.variables[v].is_global or other.function in scope):
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


@rule("errors.library_got_nothing")
def library_got_nothing(c: _Case, top: int, by: str) -> Ops:
    """An exception raised inside a library, called at offset ``top`` (the top in-app frame):
    an argument of that call followed back (``trace_expression``) to an app function's
    ``return`` that gives no value, or to an app function with no ``return`` at all: the
    library was handed nothing where it expected a value. Those returns are blamed directly,
    the silent functions and the statements on the way as context. Lookups that may give
    undefined are not followed up here: a library rejects defined values too."""
    frames = c.d.get("frames") or ()
    g = c.g
    k = g.flow.statement_at(top)
    if not frames or frames[0].get("in_app") or k is None:
        return
    end = g.flow.statements[k].span[1]
    paren = g.text.find("(", top, end)
    out = Sources()
    for arg in _arguments(g.text, paren + 1, end) if paren >= 0 else ():
        trace_expression(g, arg, k, "an argument of the failing library call", out)
    if not (out.definite or out.silent):
        return
    for span, why, fn in out.definite[:MAX_ENDS]:
        yield from c.add("dir", span, why, by, fn)
    for fn in out.silent:
        yield from c.function("ctx", fn, f"{g.functions[fn].qualname or 'the function'} "
                              "returns nothing, and its result is handed to the library", by)
    for span, why, fn in out.passed:
        yield from c.add("ctx", span, why, by, fn)


# How many hops from the call's arguments (a scene, an object added to it, what built that
# object) and how many statements are followed: enough for a scene graph two containers deep.
BUILT_DEPTH = 3
MAX_BUILT = 40


def built_objects(g, k: int) -> list[tuple[Span, str, int | None]]:
    """The statements that built the values flow statement ``k`` hands over, breadth first:
    for each variable it reads, the statements that set it or a property of it, and the method
    calls on it that hand it values (``scene.add(mesh)``, ``geometry.setAttribute(...)``),
    then the same for the variables those read (``mesh = new Mesh(geometry, material)``),
    ``BUILT_DEPTH`` hops and ``MAX_BUILT`` statements at most. Only statements that construct an
    object or hand a call values are followed; the rest (a flag set on a built object,
    ``mesh.visible = on``, which seldom breaks the library that reads it) come last, while the
    budget lasts. Compound statements are left out (their bodies are statements of their
    own)."""
    st0 = g.flow.statements[k]

    def scoped(v: int, fn: int | None) -> tuple[int, int | None]:
        # A local is followed in the function of the statement that read it.
        return (v, None if g.variables[v].is_global else fn)

    frontier = {scoped(v, st0.function) for v in st0.uses}
    seen, taken, out, flags = set(), {k}, [], []
    for hop in range(1, BUILT_DEPTH + 1):
        found = []
        for v, fn in sorted(frontier - seen, key=lambda x: (x[0], -1 if x[1] is None else x[1])):
            seen.add((v, fn))
            name = g.variables[v].name
            built = re.compile(rf"(?<![\w$.]){re.escape(name)}(?:\s*\.\s*{_NAME})*\s*"
                               rf"(?:=(?!=)|\(\s*[^)\s])")
            for j, st in enumerate(g.flow.statements):
                if j not in taken and st.head == st.span and v in st.uses | st.defs and (
                        g.variables[v].is_global or st.function == fn) and built.search(
                        g.text, st.span[0], st.span[1]):
                    taken.add(j)
                    item = (st.span, f"builds {name}, which the failing library call was "
                            f"handed ({hop} hops away)", st.function)
                    hands = _HANDS.search(g.text, st.span[0], st.span[1])
                    (found if hands else flags).append((j, item))
        frontier = set()
        for j, item in sorted(found)[:MAX_BUILT - len(out)]:
            out.append(item)
            st = g.flow.statements[j]
            frontier |= {scoped(u, st.function) for u in st.uses | st.defs}
        frontier -= seen
    out += [item for _, item in flags][:MAX_BUILT - len(out)]
    return out


@rule("errors.library_inputs")
def library_inputs(c: _Case, stmt: Span, by: str) -> Ops:
    """An exception raised inside a library, at a call of the app that handed it objects the
    app built earlier (a scene of meshes, each made of a geometry and a material): the library
    read something wrong in them, and which part the stack cannot say. The statements that
    built them (``built_objects``) are context: one of them gave the library a value of the
    wrong kind, or in the wrong place."""
    frames = c.d.get("frames") or ()
    if not frames or frames[0].get("in_app"):
        return
    k = c.g.flow.statement_at(stmt[0])
    if k is None:
        return
    for span, why, fn in built_objects(c.g, k):
        yield from c.add("ctx", span, why, by, fn)


def render_calls(g, holders) -> list[int]:
    """Flow statements that hand one of the elements ``holders`` to a call as an argument:
    by its id or class (``Plotly.react('plot', ...)``, ``d3.select('#plot')``) or through a
    variable a lookup of it set (``new Chart(canvas, ...)``). The lookups themselves are left
    out: they find the container, they do not draw in it."""
    queries = [q for q in g.dom_queries if set(q.elements) & set(holders)]
    names = {n for x in holders for n in (g.elements[x].id, *g.elements[x].classes) if n}
    found = [re.compile(r"[(,]\s*(['\"`])[#.]?" + re.escape(n) + r"\1") for n in sorted(names)]
    found += [re.compile(r"[(,]\s*" + re.escape(v) + r"\s*[,)]")
              for v in sorted({q.variable for q in queries if q.variable})]
    out: list[int] = []
    for s in g.scripts:
        for pattern in found:
            for m in pattern.finditer(g.text, s.span[0], s.span[1]):
                if any(a <= m.start() < b for a, b in (q.span for q in queries)):
                    continue
                k = g.flow.statement_at(m.start())
                if k is not None and k not in out:
                    out.append(k)
    return sorted(out)


@rule("probe.library_render")
def library_render(c: _Case, holders, what: str) -> Ops:
    """A failed check of X that a library draws (no element of the HTML, no write of the
    app's): the calls that hand the containers X's locator names to a library (the library
    made X there), directly, and the backward slice of each call (``Flow.slice``: what built
    the values it was handed, through the app's functions and the loops and branches they ran
    in) as context, ``MAX_BUILT`` statements at most."""
    flow = c.g.flow
    for k in render_calls(c.g, holders):
        yield from c.statement("dir", flow.statements[k].span, f"hands the container of {what} "
                               "to the library that draws it", flow.statements[k].function)
        sliced = flow.slice({k: "the call"}, lambda fn: True, limit=MAX_BUILT + 1)
        for j, why in sliced.items():
            for span in flow.blame(j) if j != k else ():
                yield from c.add("ctx", span, f"{why}: the data drawn as {what}", "graph",
                                 flow.statements[j].function)
