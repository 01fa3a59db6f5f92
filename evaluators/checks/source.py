"""Gate S: the HTML document and its inline scripts and styles must parse.

Parsing uses tree-sitter grammars (html, javascript, css). HTML itself is
error-tolerant in browsers, so only what a browser would also reject counts:
a syntax error in an inline JavaScript program (the browser throws a
SyntaxError and the whole script does not run) and in a stylesheet (tree-sitter
errors there are rare and mark real garbage). Each error becomes a diagnostic
with its span in response coordinates.

tree-sitter's HTML parse time grows with the square of the nesting depth (about 68 s for
100,000 levels), so a check can be given a time limit: tree-sitter itself stops at the
deadline (through its progress callback) and `SourceTimeout` is raised, the response's
fault like a syntax error. Every walk over a tree is iterative: a script nested thousands
of brackets deep is a deep tree, and Python's recursion limit is no place to fail it.
"""

from __future__ import annotations

import dataclasses
import functools
import time

import tree_sitter as ts
import tree_sitter_css
import tree_sitter_html
import tree_sitter_javascript

from evaluators.contract import Diagnostic, Reason
from evaluators.checks.extract import Extraction
from evaluators.checks.textindex import TextIndex, scrub_surrogates

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


class SourceTimeout(Exception):
    """The document did not parse within its time limit (the response's fault)."""

    def __init__(self, limit_s: float):
        self.limit_s = limit_s
        super().__init__(f"the document did not parse within {limit_s * 1000:.0f} ms")


@dataclasses.dataclass(frozen=True)
class Deadline:
    """When a source check must end: `at` on the time.monotonic() clock, `limit_s` after start."""

    at: float
    limit_s: float

    @classmethod
    def after(cls, limit_s: float) -> "Deadline":
        return cls(time.monotonic() + limit_s, limit_s)

    def passed(self) -> bool:
        return time.monotonic() > self.at

    def check(self) -> None:
        """Raises SourceTimeout once the deadline has passed."""
        if self.passed():
            raise SourceTimeout(self.limit_s)


# Bytes tree-sitter reads per callback when parsing under a deadline.
_CHUNK = 1 << 16


def parse(name: str, src: bytes, deadline: Deadline | None = None) -> ts.Tree:
    """Parses `src` with grammar `name`, stopping at `deadline` if one is given.

    Raises:
      SourceTimeout: the deadline passed first.
    """
    p = parser(name)
    if deadline is None:
        return p.parse(src)
    try:
        # tree-sitter honours a progress callback only when the text comes from a reader.
        return p.parse(lambda at, _point: src[at:at + _CHUNK],
                       progress_callback=lambda *_: deadline.passed())
    except ValueError:  # "Parsing failed": the callback cancelled it
        deadline.check()
        raise


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


def inline_blocks(html_tree: ts.Tree, src: bytes, index: TextIndex,
                  deadline: Deadline | None = None) -> list[Block]:
    """Lists inline JS and CSS blocks of a parsed document, in document order."""
    blocks = []
    stack = [html_tree.root_node]
    seen = 0
    while stack:
        node = stack.pop()
        seen += 1
        if deadline is not None and seen % 4096 == 0:
            deadline.check()
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
    the innermost ones sit where the text actually went wrong. A node is reported
    when it is an error and nothing below it was; only subtrees with an error are
    entered. The walk keeps its own stack (a post-order walk of nested frames).
    """
    found: list[ts.Node] = []
    # Each frame: [node, its children still to visit (reversed), whether one reported].
    frames: list[list] = [[tree.root_node, None, False]]
    while frames:
        frame = frames[-1]
        node = frame[0]
        if frame[1] is None:
            if len(found) >= limit:  # enough found: count this node as reported
                frames.pop()
                if frames:
                    frames[-1][2] = True
                continue
            entered = node.has_error or node.is_error
            frame[1] = list(reversed(node.children)) if entered else []
        if frame[1]:
            frames.append([frame[1].pop(), None, False])
            continue
        frames.pop()
        reported = frame[2]
        if (node.is_error or node.is_missing) and not reported:
            found.append(node)
            reported = True
        if frames and reported:
            frames[-1][2] = True
    return found


def _describe(node: ts.Node, lang: str, text: bytes) -> str:
    if node.is_missing:
        return f"{lang} syntax error: missing '{node.type}'"
    snippet = text[node.start_byte:node.end_byte].decode("utf-8", "replace")
    snippet = " ".join(snippet.split())
    if len(snippet) > 60:
        snippet = snippet[:57] + "..."
    return f"{lang} syntax error: unexpected '{snippet}'"


def check_source(code: str, deadline: Deadline | None = None
                 ) -> tuple[list[Block], list[SyntaxIssue]]:
    """Parses the document and its inline blocks.

    Args:
      code: the document; a lone surrogate in it is read as U+FFFD (as the served
        document has it), offsets unchanged.
      deadline: when to give up, or None for no limit.

    Returns:
      (blocks, issues) with offsets into `code`.

    Raises:
      SourceTimeout: the deadline passed before the check ended.
    """
    code = scrub_surrogates(code)
    # tree-sitter's lexer reads a NUL as the end of the input; the browser's HTML tokenizer
    # turns one inside a script into U+FFFD (any character, for JavaScript). \x01 is the
    # same to the grammars and keeps every byte offset.
    src = code.encode("utf-8").replace(b"\x00", b"\x01")
    index = TextIndex(code)
    tree = parse("html", src, deadline)
    blocks = inline_blocks(tree, src, index, deadline)
    issues = []
    for block in blocks:
        b0, b1 = index.char_to_byte(block.start), index.char_to_byte(block.end)
        sub = src[b0:b1]
        sub_tree = parse(block.lang, sub, deadline)
        for node in _errors(sub_tree):
            # A MISSING node is zero-width; give it its insertion point.
            s = index.byte_to_char(b0 + node.start_byte)
            e = max(s, index.byte_to_char(b0 + node.end_byte))
            issues.append(SyntaxIssue(block.lang, s, e, _describe(node, block.lang, sub)))
    return blocks, issues


def source_diagnostics(extraction: Extraction, deadline: Deadline | None = None) -> list[dict]:
    """Gate S as diagnostics in response coordinates (empty when the source is valid).

    Raises:
      SourceTimeout: the deadline passed before the check ended.
    """
    _, issues = check_source(extraction.code, deadline)
    index = TextIndex(extraction.code)
    out = []
    for issue in issues:
        start, end = extraction.to_response(issue.start), extraction.to_response(issue.end)
        line, col = index.line_col(issue.start)
        out.append(Diagnostic(
            kind="syntax_error", reason=Reason.SOURCE_ERROR, stage="source", severity="severe",
            message=f"{issue.message} (line {line}, column {col} of the app)",
            lang=issue.lang, span=[start, end]).to_json())
    return out
