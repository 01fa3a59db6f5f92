"""Pieces of the output record shared by the scorer and the fleets: a rubric's verdict, the
record of a row the evaluator could not score, the merge with the input row, and what the
attempts at one response keep between them (`Kept`)."""

from __future__ import annotations

import copy
from typing import Any

from evaluators.contract import SCHEMA_VERSION
from evaluators.tasks import Rubric, Task


def verdict(rubric: Rubric, value: str, **kw) -> dict:
    """A rubric's verdict record: `value` is pass, fail, error or unjudged."""
    rec = {"id": rubric.id, "verdict": value, "importance": rubric.importance,
           "kind": rubric.kind, "severity": None, "failed_step": None, "message": None}
    rec.update(kw)
    return rec


def error_record(task: Task | None, message: str) -> dict:
    """The record of a response the evaluator could not score (status `error`)."""
    return {
        "reward": None, "gate": None, "status": "error", "error": message[:4000],
        "rubrics": [] if task is None else [
            verdict(r, "error", message="evaluator failure", error_source="evaluator")
            for r in task.rubrics],
        "rubric_counts": {"pass": 0, "fail": 0, "error": 0 if task is None else len(task.rubrics),
                          "unjudged": 0},
        "diagnostics": [], "extraction": None, "timings": {}, "schema_version": SCHEMA_VERSION,
    }


# Fields the scorer writes: an input field of the same name is replaced, never mixed in.
OUTPUT_FIELDS = ("reward", "gate", "status", "error", "rubrics", "rubric_counts", "diagnostics",
                 "extraction", "timings", "schema_version", "attempts", "faults")


def merge(row: dict, scored: dict) -> dict:
    """The output record: the input row's own fields, then the scoring fields."""
    return {**{k: v for k, v in row.items() if k not in OUTPUT_FIELDS}, **scored}


def after_lost_attempts(rec: dict, lost: list[str]) -> dict:
    """A record scored after earlier attempts whose worker died with them (`lost`, in order).

    The worker that ran them is gone, and with it their count: they are put in front of
    the record's own attempts and faults, so `attempts` says how often the row was tried.
    """
    if not lost:
        return rec
    n = len(lost)
    faults = [{"attempt": i + 1, "message": f"evaluator fault: {m}"} for i, m in enumerate(lost)]
    faults += [{**f, "attempt": f["attempt"] + n} for f in rec.get("faults") or ()]
    return {**rec, "attempts": (rec.get("attempts") or 0) + n, "faults": faults}


class Kept:
    """What earlier attempts at one response decided on pages that ended cleanly.

    A fault (a browser killed or stopped from outside) voids the pages open at that moment,
    not the probes that had already ended: a retry runs only what is missing, so a heavy app
    whose attempts each outlast the time between hits still gets scored, and each decision
    is the one a calm run would have made on a page nobody touched.

    Copies go in and come out: a record's diagnostics are rewritten as it is assembled
    (`link_causes` turns cause marks into list indices), so a kept decision must never be
    one an attempt's record holds. One unit (gate E, or one probe's outcome) is copied as a
    whole, keeping the cause marks within it.

    Attributes:
      gate: gate E's decision `(passed, diagnostics, rerun record or None)`, or None.
      outcomes: rubric index -> its probe's outcome (`score.ProbeOutcome`).
    """

    def __init__(self) -> None:
        self.gate: tuple[bool, list[dict], dict | None] | None = None
        self.outcomes: dict[int, Any] = {}

    def __len__(self) -> int:
        return len(self.outcomes) + (self.gate is not None)

    def keep_gate(self, decision: tuple[bool, list[dict], dict | None]) -> None:
        self.gate = copy.deepcopy(decision)

    def kept_gate(self) -> tuple[bool, list[dict], dict | None] | None:
        return None if self.gate is None else copy.deepcopy(self.gate)

    def keep(self, i: int, outcome: Any) -> None:
        self.outcomes[i] = copy.deepcopy(outcome)

    def kept(self, i: int) -> Any | None:
        return copy.deepcopy(self.outcomes[i]) if i in self.outcomes else None
