"""Judge findings localized from their typed evidence: the quoted code (exact, with other
quotes, fuzzy), the line hint among repeated quotes, and the names the judge gave."""

from __future__ import annotations

import pytest

from evaluators.localize.api import localize_record
from evaluators.localize.graph import build_graph
from evaluators.localize.spans import localize

APP = """<style>
#out { color: red; }
</style>
<button id="inc">+</button><button id="dec">-</button><p id="out">0</p>
<script>
let count = 0;
function render() {
  document.getElementById('out').textContent = count;
}
function onInc() {
  count -= 1;
  render();
}
function onDec() {
  count -= 1;
  render();
}
document.getElementById('inc').addEventListener('click', onInc);
document.getElementById('dec').addEventListener('click', onDec);
</script>"""


def finding(code: str | None = None, line: int | None = None, **kw) -> dict:
    return {"kind": "judge_finding", "reason": "judge_finding", "stage": "rubric",
            "severity": "severe", "rubric_id": "r", "message": "the + button subtracts",
            "evidence_code": code, "evidence_line": line, **kw}


def _at(text: str, nth: int = 0) -> tuple[int, int]:
    start = -1
    for _ in range(nth + 1):
        start = APP.index(text, start + 1)
    return start, start + len(text)


def _line_of(text: str, nth: int = 0) -> int:
    return APP[:_at(text, nth)[0]].count("\n") + 1


def _inside(span, spans) -> bool:
    return any(s <= span[0] and span[1] <= e for s, e in spans)


G = build_graph(APP)
ON_INC = _at("count -= 1;", 0)
ON_DEC = _at("count -= 1;", 1)


@pytest.mark.parametrize("quote", [
    "count -= 1;",                       # as written
    "count   -=\n 1;",                   # other white space
    "count -= 1",                        # a partial excerpt
])
def test_a_quote_of_the_faulty_line_with_its_line_blames_that_statement(quote):
    loc = localize(G, finding(quote, _line_of("count -= 1;", 0)))
    assert loc.s_dir == (ON_INC,)
    on_inc = list(G.functions_named("onInc")[0].span)
    assert {"span": on_inc, "set": "ctx", "why": "function around the code the judge quoted",
            "by": "text", "rule": "judge.quoted_code"} in loc.evidence
    assert not _inside(ON_DEC, loc.s_dir)


def test_without_a_line_every_occurrence_is_blamed():
    loc = localize(G, finding("count -= 1;"))
    assert set(loc.s_dir) == {ON_INC, ON_DEC}


def test_other_quotes_and_a_paraphrase_still_find_the_line():
    loc = localize(G, finding('document.getElementById("inc").addEventListener("click", onInc);'))
    assert loc.s_dir == (_at("document.getElementById('inc').addEventListener('click', onInc);"),)
    assert [e["why"] for e in loc.evidence if e["set"] == "dir"] == [
        "code the judge quoted (quotes match)"]
    fuzzy = localize(G, finding("document.getElementById('out').textContent = counter;"))
    assert fuzzy.s_dir == (_at("document.getElementById('out').textContent = count;"),)


def test_a_quote_not_in_the_app_blames_only_what_the_judge_named():
    loc = localize(G, finding("total = total - step; updateView();", handler="onInc",
                              state_var="count", selector="#out"))
    assert loc.s_dir == (G.functions_named("onInc")[0].span,)  # the only pointer left
    assert _inside(_at("count = 0"), loc.s_ctx) and _inside(_at("#out { color: red; }"),
                                                            loc.s_ctx)
    named = localize(G, finding("count -= 1;", _line_of("count -= 1;", 1), handler="onDec"))
    assert named.s_dir == (ON_DEC,)  # with a quote found, a named handler is context


def test_a_judge_finding_weighs_tokens_when_its_rubric_failed():
    rec = {"response": APP, "extraction": {"start": 0, "end": len(APP)},
           "rubrics": [{"id": "r", "verdict": "fail"}, {"id": "q", "verdict": "pass"}],
           "diagnostics": [finding("count -= 1;", _line_of("count -= 1;", 0)),
                           {**finding("render();"), "rubric_id": "q"}]}
    out = localize_record(rec)
    failed, passed = out["diagnostics"]
    assert failed["weighted"] and failed["s_dir"] == [list(ON_INC)]
    assert not passed["weighted"]
