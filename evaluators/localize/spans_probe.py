"""Probe-failure strategies of diagnostic localization (``evaluators.localize.spans``).

Holds the rules that blame code for a failed probe step: the ``text`` rules (writers of the
checked element, handlers of the acted-on one or of an ancestor it bubbles to, style rules
and the declarations that hide an ancestor, missing, dangling and misdirected element
lookups, writes replacing the content of an ancestor of an element gone at probe time,
unbound handlers, the registrations that update the checked element from another element and
those whose handlers do to their own element what the unbound one should get, and the
context of what was blamed), the ``naive`` baseline (whole functions querying the failing
element), and the execution grounding of the ``grounded`` method with precise coverage
(narrowed by ``spans_flow``; with it, writes that ran of the very value expected on the
checked element to another element).
"""

from __future__ import annotations

import re

from evaluators.contract import Reason
from evaluators.localize.rules import rule
from evaluators.localize.graph import CodeGraph
from evaluators.localize.model import Element, EventBinding, Span
from evaluators.localize.spans_common import (
    _ACTION_EVENTS, _CHECK_WRITES, _TEXT, _bindings_for, _Case, _describe, _Failure,
    _fn_at, _other_writes, _write_keys, _writes, Ops, ran_functions, similar_names,
)
from evaluators.localize.spans_errors import _loops
from evaluators.localize.spans_flow import load_functions, narrow_to_slice
from evaluators.localize.spans_forward import follow_actor_value
from evaluators.localize.spans_origins import library_render
from evaluators.localize.spans_smells import (
    blame_definite_bugs, dead_element_writes, loop_never_runs,
    misspelled_properties, undone_update, unreachable_code,
)
from evaluators.localize.spans_wiring import (
    _dangling_queries, _expected_written_elsewhere, _loop_head, _misdirected_queries,
    _unbound_actor,
)

_STYLE_CHECKS = frozenset(("class", "css", "attribute", "visible", "hidden"))
_SHOWN_PROPS = frozenset(("display", "visibility", "opacity", "width", "height", "max-height",
                          "transform", "position", "left", "top", "clip-path", "overflow"))
_CHECK_ATTRS = {"class": ("class",), "value": ("value",), "checked": ("checked",),
                "enabled": ("disabled",), "disabled": ("disabled",),
                "visible": ("class", "style", "hidden"), "hidden": ("class", "style", "hidden"),
                "css": ("class", "style")}
# Writes that replace an element's whole content (or the element).
_REPLACING = frozenset(("innerHTML", "textContent", "innerText", "outerHTML", "replaceChildren",
                        "replaceWith", "remove"))
# Probe failures of a page that stopped answering: its loops are suspects.
_STOPPED_PAGE = frozenset((Reason.HANG.value, Reason.CRASH.value))


# -- probe failures ----------------------------------------------------------------------------

def _html_of(e: Element) -> Span:
    """A leaf element whole (its text is its state); a container by its start tag."""
    return e.span if not e.children and e.span[1] - e.span[0] <= 400 else e.start_tag


@rule("probe.binding")
def _binding(c: _Case, b: EventBinding, which: str, what: str) -> Ops:
    """The binding (registration) and its handler function, as separate items."""
    why = f"handler bound to {what} ({b.kind} '{b.event}')"
    h = c.g.functions[b.handler].span if b.handler is not None else None
    if h is not None and b.span[0] <= h[0] and h[1] <= b.span[1]:
        yield from c.add(which, (b.span[0], h[0]), why + ": registration")
        yield from c.add(which, (h[1], b.span[1]), why + ": registration")
    else:
        yield from c.add(which, b.span, why + ": registration")
    yield from c.function(which, b.handler, why)
    loop = _loop_head(c.g, b.span)
    if loop is not None:
        yield from c.add(which, loop, f"loop that binds the handler of {what}")


@rule("probe.actor_handlers")
def _actor_handlers(c: _Case, f: _Failure, which: str) -> Ops:
    """The handlers bound to Y (or to an ancestor it bubbles to) for the action, and Y's HTML."""
    what = _describe(c.g, f.actors, f.actor_label)
    bindings = _bindings_for(c.g, f.actors, f.action)
    for b in bindings:
        yield from _binding(c, b, which, what)
    for y in f.actors:
        yield from c.add("ctx", _html_of(c.g.elements[y]), f"HTML of the acted-on {what}")
    if bindings or not f.action:
        return
    events = _ACTION_EVENTS.get(f.action, frozenset())
    for b in c.g.event_bindings:  # no binding on Y: window/document or unresolved targets
        if (not b.elements) and b.event and b.event.lower() in events:
            yield from _binding(c, b, "ctx", b.global_target or b.target_text[:40])


@rule("probe.css_rules")
def _css_rules(c: _Case, f: _Failure) -> Ops:
    """Style rules that decide the class, style or visibility the check read on X."""
    check, name = f.checks[0]
    if check == "class":
        for n in _class_names(f.expected):
            for r in c.g.css_rules:
                if re.search(r"\." + re.escape(n) + r"(?![-\w])", r.selector):
                    yield from c.add(
                        "ctx", r.span, f"style rule for the expected class ({r.selector})")
        return
    props = {name.lower()} if check == "css" and name else (
        _SHOWN_PROPS if check in ("visible", "hidden", "action") else set())
    what = _describe(c.g, f.targets, f.label)
    for x in f.targets:
        for r in c.g.rules_for_element(x):
            hit = [d.property for d in r.declarations if d.property.lower() in props]
            if hit:
                yield from c.add(
                    "dir", r.span, f"rule {r.selector!r} matches {what} and sets {hit[0]}")
            elif check == "css":
                yield from c.add("ctx", r.span, f"rule {r.selector!r} matches {what}")
        if check in ("visible", "hidden", "action"):
            yield from _hiding_ancestors(c, c.g.elements[x].parent, check, what)
    if not f.targets and check in ("visible", "action"):
        # X is made by script (a p5 canvas): the static containers its locator names.
        for e in c.g.elements:
            if e.id in f.outer_names or set(e.classes) & set(f.outer_names):
                yield from _hiding_ancestors(c, e.index, check, f"{f.label or 'the element'}")


def _hides(d) -> bool:
    """Whether a declaration hides its element (and so all it contains)."""
    value = d.value.strip().lower().replace("!important", "").strip()
    prop = d.property.lower()
    return ((prop == "display" and value == "none") or (prop == "visibility" and value in (
        "hidden", "collapse")) or (prop == "opacity" and re.fullmatch(r"0*\.?0*%?", value)))


@rule("probe.hiding_ancestors")
def _hiding_ancestors(c: _Case, start: int | None, check: str, what: str) -> Ops:
    """Rules of ``start`` and its ancestors that can hide what they contain.

    When X should be visible (or acted on) a declaration that hides (``display: none``) is
    blamed directly, its rule as context; other display and visibility rules are context.
    """
    at = start
    while at is not None:
        for r in c.g.rules_for_element(at):
            hiding = [d for d in r.declarations if _hides(d)] if check != "hidden" else []
            for d in hiding:
                yield from c.add("dir", d.span, f"rule {r.selector!r} hides "
                                 f"{_describe(c.g, [at])}, which holds {what}")
            if hiding or any(d.property.lower() in ("display", "visibility")
                             for d in r.declarations):
                yield from c.add(
                    "ctx", r.span, f"rule {r.selector!r} can hide an ancestor of {what}")
        at = c.g.elements[at].parent


def _class_names(expected) -> list[str]:
    text = expected.get("regex", "") if isinstance(expected, dict) else str(expected or "")
    return [w for w in re.findall(r"[A-Za-z_][-\w]*", text.replace("\\b", " ")) if len(w) > 1]


@rule("probe.element_html")
def _element_html(c: _Case, f: _Failure, writes: bool) -> Ops:
    """Attributes of X that hold the checked state, and X's HTML."""
    what = _describe(c.g, f.targets, f.label)
    direct = f.initial or f.check in _STYLE_CHECKS
    for x in f.targets:
        e = c.g.elements[x]
        names = _CHECK_ATTRS.get(f.check, ())
        if f.check == "attribute":
            names = (str(f.checks[0][1] or "").lower(),)
        for a in (e.attr(n) for n in names):
            if a is not None:
                yield from c.add(
                    "dir" if direct else "ctx", a.span, f"attribute of {what} in the HTML")
        leaf_text = f.initial and not writes and _CHECK_WRITES.get(f.check) is _TEXT
        yield from c.add("dir" if leaf_text else "ctx", _html_of(e), f"HTML of the checked {what}")


@rule("probe.failed_check")
def _failed_check(c: _Case, f: _Failure) -> Ops:
    """A check on X failed (wrong text, value, class, style...) after an action on Y."""
    what = _describe(c.g, f.targets, f.label)
    keys = _write_keys(f)
    writes = _writes(c.g, f.targets, keys)
    for w in writes:
        yield from c.statement(
            "dir", w.span, f"writes {w.kind} {w.detail} of {what}".replace("  ", " "),
            w.function)
        yield from c.function("ctx", w.function, f"function writing {what}", near=w.span[0])
    if not writes and keys is not None:
        fns = {b.handler for b in _bindings_for(c.g, f.actors, f.action)} - {None}
        fns |= {t for fi in list(fns) for call in c.g.calls_from(fi) for t in call.targets}
        for w in _other_writes(c.g, f, keys, fns):
            yield from c.statement("dir", w.span, f"the action's handler writes {w.kind} of "
                                   f"{_describe(c.g, w.elements, 'an unresolved element')}, not of "
                                   f"{what}", w.function)
        for w in _writes(c.g, f.targets, None):  # the missing update belongs with the others
            yield from c.function("dir", w.function, f"writes {what}, but not what the check reads")
    if f.check in _STYLE_CHECKS or f.check == "action":
        yield from _css_rules(c, f)
    yield from _element_html(c, f, bool(writes))
    direct = f.check != "action" and (f.check not in _STYLE_CHECKS or not writes)
    yield from _actor_handlers(c, f, "dir" if direct else "ctx")
    if not f.targets and not c.has("dir"):  # X is made by script: a library may draw it
        yield from library_render(c, _holders(c.g, f), what)


def _js_mentions(g: CodeGraph, name: str, limit: int = 8) -> list[Span]:
    """Spans where script code spells ``name`` as a whole word (ids in strings, templates)."""
    pattern = re.compile(r"(?<![-\w])" + re.escape(name) + r"(?![-\w])")
    out = []
    for s in g.scripts:
        for m in pattern.finditer(g.text, s.span[0], s.span[1]):
            out.append(m.span())
            if len(out) >= limit:
                return out
    return out


@rule("probe.missing_element")
def _missing_element(c: _Case, f: _Failure) -> Ops:
    """No element matched X's locator: blame where it is created, named or looked up."""
    g = c.g
    what = _describe(g, f.targets, f.label)
    queried = set()
    for q in g.dom_queries:
        arg = (q.argument or "").lstrip("#.")
        if set(q.elements) & set(f.targets) or (arg and arg in f.names):
            queried.add(q.span)
            yield from c.statement("dir", q.span, f"looks up {what}", q.function)
            yield from c.function("ctx", q.function, f"function looking up {what}", near=q.span[0])
    for name in f.names:
        for s in _js_mentions(g, name):
            if not any(a <= s[0] < b for a, b in queried):
                yield from c.statement(
                    "dir", s, f"code names '{name}' (creates or finds the element)",
                    _fn_at(g, s[0]))
    near = list(f.targets)
    for x in f.targets:
        yield from c.add(
            "dir", g.elements[x].start_tag, f"{what} exists in the HTML but was not found "
            "when the probe ran")
    if not f.targets:
        for e in g.elements:
            if any(similar_names(n, v, c.cfg.similar_ratio)
                   for n in f.names for v in (e.id or "",) + e.classes):
                near.append(e.index)
                yield from c.add(
                    "dir", e.start_tag, f"element {_describe(g, [e.index])} is named like "
                    f"the missing {', '.join(f.names[:2])}")
    for x in near:
        parent = g.elements[x].parent
        if parent is None:
            continue
        yield from c.add("ctx", g.elements[parent].start_tag, "parent of the expected element")
        for w in g.writes_to_element(parent):
            if w.kind in ("children", "innerHTML"):
                yield from c.statement(
                    "dir", w.span, "rewrites the children of the expected element's "
                    "parent", w.function)
    yield from _ancestors_replaced(c, f.targets, what)
    yield from _missing_container(c, f, what)
    yield from _actor_handlers(c, f, "ctx")


@rule("probe.ancestors_replaced")
def _ancestors_replaced(c: _Case, targets, what: str) -> Ops:
    """X is in the HTML but gone when the probe ran: the writes that replace the whole
    content of one of its ancestors above the parent (``main.innerHTML = ...``, through a
    lookup of the wrong element) removed it."""
    g = c.g
    seen = set()
    for x in targets:
        at = g.elements[x].parent
        at = None if at is None else g.elements[at].parent
        while at is not None and at not in seen:
            seen.add(at)
            for w in g.writes_to_element(at):
                if w.kind in _REPLACING or (w.kind == "children" and w.detail in _REPLACING):
                    yield from c.statement("dir", w.span, f"replaces the content of "
                                           f"{_describe(g, [at])}, which holds {what}", w.function)
            at = g.elements[at].parent


@rule("probe.missing_container")
def _missing_container(c: _Case, f: _Failure, what: str) -> Ops:
    """The containers a missing element's locator names: their HTML and lookups as context,
    and, when nothing else was blamed, the code that renders into them."""
    found = c.has("dir")
    for x in _holders(c.g, f):
        yield from c.add("ctx", c.g.elements[x].start_tag, f"container "
                         f"{_describe(c.g, [x])} of the missing {what}")
    for q in c.g.dom_queries:
        arg = (q.argument or "").lstrip("#.")
        if not arg or arg not in f.outer_names:
            continue
        yield from c.statement(
            "ctx", q.span, f"looks up {arg}, which should contain {what}", q.function)
        own = c.g.enclosing_statement(q.span[0])
        for s in _js_mentions(c.g, q.variable or "") if not found else ():
            if c.g.enclosing_statement(s[0]) != own:
                yield from c.statement("dir", s, f"renders into {arg}, where {what} should appear",
                                       _fn_at(c.g, s[0]))
    if not found:
        yield from library_render(c, _holders(c.g, f), what)


def _holders(g: CodeGraph, f: _Failure) -> list[int]:
    """The elements of the HTML that X's locator names as its containers."""
    return [e.index for e in g.elements
            if e.id in f.outer_names or set(e.classes) & set(f.outer_names)]


@rule("probe.context")
def _context(c: _Case, ran: set[int] | None = None) -> Ops:
    """Callees, call sites and program state of the functions blamed directly.

    With ``ran`` (the functions coverage saw run since load, when any did), callees that did
    not run and call sites in functions that did not run are left out: this failure's path
    did not go through them (load-time code is not in ``ran``, so top-level sites stay).
    """
    g = c.g
    fns = sorted({i.fn for i in c.items if i.set == "dir" and i.fn is not None})
    for fi in fns:
        name = g.functions[fi].qualname or "an anonymous function"
        for call in g.calls_from(fi):
            for t in call.targets:
                if t != fi and (not ran or t in ran):
                    yield from c.function("ctx", t, f"called by {name}")
        for call in g.calls_to(fi):
            if not ran or call.caller is None or call.caller in ran:
                yield from c.statement("ctx", call.span, f"calls {name}", call.caller)
        s, e = g.functions[fi].span
        for v in g.state_vars:
            if any(s <= a < e for a, _ in v.reads + v.writes):
                yield from c.add("ctx", v.decl, f"declares state {v.name} used by {name}")
                for w in v.writes:
                    if not s <= w[0] < e:
                        yield from c.statement(
                            "ctx", w, f"writes state {v.name} used by {name}", None)


@rule("probe.naive_queries")
def _naive_queries(c: _Case, f: _Failure, why: str) -> Ops:
    """The functions (or top-level statements) looking up X, or Y when X is unresolved."""
    elements = set(f.targets) or set(f.actors)
    names = set(f.names) if f.targets or not f.actors else set(f.actor_names)
    for q in c.g.dom_queries:
        arg = (q.argument or "").lstrip("#.")
        if set(q.elements) & elements or (arg and arg in names):
            if q.function is None:
                yield from c.statement("dir", q.span, why + ": top-level query", None)
            else:
                yield from c.function("dir", q.function, why)


@rule("probe.probe_rules")
def _probe_rules(c: _Case) -> Ops:
    """The text rules of a probe failure, without the context of what they blamed."""
    f = c.failure
    if c.d.get("reason") in _STOPPED_PAGE:
        yield from _loops(c)
    yield from (_missing_element if f.missing else _failed_check)(c, f)
    yield from _dangling_queries(c, f)
    yield from _misdirected_queries(c, f)
    yield from _unbound_actor(c, f)


def _probe_fallback(c: _Case) -> Ops:
    """The chains' fallback step: the functions looking up the failing element."""
    yield from _naive_queries(c, c.failure, "fallback: the function looking up the failing element")


@rule("probe.probe_naive")
def _probe_naive(c: _Case) -> Ops:
    """The baseline for a probe failure: whole functions querying the failing element."""
    yield from _naive_queries(c, c.failure, "function querying the failing element")


def _ground_step(c: _Case) -> Ops:
    c.ran = yield from _ground(c)


def _definite_bugs_step(c: _Case) -> Ops:
    ran = c.ran
    if isinstance(c.d.get("coverage"), dict) and c.failure.initial:
        # A check with no action before it reads what the start-up code made, which ran
        # before the probe's coverage began: the functions that run at load count as run.
        ran = (ran or set()) | load_functions(c.g)
    yield from blame_definite_bugs(c, ran)
    yield from misspelled_properties(c, ran)
    yield from unreachable_code(c, ran)
    yield from loop_never_runs(c, ran)
    yield from undone_update(c, ran)
    yield from dead_element_writes(c)


def _load_bugs_step(c: _Case) -> Ops:
    """An exception: the definite bugs of the functions on its stack (a call that handed an
    element's id to the wrong parameter); while the page loaded, also of the code that runs
    at load, and misspelled element properties and code cut off by a jump there."""
    ran = {fn.index for f in c.d.get("frames") or () if f.get("in_app")
           and isinstance(f.get("offset"), int)
           and (fn := c.g.enclosing_function(f["offset"])) is not None}
    if c.d.get("reason") == "uncaught_at_load":
        ran |= load_functions(c.g)
        yield from misspelled_properties(c, ran)
        yield from unreachable_code(c, ran)
    yield from undone_update(c, ran)


def _context_step(c: _Case) -> Ops:
    yield from _context(c, c.ran)


# -- execution grounding -----------------------------------------------------------------------

@rule("probe.ground")
def _ground(c: _Case) -> Ops:
    """Execution grounding of a probe failure with the functions that ran since load.

    Adds to S_dir the writers of X and the handlers of Y that ran, and the functions they
    called that ran; then moves the blamed functions that did not run to S_ctx, unless none
    of them ran. When the action ran no code at all, blames the wiring (``_nothing_ran``).

    Returns:
        The functions that ran; None without coverage or when nothing ran.
    """
    cov = c.d.get("coverage")
    if not isinstance(cov, dict) or not isinstance(cov.get("functions"), list):
        return None
    g, f = c.g, c.failure
    ran = ran_functions(g, cov)
    if not ran and f.action:
        yield from _nothing_ran(c)
        yield from binding_cut_short(c, f, ran)
        return None
    what = _describe(g, f.targets, f.label)
    keys = _write_keys(f)
    writes = _writes(g, f.targets, keys)
    for w in writes:
        if w.function in ran:
            yield from c.function("dir", w.function, f"ran before the failure and writes {what}",
                                  "coverage")
    if not writes and keys is not None and not f.missing:
        for w in _other_writes(g, f, keys, ran):
            yield from c.statement("dir", w.span, f"ran before the failure and writes {w.kind} of "
                                   f"{_describe(g, w.elements, 'an unresolved element')}, not of "
                                   f"{what}", w.function, "coverage")
    actor = _describe(g, f.actors, f.actor_label)
    bindings = _bindings_for(g, f.actors, f.action)
    if not bindings and f.action and not f.actors:  # Y made by script: handlers that fit
        events = _ACTION_EVENTS.get(f.action, frozenset())
        bindings = [b for b in g.event_bindings if b.event and b.event.lower() in events
                    and not b.global_target]
    for b in bindings:
        if b.handler in ran:
            yield from c.function(
                "dir", b.handler, f"ran before the failure, bound to {b.target_text[:40]} "
                f"for the action on {actor}", "coverage")
    yield from binding_cut_short(c, f, ran)
    sliced = yield from narrow_to_slice(c, f, ran)
    if not sliced:  # no write of X ran: the callees that ran, whole
        for fi in sorted({i.fn for i in c.items if i.set == "dir" and i.fn in ran}):
            for call in g.calls_from(fi):
                for t in call.targets:
                    if t in ran and t != fi:
                        yield from c.function("dir", t, f"ran before the failure, called by "
                                              f"{g.functions[fi].qualname or 'a blamed function'}",
                                              "coverage")
        yield from follow_actor_value(c, f, ran)  # and where the value of the input acted on went
    if writes and keys is not None and not f.missing:
        yield from _expected_written_elsewhere(c, f, keys, ran, what)
    if c.blame.direct_functions() & ran:
        yield from c.demote(lambda i: i.fn is not None and i.fn not in ran,
                            "; did not run before the failure")
    return ran or None


# Functions made where they are written (not hoisted like a declaration).
_INLINE_KINDS = frozenset(("expression", "arrow"))


@rule("probe.binding_cut_short")
def binding_cut_short(c: _Case, f: _Failure, ran: set[int]) -> Ops:
    """A handler bound to Y for the action did not run during the probe: the ``return`` and
    ``throw`` statements before its binding, in the function that makes it, can have ended
    that function first (at load, before coverage counts), so the binding never ran. Each
    is blamed directly, the condition it runs under as context."""
    flow = c.g.flow
    bindings = _bindings_for(c.g, f.actors, f.action)
    if not bindings and f.action:  # none on Y: those for the action on a target not resolved
        events = _ACTION_EVENTS.get(f.action, frozenset())
        bindings = [b for b in c.g.event_bindings if not b.elements and not b.global_target
                    and (b.event or "").lower() in events]
    for b in bindings:
        if b.handler is None or b.handler in ran or b.function is None:
            continue
        for j in _exits_on_the_way(c.g, flow.statement_at(b.span[0], b.function)):
            st = flow.statements[j]
            # It ran at load, which coverage does not count: no function to demote it by.
            yield from c.add("dir", st.span, f"can end a function before it binds "
                             f"{b.target_text[:40]}'s handler, which did not run", "coverage")
            if st.parent is not None:
                yield from c.add("ctx", flow.statements[st.parent].head,
                                 "decides whether that return runs", "coverage")


def _exits_on_the_way(g, k: int | None, depth: int = 3) -> list[int]:
    """The ``return`` and ``throw`` statements that can keep statement ``k`` from running:
    those before it in its function and, up to ``depth`` callers up, those before each call
    of that function (a binding made in ``setup()`` never runs when ``init()`` returns before
    it calls ``setup()``). A function written inline (a callback handed to ``forEach``) runs
    only once the statement around it has made it, so that statement is on the way too."""
    flow, out, seen = g.flow, [], set()
    todo = [(k, depth)]
    while todo:
        k, left = todo.pop()
        if k is None or k in seen:
            continue
        seen.add(k)
        out += [j for j in flow.exits_before(k) if j not in out]
        fn = flow.statements[k].function
        if fn is None:
            continue
        if g.functions[fn].kind in _INLINE_KINDS and g.functions[fn].parent is not None:
            todo.append((flow.statement_at(g.functions[fn].span[0], g.functions[fn].parent),
                         left))
        if left:
            todo += [(flow.statement_at(call.span[0], call.caller), left - 1)
                     for call in g.calls_to(fn) if call.caller is not None]
    return out


@rule("probe.nothing_ran")
def _nothing_ran(c: _Case) -> Ops:
    """An action ran no code at all: its handler was never bound, so blame the wiring (the
    registrations and the start-up code that should have made them), not the handlers."""
    yield from c.demote(lambda i: i.fn is not None, "; no code ran after the action")
    for b in c.g.event_bindings:
        if b.global_target and (b.event or "").lower() in ("load", "domcontentloaded"):
            named = re.fullmatch(r"[\w$.]+", b.handler_text)
            yield from c.add(
                "dir", b.span if named else (b.span[0], b.handler_span[0]),
                f"start-up binding ({b.target_text} '{b.event}'): nothing ran after the "
                "action, so the handlers may never have been bound", "coverage")
    for fn in c.g.functions:
        if fn.name in c.cfg.entry_functions and fn.parent is None:
            yield from c.function("ctx", fn.index, "start-up function", "coverage")

