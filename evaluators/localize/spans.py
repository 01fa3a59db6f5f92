"""Diagnostics -> the code they blame: S_dir (directly responsible) and S_ctx (context).

Every span is a half-open ``[start, end)`` of ``str`` indices into the response, as the graph
and the evaluator's diagnostics use. Each span comes with evidence: the rule and the facts
(``graph``: static structure; ``stack``: an exception's frames; ``coverage``: the functions
that ran before a probe failed; ``text``: matched excerpts) that put it there.

Three methods, selected by name in ``METHODS``:

- ``text``: the code graph and the diagnostic's words only (locators, messages, excerpts),
  as RCCA's rubric-to-code localization.
- ``grounded`` (default): ``text`` plus execution facts: exception stack frames are exact
  positions, and precise coverage confirms or narrows the blamed handlers and writers and
  adds the functions that ran under them.
- ``naive``: the baseline: whole functions around the code that queries the failing element.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from typing import Callable, Iterable, Sequence

from evaluators.localize.graph import CodeGraph
from evaluators.localize.model import Element, ElementWrite, EventBinding, Span

LOCALIZED_KINDS = frozenset(("syntax_error", "page_error", "probe_failure", "runtime_failure",
                             "no_app"))
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
_STYLE_CHECKS = frozenset(("class", "css", "attribute", "visible", "hidden"))
_SHOWN_PROPS = frozenset(("display", "visibility", "opacity", "width", "height", "max-height",
                          "transform", "position", "left", "top", "clip-path", "overflow"))
_CHECK_ATTRS = {"class": ("class",), "value": ("value",), "checked": ("checked",),
                "enabled": ("disabled",), "disabled": ("disabled",),
                "visible": ("class", "style", "hidden"), "hidden": ("class", "style", "hidden"),
                "css": ("class", "style")}
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
_NULL_READ = re.compile(r"(?:Cannot (?:read|set) propert(?:y|ies) of (?:null|undefined)"
                        r"(?: \((?:reading|setting) '([^']*)'\))?|(\S+) is (?:null|undefined))")
_NAME_IN_MESSAGE = re.compile(r"([A-Za-z_$][\w$.]*) is not (?:defined|a function|a constructor)")
_HANG = re.compile(r"stopped answering|renderer crashed|infinite loop")
_INFINITE_LOOP = re.compile(r"(?:while\s*\(\s*(?:true|1)\s*\)|for\s*\(\s*;\s*;\s*\))")
_SELECTOR_NAME = re.compile(r"([#.])((?:[-\w]|\\.)+)")
_TAG = re.compile(r"<[^>]*>")
_IDENT = re.compile(r"[A-Za-z_$][\w$]{2,}")


@dataclasses.dataclass(frozen=True)
class Localization:
    """The spans one diagnostic blames.

    Attributes:
        s_dir: Directly responsible code, merged and sorted.
        s_ctx: Context (callers, callees, state, HTML), merged, sorted, without S_dir.
        evidence: ``{"span", "set", "why", "by"}`` per rule application, in rule order.
    """

    s_dir: tuple[Span, ...] = ()
    s_ctx: tuple[Span, ...] = ()
    evidence: tuple[dict, ...] = ()

    def fields(self) -> dict:
        """The JSON fields added to a diagnostic."""
        return {"s_dir": [list(s) for s in self.s_dir], "s_ctx": [list(s) for s in self.s_ctx],
                "evidence": [dict(e) for e in self.evidence]}


@dataclasses.dataclass
class _Item:
    set: str
    span: Span
    why: str
    by: str
    fn: int | None  # the function whose running the item depends on; None: not narrowed


def merge_spans(spans: Iterable[Span]) -> list[Span]:
    """Sorted union of spans; empty spans dropped, touching spans joined."""
    out: list[list[int]] = []
    for s, e in sorted(spans):
        if e <= s:
            continue
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def subtract_spans(spans: Sequence[Span], holes: Sequence[Span]) -> list[Span]:
    """``spans`` minus ``holes``; both merged and sorted."""
    out, k = [], 0
    for s, e in spans:
        while k < len(holes) and holes[k][1] <= s:
            k += 1
        j = k
        while j < len(holes) and holes[j][0] < e:
            if holes[j][0] > s:
                out.append((s, holes[j][0]))
            s = max(s, holes[j][1])
            j += 1
        if s < e:
            out.append((s, e))
    return out


class _Case:
    """One diagnostic being localized: the graph, the facts, and the blame collected."""

    def __init__(self, graph: CodeGraph, diagnostic: dict, probe: dict | None):
        self.g = graph
        self.d = diagnostic
        self.probe = probe
        self.items: list[_Item] = []
        self.failure: _Failure | None = None  # set by the probe-failure rules

    def add(self, which: str, span: Span | None, why: str, by: str = "graph",
            fn: int | None = None) -> None:
        if span is not None and span[1] > span[0]:
            self.items.append(_Item(which, (int(span[0]), int(span[1])), why, by, fn))

    def function(self, which: str, index: int | None, why: str, by: str = "graph") -> None:
        if index is not None:
            self.add(which, self.g.functions[index].span, why, by, index)

    def statement(self, which: str, span: Span, why: str, fn: int | None, by: str = "graph"):
        """Adds the innermost statement around ``span`` (``span`` itself outside JS)."""
        stmt = self.g.enclosing_statement(span[0])
        ok = stmt is not None and stmt[0] <= span[0] and span[1] <= stmt[1]
        self.add(which, stmt if ok else span, why, by, fn)

    def has(self, which: str) -> bool:
        return any(i.set == which for i in self.items)

    def result(self) -> Localization:
        n = len(self.g.text)
        clip = [(i, (max(0, i.span[0]), min(n, i.span[1]))) for i in self.items]
        s_dir = merge_spans(s for i, s in clip if i.set == "dir")
        s_ctx = subtract_spans(merge_spans(s for i, s in clip if i.set == "ctx"), s_dir)
        seen, evidence = set(), []
        for i, s in clip:
            if s[1] > s[0] and (i.set, s) not in seen:
                seen.add((i.set, s))
                evidence.append({"span": list(s), "set": i.set, "why": i.why, "by": i.by})
        return Localization(tuple(s_dir), tuple(s_ctx), tuple(evidence))


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


def similar_names(a: str, b: str) -> bool:
    """Names a model could have confused: equal up to case and separators, or close."""
    na, nb = _norm(a), _norm(b)
    if not na or not nb:
        return False
    short, long = sorted((na, nb), key=len)
    if na == nb or (len(short) >= 4 and short in long and len(short) >= len(long) / 2):
        return True
    return difflib.SequenceMatcher(None, na, nb).ratio() >= 0.8


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


def _flat_steps(steps: Sequence) -> list[dict]:
    out = []
    for s in steps or ():
        out.extend(_flat_steps(s["retry"]) if isinstance(s, dict) and "retry" in s else [s])
    return out


def _step_checks(step: dict, probe: dict | None, index: int | None) -> list[tuple]:
    """``(check, name, locator)`` per element reading the step depends on."""
    if "retry" in step:
        return [c for s in _flat_steps(step["retry"]) for c in _step_checks(s, None, None)
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
        names = {v["var"] for v in (step.get("left"), step.get("right"))
                 if isinstance(v, dict) and "var" in v}
        saves = [s for s in _flat_steps(probe.get("steps", [])[:index])
                 if isinstance(s, dict) and s.get("save") in names]
        return [c for s in saves for c in _step_checks(s, None, None)]
    return []


def _failure(g: CodeGraph, d: dict, probe: dict | None) -> _Failure:
    step = d.get("step") if isinstance(d.get("step"), dict) else {}
    checks = _step_checks(step, probe, d.get("step_index"))
    targets = tuple(dict.fromkeys(i for _, _, loc in checks for i in resolve_locator(g, loc)))
    names = tuple(dict.fromkeys(n for _, _, loc in checks for n in _locator_names(loc)))
    after = d.get("after_action") if isinstance(d.get("after_action"), dict) else None
    act = after.get("step") if after and isinstance(after.get("step"), dict) else {}
    actor_loc = _step_locator(act)
    actors = resolve_locator(g, actor_loc) if actor_loc is not None else ()
    missing = (d.get("severity") == "severe" and d.get("actual") is None
               and "no element matches" in str(d.get("message", "")))
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


def _describe(g: CodeGraph, elements: Sequence[int], label=None) -> str:
    shown = [("#" + g.elements[i].id) if g.elements[i].id else "<" + g.elements[i].tag + ">"
             for i in elements[:3]]
    return ", ".join(dict.fromkeys(shown)) or str(label or "the element")[:60]


def _bindings_for(g: CodeGraph, elements: Sequence[int], action: str | None) -> list:
    """Bindings on the acted-on elements, those the action can fire first."""
    wanted = set(elements)
    found = [b for b in g.event_bindings if wanted.intersection(b.elements)]
    events = _ACTION_EVENTS.get(action or "")
    fit = [b for b in found if events is None or b.event is None or b.event.lower() in events]
    return fit or found


# -- probe failures ----------------------------------------------------------------------------

def _html_of(e: Element) -> Span:
    """A leaf element whole (its text is its state); a container by its start tag."""
    return e.span if not e.children and e.span[1] - e.span[0] <= 400 else e.start_tag


def _binding(c: _Case, b: EventBinding, which: str, what: str) -> None:
    """The binding (registration) and its handler function, as separate items."""
    why = f"handler bound to {what} ({b.kind} '{b.event}')"
    h = c.g.functions[b.handler].span if b.handler is not None else None
    if h is not None and b.span[0] <= h[0] and h[1] <= b.span[1]:
        c.add(which, (b.span[0], h[0]), why + ": registration")
        c.add(which, (h[1], b.span[1]), why + ": registration")
    else:
        c.add(which, b.span, why + ": registration")
    c.function(which, b.handler, why)
    loop = _loop_head(c.g, b.span)
    if loop is not None:
        c.add(which, loop, f"loop that binds the handler of {what}")


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


def _actor_handlers(c: _Case, f: _Failure, which: str) -> None:
    what = _describe(c.g, f.actors, f.actor_label)
    bindings = _bindings_for(c.g, f.actors, f.action)
    for b in bindings:
        _binding(c, b, which, what)
    for y in f.actors:
        c.add("ctx", _html_of(c.g.elements[y]), f"HTML of the acted-on {what}")
    if bindings or not f.action:
        return
    events = _ACTION_EVENTS.get(f.action, frozenset())
    for b in c.g.event_bindings:  # no binding on Y: window/document or unresolved targets
        if (not b.elements) and b.event and b.event.lower() in events:
            _binding(c, b, "ctx", b.global_target or b.target_text[:40])


def _css_rules(c: _Case, f: _Failure) -> None:
    check, name = f.checks[0]
    if check == "class":
        for n in _class_names(f.expected):
            for r in c.g.css_rules:
                if re.search(r"\." + re.escape(n) + r"(?![-\w])", r.selector):
                    c.add("ctx", r.span, f"style rule for the expected class ({r.selector})")
        return
    props = {name.lower()} if check == "css" and name else (
        _SHOWN_PROPS if check in ("visible", "hidden", "action") else set())
    what = _describe(c.g, f.targets, f.label)
    for x in f.targets:
        for r in c.g.rules_for_element(x):
            hit = [d.property for d in r.declarations if d.property.lower() in props]
            if hit:
                c.add("dir", r.span, f"rule {r.selector!r} matches {what} and sets {hit[0]}")
            elif check == "css":
                c.add("ctx", r.span, f"rule {r.selector!r} matches {what}")
        parent = c.g.elements[x].parent
        while parent is not None and check in ("visible", "hidden", "action"):
            for r in c.g.rules_for_element(parent):
                if any(d.property.lower() in ("display", "visibility") for d in r.declarations):
                    c.add("ctx", r.span, f"rule {r.selector!r} can hide an ancestor of {what}")
            parent = c.g.elements[parent].parent


def _class_names(expected) -> list[str]:
    text = expected.get("regex", "") if isinstance(expected, dict) else str(expected or "")
    return [w for w in re.findall(r"[A-Za-z_][-\w]*", text.replace("\\b", " ")) if len(w) > 1]


def _element_html(c: _Case, f: _Failure, writes: bool) -> None:
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
                c.add("dir" if direct else "ctx", a.span, f"attribute of {what} in the HTML")
        leaf_text = f.initial and not writes and _CHECK_WRITES.get(f.check) is _TEXT
        c.add("dir" if leaf_text else "ctx", _html_of(e), f"HTML of the checked {what}")


def _failed_check(c: _Case, f: _Failure) -> None:
    """A check on X failed (wrong text, value, class, style...) after an action on Y."""
    what = _describe(c.g, f.targets, f.label)
    keys = _write_keys(f)
    writes = _writes(c.g, f.targets, keys)
    for w in writes:
        c.statement("dir", w.span, f"writes {w.kind} {w.detail} of {what}".replace("  ", " "),
                    w.function)
        c.function("ctx", w.function, f"function writing {what}")
    if not writes and keys is not None:
        fns = {b.handler for b in _bindings_for(c.g, f.actors, f.action)} - {None}
        fns |= {t for fi in list(fns) for call in c.g.calls_from(fi) for t in call.targets}
        for w in c.g.element_writes:
            if w.function in fns and _write_key(w) in keys:
                c.statement("dir", w.span, f"the action's handler writes {w.kind} of "
                            f"{_describe(c.g, w.elements, 'an unresolved element')}, not of "
                            f"{what}", w.function)
        for w in _writes(c.g, f.targets, None):  # the missing update belongs with the others
            c.function("dir", w.function, f"writes {what}, but not what the check reads")
    if f.check in _STYLE_CHECKS or f.check == "action":
        _css_rules(c, f)
    _element_html(c, f, bool(writes))
    direct = f.check != "action" and (f.check not in _STYLE_CHECKS or not writes)
    _actor_handlers(c, f, "dir" if direct else "ctx")


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


def _missing_element(c: _Case, f: _Failure) -> None:
    """No element matched X's locator: blame where it is created, named or looked up."""
    g = c.g
    what = _describe(g, f.targets, f.label)
    queried = set()
    for q in g.dom_queries:
        arg = (q.argument or "").lstrip("#.")
        if set(q.elements) & set(f.targets) or (arg and arg in f.names):
            queried.add(q.span)
            c.statement("dir", q.span, f"looks up {what}", q.function)
            c.function("ctx", q.function, f"function looking up {what}")
    for name in f.names:
        for s in _js_mentions(g, name):
            if not any(a <= s[0] < b for a, b in queried):
                c.statement("dir", s, f"code names '{name}' (creates or finds the element)",
                            _fn_at(g, s[0]))
    near = list(f.targets)
    for x in f.targets:
        c.add("dir", g.elements[x].start_tag, f"{what} exists in the HTML but was not found "
              "when the probe ran")
    if not f.targets:
        for e in g.elements:
            if any(similar_names(n, v) for n in f.names for v in (e.id or "",) + e.classes):
                near.append(e.index)
                c.add("dir", e.start_tag, f"element {_describe(g, [e.index])} is named like "
                      f"the missing {', '.join(f.names[:2])}")
    for x in near:
        parent = g.elements[x].parent
        if parent is None:
            continue
        c.add("ctx", g.elements[parent].start_tag, "parent of the expected element")
        for w in g.writes_to_element(parent):
            if w.kind in ("children", "innerHTML"):
                c.statement("dir", w.span, "rewrites the children of the expected element's "
                            "parent", w.function)
    _missing_container(c, f, what)
    _actor_handlers(c, f, "ctx")


def _missing_container(c: _Case, f: _Failure, what: str) -> None:
    """The containers a missing element's locator names: their HTML and lookups as context,
    and, when nothing else was blamed, the code that renders into them."""
    found = c.has("dir")
    for e in c.g.elements:
        if e.id in f.outer_names or set(e.classes) & set(f.outer_names):
            c.add("ctx", e.start_tag, f"container {_describe(c.g, [e.index])} of the missing "
                  f"{what}")
    for q in c.g.dom_queries:
        arg = (q.argument or "").lstrip("#.")
        if not arg or arg not in f.outer_names:
            continue
        c.statement("ctx", q.span, f"looks up {arg}, which should contain {what}", q.function)
        own = c.g.enclosing_statement(q.span[0])
        for s in _js_mentions(c.g, q.variable or "") if not found else ():
            if c.g.enclosing_statement(s[0]) != own:
                c.statement("dir", s, f"renders into {arg}, where {what} should appear",
                            _fn_at(c.g, s[0]))


def _dangling_queries(c: _Case, f: _Failure) -> None:
    """Queries for an id or class no element has, named like the element the probe wanted."""
    wanted = [n for n in f.names + f.actor_names]
    for q in c.g.dom_queries:
        arg = (q.argument or "").strip().lstrip("#.")
        if q.elements or not arg or not re.fullmatch(r"[-\w]+", arg):
            continue
        if any(similar_names(arg, n) for n in wanted) and arg not in wanted:
            c.statement("dir", q.span, f"queries '{arg}', which no element has (the probe "
                        f"expects {', '.join(wanted[:2])})", q.function)


_ROLE_WORDS = re.compile(r"(?:el|elem|element|node|ref)$")


def _misdirected_queries(c: _Case, f: _Failure) -> None:
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
        named = by_norm.get(_norm(var)) or by_norm.get(_ROLE_WORDS.sub("", _norm(var)))
        if named is None:  # a variable named like an element the probe used
            named = next((g.element_by_id(n).index for n in wanted
                          if g.element_by_id(n) is not None and similar_names(var, n)), None)
        if named is None or named in q.elements:
            continue
        pattern = re.compile(r"(?<![\w$.])" + re.escape(var) + r"(?![\w$])")
        used = any(pattern.search(g.text, s, e) for s, e in direct)
        if used or g.elements[named].id in wanted:
            c.statement("dir", q.span, f"{q.variable} is named after #{g.elements[named].id} "
                        f"but looks up {q.argument!r}", q.function)


_FORM_EVENTS = frozenset(("input", "change", "changed"))
_FORM_TAGS = frozenset(("input", "select", "textarea", "form", "fieldset", "option"))


def _stem(ident: str | None) -> str:
    """``btn`` for ``btn-2A1``: ids of one family differ in their last part."""
    return re.sub(r"[-_]?[^-_]*$", "", ident or "")


def _unbound_actor(c: _Case, f: _Failure) -> None:
    """Y has no handler while elements like it do: the registrations that should cover it."""
    g = c.g
    if not f.actors or not f.action or _bindings_for(g, f.actors, f.action):
        return
    events = _ACTION_EVENTS.get(f.action, frozenset())
    y = g.elements[f.actors[0]]
    for b in g.event_bindings:  # form events bound on elements that never fire them
        if (b.event or "").lower() in events & _FORM_EVENTS and b.elements and all(
                g.elements[i].tag not in _FORM_TAGS for i in b.elements):
            c.add("dir", b.span, f"binds {b.event} on {_describe(g, b.elements)}, which never "
                  f"fires it, while {_describe(g, f.actors)} has no handler")
    for b in g.event_bindings:
        like = [g.elements[i] for i in b.elements]
        if b.event and b.event.lower() in events and any(
                e.tag == y.tag and (e.parent == y.parent or set(e.classes) & set(y.classes)
                                    or _stem(e.id) == _stem(y.id) != "") for e in like):
            end = b.handler_span[0] if b.span[0] < b.handler_span[0] < b.span[1] else b.span[1]
            c.add("dir", (b.span[0], end), f"binds {b.event} on elements like "
                  f"{_describe(g, f.actors)}, which has no handler")
            loop = _loop_head(g, b.span)
            if loop is not None:
                c.add("dir", loop, f"loop that binds elements like {_describe(g, f.actors)}")


def _context(c: _Case) -> None:
    """Callees, call sites and program state of the functions blamed directly."""
    g = c.g
    fns = sorted({i.fn for i in c.items if i.set == "dir" and i.fn is not None})
    for fi in fns:
        name = g.functions[fi].qualname or "an anonymous function"
        for call in g.calls_from(fi):
            for t in call.targets:
                if t != fi:
                    c.function("ctx", t, f"called by {name}")
        for call in g.calls_to(fi):
            c.statement("ctx", call.span, f"calls {name}", call.caller)
        s, e = g.functions[fi].span
        for v in g.state_vars:
            if any(s <= a < e for a, _ in v.reads + v.writes):
                c.add("ctx", v.decl, f"declares state {v.name} used by {name}")
                for w in v.writes:
                    if not s <= w[0] < e:
                        c.statement("ctx", w, f"writes state {v.name} used by {name}", None)


def _naive_queries(c: _Case, f: _Failure, why: str) -> None:
    elements = set(f.targets) or set(f.actors)
    names = set(f.names) if f.targets or not f.actors else set(f.actor_names)
    for q in c.g.dom_queries:
        arg = (q.argument or "").lstrip("#.")
        if set(q.elements) & elements or (arg and arg in names):
            if q.function is None:
                c.statement("dir", q.span, why + ": top-level query", None)
            else:
                c.function("dir", q.function, why)


def _probe_text(c: _Case) -> None:
    f = _failure(c.g, c.d, c.probe)
    c.failure = f
    if _HANG.search(str(c.d.get("message", ""))):
        _loops(c)
    (_missing_element if f.missing else _failed_check)(c, f)
    _dangling_queries(c, f)
    _misdirected_queries(c, f)
    _unbound_actor(c, f)
    if not c.has("dir"):
        _naive_queries(c, f, "fallback: the function looking up the failing element")
    _context(c)


def _probe_naive(c: _Case) -> None:
    _naive_queries(c, _failure(c.g, c.d, c.probe), "function querying the failing element")


# -- execution grounding -----------------------------------------------------------------------

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


def _ground(c: _Case) -> None:
    """Execution grounding of a probe failure with the functions that ran since load.

    Adds to S_dir the writers of X and the handlers of Y that ran, and the functions they
    called that ran; then moves the blamed functions that did not run to S_ctx, unless none
    of them ran. When the action ran no code at all, blames the wiring (``_nothing_ran``).
    """
    cov = c.d.get("coverage")
    if not isinstance(cov, dict) or not isinstance(cov.get("functions"), list):
        return
    g, f = c.g, c.failure
    ran = ran_functions(g, cov)
    if not ran and f.action:
        _nothing_ran(c)
        return
    what = _describe(g, f.targets, f.label)
    keys = _write_keys(f)
    writes = _writes(g, f.targets, keys)
    for w in writes:
        if w.function in ran:
            c.function("dir", w.function, f"ran before the failure and writes {what}",
                       "coverage")
    if not writes and keys is not None and not f.missing:
        for w in g.element_writes:
            if w.function in ran and _write_key(w) in keys:
                c.statement("dir", w.span, f"ran before the failure and writes {w.kind} of "
                            f"{_describe(g, w.elements, 'an unresolved element')}, not of "
                            f"{what}", w.function, "coverage")
    actor = _describe(g, f.actors, f.actor_label)
    bindings = _bindings_for(g, f.actors, f.action)
    if not bindings and f.action:  # Y unresolved (made by script): handlers that fit the action
        events = _ACTION_EVENTS.get(f.action, frozenset())
        bindings = [b for b in g.event_bindings if b.event and b.event.lower() in events
                    and not b.global_target]
    for b in bindings:
        if b.handler in ran:
            c.function("dir", b.handler, f"ran before the failure, bound to {b.target_text[:40]} "
                       f"for the action on {actor}", "coverage")
    for fi in sorted({i.fn for i in c.items if i.set == "dir" and i.fn in ran}):
        for call in g.calls_from(fi):
            for t in call.targets:
                if t in ran and t != fi:
                    c.function("dir", t, f"ran before the failure, called by "
                               f"{g.functions[fi].qualname or 'a blamed function'}", "coverage")
    direct = [i for i in c.items if i.set == "dir" and i.fn is not None]
    if any(i.fn in ran for i in direct):
        for i in direct:
            if i.fn not in ran:
                i.set, i.by = "ctx", "coverage"
                i.why += "; did not run before the failure"


def _nothing_ran(c: _Case) -> None:
    """An action ran no code at all: its handler was never bound, so blame the wiring (the
    registrations and the start-up code that should have made them), not the handlers."""
    for i in c.items:
        if i.set == "dir" and i.fn is not None:
            i.set, i.by = "ctx", "coverage"
            i.why += "; no code ran after the action"
    for b in c.g.event_bindings:
        if b.global_target and (b.event or "").lower() in ("load", "domcontentloaded"):
            named = re.fullmatch(r"[\w$.]+", b.handler_text)
            c.add("dir", b.span if named else (b.span[0], b.handler_span[0]),
                  f"start-up binding ({b.target_text} '{b.event}'): nothing ran after the "
                  "action, so the handlers may never have been bound", "coverage")
    for fn in c.g.functions:
        if fn.name in ("setup", "init", "main") and fn.parent is None:
            c.function("ctx", fn.index, "start-up function", "coverage")


def _probe_grounded(c: _Case) -> None:
    _probe_text(c)
    _ground(c)
    _context(c)


# -- exceptions, syntax errors, runtime failures -----------------------------------------------

def _fn_at(g: CodeGraph, offset: int) -> int | None:
    fn = g.enclosing_function(offset)
    return None if fn is None else fn.index


def _line_at(text: str, offset: int) -> Span:
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


def _null_sources(c: _Case, stmt: Span, by: str) -> None:
    """A null/undefined read at ``stmt``: a query for an element that does not exist."""
    if not _NULL_READ.search(str(c.d.get("message", ""))):
        return
    code = c.g.text[stmt[0]:stmt[1]]
    for q in c.g.dom_queries:
        if q.elements or not q.exact:
            continue
        inside = stmt[0] <= q.span[0] < stmt[1]
        if inside or (q.variable and re.search(r"(?<![\w$.])" + re.escape(q.variable)
                                               + r"(?![\w$])", code)):
            c.statement("dir", q.span, f"query for {q.selector or q.argument!r} finds no "
                        "element: the null the statement reads", q.function, by)
    for v in c.g.state_vars:  # or program state that was never (or wrongly) set
        if "." not in v.name and any(stmt[0] <= a < stmt[1] for a, _ in v.reads):
            c.add("ctx", v.decl, f"declares {v.name}, read by the failing statement", by)
            for w in v.writes:
                c.statement("ctx", w, f"writes {v.name}, read by the failing statement", None,
                            by)


def _named_in_message(c: _Case, by: str) -> None:
    """``x is not defined`` / ``not a function``: declarations with a similar name."""
    m = _NAME_IN_MESSAGE.search(str(c.d.get("message", "")))
    if not m:
        return
    root = m.group(1).split(".")[0]
    for q in c.g.dom_queries:  # `canvas.getContext is not a function`: the wrong element
        if q.variable and q.variable.split(".")[-1] == root and "." in m.group(1):
            c.statement("dir", q.span, f"{q.variable} holds the element looked up here, "
                        f"which lacks what the code calls on it", q.function, by)
    name = m.group(1).split(".")[-1]
    for fn in c.g.functions:
        if fn.name and fn.name != name and similar_names(fn.name, name):
            c.add("ctx", fn.span, f"function {fn.name} is named like the missing {name}", by,
                  fn.index)
    for v in c.g.state_vars:
        if v.decl and v.name != name and similar_names(v.name.split(".")[-1], name):
            c.add("ctx", v.decl, f"{v.name} is named like the missing {name}", by)


def _page_error_stack(c: _Case) -> None:
    frames = [f for f in c.d.get("frames") or ()
              if f.get("in_app") and isinstance(f.get("offset"), int)]
    if not frames:
        _page_error_text(c)
        return
    g, top = c.g, frames[0]["offset"]
    head = _statement_head(g, top) or _line_at(g.text, top)
    c.add("dir", head, "statement at the top in-app frame of the exception", "stack")
    c.function("ctx", _fn_at(g, top), "function of the top frame", "stack")
    for k, frame in enumerate(frames[1:], 1):
        off = frame["offset"]
        c.add("ctx", _statement_head(g, off) or _line_at(g.text, off),
              f"call on the stack (frame {k})", "stack")
    _null_sources(c, head, "stack")
    _named_in_message(c, "stack")


def _page_error_text(c: _Case) -> None:
    excerpt = (c.d.get("excerpt") or "").strip()
    lo, hi = c.g.region
    hits = []
    while excerpt and len(hits) < 3:
        at = c.g.text.find(excerpt, hits[-1][1] if hits else lo, hi)
        if at < 0:
            break
        hits.append((at, at + len(excerpt)))
    for span in hits:
        c.add("dir", span, "line quoted by the exception report", "text")
        c.function("ctx", _fn_at(c.g, span[0]), "function containing the quoted line", "text")
        _null_sources(c, span, "text")
    if not hits:
        for item in spans_from_text_evidence(c.g, str(c.d.get("message", ""))).evidence:
            c.add("ctx", tuple(item["span"]), item["why"], "text")
    _named_in_message(c, "text")


def _page_error_naive(c: _Case) -> None:
    frames = [f for f in c.d.get("frames") or () if isinstance(f.get("offset"), int)]
    if frames:
        top = frames[0]["offset"]
        fn = _fn_at(c.g, top)
        if fn is None:
            c.add("dir", _statement_head(c.g, top) or _line_at(c.g.text, top), "top frame")
        c.function("dir", fn, "function of the top frame")


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


def _syntax_error(c: _Case) -> None:
    span = _syntax_span(c)
    if span is None:
        return
    c.add("dir", span, str(c.d.get("message", "syntax error")))
    stmt = c.g.enclosing_statement(span[0])
    fn = c.g.enclosing_function(span[0])
    around = stmt or (fn.span if fn else None) or _line_at(c.g.text, span[0])
    c.add("ctx", around, "statement around the syntax error")


def _syntax_naive(c: _Case) -> None:
    span = _syntax_span(c)
    if span is not None:
        fn = c.g.enclosing_function(span[0])
        c.add("dir", fn.span if fn else (c.g.enclosing_statement(span[0]) or span),
              "code around the syntax error")


def _runtime_failure(c: _Case) -> None:
    """Hangs and crashes: loops that cannot end, then other ``while`` loops."""
    if "uncaught" not in str(c.d.get("message", "")):
        _loops(c)  # an exception's own page_error diagnostic carries its location


def _loops(c: _Case) -> None:
    for s, e in c.g.statements:
        head = c.g.text[s:min(e, s + 40)]
        if _INFINITE_LOOP.match(head):
            c.add("dir", (s, e), "loop without an exit condition (the page hung or crashed)")
        elif head.startswith(("while", "do")):
            c.add("ctx", (s, e), "loop that may not end (the page hung or crashed)")


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
    for excerpt in dict.fromkeys(_excerpts(text)):
        for span in _find_code(graph, excerpt):
            c.add("dir", span, f"quoted code {excerpt[:40]!r}", "text")
    names = set(_IDENT.findall(text))
    for fn in graph.functions:
        if fn.name in names and fn.kind != "inline_handler":
            c.add("dir", fn.span, f"function {fn.name} named in the text", "text", fn.index)
    for kind, name in _SELECTOR_NAME.findall(text):
        attr_ok = (lambda e: e.id == name) if kind == "#" else (lambda e: name in e.classes)
        for e in graph.elements:
            if attr_ok(e):
                c.add("ctx", e.start_tag, f"element {kind}{name} named in the text", "text")
        for r in graph.css_rules:
            if re.search(re.escape(kind + name) + r"(?![-\w])", r.selector):
                c.add("ctx", r.span, f"style rule for {kind}{name}", "text")
    return c.result()


# -- dispatch ----------------------------------------------------------------------------------

_Rules = dict[str, Callable[[_Case], None]]
_TEXT_RULES: _Rules = {"probe_failure": _probe_text, "page_error": _page_error_text,
                       "syntax_error": _syntax_error, "runtime_failure": _runtime_failure}
_GROUNDED_RULES: _Rules = {**_TEXT_RULES, "probe_failure": _probe_grounded,
                           "page_error": _page_error_stack}
_NAIVE_RULES: _Rules = {"probe_failure": _probe_naive, "page_error": _page_error_naive,
                        "syntax_error": _syntax_naive, "runtime_failure": _runtime_failure}
METHODS: dict[str, _Rules] = {"text": _TEXT_RULES, "grounded": _GROUNDED_RULES,
                              "naive": _NAIVE_RULES}


def localize(graph: CodeGraph, diagnostic: dict, method: str = "grounded",
             probe: dict | None = None) -> Localization:
    """S_dir, S_ctx and evidence of one diagnostic.

    Args:
        graph: Graph of the response the diagnostic is about (built on the whole response).
        diagnostic: One entry of a record's ``diagnostics``.
        method: A key of ``METHODS``.
        probe: The probe of the diagnostic's rubric, when known: lets a failed ``assert``
            find the elements whose saved readings it compared.

    Returns:
        The localization; empty for kinds that are not localized (info, ``no_app``).

    Raises:
        KeyError: unknown method.
    """
    rule = METHODS[method].get(diagnostic.get("kind"))
    if rule is None:
        return Localization()
    c = _Case(graph, diagnostic, probe)
    rule(c)
    return c.result()
