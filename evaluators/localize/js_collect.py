"""First pass over JavaScript syntax trees: scopes, bindings and raw facts, nothing resolved.

The walk is iterative (an explicit stack), since generated code holds expressions thousands of
nodes deep (long literal arithmetic), deeper than Python's recursion limit. Facts that need name
resolution or element matching (which variable holds which element, what a call reaches) are
kept with their tree-sitter nodes and resolved by ``js_resolve`` once every script is read, so
that uses may precede declarations as hoisting allows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from evaluators.localize.js_syntax import (
    CHILD_METHODS, DECLARATION_FUNCTIONS, DOM_QUERIES, FUNCTION_TYPES, LIBRARY_QUERIES,
    MUTATORS, P5_EVENTS, STATEMENT_TYPES, function_name, is_property, literal_string, node_key,
    pattern_identifiers, property_key, static_path, unwrap,
)
from evaluators.localize.model import Span


@dataclass
class Binding:
    """A declared (or implicitly global) name. Mutable while the passes run."""

    name: str
    scope: int
    kind: str  # var, let, const, function, class, param, catch, import, implicit, this
    decl: Span | None
    init: object | None = None  # the initializer node
    function: int | None = None  # raw function id when declared as a function


@dataclass
class RawFunction:
    """A function as collected; ``parent`` and ids are raw (walk order) until resolution."""

    node: object
    name: str | None
    owner: str | None
    kind: str
    span: Span
    body: Span
    parent: int | None
    params: list[str] = field(default_factory=list)
    param_bindings: list[int] = field(default_factory=list)


class JsCollector:
    """Collects scopes, bindings and syntactic facts from JavaScript trees of one document.

    Scope 0 is the global scope, shared by all scripts and inline handlers (module scripts are
    treated as global too: a best-effort simplification, names rarely clash in one file).

    Args:
        span_of: Node -> character span in the document.
    """

    def __init__(self, span_of: Callable):
        self.span_of = span_of
        self.scope_parent: list[int | None] = [None]
        self.scope_is_function: list[bool] = [True]
        self.scope_names: list[dict[str, int]] = [{}]
        self.bindings: list[Binding] = []
        self.functions: list[RawFunction] = []
        self.function_at: dict[tuple, int] = {}
        self.statements: list[Span] = []
        # return/throw/break/continue statements followed, in their block, by code that can
        # never run (see ``_dead_end``).
        self.dead_ends: list[Span] = []
        self.dead_code: list[Span] = []  # after each dead end, the rest of its block
        # (property name, its span, the object's span) of every ``a.b`` in the scripts.
        self.properties: list[tuple[str, Span, Span]] = []
        # Raw facts; each keeps the scope and the enclosing raw function id.
        self.refs: list[tuple] = []  # (name, scope, span, mode 'r'|'w', site span)
        self.member_refs: list[tuple] = []  # (root name, scope, props, span, mode, site span)
        self.calls: list[tuple] = []  # (node, scope, func, kind 'call'|'new')
        self.assigns: list[tuple] = []  # (node, left, right, scope, func)
        # (kind, event node | p5 method name, target, handler, node, scope, func)
        self.listeners: list[tuple] = []
        self.queries: list[tuple] = []  # (node, method, object, argument, scope, func)
        self.dom_calls: list[tuple] = []  # (kind, detail, target node, node, scope, func)
        self.holder_sources: list[tuple] = []  # (key, value node, scope)
        self.iterations: list[tuple] = []  # (callback node | binding id, iterable node, scope)
        self._handlers = {
            "identifier": self._h_identifier,
            "shorthand_property_identifier": self._h_identifier,
            "member_expression": self._h_member,
            "subscript_expression": self._h_member,
            "call_expression": self._h_call,
            "new_expression": self._h_new,
            "assignment_expression": self._h_assign,
            "augmented_assignment_expression": self._h_assign,
            "update_expression": self._h_update,
            "variable_declaration": self._h_declaration,
            "lexical_declaration": self._h_declaration,
            "statement_block": self._h_block,
            "for_statement": self._h_block,
            "for_in_statement": self._h_for_in,
            "catch_clause": self._h_catch,
            "class_declaration": self._h_class,
            "class": self._h_class,
            "pair": self._h_pair,
            "field_definition": self._h_field,
            "property_identifier": _skip,
            "comment": _skip,
            "string": _skip,
            "number": _skip,
            "import_statement": _skip,
        }
        for t in FUNCTION_TYPES:
            self._handlers[t] = self._h_function

    # -- entry points ------------------------------------------------------------------------

    def add_program(self, root) -> None:
        """Walks one ``<script>`` program in the global scope."""
        self._walk([(c, 0, None) for c in root.named_children])

    def add_inline_handler(self, root, name: str, span: Span) -> int:
        """Walks the code of an ``on*`` attribute as the body of a function; returns its id."""
        fid = len(self.functions)
        self.functions.append(RawFunction(None, name, None, "inline_handler", span, span, None,
                                          ["event"]))
        scope = self._new_scope(0, True)
        self.functions[fid].param_bindings.append(self.declare("event", scope, "param", span))
        self._walk([(c, scope, fid) for c in root.named_children])
        return fid

    # -- scopes and declarations -------------------------------------------------------------

    def _new_scope(self, parent: int, is_function: bool) -> int:
        self.scope_parent.append(parent)
        self.scope_is_function.append(is_function)
        self.scope_names.append({})
        return len(self.scope_parent) - 1

    def function_scope(self, scope: int) -> int:
        while not self.scope_is_function[scope]:
            scope = self.scope_parent[scope]
        return scope

    def declare(self, name: str, scope: int, kind: str, decl: Span | None, init=None) -> int:
        names = self.scope_names[scope]
        existing = names.get(name)
        if existing is not None:  # `var` re-declaration or a repeated function name
            if init is not None and self.bindings[existing].init is None:
                self.bindings[existing].init = init
            return existing
        names[name] = len(self.bindings)
        self.bindings.append(Binding(name, scope, kind, decl, init))
        return names[name]

    def _declare_pattern(self, node, scope: int, kind: str, decl: Span, ctx, stack) -> list[int]:
        """Declares every name bound by a (possibly destructuring) pattern."""
        out, todo = [], [node]
        while todo:
            n = todo.pop()
            t = n.type
            if t in ("identifier", "shorthand_property_identifier_pattern"):
                out.append(self.declare(n.text.decode("utf-8", "replace"), scope, kind, decl))
            elif t in ("assignment_pattern", "object_assignment_pattern"):
                todo.append(n.child_by_field_name("left"))
                right = n.child_by_field_name("right")
                if right is not None:  # default values are ordinary expressions
                    stack.append((right,) + ctx)
            elif t == "pair_pattern":
                todo.append(n.child_by_field_name("value"))
            elif t in ("object_pattern", "array_pattern", "rest_pattern"):
                todo.extend(reversed(n.named_children))
        return out

    # -- the walk ----------------------------------------------------------------------------

    def _walk(self, stack: list) -> None:
        """Visits (node, scope, raw function id) entries depth-first until none are left."""
        handlers = self._handlers
        stack.reverse()
        while stack:
            node, scope, func = stack.pop()
            if node is None:
                continue
            t = node.type
            if t in STATEMENT_TYPES:
                self.statements.append(self.span_of(node))
                if t in _JUMPS and _dead_end(node):
                    jump, block = self.span_of(node), self.span_of(node.parent)
                    self.dead_ends.append(jump)
                    self.dead_code.append((jump[1], block[1] - 1))  # up to the block's `}`
            handler = handlers.get(t)
            if handler is not None:
                handler(node, scope, func, stack)
            else:
                for c in node.named_children:
                    stack.append((c, scope, func))

    def _h_identifier(self, node, scope, func, stack) -> None:
        span = self.span_of(node)
        self.refs.append((node.text.decode("utf-8", "replace"), scope, span, "r", span))

    def _note_properties(self, node, chain: bool) -> None:
        """Records the property of a member expression, and with ``chain`` those of the member
        expressions it is the object of (which the walk does not visit)."""
        while node is not None and node.type == "member_expression":
            prop, obj = node.child_by_field_name("property"), node.child_by_field_name("object")
            if prop is not None and obj is not None and prop.type == "property_identifier":
                self.properties.append((prop.text.decode("utf-8", "replace"),
                                        self.span_of(prop), self.span_of(obj)))
            node = obj if chain else None

    def _h_member(self, node, scope, func, stack) -> None:
        path = static_path(node)
        self._note_properties(node, chain=path is not None)
        if path is None:
            for c in node.named_children:
                stack.append((c, scope, func))
            return
        root, props = path
        if root.type in ("identifier", "this"):
            span = self.span_of(node)
            self.member_refs.append((root.text.decode("utf-8", "replace"), scope, props, span,
                                     "r", span))
            self._note_root(root, scope, func, stack)

    def _note_root(self, root, scope, func, stack) -> None:
        """The root of a member path is read: an identifier is walked as any other; ``this``
        is a reference of its own (a class's methods declare it)."""
        if root.type == "this":
            span = self.span_of(root)
            self.refs.append(("this", scope, span, "r", span))
        else:
            stack.append((root, scope, func))

    def _write_target(self, left, site, scope, func, stack) -> None:
        """Records the write of an assignment, update or mutating call to ``left``."""
        left = unwrap(left)
        if left is None:
            return
        site_span = self.span_of(site)
        t = left.type
        if t == "identifier":
            self.refs.append((left.text.decode("utf-8", "replace"), scope, self.span_of(left),
                              "w", site_span))
            return
        if t in ("object_pattern", "array_pattern"):
            for n in pattern_identifiers(left):
                self.refs.append((n.text.decode("utf-8", "replace"), scope, self.span_of(n), "w",
                                  site_span))
            return
        if t not in ("member_expression", "subscript_expression"):
            stack.append((left, scope, func))
            return
        # `grid[i][j] = v` writes into `grid`: record the longest static prefix as written.
        target = left
        while target is not None and static_path(target) is None:
            target = target.child_by_field_name("object")
        self._note_properties(left, chain=target is left)
        if target is not None:
            if target is not left:
                self._note_properties(target, chain=True)
            root, props = static_path(target)
            if root.type in ("identifier", "this"):
                name = root.text.decode("utf-8", "replace")
                if props:  # `state.x = v` writes state.x and reads state
                    self.member_refs.append((name, scope, props, self.span_of(target), "w",
                                             site_span))
                    self._note_root(root, scope, func, stack)
                else:
                    self.refs.append((name, scope, self.span_of(root), "w", site_span))
        if target is not left:  # computed parts (indices, calls) are read
            for c in left.named_children:
                stack.append((c, scope, func))

    def _h_assign(self, node, scope, func, stack) -> None:
        left = node.child_by_field_name("left")
        right = node.child_by_field_name("right")
        self.assigns.append((node, left, right, scope, func))
        if node.type == "assignment_expression" and left is not None and right is not None:
            self._holder_source_for(left, right, scope)
        self._write_target(left, node, scope, func, stack)
        stack.append((right, scope, func))

    def _holder_source_for(self, left, value, scope) -> None:
        left = unwrap(left)
        if left.type == "identifier":
            self.holder_sources.append((("n", left.text.decode("utf-8", "replace"), scope),
                                        value, scope))
            return
        path = static_path(left)
        if path is not None and path[1]:
            root, props = path
            self.holder_sources.append((("p", root.text.decode("utf-8", "replace"), scope, props),
                                        value, scope))

    def _h_update(self, node, scope, func, stack) -> None:
        self._write_target(node.child_by_field_name("argument"), node, scope, func, stack)

    def _h_declaration(self, node, scope, func, stack) -> None:
        if node.type == "variable_declaration":
            kind, target = "var", self.function_scope(scope)
        else:
            k = node.child_by_field_name("kind")
            kind, target = (k.type if k is not None else "let"), scope
        for d in node.named_children:
            if d.type != "variable_declarator":
                continue
            name, value = d.child_by_field_name("name"), d.child_by_field_name("value")
            if name is None:
                continue
            if name.type == "identifier":
                b = self.declare(name.text.decode("utf-8", "replace"), target, kind,
                                 self.span_of(d), value)
                if value is not None:
                    self._object_holders(b, value, scope)
            else:
                self._declare_pattern(name, target, kind, self.span_of(d),
                                      (scope, func), stack)
            if value is not None:
                stack.append((value, scope, func))

    def _object_holders(self, binding: int, value, scope) -> None:
        """`const els = {s: q(...)}`: els.s holds what q returns, and so does els as a whole."""
        self.holder_sources.append((("b", binding), value, scope))
        value = unwrap(value)
        if value is None or value.type != "object":
            return
        for pair in value.named_children:
            if pair.type != "pair":
                continue
            key = property_key(pair.child_by_field_name("key"))
            v = pair.child_by_field_name("value")
            if key is not None and v is not None:
                self.holder_sources.append((("pb", binding, (key,)), v, scope))
                self.holder_sources.append((("b", binding), v, scope))

    def _h_block(self, node, scope, func, stack) -> None:
        inner = self._new_scope(scope, False)
        for c in node.named_children:
            stack.append((c, inner, func))

    def _h_for_in(self, node, scope, func, stack) -> None:
        inner = self._new_scope(scope, False)
        left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
        kind = node.child_by_field_name("kind")
        operator = node.child_by_field_name("operator")
        iterates = operator is not None and operator.type == "of"
        if kind is not None and left is not None:
            target = self.function_scope(inner) if kind.type == "var" else inner
            bound = self._declare_pattern(left, target, kind.type, self.span_of(node),
                                          (scope, func), stack)
            if iterates and left.type == "identifier" and right is not None:
                self.iterations.append((bound[0], right, scope))
        elif left is not None:
            self._write_target(left, node, scope, func, stack)
        stack.append((right, scope, func))
        stack.append((node.child_by_field_name("body"), inner, func))

    def _h_catch(self, node, scope, func, stack) -> None:
        inner = self._new_scope(scope, False)
        param = node.child_by_field_name("parameter")
        if param is not None:
            self._declare_pattern(param, inner, "catch", self.span_of(param),
                                  (inner, func), stack)
        stack.append((node.child_by_field_name("body"), inner, func))

    def _h_class(self, node, scope, func, stack) -> None:
        name = node.child_by_field_name("name")
        if name is not None and node.type == "class_declaration":
            self.declare(name.text.decode("utf-8", "replace"), scope, "class",
                         self.span_of(node))
        # The methods' `this`: one name their properties are read and written through, so
        # that a value one method stores reaches the method reading it (data flow).
        inner = self._new_scope(scope, False)
        self.declare("this", inner, "this", None)
        for c in node.named_children:
            if c.type == "class_body":
                stack.append((c, inner, func))
            elif c.type == "class_heritage":
                stack.append((c, scope, func))

    def _h_pair(self, node, scope, func, stack) -> None:
        key = node.child_by_field_name("key")
        if key is not None and key.type == "computed_property_name":
            stack.append((key, scope, func))
        stack.append((node.child_by_field_name("value"), scope, func))

    def _h_field(self, node, scope, func, stack) -> None:
        stack.append((node.child_by_field_name("value"), scope, func))

    def _h_new(self, node, scope, func, stack) -> None:
        self.calls.append((node, scope, func, "new"))
        for c in node.named_children:
            stack.append((c, scope, func))

    def _h_call(self, node, scope, func, stack) -> None:
        self.calls.append((node, scope, func, "call"))
        callee = node.child_by_field_name("function")
        args_node = node.child_by_field_name("arguments")
        args = args_node.named_children if args_node is not None else []
        if args_node is not None and args_node.type != "arguments":
            args = [args_node]  # tagged template
        if callee is not None and callee.type == "member_expression":
            prop = callee.child_by_field_name("property")
            obj = callee.child_by_field_name("object")
            if prop is not None and obj is not None:
                self._member_call(node, prop.text.decode("utf-8", "replace"), obj, args,
                                  scope, func, stack)
                stack.append((obj, scope, func))
        elif callee is not None:
            if callee.type == "identifier" and callee.text in LIBRARY_QUERIES and args:
                # p5 `select('#b')`, jQuery `$('.x')`; dropped later if the name is user code.
                self.queries.append((node, callee.text.decode(), None, args[0], scope, func))
            stack.append((callee, scope, func))
        for a in args:
            stack.append((a, scope, func))

    def _member_call(self, node, name, obj, args, scope, func, stack) -> None:
        """Classifies ``obj.name(args)``: listeners, DOM queries and writes, mutations."""
        first = args[0] if args else None
        if name == "addEventListener" and len(args) >= 2:
            self.listeners.append(("listener", first, obj, args[1], node, scope, func))
        elif name in DOM_QUERIES or (name.encode() in LIBRARY_QUERIES and first is not None):
            self.queries.append((node, name, obj, first, scope, func))
        elif name in P5_EVENTS and len(args) == 1 and _callable_like(first):
            self.listeners.append(("p5", name, obj, first, node, scope, func))
        elif name in ("setAttribute", "removeAttribute", "toggleAttribute"):
            detail = literal_string(first) or ""
            self.dom_calls.append(("attribute", detail, obj, node, scope, func))
        elif name in CHILD_METHODS:
            self.dom_calls.append(("children", name, obj, node, scope, func))
        elif is_property(obj, "classList") and name in ("add", "remove", "toggle", "replace"):
            detail = f"{name}:{literal_string(first) or ''}"
            self.dom_calls.append(("classList", detail, obj.child_by_field_name("object"), node,
                                   scope, func))
        elif is_property(obj, "style") and name in ("setProperty", "removeProperty"):
            self.dom_calls.append(("style", literal_string(first) or "",
                                   obj.child_by_field_name("object"), node, scope, func))
        elif name in MUTATORS:
            self._write_target(obj, node, scope, func, [])
        if name == "forEach" and first is not None and first.type in FUNCTION_TYPES:
            self.iterations.append((first, obj, scope))

    # -- functions ---------------------------------------------------------------------------

    def _h_function(self, node, scope, func, stack) -> None:
        t = node.type
        name, owner = function_name(node)
        kind = {"arrow_function": "arrow", "method_definition": "method"}.get(t, "expression")
        if t in DECLARATION_FUNCTIONS:
            kind = "declaration"
        body = node.child_by_field_name("body")
        span = self.span_of(node)
        fid = len(self.functions)
        raw = RawFunction(node, name, owner, kind, span,
                          self.span_of(body) if body is not None else span, func)
        self.functions.append(raw)
        self.function_at[node_key(node)] = fid
        if t in DECLARATION_FUNCTIONS and name is not None:
            # Sloppy-mode scripts hoist function declarations to the function scope.
            b = self.declare(name, self.function_scope(scope), "function", span)
            self.bindings[b].function = fid
        inner = self._new_scope(scope, True)
        own = node.child_by_field_name("name")
        if t in ("function_expression", "function", "generator_function") and own is not None:
            b = self.declare(own.text.decode("utf-8", "replace"), inner, "function", span)
            self.bindings[b].function = fid
        params = node.child_by_field_name("parameters") or node.child_by_field_name("parameter")
        ctx = (inner, fid)
        if params is not None:
            plist = params.named_children if params.type == "formal_parameters" else [params]
            for p in plist:
                if p.type == "comment":
                    continue
                bound = self._declare_pattern(p, inner, "param", self.span_of(p), ctx, stack)
                raw.param_bindings.extend(bound)
                raw.params.extend(self.bindings[b].name for b in bound)
        if body is None:
            return
        if body.type == "statement_block":
            for c in body.named_children:
                stack.append((c, inner, fid))
        else:
            stack.append((body, inner, fid))


def _skip(node, scope, func, stack) -> None:
    return None


def _callable_like(node) -> bool:
    return node is not None and (node.type in FUNCTION_TYPES or node.type in (
        "identifier", "member_expression", "call_expression"))


_JUMPS = frozenset(("return_statement", "throw_statement", "break_statement",
                    "continue_statement"))
# What may follow a jump in its block and still be reached or harmless: declarations are
# hoisted, comments and empty statements do nothing.
_AFTER_JUMP_OK = frozenset(("comment", "empty_statement", "function_declaration",
                            "generator_function_declaration"))


def _dead_end(node) -> bool:
    """Whether a jump statement is followed, in its ``{...}`` block, by a statement that can
    never run. Only braced blocks count: after ``case 1: return x;`` the next case is reached."""
    parent = node.parent
    if parent is None or parent.type != "statement_block":
        return False
    after = node.next_named_sibling
    while after is not None:
        if after.type not in _AFTER_JUMP_OK:
            return True
        after = after.next_named_sibling
    return False
