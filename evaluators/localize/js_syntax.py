"""Helpers over tree-sitter-javascript nodes shared by the collector and the resolver."""

from __future__ import annotations

FUNCTION_TYPES = frozenset((
    "function_declaration", "generator_function_declaration", "function_expression",
    "function", "generator_function", "arrow_function", "method_definition",
))
DECLARATION_FUNCTIONS = frozenset(("function_declaration", "generator_function_declaration"))
STATEMENT_TYPES = frozenset((
    "expression_statement", "variable_declaration", "lexical_declaration", "if_statement",
    "for_statement", "for_in_statement", "while_statement", "do_statement", "try_statement",
    "with_statement", "break_statement", "continue_statement", "return_statement",
    "throw_statement", "empty_statement", "labeled_statement", "switch_statement",
    "function_declaration", "generator_function_declaration", "class_declaration",
    "import_statement", "export_statement", "debugger_statement", "field_definition",
))
DOM_QUERIES = frozenset((
    "getElementById", "querySelector", "querySelectorAll", "getElementsByClassName",
    "getElementsByTagName", "getElementsByName",
))
# Library lookups by CSS selector, all document-wide: p5 and d3 `select`/`selectAll`
# (also as `p.select` in p5 instance mode, `d3.select`), jQuery `$`.
LIBRARY_QUERIES = frozenset((b"select", b"selectAll", b"$"))
# p5.js element callbacks: `slider.input(fn)`, `button.mousePressed(fn)`.
P5_EVENTS = frozenset((
    "input", "changed", "mousePressed", "mouseReleased", "mouseClicked", "doubleClicked",
    "mouseOver", "mouseOut", "mouseMoved", "mouseWheel", "touchStarted", "touchEnded",
))
MUTATORS = frozenset((
    "push", "pop", "shift", "unshift", "splice", "sort", "reverse", "set", "add", "delete",
    "clear",
))
CHILD_METHODS = frozenset((
    "appendChild", "append", "prepend", "removeChild", "replaceChildren", "replaceChild",
    "insertBefore", "insertAdjacentHTML", "insertAdjacentElement", "replaceWith", "remove",
))


def static_path(node):
    """``a.b['c'].d`` -> (root node, ('b', 'c', 'd')); None unless every step is static.

    The root is an ``identifier`` or ``this`` node.
    """
    props = []
    n = node
    while True:
        t = n.type
        if t == "member_expression":
            p = n.child_by_field_name("property")
            if p is None or p.type not in ("property_identifier", "private_property_identifier"):
                return None
            props.append(p.text.decode("utf-8", "replace"))
        elif t == "subscript_expression":
            index = n.child_by_field_name("index")
            if index is None or index.type != "string":
                return None
            props.append(string_value(index))
        elif t == "identifier" or t == "this":
            props.reverse()
            return n, tuple(props)
        else:
            return None
        n = n.child_by_field_name("object")
        if n is None:
            return None


def string_value(node) -> str:
    """Value of a ``string`` node (escapes other than quotes kept as written)."""
    raw = node.text.decode("utf-8", "replace")
    return raw[1:-1] if len(raw) >= 2 else ""


def literal_string(node) -> str | None:
    """Value of a string literal or substitution-free template, else None."""
    if node is None:
        return None
    if node.type == "string":
        return string_value(node)
    if node.type == "template_string":
        if any(c.type == "template_substitution" for c in node.named_children):
            return None
        return node.text.decode("utf-8", "replace")[1:-1]
    return None


def node_key(node) -> tuple[int, int, str]:
    return node.start_byte, node.end_byte, node.type


def unwrap(node):
    """Strips parentheses around an expression."""
    while node is not None and node.type == "parenthesized_expression":
        inner = node.named_children
        node = inner[0] if inner else None
    return node


def is_property(node, prop: str) -> bool:
    if node.type != "member_expression":
        return False
    p = node.child_by_field_name("property")
    return p is not None and p.text == prop.encode()


def pattern_identifiers(node) -> list:
    """Identifiers a destructuring assignment writes (defaults are not visited)."""
    out, todo = [], [node]
    while todo:
        n = todo.pop()
        t = n.type
        if t in ("identifier", "shorthand_property_identifier_pattern"):
            out.append(n)
        elif t in ("assignment_pattern", "object_assignment_pattern"):
            todo.append(n.child_by_field_name("left"))
        elif t == "pair_pattern":
            todo.append(n.child_by_field_name("value"))
        elif t in ("object_pattern", "array_pattern", "rest_pattern"):
            todo.extend(n.named_children)
    return [n for n in out if n is not None]


def property_key(key) -> str | None:
    """Static name of an object key or method name node."""
    if key is None:
        return None
    if key.type in ("property_identifier", "private_property_identifier", "identifier",
                    "number"):
        return key.text.decode("utf-8", "replace")
    if key.type == "string":
        return string_value(key)
    return None


def container_owner(container) -> str | None:
    """Name of the class or object literal a member is defined in."""
    if container is None:
        return None
    if container.type == "class_body":
        cls = container.parent
        name = cls.child_by_field_name("name") if cls is not None else None
        return name.text.decode("utf-8", "replace") if name is not None else None
    if container.type != "object":
        return None
    holder = container.parent
    while holder is not None and holder.type == "parenthesized_expression":
        holder = holder.parent
    if holder is None:
        return None
    if holder.type == "variable_declarator":
        name = holder.child_by_field_name("name")
        return name.text.decode("utf-8", "replace") if name is not None else None
    if holder.type == "assignment_expression":
        left = holder.child_by_field_name("left")
        return left.text.decode("utf-8", "replace") if left is not None else None
    if holder.type == "pair":
        return property_key(holder.child_by_field_name("key"))
    return None


def function_name(node) -> tuple[str | None, str | None]:
    """Best-effort (name, owner) of a function node from its own name or where it is put."""
    own = node.child_by_field_name("name")
    if node.type == "method_definition":
        return property_key(own), container_owner(node.parent)
    if node.type in DECLARATION_FUNCTIONS:
        return (own.text.decode("utf-8", "replace") if own is not None else None), None
    own_name = own.text.decode("utf-8", "replace") if own is not None else None
    child, parent = node, node.parent
    while parent is not None and parent.type == "parenthesized_expression":
        child, parent = parent, parent.parent
    if parent is None:
        return own_name, None
    pt = parent.type
    if pt == "variable_declarator" and same_node(parent.child_by_field_name("value"), child):
        name = parent.child_by_field_name("name")
        if name is not None and name.type == "identifier":
            return name.text.decode("utf-8", "replace"), None
    elif pt == "assignment_expression" and same_node(parent.child_by_field_name("right"), child):
        path = static_path(parent.child_by_field_name("left"))
        if path is not None:
            root, props = path
            root_text = root.text.decode("utf-8", "replace")
            if not props:
                return root_text, None
            return props[-1], ".".join((root_text,) + props[:-1])
    elif pt == "pair" and same_node(parent.child_by_field_name("value"), child):
        key = property_key(parent.child_by_field_name("key"))
        if key is not None:
            return key, container_owner(parent.parent)
    elif pt == "field_definition":
        key = property_key(parent.child_by_field_name("property"))
        if key is not None:
            return key, container_owner(parent.parent)
    return own_name, None


def same_node(a, b) -> bool:
    return a is not None and b is not None and node_key(a) == node_key(b)
