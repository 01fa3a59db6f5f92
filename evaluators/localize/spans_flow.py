"""Data-flow narrowing of grounded probe-failure blame (``evaluators.localize.spans``).

The grounded rules blame whole functions: the writers of the checked element X and the
handlers of the acted-on element Y that ran. Most of their code does not touch X, and every
blamed character dilutes the weight on the faulty ones. With the graph's statement-level
flow (``flow``) this module blames instead the backward slice of the statements that wrote X
in functions that ran: the statements whose values reach the write, the conditions that
decide whether it runs and the calls that led to it, in the functions that ran or can have
run at load (coverage, read after load, does not see those). The whole functions the slice
narrows move to the context, and so do the statements of the slice that lie in blocks block
coverage saw skipped during the probe (a branch not taken: its statements cannot have made
the value the probe read then, though one may have run at load and left state behind).
"""

from __future__ import annotations

import re

from evaluators.localize.rules import rule
from evaluators.localize.graph import CodeGraph
from evaluators.localize.spans_common import (
    _CHECK_WRITES, _bindings_for, _Case, _Failure, _norm, _write_key, _write_keys, _writes,
    Ops,
)
from evaluators.localize.spans_writers import _in_app, relevant_writes

_LOAD_EVENTS = frozenset(("load", "domcontentloaded", "readystatechange"))
_P5_START = frozenset(("setup", "preload"))
_IDLE = "; in a block that did not run during the probe"
_STALE = ("; it ran at load, and the action's handler, which ran, did not run it again: the "
          "value is the load's")


def load_functions(g: CodeGraph) -> set[int]:
    """Functions that can run while the page loads: those top-level code calls, load
    handlers, p5's ``setup`` and ``preload`` (of a sketch handed to ``new p5`` too), and the
    functions they call or hand to an array method (``steps.forEach((s) => ...)`` runs its
    callback on the spot)."""
    found = {t for call in g.calls if call.caller is None and call.kind != "reference"
             for t in call.targets}
    found |= {b.handler for b in g.event_bindings if b.handler is not None
              and b.global_target and (b.event or "").lower() in _LOAD_EVENTS}
    found |= {f.index for f in g.functions if f.parent is None and f.name in _P5_START}
    found |= _sync_callbacks(g, {None}) | _p5_sketches(g)
    frontier = set(found)
    while frontier:
        frontier = ({t for fi in frontier for call in g.calls_from(fi)
                     if call.kind != "reference" for t in call.targets}
                    | _sync_callbacks(g, frontier)
                    | {f.index for f in g.functions if f.parent in frontier
                       and f.name in _P5_START}) - found  # instance mode's `p.setup = ...`
        found |= frontier
    return found


def _p5_sketches(g: CodeGraph) -> set[int]:
    """The sketch functions top-level code hands to ``new p5(...)``, which calls them."""
    made = [c.span for c in g.calls if c.kind == "new" and c.callee == "p5" and c.caller is None]
    inside = lambda at: any(a <= at < b for a, b in made)  # noqa: E731
    return ({t for c in g.calls if c.kind == "reference" and inside(c.span[0]) for t in c.targets}
            | {f.index for f in g.functions if f.parent is None and inside(f.span[0])})


_SYNC_CALLBACK = re.compile(r"\.\s*(?:forEach|map|filter|reduce|reduceRight|some|every|find|"
                            r"findIndex|findLast|flatMap|sort)\s*\(\s*$")


def _sync_callbacks(g: CodeGraph, parents: set[int | None]) -> set[int]:
    """The functions written inline as the callback of an array method in ``parents`` (None:
    the top level): they run when the method is called."""
    return {f.index for f in g.functions if f.kind in ("arrow", "expression")
            and f.parent in parents
            and _SYNC_CALLBACK.search(g.text, max(0, f.span[0] - 80), f.span[0])}


def _call_path(g: CodeGraph, functions: set[int], ran: set[int], depth: int = 3) -> dict:
    """Call statements, in functions that ran, that led to ``functions`` (up to ``depth``
    calls back): statement index -> why."""
    flow, out = g.flow, {}
    seen, frontier = set(functions), set(functions)
    for _ in range(depth):
        nxt = set()
        for fn in frontier:
            for k in flow.callers(fn):
                caller = flow.statements[k].function
                if caller in ran:
                    out.setdefault(k, f"calls {g.functions[fn].qualname or 'a function'}, "
                                      "which sets the checked value")
                    if caller not in seen:
                        seen.add(caller)
                        nxt.add(caller)
        frontier = nxt
    return out


def _seed_writes(g: CodeGraph, f: _Failure) -> list[tuple]:
    """``(write, what it writes, whether only its target matters)`` for the check: X's
    writes of what the check reads; for X made by script, what fills the containers its
    locator names; else the writes through a variable named like X (or its container);
    when no code writes X that way, the writes of that kind to other elements, of which only
    the element written matters (one of them may miss X, not compute badly)."""
    keys = _write_keys(f)
    writes = _writes(g, f.targets, keys)
    if writes:
        return [(w, "the checked element", False) for w in writes]
    if not f.targets:
        holders = [e.index for e in g.elements
                   if e.id in f.outer_names or set(e.classes) & set(f.outer_names)]
        keys = _CHECK_WRITES["count"]
        return [(w, "a container of the checked element", False)
                for w in _writes(g, holders, keys)] or _named_writes(g, holders, keys)
    named = _named_writes(g, f.targets, keys)
    if named:
        return named
    if keys is None or f.missing:
        return []
    return [(w, "another element than the checked one", True) for w in g.element_writes
            if _write_key(w) in keys]


def _named_writes(g: CodeGraph, elements, keys) -> list[tuple]:
    """``_seed_writes`` entries for the writes through a variable named exactly like one of
    ``elements``' ids (``ciphertextAlphabet.innerHTML`` for ``#ciphertext-alphabet``) that
    resolve elsewhere or nowhere: the writes the code meant for them when none resolves to
    them."""
    ids = {_norm(g.elements[x].id) for x in elements if g.elements[x].id}
    # Resolved to another element, the write went astray: only its target matters.
    return [(w, "an element the variable written is named after", bool(w.elements))
            for w in g.element_writes if not set(w.elements) & set(elements)
            and (keys is None or _write_key(w) in keys)
            and _norm(w.target_text.split(".")[-1]) in ids]


def _target_variables(g: CodeGraph, w) -> set[int]:
    """Variables read in the element expression of a write (``els.out`` of
    ``els.out.textContent = v``)."""
    start = w.span[0]
    end = g.text.find(w.target_text, start, w.span[1])
    end = start + len(w.target_text) if end == start else start
    return {r.variable for r in g.var_refs if start <= r.span[0] < end and not r.write}


def _skipped_blocks(c: _Case) -> list[tuple[int, int]]:
    """The blocks the probe's block coverage saw skipped (none in records without them)."""
    cov = c.d.get("coverage")
    blocks = cov.get("skipped") if isinstance(cov, dict) else None
    return [(int(b[0]), int(b[1])) for b in blocks or ()
            if isinstance(b, (list, tuple)) and len(b) == 2]


def _inside(span: tuple[int, int], blocks: list[tuple[int, int]]) -> bool:
    return any(s <= span[0] and span[1] <= e for s, e in blocks)


def _demote_skipped(c: _Case, sliced: dict[int, str], seeds: dict[int, str]) -> Ops:
    """Moves what lies in skipped blocks to the context: returns the statements of the slice
    there, and demotes direct blame already collected there. Only when some seed ran: when
    every checked write sat in a skipped block, that write not running is the failure."""
    blocks = _skipped_blocks(c)
    st = c.g.flow.statements
    idle = {k for k in sliced if _inside(st[k].span, blocks)}
    if all(k in idle for k in seeds):
        yield from skipped_by(c, [st[k].span for k in seeds], blocks)
        return set()
    yield from c.demote(lambda i: _inside(i.span, blocks), _IDLE)
    return idle


_JUMPS = ("return", "break", "continue", "throw")


@rule("flow.skipped_by")
def skipped_by(c: _Case, writes: list[tuple[int, int]], blocks: list[tuple[int, int]]) -> Ops:
    """Writes of the checked element that sat in blocks the probe skipped blame the jump
    (return, break, continue, throw) that ran right before such a block: control left there.
    (A branch not taken needs no rule: the slice holds the condition it depends on.)"""
    g = c.g
    for write in writes:
        inner = [b for b in blocks if b[0] <= write[0] and write[1] <= b[1]]
        if not inner:
            continue
        jump = _jump_before(g, min(inner, key=lambda b: b[1] - b[0])[0])
        if jump is not None:
            yield from c.add("dir", jump, "ran right before the block holding the element's "
                             "write, which did not run: control left there", "coverage")


def _jump_before(g: CodeGraph, at: int) -> tuple[int, int] | None:
    """The return, break, continue or throw statement that ends right before ``at`` (only
    blanks and semicolons between), or None."""
    ends = [s for s in g.statements if s[1] <= at and not g.text[s[1]:at].strip(" \t\r\n;")]
    if not ends:
        return None
    last = max(ends, key=lambda s: (s[1], s[0]))
    return last if g.text.startswith(_JUMPS, last[0]) else None


@rule("flow.narrow_to_slice", off=False)
def narrow_to_slice(c: _Case, f: _Failure, ran: set[int]) -> Ops:
    """Blames the slice of X's writes that ran (or, when none ran during the probe, of
    those made while the page loaded: X still shows their value); True when there was one.

    X's writes are found in the code; when none is, the write the page recorded seeds the
    slice (`traced_slice`). Long functions blamed whole whose statements the slice reaches
    are replaced by them.
    """
    g = c.g
    flow = g.flow
    loaded = load_functions(g)
    seeds: dict[int, str] = {}
    only: dict[int, set[int]] = {}
    writes = _seed_writes(g, f)
    for at_load, when in ((False, ran), (True, loaded | {None})):
        for w, what, target in writes:
            k = flow.statement_at(w.span[0], w.function) if w.function in when else None
            if k is not None:
                seeds[k] = f"writes {w.kind} {w.detail}".rstrip() + f" of {what}"
                if target:
                    only[k] = only.get(k, set()) | _target_variables(g, w)
        if seeds:
            break
    if not seeds:
        return (yield from traced_slice(c, f, ran))
    yield from _blame_slice(c, f, ran, seeds, only, at_load, loaded)
    return True


@rule("flow.traced_slice", off=False)
def traced_slice(c: _Case, f: _Failure, ran: set[int]) -> Ops:
    """Blames the slice of the statement that made X's latest recorded write
    (`BrowserConfig.trace_writers`), when the code shows no write of X: the value the probe
    read was written there, whatever the code calls X, and the slice follows what flowed
    into it (arguments, returns of the functions it called, the state they read). True when
    there was such a write.

    Only a fallback: tried first, before the writes found in the code, it blamed no more
    faults and spread the direct blame (benchmarks/localization.py, unseen faults, seed 0:
    hit@dir 63% either way, weight ratio 2.52x against 2.59x without it)."""
    seed = _traced_seed(c, f)
    if seed is None:
        return False
    k, why = seed
    yield from _blame_slice(c, f, ran, {k: why}, {},
                            c.g.flow.statements[k].function not in ran, load_functions(c.g))
    return True


def _traced_seed(c: _Case, f: _Failure) -> tuple[int, str] | None:
    """(statement, why) of the latest recorded write of what the failed check read."""
    writes = relevant_writes(c.d, f.checks) if c.d.get("writers") else []
    if not writes:
        return None
    latest = writes[-1]
    off = _in_app(latest)[0]
    fn = c.g.enclosing_function(off)
    k = c.g.flow.statement_at(off, None if fn is None else fn.index)
    if k is None:
        return None
    return k, (f"made the latest {latest.get('kind')} write ({latest.get('where')}) of the "
               "checked element, as the page recorded it")


def _blame_slice(c: _Case, f: _Failure, ran: set[int], seeds: dict[int, str],
                 only: dict[int, set[int]], at_load: bool, loaded: set[int]) -> Ops:
    """Blames the backward slice of ``seeds`` in the functions that ran or can have run at
    load (``loaded``): direct, but context in blocks coverage saw skipped, for a value left
    from load, and for long statements that are not seeds."""
    g = c.g
    flow = g.flow
    # After an action whose handler ran, a value X still shows from load is not what failed:
    # the handler not updating X is (its code is blamed by the callers of this function).
    stale = at_load and bool(f.action) and any(
        b.handler in ran for b in _bindings_for(g, f.actors, f.action))
    writers = {flow.statements[k].function for k in seeds}
    path = _call_path(g, writers, ran)
    sliced = flow.slice({**path, **seeds},
                        lambda fn: fn is None or fn in ran or fn in loaded or fn in writers,
                        only)
    idle = yield from _demote_skipped(c, sliced, seeds)
    touched = set()
    for k, why in sliced.items():
        spans = flow.blame(k)  # a long data table is context: it rarely holds the fault
        big = k not in seeds and sum(e - s for s, e in spans) > c.cfg.big
        for span in spans:
            if k in idle:
                yield from c.add("ctx", span, why + _IDLE, "coverage")
            elif stale:
                yield from c.add("ctx", span, why + _STALE, "coverage")
            else:
                yield from c.add("ctx" if big else "dir", span, why, "flow")
        touched.add(flow.statements[k].function)
    yield from replace_long_functions(c, touched)


@rule("flow.replace_long_functions")
def replace_long_functions(c: _Case, touched: set) -> Ops:
    """Moves direct whole-function blame of the long functions in ``touched``, whose
    statements a slice blamed directly, to the context. A short function stays whole (a
    missing statement hides in it too); a long one is narrowed to its statements in the
    slice, and stays context: a statement that is missing (a call never made) is in no slice,
    and the rest of the function is where it was left out."""
    g = c.g
    yield from c.demote(
        lambda i: i.fn is not None and i.fn in touched and i.span == g.functions[i.fn].span
        and i.span[1] - i.span[0] > c.cfg.whole, "; narrowed to its statements in the slice",
        "flow")
