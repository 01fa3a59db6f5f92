"""CSS selectors evaluated against the static HTML element tree, and style-rule extraction.

Supported in matching: type and universal selectors, ``#id``, ``.class``, attribute selectors
(``[a]``, ``=``, ``~=``, ``|=``, ``^=``, ``$=``, ``*=``, with the ``i`` flag), ``:root``, and the
four combinators (descendant, ``>``, ``+``, ``~``). Pseudo-elements and state pseudo-classes
(``:hover``, ``:checked``...) are ignored: the rule is attributed to the element whatever its
state, which is what localization wants. Any other pseudo-class (``:not``, ``:nth-child``...) is
also ignored but makes the result inexact: the match set is then a superset of the true one. A
selector that cannot be parsed (nesting ``&``, namespaces, a syntax error) matches nothing and is
inexact as well, so callers can tell "no element" from "could not tell".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Sequence

from evaluators.localize.model import CssDeclaration, CssRule, Element

_IDENT = re.compile(r"(?:[-\w]|\\[^\n]|[^\x00-\x7f])+")
_ATTR = re.compile(
    r"\[\s*((?:[-\w]|\\.)+)\s*"  # name
    r"(?:([~|^$*]?=)\s*(?:\"([^\"]*)\"|'([^']*)'|([^\]\s]+))\s*([iIsS])?\s*)?\]"  # op value flag
)
_STATE_PSEUDO = frozenset(
    "hover active focus focus-within focus-visible visited link any-link target checked "
    "disabled enabled indeterminate placeholder-shown valid invalid required optional "
    "read-only read-write default in-range out-of-range autofill user-invalid".split()
)
_LEGACY_PSEUDO_ELEMENTS = frozenset(("before", "after", "first-line", "first-letter"))


@dataclass(frozen=True)
class Compound:
    """One compound selector (``div.a#b[type=range]:hover``).

    Attributes:
        tag: Lower-cased type selector, or None for ``*``/none.
        ids: Required ids.
        classes: Required classes.
        attrs: ``(name, op, value, ignore_case)``; ``op`` is '' for presence.
        root: True for ``:root``.
        exact: False when a pseudo-class was ignored that can exclude elements.
    """

    tag: str | None
    ids: tuple[str, ...]
    classes: tuple[str, ...]
    attrs: tuple[tuple[str, str, str, bool], ...]
    root: bool
    exact: bool


@dataclass(frozen=True)
class ComplexSelector:
    """Compounds left to right; ``combinators[i]`` joins ``compounds[i]`` and ``compounds[i+1]``."""

    compounds: tuple[Compound, ...]
    combinators: tuple[str, ...]

    @property
    def exact(self) -> bool:
        return all(c.exact for c in self.compounds)


def _unescape(ident: str) -> str:
    return re.sub(r"\\(.)", r"\1", ident)


def split_top_level(text: str, sep: str = ",") -> list[str]:
    """Splits at ``sep`` outside brackets, parentheses and quotes."""
    parts, depth, quote, start = [], 0, "", 0
    for i, ch in enumerate(text):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def _skip_parens(text: str, i: int) -> int:
    """Returns the index after the ``)`` closing the ``(`` at ``i``, or -1."""
    depth = 0
    for j in range(i, len(text)):
        if text[j] == "(":
            depth += 1
        elif text[j] == ")":
            depth -= 1
            if depth == 0:
                return j + 1
    return -1


def _parse_compound(text: str, i: int) -> tuple[Compound | None, int]:
    """Parses a compound at ``i``; returns (None, i) when nothing selector-like is there."""
    start, tag, exact, root = i, None, True, False
    ids, classes, attrs = [], [], []
    if i < len(text) and text[i] == "*":
        i += 1
    else:
        m = _IDENT.match(text, i)
        if m:
            tag, i = _unescape(m.group()).lower(), m.end()
    while i < len(text):
        ch = text[i]
        if ch in "#.":
            m = _IDENT.match(text, i + 1)
            if not m:
                return None, start
            (ids if ch == "#" else classes).append(_unescape(m.group()))
            i = m.end()
        elif ch == "[":
            m = _ATTR.match(text, i)
            if not m:
                return None, start
            value = next((g for g in m.group(3, 4, 5) if g is not None), "")
            flag = (m.group(6) or "").lower() == "i"
            attrs.append((_unescape(m.group(1)).lower(), m.group(2) or "", value, flag))
            i = m.end()
        elif ch == ":":
            element = text.startswith("::", i)
            m = _IDENT.match(text, i + (2 if element else 1))
            if not m:
                return None, start
            name, i = m.group().lower(), m.end()
            if i < len(text) and text[i] == "(":
                i = _skip_parens(text, i)
                if i < 0:
                    return None, start
            if name == "root":
                root = True
            elif not (element or name in _STATE_PSEUDO or name in _LEGACY_PSEUDO_ELEMENTS):
                exact = False
        else:
            break
    if i == start:
        return None, start
    compound = Compound(tag, tuple(ids), tuple(classes), tuple(attrs), root, exact)
    return compound, i


def parse_complex(text: str) -> ComplexSelector | None:
    """Parses one complex selector (no commas); None when it is not supported or malformed."""
    compounds, combinators = [], []
    i, n = 0, len(text)
    while i < n and text[i].isspace():
        i += 1
    while True:
        compound, i = _parse_compound(text, i)
        if compound is None:
            return None
        compounds.append(compound)
        j = i
        while j < n and text[j].isspace():
            j += 1
        if j == n:
            break
        if text[j] in ">+~":
            combinator = text[j]
            j += 1
            while j < n and text[j].isspace():
                j += 1
        elif j > i:
            combinator = " "
        else:
            return None
        combinators.append(combinator)
        i = j
    return ComplexSelector(tuple(compounds), tuple(combinators))


def _attr_matches(actual: str | None, op: str, value: str, ignore_case: bool) -> bool:
    if actual is None:
        return False
    if not op:
        return True
    if ignore_case:
        actual, value = actual.lower(), value.lower()
    if op == "=":
        return actual == value
    if op == "~=":
        return value in actual.split()
    if op == "|=":
        return actual == value or actual.startswith(value + "-")
    if not value:
        return False  # [a^=""] and friends match nothing per the spec.
    if op == "^=":
        return actual.startswith(value)
    if op == "$=":
        return actual.endswith(value)
    return value in actual


class SelectorMatcher:
    """Evaluates selectors against a fixed list of elements, with id/class/tag indexes."""

    def __init__(self, elements: Sequence[Element]):
        self._elements = elements
        # A bare attribute (`disabled`) is present with the empty value, as in the DOM.
        self._attrs = [{a.name: a.value or "" for a in reversed(e.attributes)} for e in elements]
        self._class_sets = [frozenset(e.classes) for e in elements]
        self._by_id: dict[str, list[int]] = {}
        self._by_class: dict[str, list[int]] = {}
        self._by_tag: dict[str, list[int]] = {}
        for e in elements:
            if e.id is not None:
                self._by_id.setdefault(e.id, []).append(e.index)
            for c in set(e.classes):
                self._by_class.setdefault(c, []).append(e.index)
            self._by_tag.setdefault(e.tag, []).append(e.index)

    def _compound_matches(self, index: int, c: Compound) -> bool:
        e = self._elements[index]
        if c.tag is not None and e.tag != c.tag:
            return False
        if c.root and e.tag != "html":
            return False
        if any(e.id != i for i in c.ids):
            return False
        if c.classes and not self._class_sets[index].issuperset(c.classes):
            return False
        attrs = self._attrs[index]
        return all(_attr_matches(attrs.get(n, None), op, v, ic) for n, op, v, ic in c.attrs)

    def _previous_siblings(self, index: int) -> list[int]:
        parent = self._elements[index].parent
        if parent is None:
            siblings = [e.index for e in self._elements if e.parent is None]
        else:
            siblings = list(self._elements[parent].children)
        return siblings[: siblings.index(index)]

    def _matches_at(self, index: int, sel: ComplexSelector, k: int) -> bool:
        """Whether compounds[0..k] match with compounds[k] on element ``index``."""
        if not self._compound_matches(index, sel.compounds[k]):
            return False
        if k == 0:
            return True
        combinator = sel.combinators[k - 1]
        if combinator == ">" or combinator == " ":
            parent = self._elements[index].parent
            while parent is not None:
                if self._matches_at(parent, sel, k - 1):
                    return True
                if combinator == ">":
                    return False
                parent = self._elements[parent].parent
            return False
        previous = self._previous_siblings(index)
        if combinator == "+":
            return bool(previous) and self._matches_at(previous[-1], sel, k - 1)
        return any(self._matches_at(p, sel, k - 1) for p in previous)

    def _candidates(self, c: Compound) -> Sequence[int]:
        if c.ids:
            return self._by_id.get(c.ids[0], ())
        if c.classes:
            return self._by_class.get(c.classes[0], ())
        if c.tag is not None:
            return self._by_tag.get(c.tag, ())
        return range(len(self._elements))

    def match(self, selector: str) -> tuple[tuple[int, ...], bool]:
        """Matches a selector list.

        Args:
            selector: CSS selector list text.

        Returns:
            (indices of matching elements in document order, exact). ``exact`` is False when
            some part could not be evaluated (see the module docstring).
        """
        found: set[int] = set()
        exact = True
        for part in split_top_level(selector):
            sel = parse_complex(part)
            if sel is None:
                exact = False
                continue
            exact = exact and sel.exact
            last = len(sel.compounds) - 1
            found.update(i for i in self._candidates(sel.compounds[last])
                         if self._matches_at(i, sel, last))
        return tuple(sorted(found)), exact


# ---------------------------------------------------------------------------------------------
# Style rules


_GROUP_RULES = frozenset(("media_statement", "supports_statement", "at_rule", "scope_statement"))


def _declarations(block, text_of: Callable, span_of: Callable) -> tuple[CssDeclaration, ...]:
    out = []
    for d in block.named_children:
        if d.type != "declaration":
            continue
        source = text_of(d)
        prop, _, value = source.partition(":")
        out.append(CssDeclaration(prop.strip(), value.strip().rstrip(";").strip(), span_of(d)))
    return tuple(out)


def extract_rules(root, text_of: Callable, span_of: Callable,
                  matcher: SelectorMatcher) -> list[CssRule]:
    """Collects the style rules of one parsed stylesheet.

    Args:
        root: The ``stylesheet`` node of tree-sitter-css.
        text_of: Node -> its source text.
        span_of: Node -> its character span.
        matcher: Matcher over the document's elements.

    Returns:
        The rules in source order. Nested rules (CSS nesting) are kept but match nothing and
        are inexact, since their selectors are relative to the parent rule.
    """
    rules: list[CssRule] = []
    stack = [(root, None, False)]  # (node, media text, inside another rule)
    while stack:
        node, media, nested = stack.pop()
        for child in reversed(node.named_children):
            t = child.type
            if t == "rule_set":
                rules.append(_rule(child, media, nested, text_of, span_of, matcher))
                block = child.child_by_field_name("block") or _first_of(child, "block")
                if block is not None:
                    stack.append((block, media, True))
            elif t in _GROUP_RULES or t == "ERROR":
                block = _first_of(child, "block")
                condition = media
                if t != "ERROR" and block is not None:
                    condition = text_of(child)[: block.start_byte - child.start_byte].strip()
                stack.append((block if block is not None else child, condition, nested))
    rules.sort(key=lambda r: r.span)
    return rules


def _first_of(node, type_name: str):
    for c in node.named_children:
        if c.type == type_name:
            return c
    return None


def _rule(node, media, nested, text_of, span_of, matcher: SelectorMatcher) -> CssRule:
    selectors = _first_of(node, "selectors")
    block = _first_of(node, "block")
    selector = text_of(selectors).strip() if selectors is not None else ""
    if nested or not selector:
        elements, exact = (), False
    else:
        elements, exact = matcher.match(selector)
    return CssRule(
        selector=selector,
        selector_span=span_of(selectors) if selectors is not None else span_of(node),
        block=span_of(block) if block is not None else span_of(node),
        span=span_of(node),
        declarations=_declarations(block, text_of, span_of) if block is not None else (),
        elements=elements,
        exact=exact,
        media=media,
    )
