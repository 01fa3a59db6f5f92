"""Lookups and registrations that point at the wrong element (``evaluators.localize.spans``).

Part of the probe-failure rules (``spans_probe``): queries for ids no element has, named like
the element the probe wanted; lookups stored under the name of one element that return
another (the same words in another order, the element's topic less its kind words, or every
word of its id while the id looked up has none of the variable's); handlers bound nowhere the
action reaches, and the registrations that may be meant for the acted-on element (those on
elements like it, those whose handlers update the checked element, those whose handlers do
to their own element what the acted-on one should get); with coverage, writes that ran of the
very value expected on the checked element to another element.
"""

from __future__ import annotations

import re

from evaluators.localize.rules import rule
from evaluators.localize.graph import CodeGraph
from evaluators.localize.model import Span
from evaluators.localize.spans_common import (
    _ACTION_EVENTS, _bindings_for, _Case, _describe, _Failure, _norm, _write_key, _write_keys,
    _writes, name_words, Ops, similar_names,
)

_ASSIGNED = re.compile(r"[^=]*?[^=!<>]=(?!=)\s*")  # up to the right-hand side of a write


def _loop_head(g: CodeGraph, span: Span) -> Span | None:
    """``for (...)`` of the innermost ``for`` loop around ``span`` (it picks the elements and
    values each handler is bound with), or None."""
    loops = [(s, e) for s, e in g.statements
             if s < span[0] and span[1] <= e and g.text.startswith("for", s)]
    if not loops:
        return None
    start = max(loops)[0]
    depth, i = 0, g.text.find("(", start, span[0])
    while 0 <= i < span[0]:
        depth += {"(": 1, ")": -1}.get(g.text[i], 0)
        if depth == 0:
            return start, i + 1
        i += 1
    return None


@rule("wiring.dangling_queries")
def _dangling_queries(c: _Case, f: _Failure) -> Ops:
    """Queries for an id or class no element has, named like the element the probe wanted."""
    wanted = [n for n in f.names + f.actor_names]
    for q in c.g.dom_queries:
        arg = (q.argument or "").strip().lstrip("#.")
        if q.elements or not arg or not re.fullmatch(r"[-\w]+", arg):
            continue
        if any(similar_names(arg, n, c.cfg.similar_ratio) for n in wanted) and arg not in wanted:
            yield from c.statement(
                "dir", q.span, f"queries '{arg}', which no element has (the probe "
                f"expects {', '.join(wanted[:2])})", q.function)


_KEY = re.compile(r"(?<![\w$])([\w$]+)\s*:\s*$")  # `trim: ` before a lookup in an object


def _topic(name: str, kind_words: frozenset[str]) -> tuple[str, ...]:
    """The words of a name less its kind words (``trim`` for ``slider-trim``, ``trimSlider``
    and ``controls.trim``)."""
    return tuple(w for w in name_words(name) if w not in kind_words)


def _without_role(norm: str, suffixes: tuple[str, ...]) -> str:
    """A normalised variable name less its longest role ending (``output`` for ``outputel``)."""
    return next((norm[:-len(s)] for s in sorted(suffixes, key=len, reverse=True)
                 if s and norm.endswith(s)), norm)


def _named_with_words_of(g: CodeGraph, var: str, looked_up: str, wanted) -> int | None:
    """The element among ``wanted`` whose id has every word of ``var`` (``input`` for
    ``input-t``, ``container`` for ``canvas-container``) when the id looked up shares none
    with ``var``: a name that says which element it should hold, holding another."""
    words = set(name_words(var))
    if not words or any(len(w) < 3 for w in words) or words & set(name_words(looked_up)):
        return None
    return next((g.element_by_id(n).index for n in wanted if g.element_by_id(n) is not None
                 and words <= set(name_words(n))), None)


@rule("wiring.misdirected_queries")
def _misdirected_queries(c: _Case, f: _Failure) -> Ops:
    """Lookups stored in a variable named after one element that return another
    (``const btn2D = document.getElementById('canvas-3d')``), when the variable is named like
    X or Y or is read by code blamed directly."""
    g = c.g
    by_norm: dict[str, int] = {}
    for e in g.elements:
        if e.id:
            by_norm.setdefault(_norm(e.id), e.index)
    wanted = f.names + f.outer_names + f.actor_names
    direct = [i.span for i in c.items if i.set == "dir" and i.fn is not None]
    for q in g.dom_queries:
        if not q.variable or not q.exact or q.method != "getElementById":
            continue
        var = q.variable.split(".")[-1]
        named = by_norm.get(_norm(var)) or by_norm.get(
            _without_role(_norm(var), c.cfg.role_suffixes))
        if named is None:  # a variable named like an element the probe used
            named = next((g.element_by_id(n).index for n in wanted if g.element_by_id(n)
                          is not None and similar_names(var, n, c.cfg.similar_ratio)), None)
        topic = _topic(var, c.cfg.kind_words)
        if named is None and topic:  # or after what such an element controls
            named = next((g.element_by_id(n).index for n in wanted if g.element_by_id(n)
                          is not None and _topic(n, c.cfg.kind_words) == topic), None)
        if named is None:  # or with words of its id, looking up an id with none of them
            named = _named_with_words_of(g, var, q.argument or "", wanted)
        if named is None or named in q.elements:
            continue
        pattern = re.compile(r"(?<![\w$.])" + re.escape(var) + r"(?![\w$])")
        used = any(pattern.search(g.text, s, e) for s, e in direct)
        if used or g.elements[named].id in wanted:
            why = f"{q.variable} is named after #{g.elements[named].id} but looks up {q.argument!r}"
            # Lookups run at load, before coverage counts, and the blame rests on the name
            # against the id, which coverage neither confirms nor refutes: not narrowed (no
            # function the blame depends on).
            key = _KEY.search(g.text, max(0, q.span[0] - 80), q.span[0])
            if key and key.group(1) == var:  # a property of an object of lookups: just it
                yield from c.add("dir", (key.start(), q.span[1]), why)
            else:
                yield from c.statement("dir", q.span, why, None)


_FORM_EVENTS = frozenset(("input", "change", "changed"))
_FORM_TAGS = frozenset(("input", "select", "textarea", "form", "fieldset", "option"))


def _stem(ident: str | None) -> str:
    """``btn`` for ``btn-2A1``: ids of one family differ in their last part."""
    return re.sub(r"[-_]?[^-_]*$", "", ident or "")


@rule("wiring.unbound_actor")
def _unbound_actor(c: _Case, f: _Failure) -> Ops:
    """Y has no handler while elements like it do: the registrations that should cover it."""
    g = c.g
    if not f.actors or not f.action or _bindings_for(g, f.actors, f.action):
        return
    events = _ACTION_EVENTS.get(f.action, frozenset())
    y = g.elements[f.actors[0]]
    for b in g.event_bindings:  # form events bound on elements that never fire them
        if (b.event or "").lower() in events & _FORM_EVENTS and b.elements and all(
                g.elements[i].tag not in _FORM_TAGS for i in b.elements):
            yield from c.add(
                "dir", b.span, f"binds {b.event} on {_describe(g, b.elements)}, which never "
                f"fires it, while {_describe(g, f.actors)} has no handler")
    for b in g.event_bindings:
        like = [g.elements[i] for i in b.elements]
        if b.event and b.event.lower() in events and any(
                e.tag == y.tag and (e.parent == y.parent or set(e.classes) & set(y.classes)
                                    or _stem(e.id) == _stem(y.id) != "") for e in like):
            end = b.handler_span[0] if b.span[0] < b.handler_span[0] < b.span[1] else b.span[1]
            yield from c.add("dir", (b.span[0], end), f"binds {b.event} on elements like "
                             f"{_describe(g, f.actors)}, which has no handler")
            loop = _loop_head(g, b.span)
            if loop is not None:
                yield from c.add(
                    "dir", loop, f"loop that binds elements like {_describe(g, f.actors)}")
    yield from _writers_bound_elsewhere(c, f, events)


def _callers_of(g: CodeGraph, fns: set[int], depth: int = 3) -> set[int]:
    """``fns`` and the functions that call them, up to ``depth`` calls away."""
    found, frontier = set(fns), set(fns)
    for _ in range(depth):
        frontier = {call.caller for fi in frontier for call in g.calls_to(fi)} - {None} - found
        found |= frontier
    return found


@rule("wiring.writers_bound_elsewhere")
def _writers_bound_elsewhere(c: _Case, f: _Failure, events: frozenset[str]) -> Ops:
    """Y has no handler, yet handlers bound to other elements update X: one of those
    registrations may name the wrong element (the one meant for Y)."""
    g = c.g
    writers = {w.function for w in _writes(g, f.targets, _write_keys(f))} - {None}
    reach = _callers_of(g, writers)
    what = _describe(g, f.targets, f.label)
    for b in g.event_bindings:
        if (b.handler in reach and not b.global_target and b.event
                and b.event.lower() in events and not set(b.elements) & set(f.actors)):
            end = b.handler_span[0] if b.span[0] < b.handler_span[0] < b.span[1] else b.span[1]
            yield from c.add("dir", (b.span[0], end), f"binds a handler that updates {what} on "
                             f"{_describe(g, b.elements, b.target_text[:40])}, while "
                             f"{_describe(g, f.actors)} has none")


@rule("wiring.expected_written_elsewhere")
def _expected_written_elsewhere(c: _Case, f: _Failure, keys, ran: set[int], what: str) -> Ops:
    """Code that ran wrote the very value the probe expected on X (``.value = 0.5`` for an
    expected ``0.5``) to another element: that write may have been meant for X."""
    g = c.g
    want = _literal(f.expected)
    if want is None:
        return
    for w in g.element_writes:
        if w.function not in ran or _write_key(w) not in keys or set(w.elements) & set(
                f.targets):
            continue
        m = _ASSIGNED.match(g.text, w.span[0], w.span[1])
        if m and _literal(g.text[m.end():w.span[1]]) == want:
            yield from c.statement(
                "dir", w.span, f"ran before the failure and writes {want!r}, the value "
                f"expected on {what}, to {_describe(g, w.elements, 'another element')}",
                w.function, "coverage")


def _literal(value) -> str | None:
    """A number or string literal as the text it shows (``0.5`` for ``.5``, ``'0.5'``, 0.5)."""
    text = str(value).strip().rstrip(";").strip() if isinstance(value, (str, int, float)) \
        else None
    if not text:
        return None
    m = re.fullmatch(r"(['\"`])(.*)\1", text, re.S)
    text = m.group(2) if m else text
    try:
        return f"{float(text):g}"
    except ValueError:
        return text if m or isinstance(value, str) else None
