"""Gate S: the HTML document and its inline scripts and styles must parse.

Parsing uses tree-sitter grammars (html, javascript, css). HTML itself is
error-tolerant in browsers, so only what a browser would also reject counts:
a syntax error in an inline JavaScript program (the browser throws a
SyntaxError and the whole script does not run) and in a stylesheet (tree-sitter
errors there are rare and mark real garbage). Each error becomes a diagnostic
with its span in response coordinates.
"""

from __future__ import annotations

import dataclasses
import functools

import tree_sitter as ts
import tree_sitter_css
import tree_sitter_html
import tree_sitter_javascript

from evaluators.extract import Extraction
from evaluators.textindex import TextIndex

# `type` values that browsers execute as classic or module scripts.
JS_TYPES = frozenset({
    "", "text/javascript", "application/javascript", "module", "text/ecmascript",
    "application/ecmascript", "application/x-javascript", "text/jsx",
})


@functools.lru_cache(maxsize=None)
def language(name: str) -> ts.Language:
    mod = {"html": tree_sitter_html, "javascript": tree_sitter_javascript,
           "css": tree_sitter_css}[name]
    return ts.Language(mod.language())


def parser(name: str) -> ts.Parser:
    return ts.Parser(language(name))


@dataclasses.dataclass(frozen=True)
class Block:
    """An inline script or stylesheet.

    Attributes:
      lang: "javascript" or "css".
      start, end: character offsets of its text in the extracted code.
      module: for scripts, whether it is an ES module.
    """

    lang: str
    start: int
    end: int
    module: bool = False


@dataclasses.dataclass(frozen=True)
class SyntaxIssue:
    """One syntax error, in code coordinates (character offsets into the code)."""

    lang: str
    start: int
    end: int
    message: str


def _attr(start_tag: ts.Node, name: str, src: bytes) -> str | None:
    for a in start_tag.children:
        if a.type != "attribute":
            continue
        key = a.child(0)
        if key is None or src[key.start_byte:key.end_byte].decode("utf-8", "replace").lower() != name:
            continue
        for v in a.children:
            if v.type == "attribute_value":
                return src[v.start_byte:v.end_byte].decode("utf-8", "replace")
            if v.type == "quoted_attribute_value":
                inner = [c for c in v.children if c.type == "attribute_value"]
                return src[inner[0].start_byte:inner[0].end_byte].decode("utf-8", "replace") if inner else ""
        return ""
    return None


def inline_blocks(html_tree: ts.Tree, src: bytes, index: TextIndex) -> list[Block]:
    """Lists inline JS and CSS blocks of a parsed document, in document order."""
    blocks = []
    stack = [html_tree.root_node]
    while stack:
        node = stack.pop()
        if node.type in ("script_element", "style_element"):
            tag = node.child(0)
            raw = [c for c in node.children if c.type == "raw_text"]
            if tag is None or not raw:
                continue
            if node.type == "script_element":
                typ = (_attr(tag, "type", src) or "").strip().lower()
                # A script with `src` ignores its inline text, as browsers do.
                if typ not in JS_TYPES or _attr(tag, "src", src) is not None:
                    continue
                lang, module = "javascript", typ == "module"
            else:
                lang, module = "css", False
            blocks.append(Block(lang, index.byte_to_char(raw[0].start_byte),
                                index.byte_to_char(raw[0].end_byte), module))
            continue
        stack.extend(reversed(node.children))
    return blocks


def _errors(tree: ts.Tree, limit: int = 20) -> list[ts.Node]:
    """Innermost ERROR nodes and MISSING nodes, in document order.

    An outer ERROR node can span a whole script when the parser recovers late;
    the innermost ones sit where the text actually went wrong.
    """
    found = []

    def visit(node: ts.Node) -> bool:
        # Returns whether an error was reported at or below `node`.
        if len(found) >= limit:
            return True
        below = False
        if node.has_error or node.is_error:
            for child in node.children:
                below = visit(child) or below
        if (node.is_error or node.is_missing) and not below:
            found.append(node)
            return True
        return below

    visit(tree.root_node)
    return found


def _describe(node: ts.Node, lang: str, text: bytes) -> str:
    if node.is_missing:
        return f"{lang} syntax error: missing '{node.type}'"
    snippet = text[node.start_byte:node.end_byte].decode("utf-8", "replace")
    snippet = " ".join(snippet.split())
    if len(snippet) > 60:
        snippet = snippet[:57] + "..."
    return f"{lang} syntax error: unexpected '{snippet}'"


def check_source(code: str) -> tuple[list[Block], list[SyntaxIssue]]:
    """Parses the document and its inline blocks.

    Returns:
      (blocks, issues) with offsets into `code`.
    """
    src = code.encode("utf-8")
    index = TextIndex(code)
    tree = parser("html").parse(src)
    blocks = inline_blocks(tree, src, index)
    issues = []
    for block in blocks:
        b0, b1 = index.char_to_byte(block.start), index.char_to_byte(block.end)
        sub = src[b0:b1]
        sub_tree = parser(block.lang).parse(sub)
        for node in _errors(sub_tree):
            # A MISSING node is zero-width; give it its insertion point.
            s = index.byte_to_char(b0 + node.start_byte)
            e = max(s, index.byte_to_char(b0 + node.end_byte))
            issues.append(SyntaxIssue(block.lang, s, e, _describe(node, block.lang, sub)))
    return blocks, issues


def source_diagnostics(extraction: Extraction) -> list[dict]:
    """Gate S as diagnostics in response coordinates (empty when the source is valid)."""
    _, issues = check_source(extraction.code)
    index = TextIndex(extraction.code)
    out = []
    for issue in issues:
        start, end = extraction.to_response(issue.start), extraction.to_response(issue.end)
        line, col = index.line_col(issue.start)
        out.append({
            "kind": "syntax_error", "stage": "source", "severity": "severe", "rubric_id": None,
            "message": f"{issue.message} (line {line}, column {col} of the app)",
            "lang": issue.lang, "span": [start, end],
        })
    return out
