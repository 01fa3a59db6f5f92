"""Fault injection: single-fault mutants of apps (the localization benchmarks, task synthesis).

Every operator takes an app's code graph and returns the places it can put one fault
(``Mutation``: a replacement of ``response[start:end]``, the fault being the new text).
``FAULTS`` are the six kinds the localization rules were written while looking at; ``UNSEEN``
are eight kinds added for issue 18 that no rule was written for (swapped arguments, a wrong
variable of the same kind, an off-by-one loop bound, an early return, a wrong property name, a
listener on the wrong element, a timer never started, state reset in the wrong place).
``held_out`` splits tasks by a hash of their id, fixed before any rule is written against
the unseen kinds: rules are developed on the other tasks, and figures on the held-out ones are
the ones to quote.
"""

from __future__ import annotations

import dataclasses
import hashlib
import random
import re
from typing import Callable

import tree_sitter
import tree_sitter_javascript

from evaluators.localize.graph import CodeGraph

_JS = tree_sitter.Language(tree_sitter_javascript.language())
_SWAP = {"+": "-", "-": "+", "*": "/", "/": "*", "<": ">", ">": "<", "<=": ">=", ">=": "<=",
         "===": "!==", "!==": "===", "==": "!=", "!=": "==", "&&": "||", "||": "&&"}
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
HELD_OUT_SHARE = 0.4


def held_out(task_id: str) -> bool:
    """Whether a task is in the held-out split (about 40% of tasks, by a hash of the id)."""
    return int(hashlib.sha256(task_id.encode()).hexdigest()[:8], 16) / 2 ** 32 < HELD_OUT_SHARE


@dataclasses.dataclass(frozen=True)
class Mutation:
    """Replaces ``response[start:end]`` with ``new``: the fault is ``[start, start + len(new))``
    less the blanks at either end of ``new``."""

    kind: str
    start: int
    end: int
    new: str

    def apply(self, response: str) -> str:
        return response[:self.start] + self.new + response[self.end:]

    @property
    def fault(self) -> tuple[int, int]:
        # Blanks around the inserted code (`` return;``) are no one's to blame.
        body = self.new.strip()
        if not body:
            return self.start, self.start + len(self.new)
        lead = len(self.new) - len(self.new.lstrip())
        return self.start + lead, self.start + lead + len(body)


# -- fault sites --------------------------------------------------------------------------------

def _js_nodes(g: CodeGraph, types: frozenset[str]) -> list[tuple[object, int, bytes]]:
    """Nodes of the given types in every script: (node, char offset of the script, its bytes)."""
    out = []
    parser = tree_sitter.Parser(_JS)
    for script in g.scripts:
        data = g.text[script.span[0]:script.span[1]].encode("utf-8")
        stack = [parser.parse(data).root_node]
        while stack:
            node = stack.pop()
            if node.type in types:
                out.append((node, script.span[0], data))
            stack.extend(node.children)
    return out


def _char(base: int, data: bytes, byte: int) -> int:
    return base + len(data[:byte].decode("utf-8", "ignore"))


def _operator_sites(g: CodeGraph, rng: random.Random) -> list[Mutation]:
    out = []
    for node, base, data in _js_nodes(g, frozenset(("binary_expression",))):
        op = node.child_by_field_name("operator")
        sides = (node.child_by_field_name("left"), node.child_by_field_name("right"))
        if op is None or op.type not in _SWAP or any(
                s is not None and s.type in ("string", "template_string") for s in sides):
            continue
        start = _char(base, data, op.start_byte)
        if g.enclosing_function(start) is not None:
            out.append(Mutation("operator", start, start + len(op.type), _SWAP[op.type]))
    return out


def _constant_sites(g: CodeGraph, rng: random.Random) -> list[Mutation]:
    out = []
    for node, base, data in _js_nodes(g, frozenset(("number",))):
        text = data[node.start_byte:node.end_byte].decode()
        try:
            value = float(text)
        except ValueError:
            continue
        new = str(int(value) + 1) if value.is_integer() else f"{value * 2 + 0.5:g}"
        start = _char(base, data, node.start_byte)
        out.append(Mutation("constant", start, start + len(text), new))
    return out


def _state_sites(g: CodeGraph, rng: random.Random) -> list[Mutation]:
    out = []
    for v in g.state_vars:
        for s, e in v.writes:
            stmt = g.enclosing_statement(s)
            if stmt is None or g.enclosing_function(s) is None:
                continue
            if g.text[stmt[0]:stmt[1]].rstrip().rstrip(";").strip() == g.text[s:e]:
                out.append(Mutation("state_update", s, e, "void 0"))
    return out


def _handler_sites(g: CodeGraph, rng: random.Random) -> list[Mutation]:
    """Named handlers of listeners and ``on*`` properties, and the call in ``on*`` attributes."""
    names = sorted({f.name for f in g.functions
                    if f.kind == "declaration" and f.parent is None and f.name})
    out = []
    for b in g.event_bindings:
        start = b.handler_span[0]
        m = re.match(r"\s*([A-Za-z_$][\w$]*)\s*\(" if b.kind == "attribute"
                     else r"([A-Za-z_$][\w$]*)$", b.handler_text)
        if m is None or (b.kind == "attribute" and m.group(1) not in names):
            continue
        others = [n for n in names if n != m.group(1)]
        if others:
            out.append(Mutation("handler", start + m.start(1), start + m.end(1),
                                rng.choice(others)))
    return out


def _query_sites(g: CodeGraph, rng: random.Random) -> list[Mutation]:
    ids = sorted({e.id for e in g.elements if e.id and re.fullmatch(r"[-\w]+", e.id)})
    out = []
    for q in g.dom_queries:
        arg = q.argument or ""
        if q.method == "getElementById":
            ident = arg
        elif q.method == "querySelector" and re.fullmatch(r"#[-\w]+", arg):
            ident = arg[1:]
        else:
            continue
        at = g.text.find(ident, q.span[0] + len(q.method), q.span[1])
        others = [i for i in ids if i != ident]
        if at >= 0 and ident and others:
            out.append(Mutation("query_id", at, at + len(ident), rng.choice(others)))
    return out


def _css_value(prop: str, value: str) -> str | None:
    if prop == "display":
        return "block" if value == "none" else "none"
    if prop == "visibility":
        return "visible" if value == "hidden" else "hidden"
    if prop.endswith("color") and re.fullmatch(r"#[0-9a-fA-F]{3,8}|[a-z]+", value):
        return "#777777"
    m = _NUMBER.search(value)
    if m and not value.startswith("#"):
        number = float(m.group())
        new = f"{number * 2 + 1:g}"
        return value[:m.start()] + new + value[m.end():]
    return None


def _css_sites(g: CodeGraph, rng: random.Random) -> list[Mutation]:
    out = []
    for rule in g.css_rules:
        for d in rule.declarations:
            text = g.text[d.span[0]:d.span[1]]
            m = re.match(r"[^:]*:\s*(.*?)\s*;?\s*$", text, re.S)
            if not m or not m.group(1):
                continue
            new = _css_value(d.property.lower(), m.group(1))
            if new is not None and new != m.group(1):
                start = d.span[0] + m.start(1)
                out.append(Mutation("css_value", start, start + len(m.group(1)), new))
    return out


FAULTS: dict[str, Callable[[CodeGraph, random.Random], list[Mutation]]] = {
    "handler": _handler_sites, "query_id": _query_sites, "operator": _operator_sites,
    "constant": _constant_sites, "state_update": _state_sites, "css_value": _css_sites,
}


# -- kinds no rule was written for (issue 18) ---------------------------------------------------

_TIMERS = frozenset(("setInterval", "setTimeout", "requestAnimationFrame"))
_DOM_PROPS = ("textContent", "innerHTML", "innerText", "value", "checked", "className",
              "disabled", "hidden", "width", "height", "fillStyle", "strokeStyle", "src")


def _text(node, data: bytes) -> str:
    return data[node.start_byte:node.end_byte].decode("utf-8", "ignore")


def _in_function(g: CodeGraph, at: int) -> bool:
    return g.enclosing_function(at) is not None


def _swapped_args(g: CodeGraph, rng: random.Random) -> list[Mutation]:
    out = []
    for node, base, data in _js_nodes(g, frozenset(("arguments",))):
        args = [c for c in node.named_children if c.type != "comment"]
        if len(args) < 2 or _text(args[0], data) == _text(args[1], data):
            continue
        a, b = args[0], args[1]
        start, end = _char(base, data, a.start_byte), _char(base, data, b.end_byte)
        if not _in_function(g, start):
            continue
        between = data[a.end_byte:b.start_byte].decode("utf-8", "ignore")
        out.append(Mutation("swapped_args", start, end,
                            _text(b, data) + between + _text(a, data)))
    return out


def _wrong_variable(g: CodeGraph, rng: random.Random) -> list[Mutation]:
    names = sorted({v.name for v in g.state_vars if "." not in v.name and v.decl})
    out = []
    for v in g.state_vars:
        others = [n for n in names if n != v.name]
        if "." in v.name or not others:
            continue
        for s, e in v.reads:
            if _in_function(g, s) and g.text[s:e] == v.name:
                out.append(Mutation("wrong_variable", s, e, rng.choice(others)))
    return out


def _loop_bound(g: CodeGraph, rng: random.Random) -> list[Mutation]:
    off = {"<": "<=", "<=": "<", ">": ">=", ">=": ">"}
    out = []
    for node, base, data in _js_nodes(g, frozenset(("for_statement",))):
        cond = node.child_by_field_name("condition")
        stack = [cond] if cond is not None else []
        while stack:
            n = stack.pop()
            op = n.child_by_field_name("operator") if n.type == "binary_expression" else None
            if op is not None and op.type in off:
                start = _char(base, data, op.start_byte)
                out.append(Mutation("loop_bound", start, start + len(op.type), off[op.type]))
                break
            stack.extend(n.children)
    return out


def _early_return(g: CodeGraph, rng: random.Random) -> list[Mutation]:
    out = []
    for fn in g.functions:
        body = g.text[fn.body[0]:fn.body[1]]
        if not body.startswith("{") or body.count(";") < 2 or fn.kind == "inline_handler":
            continue
        at = fn.body[0] + 1
        out.append(Mutation("early_return", at, at, " return;"))
    return out


def _property_name(g: CodeGraph, rng: random.Random) -> list[Mutation]:
    out = []
    for node, base, data in _js_nodes(g, frozenset(("member_expression",))):
        prop = node.child_by_field_name("property")
        if prop is None or _text(prop, data) not in _DOM_PROPS:
            continue
        name = _text(prop, data)
        new = name.lower() if name.lower() != name else name + "s"
        start = _char(base, data, prop.start_byte)
        if _in_function(g, start):
            out.append(Mutation("property_name", start, start + len(name), new))
    return out


def _listener_target(g: CodeGraph, rng: random.Random) -> list[Mutation]:
    holders = sorted({q.variable for q in g.dom_queries
                      if q.variable and re.fullmatch(r"[A-Za-z_$][\w$]*", q.variable)})
    out = []
    for b in g.event_bindings:
        others = [h for h in holders if h != b.target_text]
        if b.kind != "listener" or b.target_text not in holders or not others:
            continue
        if g.text.startswith(b.target_text, b.span[0]):
            out.append(Mutation("listener_target", b.span[0], b.span[0] + len(b.target_text),
                                rng.choice(others)))
    return out


def _timer_not_started(g: CodeGraph, rng: random.Random) -> list[Mutation]:
    out = []
    for node, base, data in _js_nodes(g, frozenset(("call_expression",))):
        fn = node.child_by_field_name("function")
        name = _text(fn, data).split(".")[-1] if fn is not None else ""
        if name in _TIMERS:
            start = _char(base, data, node.start_byte)
            out.append(Mutation("timer_not_started", start, _char(base, data, node.end_byte),
                                "void 0"))
    return out


def _reset_misplaced(g: CodeGraph, rng: random.Random) -> list[Mutation]:
    """A write of a state variable's initial value added at the end of a function that
    updates it (the update is undone as soon as it is made)."""
    out = []
    for v in g.state_vars:
        if "." in v.name or v.decl is None:
            continue
        init = g.text[v.decl[0]:v.decl[1]].partition("=")[2].strip()
        if not init or len(init) > 40 or "\n" in init:
            continue
        for fi in sorted({g.enclosing_function(s).index for s, _ in v.writes
                          if g.enclosing_function(s) is not None}):
            fn = g.functions[fi]
            if g.text[fn.body[0]:fn.body[1]].startswith("{"):
                at = fn.body[1] - 1
                out.append(Mutation("reset_misplaced", at, at, f" {v.name} = {init}; "))
    return out


UNSEEN: dict[str, Callable[[CodeGraph, random.Random], list[Mutation]]] = {
    "swapped_args": _swapped_args, "wrong_variable": _wrong_variable,
    "loop_bound": _loop_bound, "early_return": _early_return,
    "property_name": _property_name, "listener_target": _listener_target,
    "timer_not_started": _timer_not_started, "reset_misplaced": _reset_misplaced,
}


# -- markup: what an app shows before any script runs (task synthesis) --------------------------

_MARKUP_ATTRS = ("type", "value", "min", "max", "step", "placeholder", "checked", "hidden",
                 "disabled", "selected")


def _element_dropped(g: CodeGraph, rng: random.Random) -> list[Mutation]:
    """An element with an id removed from the page (a control or display left out)."""
    return [Mutation("element_dropped", e.span[0], e.span[1], "")
            for e in g.elements if e.id and e.tag not in ("script", "style", "html", "body", "head")]


def _id_renamed(g: CodeGraph, rng: random.Random) -> list[Mutation]:
    """An element's id misspelled in the markup (scripts and probes no longer find it)."""
    out = []
    for e in g.elements:
        for a in e.attributes:
            if a.name == "id" and a.value and a.value_span:
                out.append(Mutation("id_renamed", a.value_span[0], a.value_span[1], a.value + "x"))
    return out


def _attribute_changed(g: CodeGraph, rng: random.Random) -> list[Mutation]:
    """An input's type, value, bound or state attribute changed or removed."""
    out = []
    for e in g.elements:
        for a in e.attributes:
            if a.name not in _MARKUP_ATTRS:
                continue
            if a.value_span and a.value:
                new = {"number": "text", "text": "number", "range": "number",
                       "checkbox": "radio"}.get(a.value)
                if new is None:
                    m = _NUMBER.fullmatch(a.value)
                    new = str(int(float(a.value)) + 1) if m else a.value + "?"
                out.append(Mutation("attribute_changed", a.value_span[0], a.value_span[1], new))
            else:
                out.append(Mutation("attribute_changed", a.span[0], a.span[1], ""))
    return out


def _text_changed(g: CodeGraph, rng: random.Random) -> list[Mutation]:
    """The initial text of an element with an id changed (a wrong default or label)."""
    out = []
    for e in g.elements:
        if not e.id or e.children or e.tag in ("script", "style"):
            continue
        inner_start = e.start_tag[1]
        close = g.text.rfind("</", inner_start, e.span[1])
        if close <= inner_start:
            continue
        text = g.text[inner_start:close]
        if text.strip() and "<" not in text:
            m = _NUMBER.search(text)
            new = (text[:m.start()] + str(int(float(m.group())) + 1) + text[m.end():]) if m else text + "!"
            out.append(Mutation("text_changed", inner_start, close, new))
    return out


MARKUP: dict[str, Callable[[CodeGraph, random.Random], list[Mutation]]] = {
    "element_dropped": _element_dropped, "id_renamed": _id_renamed,
    "attribute_changed": _attribute_changed, "text_changed": _text_changed,
}
