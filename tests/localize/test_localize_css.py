"""CSS selector evaluation against the static element tree."""

from __future__ import annotations

import pytest

from evaluators.localize.css import parse_complex, split_top_level
from evaluators.localize.graph import build_graph

DOC = """<html><body>
<div id="a" class="x y" title="Hello World" lang="en-US">
  <section><p class="x">one</p><span data-k="v1">s1</span></section>
  <p>two</p><span>s2</span><em>e</em>
</div>
<input type="range" name="r"><input type="text" disabled>
</body></html>"""


@pytest.fixture(scope="module")
def g():
    return build_graph(DOC)


def tags(g, indices):
    return [g.elements[i].tag + (f"#{g.elements[i].id}" if g.elements[i].id else "")
            for i in indices]


@pytest.mark.parametrize("selector, expected", [
    ("div", ["div#a"]),
    ("*", ["html", "body", "div#a", "section", "p", "span", "p", "span", "em", "input",
           "input"]),
    ("#a", ["div#a"]),
    (".x", ["div#a", "p"]),
    (".x.y", ["div#a"]),
    ("p.x", ["p"]),
    ("div p", ["p", "p"]),
    ("div > p", ["p"]),
    ("#a > section > p.x", ["p"]),
    ("body div section span", ["span"]),
    ("p + span", ["span", "span"]),
    ("section + p", ["p"]),
    ("section ~ em", ["em"]),
    ("p ~ span", ["span", "span"]),
    ("[disabled]", ["input"]),
    ('input[type="range"]', ["input"]),
    ("input[type=text]", ["input"]),
    ("[title~=World]", ["div#a"]),
    ("[lang|=en]", ["div#a"]),
    ("[title^=Hell]", ["div#a"]),
    ("[title$=rld]", ["div#a"]),
    ("[title*='lo W']", ["div#a"]),
    ("[title='hello world' i]", ["div#a"]),
    ("[title='hello world']", []),
    ("[data-k^='']", []),
    (":root", ["html"]),
    ("span::before", ["span", "span"]),
    ("#a span:hover", ["span", "span"]),
    ("input:checked, em", ["em", "input", "input"]),
    ("DIV > P", ["p"]),
])
def test_exact_matches(g, selector, expected):
    indices, exact = g.match(selector)
    assert tags(g, indices) == expected  # in document order
    assert exact


def test_exact_matches_are_in_document_order(g):
    indices, _ = g.match("em, p")
    assert list(indices) == sorted(indices)
    assert tags(g, indices) == ["p", "p", "em"]


@pytest.mark.parametrize("selector, expected", [
    ("p:first-child", ["p", "p"]),  # superset: structural pseudo-class ignored
    ("span:not([data-k])", ["span", "span"]),
    ("div :is(p, em)", ["section", "p", "span", "p", "span", "em"]),
])
def test_inexact_matches_are_supersets(g, selector, expected):
    indices, exact = g.match(selector)
    assert tags(g, indices) == expected
    assert not exact


@pytest.mark.parametrize("selector", ["& p", "svg|rect", "#", "p >", "div[", "a,,"])
def test_unparseable_selectors_match_nothing_and_are_inexact(g, selector):
    assert g.match(selector) == ((), False)


def test_unparseable_part_keeps_the_rest_of_the_list(g):
    assert g.match("em, & p") == ((8,), False)


def test_split_top_level_respects_brackets_and_quotes():
    assert split_top_level('a, :is(b, c), [t="x,y"]') == ["a", " :is(b, c)", ' [t="x,y"]']


def test_parse_complex_structure():
    sel = parse_complex("div.a > p#b.c[x=1]:hover ~ *")
    assert sel.combinators == (">", "~")
    assert [(c.tag, c.ids, c.classes) for c in sel.compounds] == [
        ("div", (), ("a",)), ("p", ("b",), ("c",)), (None, (), ())]
    assert sel.compounds[1].attrs == (("x", "=", "1", False),)
    assert sel.exact
