"""Code graph of one single-file web app, built with tree-sitter.

``build_graph`` parses the HTML, every inline JavaScript (``<script>``, ``on*`` attributes) and
CSS (``<style>``) at its own offsets, and links them: elements, functions, event bindings, DOM
queries, element writes, state variables, call edges and the elements CSS rules can match.
A handler's writes through ``this`` (not in an arrow function) or its event's
``currentTarget``/``target`` resolve to the elements it is bound to.
Spans are ``str`` indices into the text given (tree-sitter's UTF-8 byte offsets are converted),
so a graph built on a whole response (with ``region`` set to its HTML) speaks the response's
offsets directly. Everything is best effort and static: elements created by JavaScript are not
in the graph, and unresolvable facts are kept with empty element/function links rather than
guessed. Building never raises on malformed input; tree-sitter recovers from syntax errors.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import html
import re
from typing import Sequence

import tree_sitter
import tree_sitter_css
import tree_sitter_html
import tree_sitter_javascript

from evaluators.localize import js_records
from evaluators.localize.css import SelectorMatcher, extract_rules
from evaluators.localize.js_collect import JsCollector
from evaluators.localize.js_resolve import JsResolver
from evaluators.localize.model import (
    Attribute, Call, CssRule, DomQuery, Element, ElementWrite, EventBinding, Function,
    InlineHandler, Script, Span, StateVar, StyleBlock, Variable, VarRef,
)

_HTML = tree_sitter.Language(tree_sitter_html.language())
_JS = tree_sitter.Language(tree_sitter_javascript.language())
_CSS = tree_sitter.Language(tree_sitter_css.language())
_ELEMENT_TYPES = frozenset(("element", "script_element", "style_element"))
_NON_ASCII = re.compile(r"[^\x00-\x7f]")
_TAG_START = re.compile(rb"[A-Za-z]")
_FENCE = re.compile(r"```[ \t]*(\w*)[^\n]*\n")


class _Offsets:
    """UTF-8 byte offsets of ``text[start:end]`` -> ``str`` indices into ``text``.

    ASCII regions (most answers) map by addition; otherwise a sorted table of where multi-byte
    characters end turns a byte offset into a character offset with one bisection.
    """

    def __init__(self, text: str, start: int, end: int):
        region = text[start:end]
        self.data = region.encode("utf-8", "surrogatepass")
        self.base = start
        self._ends: list[int] = []  # byte offset just after each non-ASCII character
        self._extra: list[int] = [0]  # extra bytes before that point, cumulated
        shift = 0
        for m in _NON_ASCII.finditer(region):
            extra = len(m.group().encode("utf-8", "surrogatepass")) - 1
            shift += extra
            self._ends.append(m.start() + shift + 1)
            self._extra.append(shift)

    def char(self, byte: int) -> int:
        if not self._ends:
            return self.base + byte
        return self.base + byte - self._extra[bisect.bisect_right(self._ends, byte)]


def find_html_region(response: str) -> Span:
    """Span of the app inside a model response.

    The content of the first fenced block tagged ``html`` (or of the first fence whose content
    holds a tag when none is tagged); an unterminated fence runs to the end; without fences, the
    whole response.
    """
    fences = list(_FENCE.finditer(response))
    chosen = next((m for m in fences if m.group(1).lower() == "html"), None)
    if chosen is None:
        chosen = next((m for m in fences if "<" in response[m.end():m.end() + 2000]), None)
    if chosen is None:
        return 0, len(response)
    start = chosen.end()
    close = response.find("\n```", start - 1)
    return start, (close + 1 if close >= 0 else len(response))


class _Builder:
    """Holds the parse state of one ``build_graph`` call."""

    def __init__(self, text: str, start: int, end: int):
        self.text = text
        self.offsets = _Offsets(text, start, end)
        self.data = self.offsets.data
        self.js = tree_sitter.Parser(_JS)
        self.css = tree_sitter.Parser(_CSS)
        self.trees = []  # keeps every tree alive while nodes are in use
        self.collector = JsCollector(self.span_of)
        self.raw_elements: list[dict] = []
        self.scripts: list[Script] = []
        self.styles: list[tuple[int, object]] = []
        self.inline: list[tuple] = []

    def span_of(self, node) -> Span:
        c = self.offsets.char
        return c(node.start_byte), c(node.end_byte)

    def text_of(self, node) -> str:
        return self.data[node.start_byte:node.end_byte].decode("utf-8", "replace")

    def parse_at(self, parser, node):
        """Parses the bytes of ``node`` alone, keeping document byte offsets in the tree."""
        parser.included_ranges = [tree_sitter.Range(node.start_point, node.end_point,
                                                    node.start_byte, node.end_byte)]
        tree = parser.parse(self.data)
        self.trees.append(tree)
        return tree.root_node

    # -- HTML ----------------------------------------------------------------------------

    def walk_html(self) -> None:
        tree = tree_sitter.Parser(_HTML).parse(self.data)
        self.trees.append(tree)
        stack = [(tree.root_node, None)]
        while stack:
            node, parent = stack.pop()
            if node.type in _ELEMENT_TYPES:
                index = self._add_element(node, parent)
                if index is not None:
                    parent = index
            children = [c for c in node.named_children
                        if c.type in _ELEMENT_TYPES or c.type == "ERROR"]
            stack.extend((c, parent) for c in reversed(children))

    def _add_element(self, node, parent: int | None) -> int | None:
        start_tag = next((c for c in node.named_children
                          if c.type in ("start_tag", "self_closing_tag")), None)
        if start_tag is None:
            return None
        name = next((c for c in start_tag.named_children if c.type == "tag_name"), None)
        if name is None or name.start_byte != start_tag.start_byte + 1 or not _TAG_START.match(
                self.data, name.start_byte):
            return None  # browsers read `a < 360` as text: a tag name starts with a letter
        index = len(self.raw_elements)
        attributes = [self._attribute(a) for a in start_tag.named_children
                      if a.type == "attribute"]
        raw = {"tag": self.text_of(name).lower(), "attributes": attributes, "node": node,
               "start_tag": start_tag, "parent": parent, "handlers": []}
        self.raw_elements.append(raw)
        for attribute, value_node in attributes:
            self._maybe_handler(index, raw, attribute, value_node)
        content = next((c for c in node.named_children if c.type == "raw_text"), None)
        if node.type == "script_element" and content is not None:
            self._add_script(index, attributes, content)
        elif node.type == "style_element" and content is not None:
            self.styles.append((index, content))
        return index

    def _attribute(self, node) -> tuple[Attribute, object]:
        name_node = next((c for c in node.named_children if c.type == "attribute_name"), None)
        name = self.text_of(name_node).lower() if name_node is not None else ""
        value_node, value_span = None, None
        for c in node.named_children:
            if c.type == "attribute_value":
                value_node = c
            elif c.type == "quoted_attribute_value":
                inner = [v for v in c.named_children if v.type == "attribute_value"]
                value_node = inner[0] if inner else None
                if value_node is None:  # name="": an empty value between the quotes
                    s, e = self.span_of(c)
                    value_span = (s + 1, max(s + 1, e - 1))
        if value_node is not None:
            value_span = self.span_of(value_node)
        value = None
        if value_span is not None:
            value = html.unescape(self.text[value_span[0]:value_span[1]])
        return Attribute(name, value, self.span_of(node), value_span), value_node

    def _maybe_handler(self, index: int, raw: dict, attribute: Attribute, value_node) -> None:
        name = attribute.name
        if not (name.startswith("on") and len(name) > 2 and value_node is not None):
            return
        root = self.parse_at(self.js, value_node)
        fid = self.collector.add_inline_handler(root, name, attribute.value_span)
        raw["handlers"].append((name[2:], attribute.span, attribute.value_span, fid))
        self.inline.append((index, name[2:], fid, attribute.span, attribute.value_span,
                            self.text_of(raw["start_tag"]), self.text_of(value_node)))

    def _add_script(self, index: int, attributes, content) -> None:
        attrs = {a.name: a.value for a, _ in reversed(attributes)}
        kind = (attrs.get("type") or "").strip().lower()
        if not (kind in ("", "module") or any(
                k in kind for k in ("javascript", "ecmascript", "babel", "jsx"))):
            return  # shaders, JSON, import maps, templates
        self.scripts.append(Script(index, self.span_of(content), kind == "module",
                                   attrs.get("src")))
        self.collector.add_program(self.parse_at(self.js, content))

    def elements(self) -> list[Element]:
        children: list[list[int]] = [[] for _ in self.raw_elements]
        for i, raw in enumerate(self.raw_elements):
            if raw["parent"] is not None:
                children[raw["parent"]].append(i)
        out = []
        for i, raw in enumerate(self.raw_elements):
            attributes = tuple(a for a, _ in raw["attributes"])
            ident = next((a.value for a in attributes if a.name == "id"), None)
            classes = next((a.value for a in attributes if a.name == "class"), None) or ""
            out.append(Element(i, raw["tag"], ident, tuple(classes.split()), attributes, (),
                               self.span_of(raw["node"]), self.span_of(raw["start_tag"]),
                               raw["parent"], tuple(children[i])))
        return out


def build_graph(text: str, region: Span | None = None) -> "CodeGraph":
    """Builds the code graph of the app in ``text[region[0]:region[1]]``.

    Args:
        text: The response (or the bare HTML).
        region: Span of the HTML within ``text``; the whole text when None. For a model
            response, pass the evaluator's extraction span (``(start, end)`` of gate F), or
            ``find_html_region`` where that is not at hand.

    Returns:
        The graph; all its spans index ``text``.
    """
    start, end = region if region is not None else (0, len(text))
    b = _Builder(text, start, end)
    b.walk_html()
    elements = b.elements()
    matcher = SelectorMatcher(elements)
    rules: list[CssRule] = []
    for element, content in b.styles:
        rules.extend(extract_rules(b.parse_at(b.css, content), b.text_of, b.span_of, matcher))
    r = JsResolver(b.collector, elements, matcher, b.text_of)
    elements = [
        dataclasses.replace(e, handlers=tuple(InlineHandler(ev, a, c, r.f(fid))
                                              for ev, a, c, fid in raw["handlers"]))
        for e, raw in zip(elements, b.raw_elements)]
    statements = sorted(set(b.collector.statements))
    variables, var_refs = js_records.variables(r)
    functions, bindings = r.functions(), js_records.event_bindings(r, b.inline)
    return CodeGraph(
        text=text, region=(start, end), elements=elements, scripts=b.scripts,
        styles=[StyleBlock(i, b.span_of(c)) for i, c in b.styles],
        functions=functions, calls=r.calls(), event_bindings=bindings,
        dom_queries=js_records.dom_queries(r),
        element_writes=_own_element_writes(functions, bindings, js_records.element_writes(r)),
        state_vars=js_records.state_vars(r), css_rules=sorted(rules, key=lambda x: x.span),
        statements=statements, variables=variables, var_refs=var_refs, matcher=matcher,
        dead_ends=sorted(zip(b.collector.dead_ends, b.collector.dead_code)),
        properties=sorted(set(b.collector.properties), key=lambda p: p[1]),
    )


def _own_element_writes(functions, bindings, writes):
    """Writes through ``this`` (a non-arrow handler) or the handler event's ``currentTarget``
    / ``target``, resolved to the elements the handler is bound to."""
    bound: dict[int, set[int]] = {}
    for bnd in bindings:
        if bnd.handler is not None and bnd.elements and not bnd.global_target:
            bound.setdefault(bnd.handler, set()).update(bnd.elements)
    out = []
    for w in writes:
        fn = functions[w.function] if w.function is not None else None
        if not w.elements and fn is not None and fn.index in bound and _names_own_element(
                w.target_text, fn):
            w = dataclasses.replace(w, elements=tuple(sorted(bound[fn.index])))
        out.append(w)
    return out


def _names_own_element(target: str, fn) -> bool:
    if target == "this":
        return fn.kind != "arrow"
    event, _, prop = target.partition(".")
    return bool(fn.params) and event == fn.params[0] and prop in ("currentTarget", "target")


class _Nesting:
    """Innermost-span lookups over a laminar family of spans (nested or disjoint)."""

    def __init__(self, spans: Sequence[Span]):
        order = sorted(range(len(spans)), key=lambda i: (spans[i][0], -spans[i][1]))
        self._order = order
        self._starts = [spans[i][0] for i in order]
        self._spans = [spans[i] for i in order]
        self._parents: list[int | None] = []
        stack: list[int] = []
        for k, (s, e) in enumerate(self._spans):
            while stack and self._spans[stack[-1]][1] < e:
                stack.pop()
            self._parents.append(stack[-1] if stack else None)
            stack.append(k)

    def innermost(self, offset: int) -> int | None:
        """Index (into the spans given) of the innermost span containing ``offset``."""
        k = bisect.bisect_right(self._starts, offset) - 1
        while k is not None and k >= 0:
            s, e = self._spans[k]
            if s <= offset < e:
                return self._order[k]
            k = self._parents[k]
        return None


class CodeGraph:
    """The code graph; see the module docstring and ``model`` for the records.

    Attributes:
        text: The text the graph indexes. region: Span of the HTML within it.
        elements, scripts, styles, functions, calls, event_bindings, dom_queries,
        element_writes, state_vars, css_rules: Tuples of records in source order.
        statements: Spans of JavaScript statements, sorted.
        dead_ends: Spans of the ``return``, ``throw``, ``break`` and ``continue`` statements
            that code after them in the same block can never get past, sorted.
        dead_code: For each of ``dead_ends``, the span of the code after it in its block.
        properties: ``(name, span, object span)`` of every named property access
            (``a.b``: ``b``, the span of ``b``, the span of ``a``), by position; the method
            of a call (``a.f()``) is not one (a misspelled method throws, and says so).
        variables: Every JavaScript binding (``var_refs`` index it); var_refs: their reads
            and writes, in source order.
    """

    def __init__(self, *, text: str, region: Span, elements, scripts, styles, functions, calls,
                 event_bindings, dom_queries, element_writes, state_vars, css_rules, statements,
                 matcher: SelectorMatcher, variables=(), var_refs=(), dead_ends=(),
                 properties=()):
        self.text = text
        self.region = region
        self.elements: tuple[Element, ...] = tuple(elements)
        self.scripts: tuple[Script, ...] = tuple(scripts)
        self.styles: tuple[StyleBlock, ...] = tuple(styles)
        self.functions: tuple[Function, ...] = tuple(functions)
        self.calls: tuple[Call, ...] = tuple(calls)
        self.event_bindings: tuple[EventBinding, ...] = tuple(event_bindings)
        self.dom_queries: tuple[DomQuery, ...] = tuple(dom_queries)
        self.element_writes: tuple[ElementWrite, ...] = tuple(element_writes)
        self.state_vars: tuple[StateVar, ...] = tuple(state_vars)
        self.css_rules: tuple[CssRule, ...] = tuple(css_rules)
        self.statements: tuple[Span, ...] = tuple(statements)
        self.dead_ends: tuple[Span, ...] = tuple(j for j, _ in dead_ends)  # (jump, dead code)
        self.dead_code: tuple[Span, ...] = tuple(c for _, c in dead_ends)
        self.properties: tuple[tuple[str, Span, Span], ...] = tuple(properties)
        self.variables: tuple[Variable, ...] = tuple(variables)
        self.var_refs: tuple[VarRef, ...] = tuple(var_refs)
        self._matcher = matcher
        self._function_nesting = _Nesting([f.span for f in self.functions])
        self._statement_nesting = _Nesting(self.statements)
        self._element_nesting = _Nesting([e.span for e in self.elements])
        self._rule_nesting = _Nesting([r.span for r in self.css_rules])
        self._state_by_name = {v.name: v for v in self.state_vars}

    # -- positions -----------------------------------------------------------------------

    def enclosing_function(self, offset: int) -> Function | None:
        """Innermost function (or inline handler) whose span contains ``offset``."""
        i = self._function_nesting.innermost(offset)
        return None if i is None else self.functions[i]

    def enclosing_statement(self, offset: int) -> Span | None:
        """Span of the innermost JavaScript statement containing ``offset``."""
        i = self._statement_nesting.innermost(offset)
        return None if i is None else self.statements[i]

    def enclosing_element(self, offset: int) -> Element | None:
        i = self._element_nesting.innermost(offset)
        return None if i is None else self.elements[i]

    def enclosing_rule(self, offset: int) -> CssRule | None:
        i = self._rule_nesting.innermost(offset)
        return None if i is None else self.css_rules[i]

    # -- elements ------------------------------------------------------------------------

    def elements_by_id(self, element_id: str) -> tuple[Element, ...]:
        return tuple(e for e in self.elements if e.id == element_id)

    def element_by_id(self, element_id: str) -> Element | None:
        """The element ``getElementById`` would return (the first with that id)."""
        return next((e for e in self.elements if e.id == element_id), None)

    def match(self, selector: str) -> tuple[tuple[int, ...], bool]:
        """(indices of elements matching a CSS selector list, exact); see ``css``."""
        return self._matcher.match(selector)

    def select(self, selector: str) -> tuple[Element, ...]:
        """Elements a CSS selector list matches (a superset when the match is inexact)."""
        return tuple(self.elements[i] for i in self._matcher.match(selector)[0])

    def bindings_for_element(self, index: int) -> tuple[EventBinding, ...]:
        return tuple(b for b in self.event_bindings if index in b.elements)

    def queries_for_element(self, index: int) -> tuple[DomQuery, ...]:
        return tuple(q for q in self.dom_queries if index in q.elements)

    def writes_to_element(self, index: int) -> tuple[ElementWrite, ...]:
        return tuple(w for w in self.element_writes if index in w.elements)

    def rules_for_element(self, index: int) -> tuple[CssRule, ...]:
        return tuple(r for r in self.css_rules if index in r.elements)

    # -- code ----------------------------------------------------------------------------

    def functions_named(self, name: str) -> tuple[Function, ...]:
        return tuple(f for f in self.functions if f.name == name or f.qualname == name)

    def calls_from(self, function: int | None) -> tuple[Call, ...]:
        """Call edges whose caller is ``function`` (None: top-level code)."""
        return tuple(c for c in self.calls if c.caller == function)

    def calls_to(self, function: int) -> tuple[Call, ...]:
        return tuple(c for c in self.calls if function in c.targets)

    @functools.cached_property
    def flow(self):
        """Statement-level data flow (``flow.Flow``), built on first use."""
        from evaluators.localize.flow import Flow  # flow reads the graph: built after it

        return Flow(self)

    def state_var(self, name: str) -> StateVar | None:
        """A global variable (``n``) or property path (``state.x``) by name."""
        return self._state_by_name.get(name)
