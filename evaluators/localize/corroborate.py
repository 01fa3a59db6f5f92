"""Judge findings beside execution evidence of the same rubric: the stated combination.

A rubric can fail with both kinds of diagnostic: execution evidence (its probe's failure, an
exception its probe raised) and a judge's finding (a quote, a named handler). Each is
localized alone (``spans.localize``); this step then combines them, per rubric, after every
diagnostic of the record is localized. The rule (id ``judge.corroborate``, switched off with
``LocalizeConfig.disabled_rules`` like any rule, which leaves each diagnostic's own spans):

- code both blame is direct in both: a span one blames directly that meets the other's blame
  (S_dir or S_ctx) stays direct, and the part of the other's context it covers becomes direct
  there too, so the corroborated tokens carry two direct blames (``WeightConfig`` accumulates
  them up to its cap);
- code the judge blames directly only by a name (a handler it named, when its quote was not
  found in the app) moves to the judge's context when execution blamed some code directly and
  none of it: execution facts (a stack, coverage, a slice) outrank a name they do not support.
  Code the judge quoted, found in the app, stays direct: the quote is evidence of its own, and
  it is right where execution missed. Without direct execution blame the judge's spans stand;
- code only execution blames keeps its set.

Measured with `python benchmarks/judge_localization.py --grounded` (the localization
benchmark's mutants; README): demoting every uncorroborated direct span, quotes included,
lost the mutants where the judge quoted the fault and execution blamed elsewhere.

Spans are compared whole (a named handler stays direct if it meets any execution span), so no
blame is cut into pieces. Every change is recorded in the diagnostic's evidence with the rule
id.
"""

from __future__ import annotations

from evaluators.localize.combine import merge_spans, subtract_spans
from evaluators.localize.rules import declare

RULE = declare("judge.corroborate", __name__, (
    "Code a judge finding and the execution evidence of the same rubric both blame is direct "
    "in both; a handler the judge only named is context when execution blamed other code."))
_EXECUTION = frozenset(("probe_failure", "page_error"))

Span = tuple[int, int]


def _spans(d: dict, which: str) -> list[Span]:
    return [(int(s), int(e)) for s, e in d.get(which) or ()]


def _meets(span: Span, spans: list[Span]) -> bool:
    return any(s < span[1] and span[0] < e for s, e in spans)


def _intersect(spans: list[Span], within: list[Span]) -> list[Span]:
    return merge_spans((max(s, a), min(e, b)) for s, e in spans for a, b in within
                       if max(s, a) < min(e, b))


def _set(d: dict, s_dir: list[Span], s_ctx: list[Span]) -> None:
    s_dir = merge_spans(s_dir)
    d["s_dir"] = [list(s) for s in s_dir]
    d["s_ctx"] = [list(s) for s in subtract_spans(merge_spans(s_ctx), s_dir)]


def _evidence(d: dict, spans: list[Span], which: str, why: str) -> None:
    d.setdefault("evidence", [])
    d["evidence"] += [{"span": list(s), "set": which, "why": why, "by": "judge+execution",
                       "rule": RULE} for s in spans]


def corroborate(diagnostics: list[dict], disabled: frozenset[str] = frozenset()) -> None:
    """Applies the rule to localized ``diagnostics`` (in place), per rubric.

    Args:
        diagnostics: A record's diagnostics, the localizable ones with ``s_dir``/``s_ctx``.
        disabled: ``LocalizeConfig.disabled_rules``; with ``judge.corroborate`` in it,
            nothing changes.
    """
    if RULE in disabled:
        return
    rubrics: dict[str, tuple[list[dict], list[dict]]] = {}
    for d in diagnostics:
        rid = d.get("rubric_id")
        if rid is None or "s_dir" not in d:
            continue
        judged, executed = rubrics.setdefault(rid, ([], []))
        if d.get("kind") == "judge_finding":
            judged.append(d)
        elif d.get("kind") in _EXECUTION:
            executed.append(d)
    for judged, executed in rubrics.values():
        if judged and executed:
            _combine(judged, executed)


def _named_only(d: dict, span: Span) -> bool:
    """Whether every direct blame of ``span`` in ``d`` came from a name the judge gave (rule
    ``judge.named_code``), none from a quote found in the app."""
    rules = {e.get("rule") for e in d.get("evidence") or () if e.get("set") == "dir"
             and _meets(span, [tuple(e["span"])])}
    return rules == {"judge.named_code"}


def _combine(judged: list[dict], executed: list[dict]) -> None:
    e_dir = merge_spans(s for d in executed for s in _spans(d, "s_dir"))
    e_all = merge_spans([*e_dir, *(s for d in executed for s in _spans(d, "s_ctx"))])
    j_dir = merge_spans(s for d in judged for s in _spans(d, "s_dir"))
    for d in judged:
        own_dir, own_ctx = _spans(d, "s_dir"), _spans(d, "s_ctx")
        alone = [s for s in own_dir if not _meets(s, e_all) and _named_only(d, s)] \
            if e_dir else []
        kept = [s for s in own_dir if s not in alone]
        promoted = [s for s in _intersect(own_ctx, e_dir) if s not in kept]
        _set(d, kept + promoted, own_ctx + alone)
        _evidence(d, alone, "ctx", "only a name the judge gave blames it; execution evidence "
                  "of the same rubric blames other code directly")
        _evidence(d, promoted, "dir", "the judge's context that execution blames directly")
    for d in executed:
        own_dir, own_ctx = _spans(d, "s_dir"), _spans(d, "s_ctx")
        promoted = _intersect(own_ctx, j_dir)
        if promoted:
            _set(d, own_dir + promoted, own_ctx)
            _evidence(d, promoted, "dir", "context of the failure that the judge's finding "
                      "blames directly")
