"""Null reads of state that no code gives a value (``evaluators.localize.spans``).

``Cannot read properties of undefined`` at a statement that reads program state no code ever
sets (a variable only declared, or declared empty, and never assigned; an object property no
code assigns) means an assignment is missing. A missing statement has no span of its own, so
the rule blames where it belongs: among the assignments of its siblings (variables declared
in the same statement, other properties of the same object: code sets them together; the
run of them with the gaps between, and the statements just before and after it), just
before the read on each stack frame (the path that reached the read without setting it),
and just before the first read of the state that ran earlier on that path without failing
(``scene.add(group)`` before ``group.clear()``: the value was missing already there). The
start-up functions on the stack, where state is usually set, are context, and what they ran
before their frame's statement is direct blame (the missing assignment belongs among it). An
object only ever empty, none of whose properties is set, has as siblings the state declared
just before and after it. A local of a function on the stack that is built
(``shape.lineTo(...)``) and never used before the read means the statement using it (which
would set the state) is missing: the statement after its last use is blamed.
"""

from __future__ import annotations

import re

from evaluators.localize.rules import rule
from evaluators.localize.graph import CodeGraph
from evaluators.localize.model import Span, StateVar
from evaluators.localize.spans_common import _Case, _fn_at, Ops, exception_of
from evaluators.localize.spans_common import neighbour_statement as _neighbour

# A declarator that leaves its variable without a value, or with an empty container.
_NO_VALUE = re.compile(r"[\w$]+\s*(?:=\s*(?:null|undefined|void\s+0))?\s*")
_EMPTY = re.compile(r"[\w$]+\s*=\s*(?:\[\s*\]|\{\s*\}|new\s+(?:Map|Set|Array|Object)\s*\(\s*\))\s*")
_ASSIGN = re.compile(r"\s*(?:(?:[-+*/%&|^]|\*\*|<<|>>>?|&&|\|\||\?\?)?=(?!=)|\+\+|--)")
_DECLARATION = re.compile(r"(?:export\s+)?(?:async\s+)?(?:function|class)\b")
_METHOD_CALL = re.compile(r"\s*\??\.\s*[A-Za-z_$][\w$]*\s*\(")  # `.moveTo(` after a read


def _assigned(g: CodeGraph, v: StateVar) -> bool:
    """Whether code sets ``v``: a property by any write or a literal key; a variable by an
    assignment (mutating calls such as ``v.push(x)`` need a value already)."""
    if "." in v.name:
        return bool(v.writes) or v.decl is not None
    for s, e in v.writes:
        site = g.text[s:e]
        if site.startswith(("[", "{", "++", "--")) or (
                site.startswith(v.name) and _ASSIGN.match(site, len(v.name))):
            return True
    return False


def _root_value(g: CodeGraph, v: StateVar) -> str:
    """``set``, ``empty`` (only ever an empty container) or ``none`` (never a value)."""
    if _assigned(g, v):
        return "set"
    decl = "" if v.decl is None else g.text[v.decl[0]:v.decl[1]]
    if v.decl is None or _NO_VALUE.fullmatch(decl):
        return "none"
    return "empty" if _EMPTY.fullmatch(decl) else "set"


def _unset_in(g: CodeGraph, stmt: Span) -> list[StateVar]:
    """State ``stmt`` reads that no code sets: a variable never given a value; a property
    (``a.b`` of a read of ``a.b.c``) or an element (``a[i]``) of a variable that is only ever
    an empty container."""
    by_name = {v.name: v for v in g.state_vars}
    out: dict[str, StateVar] = {}
    for v in g.state_vars:
        reads = [a for a, _ in v.reads if stmt[0] <= a < stmt[1]]
        parts = v.name.split(".")
        root = by_name.get(parts[0])
        if not reads or root is None:
            continue
        value = _root_value(g, root)
        if value == "none":
            out[root.name] = root
        elif value == "empty" and len(parts) > 1:
            name = ".".join(parts[:2])
            p = by_name.get(name)
            if p is None or not _assigned(g, p):
                out[name] = p or StateVar(name, parts[0], None, (), ())
        elif value == "empty" and any(
                re.match(r"\s*\[", g.text[a + len(v.name):a + len(v.name) + 4]) for a in reads):
            out[root.name] = root
    return list(out.values())


def _siblings(g: CodeGraph, unset: list[StateVar]) -> list[StateVar]:
    """State set together with the unset: variables declared in the same statement, other
    properties of the same object."""
    decls = {g.enclosing_statement(v.decl[0]) for v in unset if v.decl and "." not in v.name}
    parents = {v.name.rsplit(".", 1)[0] for v in unset if "." in v.name}
    # An object only ever empty, none of whose properties is set: the state declared just
    # before and after it is set with it.
    roots = [v for v in g.state_vars if v.name in parents and v.decl]
    for v in roots if not any(w.name.split(".")[0] in parents and _assigned(g, w)
                              for w in g.state_vars if "." in w.name) else ():
        stmt = g.enclosing_statement(v.decl[0])
        for after in (False, True):
            near = None if stmt is None else _neighbour(g, stmt, after)
            if near is not None and re.match(r"(?:let|var|const)\s", g.text[near[0]:near[1]]):
                decls.add(near)
    names = {v.name for v in unset}
    out = []
    for v in g.state_vars:
        if v.name in names or not _assigned(g, v):
            continue
        if "." in v.name and v.name.rsplit(".", 1)[0] in parents:
            out.append(v)
        elif "." not in v.name and v.decl and g.enclosing_statement(v.decl[0]) in decls - {None}:
            out.append(v)
    return out


@rule("unset.sibling_runs")
def _sibling_runs(c: _Case, unset: list[StateVar], frames: dict, names: str, by: str) -> Ops:
    """The run of statements assigning the siblings in each function, gaps included, and the
    statements just before and after it: where the missing assignment belongs. In a function
    on the stack only the assignments before its frame count (those ran before the read)."""
    g = c.g
    per_fn: dict[int | None, list[Span]] = {}
    for v in _siblings(g, unset):
        for w in v.writes:
            stmt = g.enclosing_statement(w[0])
            fn = _fn_at(g, w[0])
            if stmt is not None and (fn not in frames or w[0] < frames[fn]):
                per_fn.setdefault(fn, []).append(stmt)
    for fn, stmts in per_fn.items():
        run = (min(s for s, _ in stmts), max(e for _, e in stmts))
        why = f"sets the state set with {names}, which no code sets"
        for span in [run] if run[1] - run[0] <= c.cfg.run_limit else stmts:
            yield from c.add("dir", span, why, by)
        for after in (False, True):
            near = _neighbour(g, run, after)
            if near is not None and near[1] - near[0] <= c.cfg.path_limit:
                where = "after" if after else "before"
                yield from c.add("dir", near, f"{why} (the statement {where} them)", by)


def _first_read(g: CodeGraph, reads: list[int], fn: int | None, before: int,
                depth: int = 2, seen: frozenset = frozenset()) -> int | None:
    """Offset of the read among ``reads`` that runs first in ``fn`` up to ``before``: in its
    own code, or in a function an earlier call of it runs (``depth`` calls deep), in the
    order the code runs; None if none does."""
    lo = g.functions[fn].span[0] if fn is not None else g.region[0]
    events = [(a, None) for a in reads if lo <= a < before and _fn_at(g, a) == fn]
    if depth > 0:
        events += [(call.span[0], call) for call in g.calls_from(fn)
                   if call.kind != "reference" and lo <= call.span[0] < before]
    for at, call in sorted(events, key=lambda ev: ev[0]):
        if call is None:
            return at
        for t in call.targets:
            if t != fn and t not in seen:
                found = _first_read(g, reads, t, g.functions[t].span[1], depth - 1,
                                    seen | {fn})
                if found is not None:
                    return found
    return None


@rule("unset.earlier_reads")
def _earlier_reads(c: _Case, unset: list[StateVar], offsets: list[int], names: str,
                   by: str) -> Ops:
    """The first read of the unset state on the path, before the failing one, that did not
    fail (it passed the missing value on), and the statement just before it."""
    g = c.g
    for k, off in enumerate(offsets):
        stmt = g.enclosing_statement(off)
        if stmt is None:
            continue
        names_set = {v.name for v in unset}
        reads = [a for v in g.state_vars if v.name in names_set for a, _ in v.reads]
        at = _first_read(g, reads, _fn_at(g, off), stmt[0])
        if at is None:
            continue
        first = g.enclosing_statement(at)
        if first is None or first[1] - first[0] > c.cfg.path_limit:
            continue
        yield from c.add(
            "dir", first, f"reads {names} before it is set, on the path to the failing "
            f"read (frame {k})", by)
        prev = _neighbour(g, first, False)
        if prev is not None and prev[1] - prev[0] <= c.cfg.path_limit:
            yield from c.add(
                "dir", prev, f"runs just before the first read of {names} (frame {k}), "
                "where it should have been set", by)
        return


@rule("unset.unset_state")
def _unset_state(c: _Case, stmt: Span, offsets: list[int], by: str) -> Ops:
    """A null read of state that no code sets: where the missing assignment belongs.

    Args:
        c: The case (a page_error).
        stmt: The failing statement.
        offsets: In-app stack frame offsets, top first (just the statement's without a
            stack).
        by: Evidence source.
    """
    if exception_of(c.d).get("null_read"):
        yield from unset_state_at(c, stmt, offsets, by)


@rule("unset.unset_state_at")
def unset_state_at(c: _Case, stmt: Span, offsets: list[int], by: str) -> Ops:
    """``_unset_state`` for a statement known to have read a missing value (a null read, or
    the arguments that started a recursion that never ended)."""
    g = c.g
    unset = _unset_in(g, stmt)
    if not unset:
        return
    names = ", ".join(v.name for v in unset)
    frames: dict[int | None, int] = {}
    for off in offsets:  # each function on the stack, with where it was when the read failed
        frames.setdefault(_fn_at(g, off), off)
    yield from _sibling_runs(c, unset, frames, names, by)
    yield from _earlier_reads(c, unset, offsets, names, by)
    for fn, off in frames.items():
        if fn is not None:
            yield from _unconsumed_locals(c, fn, off, names, by)
    for k, off in enumerate(offsets):
        inner = g.enclosing_statement(off)
        prev = None if inner is None else _neighbour(g, inner, False)
        if prev is not None and prev[1] - prev[0] <= c.cfg.path_limit and not _DECLARATION.match(
                g.text, prev[0]):  # a declaration there runs nothing
            yield from c.add(
                "dir", prev, f"runs just before the read of {names} (frame {k}) and does not "
                "set it, which no code does", by)
        fn = _fn_at(g, off)
        if fn is not None and g.functions[fn].name in c.cfg.entry_functions:
            yield from c.function(
                "ctx", fn, f"start-up function on the stack, where {names} is not set",
                by)
            yield from _start_up_before(c, fn, off, names, by)


@rule("unset.start_up_before")
def _start_up_before(c: _Case, fn: int, off: int, names: str, by: str) -> Ops:
    """The statements of a start-up function (``setup``, ``init``) that ran before its
    frame's statement, nearest first up to ``c.cfg.run_limit`` characters: state is set there,
    and one of them, or one missing among them, should have set the unset state."""
    g = c.g
    body = g.functions[fn].body
    outer = [(s, e) for s, e in g.statements if body[0] <= s <= off < e <= body[1]
             and _fn_at(g, s) == fn]
    if not outer:
        return
    at, total = max(outer, key=lambda sp: sp[1] - sp[0]), 0
    for _ in range(c.cfg.run_statements):
        at = _neighbour(g, at, False)
        if at is None or total + at[1] - at[0] > c.cfg.run_limit:
            return
        total += at[1] - at[0]
        if not _DECLARATION.match(g.text, at[0]):
            yield from c.add("dir", at, f"start-up code that ran before the read of {names} (in "
                             f"{g.functions[fn].name}) and does not set it", by)


@rule("unset.unconsumed_locals")
def _unconsumed_locals(c: _Case, fn: int, before: int, names: str, by: str) -> Ops:
    """Locals of a function on the stack that are built (``shape.lineTo(...)``) and then never
    used (never passed, returned, assigned or read for a property) before its frame: the use
    that would have set the unset state (``geometry = new Geometry(shape)``) is missing just
    after the statement of their last reference."""
    g = c.g
    lo, hi = g.functions[fn].span
    for v, var in enumerate(g.variables):
        if var.is_global or var.kind not in ("let", "const", "var") or var.decl is None or \
                not lo <= var.decl[0] < hi or _fn_at(g, var.decl[0]) != fn:
            continue
        reads = [r.span for r in g.flow.refs_of(v) if not r.write]
        if not reads or reads[-1][1] > before or not all(
                _METHOD_CALL.match(g.text, e) for _, e in reads):
            continue
        body = g.functions[fn].body
        last = [(s, e) for s, e in g.statements
                if body[0] < s <= reads[-1][0] < e <= body[1] and _fn_at(g, s) == fn]
        nxt = _neighbour(g, max(last, key=lambda sp: sp[1] - sp[0]), True) if last else None
        if nxt is not None and nxt[1] - nxt[0] <= c.cfg.path_limit and nxt[0] < before:
            yield from c.add(
                "dir", nxt, f"follows the last use of {var.name}, which is built and never "
                f"used: its use, which may set {names}, is missing here", by)
