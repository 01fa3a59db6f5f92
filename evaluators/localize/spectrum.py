"""Spectrum-based suspiciousness: the statements failing probes ran and passing probes did not.

With `BrowserConfig.coverage` and `coverage_passing` every probe of a record carries its path
(the functions that ran since load, and the blocks inside them that did not). A statement
ran in a probe when the innermost function whose body holds it ran and no skipped block
holds it; top-level code runs at load, before any probe's reading, so it is in no spectrum.
Each statement gets the Ochiai score over the record's probes,

    ochiai(s) = ef / sqrt(F * (ef + ep)),

with ef and ep the failing and passing probes that ran s and F the failing probes. It reads
no names, no messages and no locators: only which code ran on which outcome. Its weakness
is the standard one: a fault in code every probe runs ties with all of that code, and with
no passing probe every statement a failing probe ran scores the same.

`_Case.d["spectrum"]` (set by `api.localize_diagnostics` from the record, never stored)
holds `{"failing": [coverage], "passing": [coverage]}`; a diagnostic's own path is its
`coverage`.
"""

from __future__ import annotations

import math

from evaluators.localize.graph import CodeGraph
from evaluators.localize.rules import rule
from evaluators.localize.spans_common import Ops, _Case, ran_functions

Span = tuple[int, int]
# A top tier whose statements cover more than this share of the app's JavaScript is not blamed
# directly (context only): a tie that large says the spectrum cannot tell (every probe ran it).
MAX_DIR_SHARE = 0.25


def owner(g: CodeGraph, span: Span):
    """The innermost function whose body holds the statement, or None (top-level code)."""
    fn = g.enclosing_function(span[0])
    while fn is not None and not (fn.body[0] <= span[0] and span[1] <= fn.body[1]):
        fn = None if fn.parent is None else g.functions[fn.parent]
    return fn


def executed(g: CodeGraph, coverage: dict | None) -> set[int]:
    """Indices of `g.statements` that ran on the path `coverage` records."""
    if not isinstance(coverage, dict):
        return set()
    ran = ran_functions(g, coverage)
    skipped = [(int(b[0]), int(b[1])) for b in coverage.get("skipped") or ()
               if isinstance(b, (list, tuple)) and len(b) == 2]
    out = set()
    for i, s in enumerate(g.statements):
        fn = owner(g, s)
        if fn is not None and fn.index in ran and not any(a <= s[0] and s[1] <= b
                                                          for a, b in skipped):
            out.add(i)
    return out


def ochiai(failing: list[set[int]], passing: list[set[int]]) -> dict[int, float]:
    """{statement: Ochiai score} over the statements some failing path ran."""
    if not failing:
        return {}
    scores = {}
    for s in set().union(*failing):
        ef = sum(s in f for f in failing)
        ep = sum(s in p for p in passing)
        scores[s] = ef / math.sqrt(len(failing) * (ef + ep))
    return scores


def _leaves(g: CodeGraph, chosen: set[int]) -> list[Span]:
    """The chosen statements that hold no other chosen statement (a loop, not its body too)."""
    spans = [g.statements[i] for i in chosen]
    return [s for s in spans
            if not any(t != s and s[0] <= t[0] and t[1] <= s[1] for t in spans)]


def paths(c: _Case) -> tuple[set[int], list[set[int]], list[set[int]]] | None:
    """(the case's own path, the failing paths, the passing paths) as statement sets; None
    without a spectrum or a path of its own."""
    spec = c.d.get("spectrum")
    mine = executed(c.g, c.d.get("coverage"))
    if not isinstance(spec, dict) or not mine:
        return None
    failing = [executed(c.g, cov) for cov in spec.get("failing") or ()] or [mine]
    passing = [executed(c.g, cov) for cov in spec.get("passing") or ()]
    return mine, failing, passing


def case_scores(c: _Case) -> dict[int, float]:
    """{statement: Ochiai} over the statements the case's own failing path ran."""
    got = paths(c)
    if got is None:
        return {}
    return _own_scores(*got)


def _own_scores(mine: set[int], failing: list[set[int]],
                passing: list[set[int]]) -> dict[int, float]:
    return {s: v for s, v in ochiai(failing, passing).items() if s in mine}


@rule("probe.spectrum")
def spectrum_blame(c: _Case) -> Ops:
    """A failed probe blames the statements its path ran that the fewest passing probes ran
    (the top Ochiai tier) directly, and the next tier as context."""
    got = paths(c)
    if got is None:
        return
    _, failing, passing = got
    scores = _own_scores(*got)
    tiers = sorted(set(scores.values()), reverse=True)[:2]
    js = sum(x.span[1] - x.span[0] for x in c.g.scripts) or len(c.g.text)
    for rank, tier in enumerate(tiers):
        chosen = {s for s, v in scores.items() if v == tier}
        leaves = _leaves(c.g, chosen)
        one = next(iter(chosen))
        why = (f"ran on {sum(one in f for f in failing)} of {len(failing)} failing and "
               f"{sum(one in p for p in passing)} of {len(passing)} passing probes' paths "
               f"(Ochiai {tier:.2f}, rank {rank + 1})")
        wide = sum(e - s for s, e in leaves) > MAX_DIR_SHARE * js
        level = "dir" if rank == 0 and not wide else "ctx"
        for span in leaves:
            yield from c.add(level, span, why, "coverage")
