"""The scored combiner (method ``ranked``): every source scores the code, S_dir is the top.

The ``grounded`` chain decides S_dir by the order of its rules: a later rule demotes or drops
what an earlier one blamed. Here the same rules only supply evidence, and one ranking decides.
Each blamed item (its span, its set and the kind of fact behind it, ``Blame.by``) adds, at
every character it covers,

    weight(by) * (1 if direct else ctx_weight) * min(1, focus / length) ** 0.5,

so that a statement blamed by an exception's frame outranks a whole function blamed for
querying the element, and where several independent facts overlap their scores add. The
spectrum (``spectrum.ochiai`` over the record's probes: the statements failing probes ran
and passing ones did not) adds ``weight("spectrum") * ochiai`` over each statement it scores
(innermost statements, and the head of a compound one up to its first scored statement).
It reads no names: only where facts point.

The characters with the highest score, in runs, form S_dir until S_dir would exceed
``budget`` of the app's characters (the top run always); every other blamed character is
S_ctx. Each S_dir run records the rules whose blame scored it (``probe.rank`` blames it,
naming them); direct blame outside the chosen runs moves to the context with
``demoted_by: probe.rank``, and blame the chain had already demoted (code that did not run
before the failure) scores nothing. When the top score alone covers more than a quarter of
the app (``spectrum.MAX_DIR_SHARE``: every statement tied, as with no passing probe to
contrast), the ranking cannot tell and the chain's own S_dir stands.

Settings (``LocalizeConfig.rank_*``): the weights per fact, the context weight, the focus
length and the budget. They are settings of one formula, not rules about apps; the
localization benchmark reports them with the split they were chosen on.
"""

from __future__ import annotations

import bisect
import math

from evaluators.localize.combine import Blame
from evaluators.localize.graph import CodeGraph
from evaluators.localize.rules import rule
from evaluators.localize.spans_common import Ops, _Case
from evaluators.localize.spectrum import MAX_DIR_SHARE, case_scores

Span = tuple[int, int]


def _item_weight(item: Blame, weights: dict[str, float], ctx_weight: float,
                 focus: int) -> float:
    length = max(1, item.span[1] - item.span[0])
    level = 1.0 if item.set == "dir" else ctx_weight
    return weights.get(item.by, weights.get("other", 1.0)) * level * \
        min(1.0, focus / length) ** 0.5


def spectrum_units(g: CodeGraph, scores: dict[int, float]) -> list[tuple[Span, float]]:
    """(span, Ochiai) of each scored statement's own code: an innermost statement whole, a
    compound one (a loop, an `if`) from its start to its first scored statement inside."""
    spans = sorted((g.statements[i], v) for i, v in scores.items())
    out = []
    for k, ((s, e), v) in enumerate(spans):
        # Statements nest or are apart: the next one in text order that starts inside this
        # one is its first scored statement inside.
        end = min(e, spans[k + 1][0][0]) if k + 1 < len(spans) else e
        if end > s:
            out.append(((s, end), v))
    return out


def scores(contributions: list[tuple[Span, float]]) -> list[tuple[Span, float]]:
    """Piecewise-constant sum of (span, weight) contributions: maximal runs of equal
    positive score, in text order."""
    events: dict[int, float] = {}
    for (s, e), w in contributions:
        if e > s and w > 0:
            events[s] = events.get(s, 0.0) + w
            events[e] = events.get(e, 0.0) - w
    out: list[tuple[Span, float]] = []
    level, at = 0.0, None
    for x in sorted(events):
        if at is not None and level > 1e-9 and x > at:
            if out and out[-1][0][1] == at and math.isclose(out[-1][1], level):
                out[-1] = ((out[-1][0][0], x), level)
            else:
                out.append(((at, x), level))
        level += events[x]
        at = x
    return out


def top_runs(runs: list[tuple[Span, float]], budget_chars: float,
             max_chars: float) -> list[tuple[Span, float]] | None:
    """The highest-scoring runs, best first, while their total length stays within
    `budget_chars` (all runs of the top score, whatever their length); None when the top
    score alone covers more than `max_chars`: a tie that wide says the scores cannot tell."""
    ranked = sorted(runs, key=lambda r: (-r[1], r[0]))
    if not ranked:
        return []
    best = ranked[0][1]
    chosen, used = [], 0
    for span, v in ranked:
        size = span[1] - span[0]
        if math.isclose(v, best) or used + size <= budget_chars:
            chosen.append((span, v))
            used += size
        else:
            break
    top = sum(e - s for (s, e), v in chosen if math.isclose(v, best))
    return None if top > max_chars else chosen


def _overlaps_any(span: Span, units: list[tuple[Span, float]], starts: list[int]) -> bool:
    """Whether `span` overlaps one of `units` (disjoint, in text order; `starts` theirs)."""
    k = bisect.bisect_left(starts, span[1]) - 1
    return k >= 0 and units[k][0][1] > span[0]


@rule("probe.rank")
def rank_blame(c: _Case) -> Ops:
    """Ranks the code by the summed, length-discounted weight of every fact that blamed it
    (and the spectrum); the top within the budget is S_dir, the rest context."""
    cfg = c.cfg
    weights = dict(cfg.rank_weights)
    # Blame execution already moved to the context (the code did not run before the
    # failure) stays context and scores nothing: it is evidence against that code.
    scored = [i for i in c.items if i.span[1] > i.span[0] and not i.demoted_by]
    contrib = [(i.span, _item_weight(i, weights, cfg.rank_ctx_weight, cfg.rank_focus))
               for i in scored]
    w_spec = weights.get("spectrum", 0.0)
    units = spectrum_units(c.g, case_scores(c)) if w_spec > 0 else []
    # The spectrum's own top two tiers as context (what the rules blamed is context already).
    tiers = sorted({v for _, v in units}, reverse=True)[:2]
    for span, v in units:
        if v in tiers:
            yield from c.add("ctx", span, f"Ochiai {v:.2f} over the record's probes", "coverage")
    app = max(1, c.g.region[1] - c.g.region[0])
    chosen = top_runs(scores(contrib + [(span, w_spec * v) for span, v in units]),
                      cfg.rank_budget * app, MAX_DIR_SHARE * app)
    if not chosen:
        return  # nothing scored, or a tie too wide to tell: the chain's own S_dir stands

    def kept(i: Blame) -> bool:
        return any(s <= i.span[0] and i.span[1] <= e for (s, e), _ in chosen)

    yield from c.demote(lambda i: not kept(i), "; not in the top of the ranking", by="rank")
    starts = [u[0] for u, _ in units]
    for rank, (span, v) in enumerate(chosen, 1):
        sources = sorted({i.rule for i in scored if i.span[0] < span[1] and span[0] < i.span[1]})
        if _overlaps_any(span, units, starts):
            sources.append("spectrum")
        yield from c.add("dir", span, f"rank {rank} (score {v:.2f}) from {', '.join(sources)}",
                         "rank")
