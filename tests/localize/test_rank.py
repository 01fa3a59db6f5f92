"""The scored combiner (`localize.rank`, method ``ranked``): one ranking decides S_dir."""

from __future__ import annotations

import pytest

from evaluators.localize.graph import build_graph
from evaluators.localize.rank import scores, spectrum_units, top_runs
from evaluators.localize.rules import LocalizeConfig
from evaluators.localize.spans import localize
from tests.localize.diags import probe_failure, rules_of, span

# The value written is wrong; nothing in the code names the element the way the probe does
# except one lookup, and the page recorded the write (trace_writers) with its stack.
APP = """<span id="total">0</span><button id="go">go</button>
<script>
let count = 0;
function put(el, k, v) { el[k] = v; }
function refresh() {
  const el = document.getElementById('total');
  count += 2;
  console.log('refresh', count);
  put(el, 'textContent', count * 5);
}
document.getElementById('go').addEventListener('click', refresh);
</script>"""


def _diagnostic() -> dict:
    frames = [{"in_app": True, "offset": APP.index(c)}
              for c in ("el[k] = v;", "put(el, 'textContent', count * 5);")]
    return {**probe_failure({"expect": "text", "locator": "#total", "value": "2"},
                            {"do": "click", "locator": "#go"}),
            "writers": [{"kind": "text", "where": "self", "frames": frames}]}


def _text(loc, which: str) -> list[str]:
    return [APP[s:e] for s, e in getattr(loc, which)]


def test_overlapping_blame_adds_up_in_runs_of_equal_score():
    assert scores([((0, 10), 1.0), ((5, 15), 2.0), ((20, 22), 0.0)]) == [
        ((0, 5), 1.0), ((5, 10), 3.0), ((10, 15), 2.0)]
    # Touching runs of the same score are one run.
    assert scores([((0, 5), 1.0), ((5, 9), 1.0)]) == [((0, 9), 1.0)]


def test_the_top_score_is_always_kept_and_the_rest_fills_the_budget():
    runs = [((0, 50), 1.0), ((60, 70), 3.0), ((80, 200), 3.0), ((210, 215), 2.0)]
    # The top tier is 130 characters, over a budget of 100: kept whole, nothing more.
    assert top_runs(runs, 100, 1000) == [((60, 70), 3.0), ((80, 200), 3.0)]
    assert top_runs(runs, 140, 1000) == [((60, 70), 3.0), ((80, 200), 3.0), ((210, 215), 2.0)]
    assert top_runs([], 10, 1000) == []
    # A top tier wider than the most the ranking may blame: it cannot tell.
    assert top_runs(runs, 100, 129) is None


def test_a_compound_statement_scores_only_its_head():
    g = build_graph("<script>function f(a) { if (a > 1) { a = 2; } return a; }</script>")
    i_if = next(i for i, s in enumerate(g.statements) if g.text[s[0]:s[1]].startswith("if"))
    i_set = next(i for i, s in enumerate(g.statements) if g.text[s[0]:s[1]] == "a = 2;")
    units = {g.text[s:e]: v for (s, e), v in spectrum_units(g, {i_if: 1.0, i_set: 0.5})}
    assert units == {"if (a > 1) { ": 1.0, "a = 2;": 0.5}


def test_where_independent_facts_meet_is_direct_and_the_rest_context():
    g = build_graph(APP)
    grounded = localize(g, _diagnostic(), "grounded")
    ranked = localize(g, _diagnostic(), "ranked")
    # Grounded blames the handler bound to the acted-on button whole; the ranking keeps
    # the statement the recorded write's stack and the call graph both point at.
    assert any(t.startswith("function refresh()") for t in _text(grounded, "s_dir"))
    assert _text(ranked, "s_dir") == ["el[k] = v;"]
    assert any(t.startswith("function refresh()") for t in _text(ranked, "s_ctx"))
    # The write's own blame stays direct, with the ranking's; what lies outside is demoted.
    (top,) = [e for e in ranked.evidence if e["set"] == "dir"]
    assert set(rules_of(top)) == {"probe.writers", "probe.rank"}
    demoted = [e for e in ranked.evidence if e.get("demoted_by") == "probe.rank"]
    assert {r for e in demoted for r in rules_of(e)} == {"probe.binding"}
    # Off, the method is the grounded chain.
    off = localize(g, _diagnostic(), "ranked", cfg=LocalizeConfig({"probe.rank"}))
    assert off.s_dir == grounded.s_dir and off.s_ctx == grounded.s_ctx


def test_the_budget_bounds_what_beyond_the_top_is_direct():
    g = build_graph(APP)
    wide = localize(g, _diagnostic(), "ranked", cfg=LocalizeConfig(rank_budget=1.0))
    narrow = localize(g, _diagnostic(), "ranked")
    assert sum(e - s for s, e in wide.s_dir) > sum(e - s for s, e in narrow.s_dir)
    a, b = span("count * 5", APP)
    assert any(s <= a and b <= e for s, e in wide.s_dir)
    assert not any(s <= a and b <= e for s, e in narrow.s_dir)


def test_the_spectrum_alone_ranks_when_no_rule_blamed():
    # No locator resolves and nothing was written: only the paths of the probes speak.
    app = ("<script>let m = 0, n = 0;\nfunction dec() { m -= 1; }\nfunction inc() { n += 1; }"
           "\n</script>")
    g = build_graph(app)

    def path(*names):
        return {"functions": [{"name": f.name, "start": f.span[0], "end": f.span[1],
                               "count": 1} for x in names for f in g.functions_named(x)]}
    d = {**probe_failure({"expect": "text", "locator": "#nothing", "value": "1"}, None),
         "coverage": path("dec"), "spectrum": {"failing": [path("dec")],
                                               "passing": [path("inc")]}}
    loc = localize(g, d, "ranked")
    assert [app[s:e] for s, e in loc.s_dir] == ["m -= 1;"]


def test_a_tie_too_wide_leaves_the_chain_its_own_blame():
    # No passing probe and no rule's blame: every statement the failing probe ran ties at
    # Ochiai 1, over more than a quarter of the app. A tie that wide tells nothing: no
    # direct blame comes of it (only context), where the top tier alone would take it all.
    app = "<script>function dec() { m -= 1; m -= 2; m -= 3; }</script>"
    g = build_graph(app)
    (f,) = g.functions_named("dec")
    ran = {"functions": [{"name": "dec", "start": f.span[0], "end": f.span[1], "count": 1}]}
    d = {**probe_failure({"expect": "text", "locator": "#nothing", "value": "1"}, None),
         "coverage": ran, "spectrum": {"failing": [ran], "passing": []}}
    ranked = localize(g, d, "ranked")
    assert ranked.s_dir == localize(g, d, "grounded").s_dir == ()
    assert [app[s:e] for s, e in ranked.s_ctx] == ["m -= 1;", "m -= 2;", "m -= 3;"]


def test_blame_execution_demoted_scores_nothing():
    # The handler of the acted-on button did not run before the failure (its coverage is
    # empty): grounding demoted it, and however heavy the graph's weight, it is not ranked.
    g = build_graph(APP)
    d = {**_diagnostic(), "coverage": {"functions": []}}
    heavy = LocalizeConfig(rank_weights=(("graph", 100.0), ("stack", 0.1)))
    ranked = localize(g, d, "ranked", cfg=heavy)
    grounded = localize(g, d, "grounded")
    assert any(e.get("demoted_by") and "refresh" in APP[e["span"][0]:e["span"][1]]
               for e in grounded.evidence)
    assert not any("function refresh" in t for t in _text(ranked, "s_dir"))


@pytest.mark.parametrize("bad", [{"rank_budget": 0.0}, {"rank_focus": 0},
                                 {"rank_ctx_weight": -1.0}, {"rank_ctx_weight": float("nan")},
                                 {"rank_weights": (("stak", 1.0),)},
                                 {"rank_weights": (("stack", -1.0),)},
                                 {"rank_weights": (("flow", float("inf")),)}])
def test_bad_rank_settings_are_errors(bad):
    with pytest.raises(ValueError, match="rank_"):
        LocalizeConfig(**bad)
