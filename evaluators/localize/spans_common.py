"""Shared pieces of diagnostic localization (``evaluators.localize.spans``).

Holds what every localization strategy builds on: the ``Localization`` result and the span
algebra (``merge_spans``, ``subtract_spans``); ``_Case``, one diagnostic being localized with
the blame collected for it; ``ran_functions``, the graph functions precise coverage saw run;
probe locator resolution against the code graph
(``resolve_locator``, ``similar_names``); and ``_Failure``, a failing probe step resolved to
the elements it checked and acted on, with the element writes and event bindings that
concern them.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import re
from typing import Iterable, Sequence

from evaluators.checks.steps import compared_saves, flat_steps
from evaluators.contract import JsException, Reason, exception_name
from evaluators.localize.combine import (  # noqa: F401  (re-exported to the rule modules)
    Blame, Combiner, Demote, Drop, Localization, Ops, merge_spans, subtract_spans,
)
from evaluators.localize.graph import CodeGraph
from evaluators.localize.model import Element, ElementWrite, Span
from evaluators.localize.rules import LocalizeConfig

_TEXT = frozenset(("textContent", "innerHTML", "innerText", "outerHTML", "children"))
_SHOWN = frozenset(("style", "classList", "className", "hidden", "attribute:hidden",
                    "attribute:style", "attribute:class", "children", "innerHTML"))
_ENABLED = frozenset(("disabled", "attribute:disabled"))
# Which element writes can change what a check reads (keys of ``_write_key``); None: any.
_CHECK_WRITES: dict[str, frozenset[str] | None] = {
    "text": _TEXT, "contains_text": _TEXT, "empty": _TEXT, "read:text": _TEXT,
    "read:inner_text": _TEXT, "read:inner_html": _TEXT,
    "value": frozenset(("value", "valueAsNumber", "selectedIndex", "attribute:value")),
    "checked": frozenset(("checked", "attribute:checked")),
    "enabled": _ENABLED, "disabled": _ENABLED,
    "class": frozenset(("classList", "className", "attribute:class")),
    "css": frozenset(("style", "classList", "className", "attribute:style", "attribute:class")),
    "visible": _SHOWN, "hidden": _SHOWN, "action": _SHOWN | _ENABLED,
    "count": frozenset(("children", "innerHTML")),
}
_CHECK_WRITES["read:value"] = _CHECK_WRITES["value"]
_CHECK_WRITES["read:checked"] = _CHECK_WRITES["checked"]
_MOUSE = frozenset(("click", "mousedown", "mouseup", "mousemove", "pointerdown", "pointerup",
                    "pointermove", "mousepressed", "mousereleased", "mousedragged",
                    "mouseclicked", "touchstart", "touchmove", "touchend", "drag", "dragstart",
                    "dragend", "dragover", "drop", "wheel"))
_KEYS = frozenset(("keydown", "keyup", "keypress", "input", "change", "changed"))
# Events an action can fire, for picking the bindings of the acted-on element.
_ACTION_EVENTS = {
    "click": frozenset(("click", "mousedown", "mouseup", "pointerdown", "pointerup", "change",
                        "input", "submit", "mousepressed", "mouseclicked", "mousereleased",
                        "touchstart", "changed")),
    "dblclick": frozenset(("dblclick", "doubleclicked", "click", "mousedown")),
    "fill": _KEYS, "press": _KEYS,
    "select_option": frozenset(("change", "input", "changed")),
    "check": frozenset(("change", "click", "input", "changed")),
    "uncheck": frozenset(("change", "click", "input", "changed")),
    "hover": frozenset(("mouseover", "mouseenter", "mousemove", "pointerover", "pointerenter",
                        "pointermove", "mouseover")),
    "focus": frozenset(("focus", "focusin")),
    "drag_to": _MOUSE, "mouse": _MOUSE,
}
# A function given as context that is longer than this is cut down to its head and the
# self.cfg.around statements on each side of the code in question (a load handler holding a whole
# app is no context: 1.5x on half an app dilutes the blame on the faulty statement).
_SELECTOR_NAME = re.compile(r"([#.])((?:[-\w]|\\.)+)")
_TAG = re.compile(r"<[^>]*>")


class _Case:
    """One diagnostic being localized: the graph, the facts, and the blame collected."""

    def __init__(self, graph: CodeGraph, diagnostic: dict, probe: dict | None,
                 cfg: LocalizeConfig = LocalizeConfig()):
        self.g = graph
        self.d = diagnostic
        self.probe = probe
        self.cfg = cfg
        self.blame = Combiner()  # applies what the rules yield; rules only read it
        self.ran: set[int] | None = None  # functions that ran, once the grounding step set it

    @functools.cached_property
    def failure(self) -> "_Failure":
        """The failing probe step resolved against the graph (probe failures only)."""
        return _failure(self.g, self.d, self.probe)

    @property
    def items(self) -> tuple[Blame, ...]:
        return self.blame.items

    # The helpers below build operations for the rule calling them (with ``yield from``);
    # the rule's registration tags them with its id, the combiner applies them.

    def add(self, which: str, span: Span | None, why: str, by: str = "graph",
            fn: int | None = None) -> Ops:
        """Blames ``span`` (nothing when it is None)."""
        if span is not None:
            yield Blame(which, (int(span[0]), int(span[1])), why, by, fn)

    def demote(self, test, because: str, by: str = "coverage") -> Ops:
        """Moves direct items to the context (``combine.Demote``); evaluates to how many."""
        return (yield Demote(test, because, by))

    def drop(self, test) -> Ops:
        """Removes items a narrower blame replaces (``combine.Drop``); evaluates to how many."""
        return (yield Drop(test))

    def function(self, which: str, index: int | None, why: str, by: str = "graph",
                 near: int | None = None) -> Ops:
        """Adds a function whole; as context, one longer than ``cfg.long_context`` (a whole app
        in a load handler) only by its head and the statements around ``near``."""
        if index is None:
            return
        fn = self.g.functions[index]
        if which != "ctx" or fn.span[1] - fn.span[0] <= self.cfg.long_context:
            yield from self.add(which, fn.span, why, by, index)
            return
        yield from self.add(
            "ctx", (fn.span[0], min(fn.body[0] + 1, fn.span[1])), why + " (its head)", by,
            index)
        stmt = self.g.enclosing_statement(near) if near is not None else None
        if stmt is None or not fn.span[0] <= stmt[0] < fn.span[1]:
            return
        around = [stmt, *self._heads_over(stmt, index)]
        for after in (False, True):
            at = stmt
            for _ in range(self.cfg.around):
                at = neighbour_statement(self.g, at, after)
                if at is None or at[1] - at[0] > self.cfg.long_context:
                    break
                around.append(at)
        for span in around:
            yield from self.add("ctx", span, why + " (the statements around)", by, index)

    def _heads_over(self, stmt: Span, index: int) -> list[Span]:
        """The heads of the loops and branches of function ``index`` around ``stmt``, inner
        first (``for (let i = 0; i <= n; i++)``, ``if (x)``): they decide whether and with
        which values it runs, and a neighbour of its first statement is a head's clause."""
        flow = self.g.flow
        k = flow.statement_at(stmt[0], index)
        out: list[Span] = []
        while k is not None and len(out) < self.cfg.around:
            k = flow.statements[k].parent
            if k is not None and flow.statements[k].head != flow.statements[k].span:
                out.append(flow.statements[k].head)
        return out

    def statement(self, which: str, span: Span, why: str, fn: int | None,
                  by: str = "graph") -> Ops:
        """Adds the innermost statement around ``span`` (``span`` itself outside JS)."""
        stmt = self.g.enclosing_statement(span[0])
        ok = stmt is not None and stmt[0] <= span[0] and span[1] <= stmt[1]
        yield from self.add(which, stmt if ok else span, why, by, fn)

    def has(self, which: str) -> bool:
        return self.blame.has(which)

    def result(self) -> Localization:
        return self.blame.result(len(self.g.text))


def neighbour_statement(g: CodeGraph, stmt: Span, after: bool) -> Span | None:
    """The statement just before (or after) ``stmt`` in the same block (or script)."""
    fn = g.enclosing_function(stmt[0])
    starts = [s for s, e in g.statements if s <= stmt[0] and stmt[1] <= e and (s, e) != stmt]
    ends = [e for s, e in g.statements if s <= stmt[0] and stmt[1] <= e and (s, e) != stmt]
    body = fn.body if fn is not None and fn.body[0] <= stmt[0] else next(
        (sc.span for sc in g.scripts if sc.span[0] <= stmt[0] < sc.span[1]), g.region)
    lo, hi = max(starts + [body[0]]), min(ends + [body[1]])
    if after:
        found = [(s, -e) for s, e in g.statements if stmt[1] <= s and e <= hi]
        return (min(found)[0], -min(found)[1]) if found else None
    found = [(e, -s) for s, e in g.statements if lo <= s and e <= stmt[0]]
    return (-max(found)[1], max(found)[0]) if found else None


def _fn_at(g: CodeGraph, offset: int) -> int | None:
    """Index of the innermost function around ``offset``, or None."""
    fn = g.enclosing_function(offset)
    return None if fn is None else fn.index


def lexical_scope(g: CodeGraph, fn: int | None) -> set[int | None]:
    """Function ``fn``, the functions around it and the top level (None): where the
    variables its code reads can be declared and set (a closure reads its maker's locals)."""
    out: set[int | None] = {None}
    while fn is not None:
        out.add(fn)
        fn = g.functions[fn].parent
    return out


def ran_functions(g: CodeGraph, coverage: dict | None) -> set[int]:
    """Graph functions that precise coverage saw run (count > 0).

    A covered range is matched to the graph function ending at the same offset whose start is
    nearest (V8 and tree-sitter may disagree on where a function starts: the ``function``
    keyword, the name or the parameters), else to the innermost function containing it.
    """
    by_end: dict[int, list[int]] = {}
    for fn in g.functions:
        by_end.setdefault(fn.span[1], []).append(fn.index)
    ran = set()
    for cov in (coverage or {}).get("functions") or ():
        if not isinstance(cov, dict) or not cov.get("count", 1) or cov.get("start") is None:
            continue
        s, e = int(cov["start"]), int(cov.get("end", cov["start"]))
        same_end = by_end.get(e)
        if same_end:
            ran.add(min(same_end, key=lambda i: abs(g.functions[i].span[0] - s)))
            continue
        fn = g.enclosing_function(s)
        if fn is not None and fn.span[1] >= e:
            ran.add(fn.index)
    return ran


# -- locators --------------------------------------------------------------------------------

def _element_text(g: CodeGraph, e: Element) -> str:
    inner = g.text[e.start_tag[1]:e.span[1]]
    return " ".join(_TAG.sub(" ", inner).split())


def _role_of(e: Element) -> str | None:
    explicit = e.attr("role")
    if explicit is not None and explicit.value:
        return explicit.value.strip().lower()
    kind = ((e.attr("type").value if e.attr("type") else None) or "text").lower()
    if e.tag == "input":
        return {"button": "button", "submit": "button", "reset": "button", "range": "slider",
                "checkbox": "checkbox", "radio": "radio", "number": "spinbutton"}.get(kind,
                                                                                   "textbox")
    return {"button": "button", "a": "link", "select": "combobox", "textarea": "textbox",
            "img": "img", **{f"h{k}": "heading" for k in range(1, 7)}}.get(e.tag)


def _accessible_name(g: CodeGraph, e: Element) -> str:
    for name in ("aria-label", "title", "value", "alt"):
        a = e.attr(name)
        if a is not None and a.value:
            return a.value
    label = next((x for x in g.elements if x.tag == "label" and e.id and x.attr("for")
                  and x.attr("for").value == e.id), None)
    return _element_text(g, label if label is not None else e)


def _text_match(have: str, want, exact: bool) -> bool:
    if isinstance(want, dict) and "regex" in want:
        try:
            return re.search(want["regex"], have, re.I if "i" in want.get("flags", "") else 0)
        except re.error:
            return False
    want = " ".join(str(want).split())
    return have == want if exact else want.lower() in have.lower()


def resolve_locator(g: CodeGraph, loc) -> tuple[int, ...]:
    """Indices of the static elements a probe locator can match (best effort).

    CSS goes through the graph's matcher (Playwright's ``>>`` chains by their last part);
    ``role``, ``text`` and ``label`` use tags, roles and static text content.
    """
    if isinstance(loc, str):
        loc = {"css": loc}
    if not isinstance(loc, dict):
        return ()
    exact = bool(loc.get("exact"))
    if "css" in loc:
        sel = str(loc["css"]).split(">>")[-1].strip()
        found = list(g.select(sel)) if sel and not sel.startswith("text=") else []
    elif "role" in loc:
        found = [e for e in g.elements if _role_of(e) == str(loc["role"]).lower()
                 and ("name" not in loc or _text_match(_accessible_name(g, e), loc["name"],
                                                       exact))]
    elif "text" in loc:
        found = [e for e in g.elements if _text_match(_element_text(g, e), loc["text"], exact)]
        found = [e for e in found if not any(c in {x.index for x in found} for c in e.children)]
    else:
        labels = [e for e in g.elements if e.tag == "label"
                  and _text_match(_element_text(g, e), loc.get("label", ""), exact)]
        ids = {lb.attr("for").value for lb in labels if lb.attr("for")}
        found = [e for e in g.elements if e.id in ids or (e.attr("aria-label") and _text_match(
            e.attr("aria-label").value or "", loc.get("label", ""), exact))]
    if "has_text" in loc:
        found = [e for e in found if _text_match(_element_text(g, e), loc["has_text"], False)]
    return tuple(e.index for e in found)


def _locator_names(loc, own: bool = True) -> tuple[str, ...]:
    """Ids and class names a CSS locator gives the element itself (what code would call it),
    or, with ``own`` False, those it gives the element's ancestors and siblings."""
    if isinstance(loc, dict):
        loc = loc.get("css") or ""
    if not isinstance(loc, str):
        return ()
    parts = re.split(r"[\s>+~]+", re.sub(r"\[[^\]]*\]|\([^)]*\)", "", loc).strip())
    loc = parts[-1] if own else " ".join(parts[:-1])
    found = [m.group(2).replace("\\", "") for m in _SELECTOR_NAME.finditer(loc)]
    return tuple(dict.fromkeys(n for n in found if not n[0].isdigit()))


def _step_locator(step: dict | None):
    if not isinstance(step, dict):
        return None
    loc = step.get("locator", step.get("from"))
    at = step.get("at")
    return loc if loc is not None else (at.get("box") if isinstance(at, dict) else None)


def _norm(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def name_words(name: str) -> tuple[str, ...]:
    """The words of an identifier, sorted (``trimSlider`` and ``slider-trim``: trim, slider)."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name or "")
    return tuple(sorted(w for w in re.split(r"[^A-Za-z0-9]+", spaced.lower()) if w))


def similar_names(a: str, b: str, ratio: float = LocalizeConfig.similar_ratio) -> bool:
    """Names a model could have confused: equal up to case and separators, the same words in
    another order, or close (difflib ratio at least ``ratio``)."""
    na, nb = _norm(a), _norm(b)
    if not na or not nb:
        return False
    words = name_words(a)
    if len(words) > 1 and words == name_words(b):
        return True
    short, long = sorted((na, nb), key=len)
    if na == nb or (len(short) >= 4 and short in long and len(short) >= len(long) / 2):
        return True
    return difflib.SequenceMatcher(None, na, nb).ratio() >= ratio


# -- what a probe failure says -----------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class _Failure:
    """A failing probe step, resolved against the graph.

    Attributes:
        checks: ``(check, name)`` per reading that failed: an ``expect`` kind, ``read:<r>``
            for a saved reading an ``assert`` compared, ``action`` for a failed action.
        expected: The expected value (for class names).
        targets: X, the elements checked. names: ids and classes X's locators give X;
            outer_names: those they give its ancestors.
        label: X's locator as the diagnostic shows it.
        actors, actor_names, actor_label: the same for Y, the element of the last action
            before the failure. action: that action's kind.
        missing: No element matched X's locator. initial: no action came before.
    """

    checks: tuple[tuple[str, str | None], ...]
    expected: object
    targets: tuple[int, ...]
    names: tuple[str, ...]
    outer_names: tuple[str, ...]
    label: str | None
    actors: tuple[int, ...]
    actor_names: tuple[str, ...]
    actor_label: str | None
    action: str | None
    missing: bool
    initial: bool

    @property
    def check(self) -> str:
        return self.checks[0][0] if self.checks else ""


def _step_checks(step: dict, probe: dict | None, index: int | None) -> list[tuple]:
    """``(check, name, locator)`` per element reading the step depends on."""
    if "retry" in step:
        return [c for s in flat_steps(step["retry"]) for c in _step_checks(s, None, None)
                if c[0] != "action"]
    if "expect" in step:
        return [(step["expect"], step.get("name"), step.get("locator"))]
    if "save" in step and "eval" not in step:
        read = str(step.get("read", ""))
        if read.startswith("attribute:"):
            return [("attribute", read.split(":", 1)[1], step.get("from"))]
        return [("read:" + read, None, step.get("from"))]
    if "do" in step or "mouse" in step:
        return [("action", None, _step_locator(step))]
    if "assert" in step and probe is not None and index is not None:
        saves = compared_saves(probe.get("steps", []), step, index)
        return [c for s in saves for c in _step_checks(s, None, None)]
    return []


def _line_at(text: str, offset: int) -> Span:
    """The line at ``offset``, without its indentation and trailing blanks."""
    start = text.rfind("\n", 0, offset) + 1
    end = text.find("\n", offset)
    end = len(text) if end < 0 else end
    while start < end and text[start].isspace():
        start += 1
    return start, max(start, len(text[start:end].rstrip()) + start)


def _statement_head(g: CodeGraph, offset: int) -> Span | None:
    """The statement at ``offset``; a compound one up to its first nested statement after it."""
    stmt = g.enclosing_statement(offset)
    if stmt is None:
        return None
    for s, e in g.statements:
        if stmt[0] < s and e <= stmt[1] and s > offset:
            return stmt[0], s
    return stmt


def exception_of(d: dict) -> dict:
    """The fields of a diagnostic's thrown exception (`evaluators.contract.JsException`);
    {} when it has none. The name is read through `exception_name`, and a field that a
    record written before it existed lacks is taken from the report by the contract's own
    parser, so older records read the same as new ones."""
    e = d.get("exception")
    if not isinstance(e, dict):
        return {}
    try:
        return JsException.from_json(e).to_json()
    except (TypeError, ValueError):  # not the contract's object: what it holds, as it is
        return {**e, "name": exception_name(e.get("name"))}


def _failure(g: CodeGraph, d: dict, probe: dict | None) -> _Failure:
    step = d.get("step") if isinstance(d.get("step"), dict) else {}
    checks = _step_checks(step, probe, d.get("step_index"))
    targets = tuple(dict.fromkeys(i for _, _, loc in checks for i in resolve_locator(g, loc)))
    names = tuple(dict.fromkeys(n for _, _, loc in checks for n in _locator_names(loc)))
    after = d.get("after_action") if isinstance(d.get("after_action"), dict) else None
    act = after.get("step") if after and isinstance(after.get("step"), dict) else {}
    actor_loc = _step_locator(act)
    actors = resolve_locator(g, actor_loc) if actor_loc is not None else ()
    missing = d.get("reason") == Reason.MISSING_ELEMENT.value
    outer = tuple(dict.fromkeys(n for _, _, loc in checks for n in _locator_names(loc, False)))
    return _Failure(tuple((c, n) for c, n, _ in checks), d.get("expected"), targets, names,
                    outer, d.get("locator"), actors, _locator_names(actor_loc),
                    after.get("locator") if after else None,
                    act.get("do") or ("mouse" if "mouse" in act else None), missing, not act)


def _write_key(w: ElementWrite) -> str:
    return f"attribute:{w.detail.lower()}" if w.kind == "attribute" else w.kind


def _write_keys(f: _Failure) -> frozenset[str] | None:
    """Keys of the writes that can change what the failed checks read; None for any write."""
    keys: set[str] = set()
    for check, name in f.checks:
        if check == "attribute":
            name = (name or "").lower()
            extra = _CHECK_WRITES["class"] if name == "class" else (
                _CHECK_WRITES["css"] if name == "style" else frozenset())
            keys |= {f"attribute:{name}", name} | extra
            continue
        found = _CHECK_WRITES.get(check)
        if found is None:
            return None
        keys |= found
    return frozenset(keys) if keys else None


def _writes(g: CodeGraph, elements: Iterable[int], keys) -> list[ElementWrite]:
    out = {w.span: w for x in elements for w in g.writes_to_element(x)
           if keys is None or _write_key(w) in keys}
    return [out[s] for s in sorted(out)]


def _other_writes(g: CodeGraph, f: "_Failure", keys, functions: set) -> list[ElementWrite]:
    """Writes of what the check reads, in ``functions``, to elements other than X (when no
    code writes X so): one of them may miss X. When X is made by script and some fill the
    containers X's locator names (or write elements made on the spot), only those: X is
    made there, and the writes to unrelated elements are not where it went wrong."""
    found = [w for w in g.element_writes if w.function in functions and _write_key(w) in keys]
    if f.targets:
        return found
    holders = {e.index for e in g.elements
               if e.id in f.outer_names or set(e.classes) & set(f.outer_names)}
    near = [w for w in found if holders & set(w.elements)]
    return near + [w for w in found if not w.elements] if near else found


def _describe(g: CodeGraph, elements: Sequence[int], label=None) -> str:
    shown = [("#" + g.elements[i].id) if g.elements[i].id else "<" + g.elements[i].tag + ">"
             for i in elements[:3]]
    return ", ".join(dict.fromkeys(shown)) or str(label or "the element")[:60]


def _bindings_for(g: CodeGraph, elements: Sequence[int], action: str | None) -> list:
    """Bindings on the acted-on elements, those the action can fire first; without one the
    action fires, those on their ancestors that it fires (the event bubbles up to them)."""
    wanted = set(elements)
    found = [b for b in g.event_bindings if wanted.intersection(b.elements)]
    events = _ACTION_EVENTS.get(action or "")
    fit = [b for b in found if events is None or b.event is None or b.event.lower() in events]
    if fit:
        return fit
    above = set()
    for x in elements:
        p = g.elements[x].parent
        while p is not None:
            above.add(p)
            p = g.elements[p].parent
    delegated = [b for b in g.event_bindings if above.intersection(b.elements) and (
        events is None or (b.event or "").lower() in events)]
    return delegated or found

