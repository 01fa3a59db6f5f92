"""The gated reward R(y) of the RCCA method."""

from __future__ import annotations

from evaluators.config import RewardConfig

GATES = ("format", "source", "runtime")


def rubric_reward(rubrics: list[dict], cfg: RewardConfig) -> float:
    """R_rubric = min(ceiling, max(floor, 1 - sum of p(importance, severity))).

    Args:
      rubrics: verdict records with `verdict`, `importance` and `severity`.
        Only `fail` verdicts count; `pass`, `error` (the probe's or the
        evaluator's fault) and `unjudged` (no probe yet) cost nothing.
      cfg: penalties, floor and ceilings.
    """
    total = 0.0
    ceiling = 1.0
    for r in rubrics:
        if r["verdict"] != "fail":
            continue
        key = (r["importance"], r.get("severity") or "severe")
        total += cfg.penalties[key]
        ceiling = min(ceiling, cfg.ceilings.get(key, 1.0))
    return min(ceiling, max(cfg.floor, 1.0 - total))


def gated_reward(gate: str | None, rubrics: list[dict], cfg: RewardConfig) -> float:
    """The reward given the first failed gate (None when all passed)."""
    if gate == "format":
        return cfg.format_fail
    if gate == "source":
        return cfg.source_fail
    if gate == "runtime":
        return cfg.runtime_fail
    return rubric_reward(rubrics, cfg)
