"""What the judge must answer, per rubric, and the validating parser of its answer.

The answer is one JSON object: ``{"rubrics": [{"id", "verdict", "severity", "issues"}]}``
with one entry per rubric asked about. ``severity`` is the judge's word for how bad a
failure is (``minor`` / ``major`` / ``critical``), mapped once, here, onto the reward's
severities (``SEVERITY``). Each issue is a finding in words with its evidence: a code
excerpt quoted from the response, and where known its line, a selector, a handler or
function name and a state variable. Nothing downstream reads the words; localization reads
the excerpt, the line and the names.
"""

from __future__ import annotations

import dataclasses
import json
import re

import jsonschema

SEVERITY = {"critical": "severe", "major": "moderate", "minor": "minor"}

_ISSUE = {
    "type": "object",
    "properties": {
        "issue": {"type": "string", "description": "what is wrong, as a user would see it"},
        "code": {"type": "string", "description": "the responsible code, quoted verbatim "
                                                   "from the app (one or a few lines)"},
        "line": {"type": ["integer", "null"], "description": "line number of the quote"},
        "selector": {"type": ["string", "null"]},
        "handler": {"type": ["string", "null"], "description": "function or handler name"},
        "state": {"type": ["string", "null"], "description": "state variable involved"},
    },
    "required": ["issue", "code"],
    "additionalProperties": False,
}
SCHEMA = {
    "type": "object",
    "properties": {"rubrics": {"type": "array", "items": {
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "verdict": {"enum": ["pass", "fail"]},
            "severity": {"enum": [*SEVERITY, None]},
            "issues": {"type": "array", "items": _ISSUE},
        },
        "required": ["id", "verdict", "severity", "issues"],
        "additionalProperties": False,
    }}},
    "required": ["rubrics"],
    "additionalProperties": False,
}


def response_format() -> dict:
    """The ``response_format`` of a request with OpenAI structured outputs."""
    return {"type": "json_schema",
            "json_schema": {"name": "rubric_verdicts", "strict": False, "schema": SCHEMA}}


@dataclasses.dataclass(frozen=True)
class Issue:
    issue: str
    code: str
    line: int | None = None
    selector: str | None = None
    handler: str | None = None
    state: str | None = None


@dataclasses.dataclass(frozen=True)
class Judgement:
    """The judge's word on one rubric (``severity``: the reward's scale, None on a pass;
    ``said``: the judge's own severity word, None when it gave none)."""

    rubric_id: str
    verdict: str
    severity: str | None
    issues: tuple[Issue, ...]
    said: str | None = None


class BadAnswer(ValueError):
    """The judge's answer does not follow the schema; the message says where, for repair."""


_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.S)


def parse(text: str, asked: list[str]) -> dict[str, Judgement]:
    """The judgements in ``text``, one per id of ``asked``.

    Raises:
      BadAnswer: not JSON, not the schema, a rubric missing, unknown or repeated.
    """
    m = _FENCE.match(text or "")
    raw = m.group(1) if m else (text or "").strip()
    try:
        obj = json.loads(raw)
    except ValueError as e:
        raise BadAnswer(f"the answer is not JSON ({e})") from None
    try:
        jsonschema.validate(obj, SCHEMA)
    except jsonschema.ValidationError as e:
        where = "/".join(str(p) for p in e.absolute_path) or "the top level"
        raise BadAnswer(f"at {where}: {e.message}") from None
    out: dict[str, Judgement] = {}
    for r in obj["rubrics"]:
        if r["id"] not in asked:
            raise BadAnswer(f"rubric {r['id']!r} was not asked about (asked: {asked})")
        if r["id"] in out:
            raise BadAnswer(f"rubric {r['id']!r} is answered twice")
        severity = SEVERITY.get(r["severity"] or "") if r["verdict"] == "fail" else None
        failed = r["verdict"] == "fail"
        out[r["id"]] = Judgement(r["id"], r["verdict"], severity or ("severe" if failed else None),
                                 tuple(Issue(**i) for i in r["issues"]),
                                 r["severity"] if failed else None)
    missing = [a for a in asked if a not in out]
    if missing:
        raise BadAnswer(f"no verdict for rubric(s) {missing}")
    return out
