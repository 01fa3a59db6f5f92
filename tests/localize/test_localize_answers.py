"""The code graph on real model answers (read from ../shared, never copied here).

Offsets are checked against the text itself: each record's span must hold the source its kind
implies, which catches byte/character mix-ups on the many answers with non-ASCII text.
"""

from __future__ import annotations

import re

import pytest

from evaluators.localize.graph import CodeGraph, build_graph, find_html_region


def check_graph(g: CodeGraph) -> None:
    """Asserts invariants every graph must satisfy; returns nothing, raises on violation."""
    text, (lo, hi) = g.text, g.region

    def inside(s):
        assert lo <= s[0] <= s[1] <= hi, s

    for e in g.elements:
        inside(e.span)
        assert text[e.start_tag[0]:e.start_tag[1]].lower().startswith("<" + e.tag)
        for a in e.attributes:
            assert text[a.span[0]:a.span[1]].lower().startswith(a.name)
    for f in g.functions:
        inside(f.span)
        assert f.span[0] <= f.body[0] <= f.body[1] <= f.span[1]
        source = text[f.span[0]:f.span[1]]
        if f.kind == "declaration":
            assert re.match(r"(async\s+)?function", source), source[:40]
        if f.kind == "arrow":
            assert "=>" in source
        if f.parent is not None:
            p = g.functions[f.parent].span
            assert p[0] <= f.span[0] and f.span[1] <= p[1]
    for q in g.dom_queries:
        assert q.method in text[q.span[0]:q.span[1]]
    for b in g.event_bindings:
        inside(b.span)
        if b.kind == "listener":
            assert "addEventListener" in text[b.span[0]:b.span[1]]
    for v in g.state_vars:
        for s in v.reads:
            assert text[s[0]:s[1]].startswith(v.root), (v.name, text[s[0]:s[1]])
        if v.decl is not None:  # `n = 6`, `{ a, n } = f()`, or the pair `x: 1` of state.x
            assert re.search(rf"\b{re.escape(v.name.split('.')[-1])}\b",
                             text[v.decl[0]:v.decl[1]]), v.name
    for r in g.css_rules:
        assert text[r.selector_span[0]:r.selector_span[1]].strip() == r.selector
        assert text[r.block[0]] == "{"
    for s in g.statements:
        inside(s)


def test_sample_of_answers(answers):
    """The longest non-ASCII answer of each model."""
    by_model: dict[str, dict] = {}
    for a in answers:
        if not a["response"].isascii():
            best = by_model.get(a["model"])
            if best is None or len(a["response"]) > len(best["response"]):
                by_model[a["model"]] = a
    assert len(by_model) >= 5
    for a in by_model.values():
        g = build_graph(a["response"], find_html_region(a["response"]))
        assert g.elements and g.functions
        check_graph(g)


@pytest.mark.slow
def test_every_answer(answers):
    assert len(answers) == 1500
    for a in answers:
        response = a["response"]
        g = build_graph(response, find_html_region(response))
        check_graph(g)
