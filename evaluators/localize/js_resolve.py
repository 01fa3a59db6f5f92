"""Second pass: resolves the collector's raw facts into the graph's records.

Resolution order matters: implicit globals are declared first (so that ``x = 1`` without a
declaration resolves), then which function each binding holds, then the element holders (to a
fixed point, since ``const b = els.btn`` depends on ``els``), and only then the records that
mention elements (queries, bindings, writes). Raw function ids are renumbered in source order.
"""

from __future__ import annotations

import re
from itertools import product
from typing import Callable, Sequence

from evaluators.localize.css import SelectorMatcher
from evaluators.localize.js_collect import JsCollector
from evaluators.localize.js_syntax import (
    FUNCTION_TYPES, literal_string, node_key, static_path, unwrap,
)
from evaluators.localize.model import Call, Element, Function

_EMPTY: frozenset[int] = frozenset()
STATE_KINDS = frozenset(("var", "let", "const", "implicit"))
_GLOBAL_OBJECTS = {"window": "window", "self": "window", "globalThis": "window",
                   "document": "document"}
# Properties that only exist on elements: a write is a DOM write even if the target is unknown.
DOM_ONLY_PROPS = frozenset(("textContent", "innerHTML", "innerText", "outerHTML", "className"))
# Properties that objects other than elements often have: recorded only on known elements.
ELEMENT_PROPS = frozenset((
    "value", "checked", "disabled", "hidden", "src", "href", "selected", "selectedIndex", "min",
    "max", "step", "placeholder", "title", "id", "width", "height", "type", "valueAsNumber",
    "open", "htmlFor",
))
UNAMBIGUOUS_CHILD_METHODS = frozenset((
    "appendChild", "removeChild", "replaceChildren", "replaceChild", "insertBefore",
    "insertAdjacentHTML", "insertAdjacentElement",
))
_SELECTOR_QUERIES = frozenset(("querySelector", "querySelectorAll", "select", "selectAll", "$"))
_FIRST_MATCH = frozenset(("querySelector", "select"))
_DOCUMENT_WIDE = frozenset(("getElementById", "select", "selectAll", "$"))
_MAX_ALTERNATIVES = 64
_NUMBER = r"-?[0-9]+(?:\.[0-9]+)?"
_MAX_DEPTH = 8


class JsResolver:
    """Resolves a finished ``JsCollector`` against the document's elements.

    Args:
        col: The collector, after every script and inline handler was added.
        elements: The document's elements.
        matcher: Selector matcher over ``elements``.
        text_of: Node -> its source text.
    """

    def __init__(self, col: JsCollector, elements: Sequence[Element], matcher: SelectorMatcher,
                 text_of: Callable):
        self.col = col
        self.elements = elements
        self.matcher = matcher
        self.text_of = text_of
        self._cache: dict[tuple[str, int], int | None] = {}
        self.holders: dict[tuple, set[int]] = {}
        self.string_values: dict[int, list[str]] = {}
        # (binding, field) -> the field's value in each object of a literal table the binding
        # runs over (None where an object lacks it or it is not a literal string)
        self.field_values: dict[tuple[int, str], list[str | None]] = {}
        tags = {}
        for e in elements:
            tags.setdefault(e.tag, e.index)
        self._body, self._html = tags.get("body"), tags.get("html")
        order = sorted(range(len(col.functions)),
                       key=lambda i: (col.functions[i].span[0], -col.functions[i].span[1]))
        self.fmap = {raw: new for new, raw in enumerate(order)}
        self._order = order
        self._declare_implicit_globals()
        self._bind_function_values()
        self._by_qualname: dict[str, list[int]] = {}
        self._by_owner: dict[str, list[int]] = {}
        self._members_by_name: dict[str, list[int]] = {}
        for raw, f in enumerate(col.functions):
            if f.owner is not None and f.name is not None:
                self._members_by_name.setdefault(f.name, []).append(raw)
                self._by_qualname.setdefault(f"{f.owner}.{f.name}", []).append(raw)
                self._by_owner.setdefault(f.owner, []).append(raw)
        # A bare `select(...)` is p5's only when no user function of that name exists.
        self.queries = [q for q in col.queries
                        if q[2] is not None or self.resolve(q[1], q[4]) is None]
        self._query_at = {node_key(raw[0]): raw for raw in self.queries}
        self._collect_string_values()
        self._compute_holders()

    # -- names -------------------------------------------------------------------------------

    def resolve(self, name: str, scope: int) -> int | None:
        key = (name, scope)
        if key in self._cache:
            return self._cache[key]
        names, parent = self.col.scope_names, self.col.scope_parent
        s, found = scope, None
        while s is not None:
            found = names[s].get(name)
            if found is not None:
                break
            s = parent[s]
        self._cache[key] = found
        return found

    def _declare_implicit_globals(self) -> None:
        for name, scope, span, mode, site in self.col.refs:
            if mode == "w" and self.resolve(name, scope) is None:
                self.col.declare(name, 0, "implicit", None)
                self._cache.clear()

    def _bind_function_values(self) -> None:
        at = self.col.function_at
        for b in self.col.bindings:
            init = unwrap(b.init)
            if b.function is None and init is not None and init.type in FUNCTION_TYPES:
                b.function = at.get(node_key(init))
        for node, left, right, scope, func in self.col.assigns:
            left, right = unwrap(left), unwrap(right)
            if left is None or right is None or left.type != "identifier":
                continue
            if right.type in FUNCTION_TYPES:
                b = self.resolve(left.text.decode("utf-8", "replace"), scope)
                if b is not None and self.col.bindings[b].function is None:
                    self.col.bindings[b].function = at.get(node_key(right))

    def _binding_of(self, node, scope: int) -> int | None:
        node = unwrap(node)
        if node is None or node.type != "identifier":
            return None
        return self.resolve(node.text.decode("utf-8", "replace"), scope)

    # -- literal strings ---------------------------------------------------------------------

    def _array_items(self, node, scope: int) -> list:
        """The items of a literal array, given as is or by the variable it initialises."""
        node = unwrap(node)
        if node is not None and node.type == "identifier":
            b = self._binding_of(node, scope)
            node = unwrap(self.col.bindings[b].init) if b is not None else None
        if node is None or node.type != "array":
            return []
        return [c for c in node.named_children if c.type != "comment"]

    def _array_strings(self, node, scope: int) -> list[str] | None:
        values = [literal_string(c) for c in self._array_items(node, scope)]
        return values if values and all(v is not None for v in values) else None

    def _array_objects(self, node, scope: int) -> list[dict[str, str | None]] | None:
        """The fields of a literal array of object literals (``[{id: 'a'}, ...]``), each
        field's value when it is a literal string, else None."""
        items = self._array_items(node, scope)
        if not items or any(c.type != "object" for c in items):
            return None
        out = []
        for obj in items:
            fields = {}
            for pair in (c for c in obj.named_children if c.type == "pair"):
                key = pair.child_by_field_name("key")
                name = literal_string(key) if key.type == "string" else self.text_of(key)
                fields[name] = literal_string(unwrap(pair.child_by_field_name("value")))
            out.append(fields)
        return out

    def _collect_string_values(self) -> None:
        """``['a', 'b'].forEach(id => ...)`` and ``for (const id of [...])`` bind literals;
        over a table of objects (``[{id: 'a'}, ...].forEach(r => ...)``), their fields."""
        for target, iterable, scope in self.col.iterations:
            b = target if isinstance(target, int) else self._first_param(target)
            if b is None:
                continue
            values = self._array_strings(iterable, scope)
            if values:
                self.string_values.setdefault(b, []).extend(values)
            rows = self._array_objects(iterable, scope) or []
            for name in dict.fromkeys(n for r in rows for n in r):
                self.field_values.setdefault((b, name), []).extend(r.get(name) for r in rows)

    def _first_param(self, callback) -> int | None:
        raw = self.col.function_at.get(node_key(callback))
        if raw is None or not self.col.functions[raw].param_bindings:
            return None
        return self.col.functions[raw].param_bindings[0]

    def string_alternatives(self, node, scope: int, depth: int = 0) -> tuple[list[str], bool]:
        """Possible values of a string expression as regexes; (patterns, all literal).

        Unknown parts become ``.*``, so ``'btn-' + i`` gives ``['btn\\-.*']``.
        """
        node = unwrap(node)
        if node is None or depth > _MAX_DEPTH:
            return [".*"], False
        value = literal_string(node)
        if value is not None:
            return [re.escape(value)], True
        t = node.type
        if t == "number":
            return [_NUMBER], False
        if t == "identifier":
            b = self._binding_of(node, scope)
            if b is not None:
                known = self.string_values.get(b)
                binding = self.col.bindings[b]
                init = unwrap(binding.init)
                if not known and binding.kind == "const":
                    value = literal_string(init)
                    known = [value] if value is not None else None
                if known:
                    return [re.escape(v) for v in dict.fromkeys(known)], True
                if init is not None and init.type == "number":  # a counter: `'b' + i`
                    return [_NUMBER], False
            return [".*"], False
        if t == "member_expression":  # `r.id`, r running over a table of objects
            field = node.child_by_field_name("property")
            b = self._binding_of(node.child_by_field_name("object"), scope)
            known = self.field_values.get((b, self.text_of(field))) if b is not None else None
            if known and all(v is not None for v in known):
                return [re.escape(v) for v in dict.fromkeys(known)], True
            return [".*"], False
        if t == "binary_expression":
            op = node.child_by_field_name("operator")
            if op is not None and op.type == "+":
                left = self.string_alternatives(node.child_by_field_name("left"), scope, depth + 1)
                right = self.string_alternatives(node.child_by_field_name("right"), scope,
                                                 depth + 1)
                return _concat([left, right])
        if t == "template_string":
            parts = []
            for c in node.named_children:
                if c.type == "template_substitution":
                    inner = c.named_children
                    parts.append(self.string_alternatives(inner[0], scope, depth + 1)
                                 if inner else ([".*"], False))
                elif c.type in ("string_fragment", "escape_sequence"):
                    parts.append(([re.escape(self.text_of(c))], True))
            return _concat(parts)
        return [".*"], False

    # -- elements ----------------------------------------------------------------------------

    def _holder_key(self, spec) -> tuple | None:
        kind = spec[0]
        if kind == "b":
            return spec
        if kind == "n":
            b = self.resolve(spec[1], spec[2])
            return ("b", b) if b is not None else None
        if kind == "pb":
            return ("p", spec[1], spec[2])
        root = self.resolve(spec[1], spec[2])
        return ("p", root if root is not None else spec[1], spec[3])

    def _compute_holders(self) -> None:
        sources = []
        for spec, value, scope in self.col.holder_sources:
            key = self._holder_key(spec)
            if key is not None:
                sources.append((key, value, scope))
        for target, iterable, scope in self.col.iterations:
            b = target if isinstance(target, int) else self._first_param(target)
            if b is not None:
                sources.append((("b", b), iterable, scope))
        for _ in range(4):  # chains like `a = q(); b = a; c = b.x` settle in a few rounds
            changed = False
            for key, value, scope in sources:
                found = self.elements_of(value, scope)
                if found and not found <= self.holders.get(key, _EMPTY):
                    self.holders.setdefault(key, set()).update(found)
                    changed = True
            if not changed:
                break

    def elements_of(self, node, scope: int, depth: int = 0) -> frozenset[int]:
        """Elements an expression can evaluate to, from the static HTML."""
        node = unwrap(node)
        if node is None or depth > _MAX_DEPTH:
            return _EMPTY
        t = node.type
        if t == "call_expression":
            q = self._query_at.get(node_key(node))
            return frozenset(self.query_elements(q, depth)[0]) if q is not None else _EMPTY
        if t == "identifier":
            b = self._binding_of(node, scope)
            return frozenset(self.holders.get(("b", b), _EMPTY)) if b is not None else _EMPTY
        if t in ("member_expression", "subscript_expression"):
            path = static_path(node)
            if path is not None and path[1]:
                root, props = path
                name = self.text_of(root)
                b = self.resolve(name, scope) if root.type == "identifier" else None
                if b is None and name == "document" and len(props) == 1:
                    special = {"body": self._body, "documentElement": self._html}.get(props[0])
                    return frozenset((special,)) if special is not None else _EMPTY
                found = self.holders.get(("p", b if b is not None else name, props))
                if found:
                    return frozenset(found)
            if t == "subscript_expression":  # an item of a NodeList or of an object of elements
                return self.elements_of(node.child_by_field_name("object"), scope, depth + 1)
        return _EMPTY

    def _is_document(self, node, scope: int) -> bool:
        node = unwrap(node)
        return (node is not None and node.type == "identifier" and node.text == b"document"
                and self.resolve("document", scope) is None)

    def query_elements(self, q, depth: int = 0) -> tuple[tuple[int, ...], bool, str | None]:
        """Elements a DOM query can return: (indices, exact, selector equivalent)."""
        node, method, obj, arg, scope, func = q
        patterns, literal = self.string_alternatives(arg, scope) if arg is not None else ([], False)
        if not patterns or all(p == ".*" for p in patterns):
            return (), False, None
        values = [_unescape_regex(p) for p in patterns] if literal else None
        found, exact, selector = self._match_query(method, values, patterns)
        if obj is None or self._is_document(obj, scope) or method in _DOCUMENT_WIDE:
            return found, exact, selector
        scope_elements = self.elements_of(obj, scope, depth + 1)
        if not scope_elements:
            return found, False, selector
        inside = tuple(i for i in found if self._has_ancestor(i, scope_elements))
        if method in _FIRST_MATCH and exact:
            inside = inside[:1]
        return inside, exact, selector

    def _match_query(self, method, values, patterns) -> tuple[tuple[int, ...], bool, str | None]:
        elements = self.elements
        if values is None:  # computed argument: match names against the regexes
            rx = re.compile("|".join(f"(?:{p})" for p in patterns))
            if method == "getElementById":
                hits = [e.index for e in elements if e.id is not None and rx.fullmatch(e.id)]
            elif method == "getElementsByClassName":
                hits = [e.index for e in elements if any(rx.fullmatch(c) for c in e.classes)]
            elif method == "getElementsByTagName":
                hits = [e.index for e in elements if rx.fullmatch(e.tag)]
            elif method == "getElementsByName":
                hits = [e.index for e in elements if rx.fullmatch(_attr(e, "name") or "\0")]
            else:
                hits = []
            return tuple(hits), False, None
        found, exact, selectors = set(), True, []
        for v in values:
            if method == "getElementById":
                hits = [e.index for e in elements if e.id == v][:1]
                selectors.append("#" + v if re.fullmatch(r"[A-Za-z_][-\w]*", v) else f'[id="{v}"]')
            elif method in _SELECTOR_QUERIES:
                hits, ok = self.matcher.match(v)
                exact = exact and ok
                hits = hits[:1] if method in _FIRST_MATCH and ok else hits
                selectors.append(v)
            elif method == "getElementsByClassName":
                wanted = set(v.split())
                hits = [e.index for e in elements if wanted and wanted <= set(e.classes)]
                selectors.append("".join("." + c for c in v.split()))
            elif method == "getElementsByTagName":
                hits = [e.index for e in elements if v == "*" or e.tag == v.lower()]
                selectors.append(v.lower())
            else:
                hits = [e.index for e in elements if _attr(e, "name") == v]
                selectors.append(f'[name="{v}"]')
            found.update(hits)
        return tuple(sorted(found)), exact, ", ".join(selectors)

    def _has_ancestor(self, index: int, ancestors: frozenset[int]) -> bool:
        parent = self.elements[index].parent
        while parent is not None:
            if parent in ancestors:
                return True
            parent = self.elements[parent].parent
        return False

    def target_of(self, node, scope: int) -> tuple[tuple[int, ...], str | None]:
        """(elements, ``window``/``document`` or None) of an event or write target."""
        n = unwrap(node)
        if n is not None and n.type == "identifier":
            name = self.text_of(n)
            if name in _GLOBAL_OBJECTS and self.resolve(name, scope) is None:
                return (), _GLOBAL_OBJECTS[name]
        return tuple(sorted(self.elements_of(node, scope))), None

    # -- functions ---------------------------------------------------------------------------

    def member_targets(self, callee, scope: int) -> list[int]:
        """Raw functions a ``recv.name`` expression may denote (user-defined members only)."""
        prop = callee.child_by_field_name("property")
        if prop is None:
            return []
        path = static_path(callee)
        if path is not None:
            exact = self._by_qualname.get(self.text_of(callee).replace("?.", "."))
            if exact:
                return exact
            root = path[0]
            if root.type == "identifier" and self.resolve(self.text_of(root), scope) is None:
                return []  # Math.max, console.log, THREE.Vector3: library objects
        return list(self._members_by_name.get(self.text_of(prop), ()))

    def function_of(self, node, scope: int, depth: int = 0) -> int | None:
        """Raw function a handler expression denotes, when resolvable."""
        node = unwrap(node)
        if node is None or depth > _MAX_DEPTH:
            return None
        t = node.type
        if t in FUNCTION_TYPES:
            return self.col.function_at.get(node_key(node))
        if t == "identifier":
            b = self._binding_of(node, scope)
            return self.col.bindings[b].function if b is not None else None
        if t == "member_expression":
            targets = self.member_targets(node, scope)
            return targets[0] if targets else None
        if t == "call_expression":  # handler.bind(this)
            callee = node.child_by_field_name("function")
            prop = callee.child_by_field_name("property") if callee is not None else None
            if prop is not None and prop.text == b"bind":
                return self.function_of(callee.child_by_field_name("object"), scope, depth + 1)
        return None

    def f(self, raw: int | None) -> int | None:
        """Final index of a raw function id."""
        return None if raw is None else self.fmap[raw]

    def functions(self) -> list[Function]:
        out = []
        for new, raw in enumerate(self._order):
            r = self.col.functions[raw]
            qual = f"{r.owner}.{r.name}" if r.owner is not None and r.name is not None else r.name
            out.append(Function(new, r.name, qual, r.owner, r.kind, r.span, r.body,
                                self.f(r.parent), tuple(r.params)))
        return out

    def calls(self) -> list[Call]:
        out = []
        for node, scope, func, kind in self.col.calls:
            callee = unwrap(node.child_by_field_name("function" if kind == "call"
                                                     else "constructor"))
            if callee is None:
                continue
            name, targets = None, []
            t = callee.type
            if t == "identifier":
                name = self.text_of(callee)
                b = self.resolve(name, scope)
                if b is not None and self.col.bindings[b].function is not None:
                    targets = [self.col.bindings[b].function]
                elif kind == "new":
                    targets = self._by_qualname.get(f"{name}.constructor", [])
            elif t == "member_expression":
                prop = callee.child_by_field_name("property")
                name = self.text_of(prop) if prop is not None else None
                targets = self.member_targets(callee, scope)
            elif t == "subscript_expression":  # FNS[kind](...): any function member of FNS
                obj = callee.child_by_field_name("object")
                if obj is not None and obj.type == "identifier" and \
                        self.resolve(self.text_of(obj), scope) is not None:
                    targets = self._by_owner.get(self.text_of(obj), [])
            elif t in FUNCTION_TYPES:  # an immediately invoked function
                targets = [self.col.function_at[node_key(callee)]]
            out.append(Call(self.f(func), name, self.text_of(callee),
                            tuple(sorted({self.fmap[r] for r in targets})), kind,
                            self.col.span_of(node)))
            out.extend(self._references(node, scope, func))
        out.sort(key=lambda c: c.span)
        return out

    def _references(self, node, scope: int, func) -> list[Call]:
        """Functions passed by name as arguments: ``requestAnimationFrame(draw)``."""
        args = node.child_by_field_name("arguments")
        out = []
        for a in (args.named_children if args is not None else ()):
            if a.type != "identifier":
                continue
            b = self.resolve(self.text_of(a), scope)
            if b is not None and self.col.bindings[b].function is not None:
                out.append(Call(self.f(func), self.text_of(a), self.text_of(a),
                                (self.fmap[self.col.bindings[b].function],), "reference",
                                self.col.span_of(a)))
        return out


def _concat(parts: list[tuple[list[str], bool]]) -> tuple[list[str], bool]:
    literal = all(lit for _, lit in parts)
    combos = [""]
    for alternatives, _ in parts:
        combos = ["".join(c) for c in product(combos, alternatives)][:_MAX_ALTERNATIVES]
    return [re.sub(r"(?:\.\*)+", ".*", c) for c in combos], literal


def _unescape_regex(pattern: str) -> str:
    return re.sub(r"\\(.)", r"\1", pattern)


def _attr(element: Element, name: str) -> str | None:
    a = element.attr(name)
    return a.value if a is not None else None
