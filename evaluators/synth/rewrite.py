"""Semantics-preserving rewrites of an app: a probe that fails on one tests how the code is
written, not what the app does.

`rewrite` renames the variables and functions the app's scripts declare (every binding,
consistently, to names that appear nowhere in the app) and reverses the order of the
top-level function declarations of each script (declarations are hoisted, so order does not
matter). A name is left alone when the app could reach it other than through the script's
own bindings: one that also appears in the HTML outside the scripts (an inline `onclick`),
is read as a property (`obj.name`, `window.name`) or appears in a string (`eval`,
`window['name']`, a timer's code string), or is a global the page did not declare.
"""

from __future__ import annotations

import re

import tree_sitter
import tree_sitter_javascript

from evaluators.localize.graph import build_graph

_JS = tree_sitter.Language(tree_sitter_javascript.language())
_DECLARATORS = {"variable_declarator": "name", "function_declaration": "name",
                "class_declaration": "name", "generator_function_declaration": "name"}


def _walk(node):
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(n.children))


def _declared(root) -> set[str]:
    """Names bound by declarations and parameters in a script."""
    names = set()
    for n in _walk(root):
        field = _DECLARATORS.get(n.type)
        if field:
            target = n.child_by_field_name(field)
            if target is not None and target.type == "identifier":
                names.add(target.text.decode())
        if n.type == "formal_parameters":
            names.update(c.text.decode() for c in n.children if c.type == "identifier")
    return names


def _reserved(html: str, scripts: list[tuple[int, int]], roots) -> set[str]:
    """Names reachable other than through the scripts' own bindings."""
    outside, last = [], 0
    for s, e in scripts:
        outside.append(html[last:s])
        last = e
    outside.append(html[last:])
    words = set(re.findall(r"[A-Za-z_$][\w$]*", "".join(outside)))
    for root in roots:
        for n in _walk(root):
            if n.type in ("property_identifier", "shorthand_property_identifier",
                          "shorthand_property_identifier_pattern"):
                words.add(n.text.decode())
            elif n.type in ("string", "template_string"):  # eval'd code, window['name']
                words.update(re.findall(r"[A-Za-z_$][\w$]*", n.text.decode()))
    return words


def _renames(html: str, scripts, roots) -> dict[str, str]:
    declared = set().union(*(_declared(r) for r in roots)) if roots else set()
    keep = _reserved(html, scripts, roots)
    names = sorted(declared - keep)
    taken = set(re.findall(r"[A-Za-z_$][\w$]*", html))
    out, i = {}, 0
    for name in names:
        while f"v{i}_" in taken:
            i += 1
        out[name] = f"v{i}_"
        i += 1
    return out


def _reorderable(root) -> list:
    """A script's top-level function declarations when their order can be changed."""
    decls = [c for c in root.children if c.type == "function_declaration"]
    names = [d.child_by_field_name("name") for d in decls]
    if len(decls) < 2 or len({n.text for n in names if n is not None}) < len(decls):
        return []  # two declarations of one name: the later wins, so order matters
    return decls


def _renamed(data: bytes, node, renames: dict[str, str]) -> bytes:
    """The node's text with the renamed identifiers inside it replaced."""
    edits = [(n.start_byte - node.start_byte, n.end_byte - node.start_byte,
              renames[n.text.decode()].encode())
             for n in _walk(node) if n.type == "identifier" and n.text.decode() in renames]
    return _apply(data[node.start_byte:node.end_byte], edits)


def _script_edits(root, data: bytes, renames: dict[str, str]) -> list[tuple[int, int, bytes]]:
    decls = _reorderable(root)
    texts = [_renamed(data, d, renames) for d in decls]
    edits = [(d.start_byte, d.end_byte, t) for d, t in zip(decls, reversed(texts))]
    inside = [(d.start_byte, d.end_byte) for d in decls]
    for n in _walk(root):
        if n.type == "identifier" and n.text.decode() in renames and not any(
                a <= n.start_byte < b for a, b in inside):
            edits.append((n.start_byte, n.end_byte, renames[n.text.decode()].encode()))
    return edits


def rewrite(response: str) -> str | None:
    """The app with its own bindings renamed and its function declarations reordered.

    Returns None when the app has no script to rewrite, a script does not parse (a rewrite
    must not change what the browser sees as an error), or nothing would change.
    """
    g = build_graph(response)
    scripts = [s.span for s in g.scripts if s.span[1] > s.span[0]]
    if not scripts:
        return None
    parser = tree_sitter.Parser(_JS)
    datas = [response[s:e].encode("utf-8") for s, e in scripts]
    roots = [parser.parse(d).root_node for d in datas]
    if any(r.has_error for r in roots):
        return None
    renames = _renames(response, scripts, roots)
    out, last = [], 0
    for (s, e), data, root in zip(scripts, datas, roots):
        out.append(response[last:s])
        out.append(_apply(data, _script_edits(root, data, renames)).decode("utf-8"))
        last = e
    out.append(response[last:])
    new = "".join(out)
    return None if new == response else new


def _apply(data: bytes, edits) -> bytes:
    out, last = [], 0
    for a, b, t in sorted(edits, key=lambda x: x[0]):
        if a < last:
            continue
        out.append(data[last:a])
        out.append(t)
        last = b
    out.append(data[last:])
    return b"".join(out)
