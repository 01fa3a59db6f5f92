"""Builds the graph's JavaScript records from a ``JsResolver``."""

from __future__ import annotations

import re

from evaluators.localize.js_syntax import (
    container_owner, is_property, literal_string, node_key, property_key, unwrap,
)
from evaluators.localize.js_resolve import (
    DOM_ONLY_PROPS, ELEMENT_PROPS, STATE_KINDS, UNAMBIGUOUS_CHILD_METHODS, JsResolver,
)
from evaluators.localize.model import (
    DomQuery, ElementWrite, EventBinding, Span, StateVar, Variable, VarRef,
)

_EVENT_PROPERTY = re.compile(r"on[a-z]+")


def event_bindings(r: JsResolver, inline: list[tuple]) -> list[EventBinding]:
    """Listeners, ``on*`` property assignments and inline attributes.

    Args:
        r: The resolver.
        inline: ``(element, event, raw function, attribute span, code span, start-tag text,
            code text)`` per inline ``on*`` attribute.
    """
    col, text, span = r.col, r.text_of, r.col.span_of
    out = []
    for kind, event, target, handler, node, scope, func in col.listeners:
        name = event if isinstance(event, str) else literal_string(unwrap(event))
        elements, global_target = r.target_of(target, scope)
        out.append(EventBinding(name, kind, text(target), elements, global_target,
                                r.f(r.function_of(handler, scope)), text(handler), span(handler),
                                span(node), r.f(func)))
    for node, left, right, scope, func in col.assigns:
        left = unwrap(left)
        if node.type != "assignment_expression" or left is None or right is None:
            continue
        if left.type != "member_expression":
            continue
        prop = left.child_by_field_name("property")
        if prop is None or not _EVENT_PROPERTY.fullmatch(text(prop)):
            continue
        obj = left.child_by_field_name("object")
        elements, global_target = r.target_of(obj, scope)
        out.append(EventBinding(text(prop)[2:], "property", text(obj), elements, global_target,
                                r.f(r.function_of(right, scope)), text(right), span(right),
                                span(node), r.f(func)))
    for element, event, raw, attribute_span, code_span, tag_text, code in inline:
        out.append(EventBinding(event, "attribute", tag_text, (element,), None, r.f(raw), code,
                                code_span, attribute_span, None))
    out.sort(key=lambda b: b.span)
    return out


def _kebab(name: str) -> str:
    return re.sub(r"[A-Z]", lambda m: "-" + m.group().lower(), name)


def _assignment_write(r: JsResolver, left) -> tuple[str, str, object] | None:
    """(kind, detail, target node) when an assignment to ``left`` writes an element."""
    if left is None or left.type != "member_expression":
        return None
    prop_node = left.child_by_field_name("property")
    obj = left.child_by_field_name("object")
    if prop_node is None or obj is None:
        return None
    prop = r.text_of(prop_node)
    if is_property(obj, "style"):
        return "style", prop, obj.child_by_field_name("object")
    if is_property(obj, "dataset"):
        return "attribute", "data-" + _kebab(prop), obj.child_by_field_name("object")
    if prop == "style":
        return "style", "", obj
    if prop in DOM_ONLY_PROPS or prop in ELEMENT_PROPS:
        return prop, "", obj
    return None


def element_writes(r: JsResolver) -> list[ElementWrite]:
    """Writes to element content, properties, style, classes, attributes and children.

    Properties that non-element objects share (``value``, ``width``...) count only when the
    target resolves to an element; ``textContent``, ``innerHTML``, ``style`` and DOM methods
    count even on an unknown target, since only elements have them.
    """
    col, text, span = r.col, r.text_of, r.col.span_of
    out = []
    for node, left, right, scope, func in col.assigns:
        found = _assignment_write(r, unwrap(left))
        if found is None:
            continue
        kind, detail, target = found
        elements, _ = r.target_of(target, scope)
        if kind in ELEMENT_PROPS and not elements:
            continue
        out.append(ElementWrite(kind, detail, text(target), elements, span(node), r.f(func)))
    for kind, detail, target, node, scope, func in col.dom_calls:
        if target is None:
            continue
        elements, global_target = r.target_of(target, scope)
        if global_target is not None:
            continue
        if kind == "children" and detail not in UNAMBIGUOUS_CHILD_METHODS and not elements:
            continue
        out.append(ElementWrite(kind, detail, text(target), elements, span(node), r.f(func)))
    out.sort(key=lambda w: w.span)
    return out


def _result_variable(node, text) -> str | None:
    """Where a query's result is stored: ``b`` in ``const b = q()``, ``els.b`` in ``{b: q()}``."""
    child, parent = node, node.parent
    while parent is not None and parent.type in ("parenthesized_expression", "await_expression"):
        child, parent = parent, parent.parent
    if parent is None:
        return None
    key = node_key(child)
    value = parent.child_by_field_name("value")
    if parent.type == "variable_declarator" and value is not None and node_key(value) == key:
        name = parent.child_by_field_name("name")
        return text(name) if name is not None and name.type == "identifier" else None
    right = parent.child_by_field_name("right")
    if parent.type == "assignment_expression" and right is not None and node_key(right) == key:
        return text(parent.child_by_field_name("left"))
    if parent.type == "pair" and value is not None and node_key(value) == key:
        prop = property_key(parent.child_by_field_name("key"))
        owner = container_owner(parent.parent)
        return f"{owner}.{prop}" if owner and prop else prop
    return None


def dom_queries(r: JsResolver) -> list[DomQuery]:
    out = []
    for q in r.queries:
        node, method, obj, arg, scope, func = q
        elements, exact, selector = r.query_elements(q)
        out.append(DomQuery(method, literal_string(unwrap(arg)), selector, elements, exact,
                            _result_variable(node, r.text_of), r.col.span_of(node), r.f(func)))
    out.sort(key=lambda q: q.span)
    return out


def _property_decl(r: JsResolver, binding: int, props: tuple[str, ...]) -> Span | None:
    init = unwrap(r.col.bindings[binding].init)
    if init is None or init.type != "object" or len(props) != 1:
        return None
    for pair in init.named_children:
        if pair.type == "pair" and property_key(pair.child_by_field_name("key")) == props[0]:
            return r.col.span_of(pair)
    return None


def state_vars(r: JsResolver) -> list[StateVar]:
    """Global ``var``/``let``/``const`` (and implicit) variables and static paths under them.

    Paths are not made under variables that hold elements (``els.out.textContent`` is a DOM
    write, reported by ``element_writes``, not program state).
    """
    col = r.col
    state = {b for b, binding in enumerate(col.bindings)
             if binding.scope == 0 and binding.kind in STATE_KINDS and binding.function is None}
    sites: dict[tuple, tuple[list, list]] = {(b, ()): ([], []) for b in state}
    for name, scope, span, mode, site in col.refs:
        b = r.resolve(name, scope)
        if b in state:
            reads, writes = sites[(b, ())]
            (reads if mode == "r" else writes).append(span if mode == "r" else site)
    for root, scope, props, span, mode, site in col.member_refs:
        b = r.resolve(root, scope)
        if b not in state or ("b", b) in r.holders:
            continue
        reads, writes = sites.setdefault((b, props), ([], []))
        (reads if mode == "r" else writes).append(span if mode == "r" else site)
    out = []
    for (b, props), (reads, writes) in sites.items():
        binding = col.bindings[b]
        decl = _property_decl(r, b, props) if props else binding.decl
        name = ".".join((binding.name,) + props)
        out.append(StateVar(name, binding.name, decl, tuple(sorted(set(reads))),
                            tuple(sorted(set(writes)))))
    out.sort(key=lambda v: (_first(v), v.name))
    return out


def _first(v: StateVar) -> int:
    starts = [s[0] for s in v.reads + v.writes] + ([v.decl[0]] if v.decl else [])
    return min(starts) if starts else -1


def variables(r: JsResolver) -> tuple[list[Variable], list[VarRef]]:
    """Every binding as a ``Variable`` (same index as the collector's binding), and every
    resolved reference to one, in source order (what data-flow slicing reads)."""
    col = r.col
    param_of = {b: r.f(fid) for fid, f in enumerate(col.functions) for b in f.param_bindings}
    out = [Variable(b.name, b.kind, b.decl, b.scope == 0, param_of.get(i))
           for i, b in enumerate(col.bindings)]
    refs = []
    for name, scope, span, mode, site in col.refs:
        b = r.resolve(name, scope)
        if b is not None:
            refs.append(VarRef(b, span, mode == "w", site))
    for root, scope, props, span, mode, site in col.member_refs:
        b = r.resolve(root, scope)
        # A read's root identifier is a ref of its own; a property write on an element is a
        # DOM write (``element_writes``), not a new value of the variable.
        if b is not None and mode == "w" and ("b", b) not in r.holders:
            refs.append(VarRef(b, span, True, site))
    refs.sort(key=lambda x: (x.span, x.write))
    return out, refs
