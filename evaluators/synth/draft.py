"""A drafted task: request, rubrics (with probes where one fits) and a reference app.

A draft is what a drafter (a model, or the offline generator) proposes; validation
(`synth.validate`) decides what of it becomes a task. Drafts from a model arrive as JSON
text; `parse_draft` reads them and names the field at fault, so a broken draft is dropped
with a reason instead of failing the batch.

Draft JSON (what the prompt asks a model for):

    {"request": "...", "domain": "science", "kind": "canvas chart", "difficulty": "medium",
     "rubrics": [{"id": "...", "text": "...", "kind": "initial|dynamic",
                  "importance": "core|behavior|rendering", "probe": {...} | null}],
     "reference_html": "<!DOCTYPE html>..."}
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

from evaluators.tasks import FormatError, parse_task

DIFFICULTIES = ("easy", "medium", "hard")
# The six domains of MiniAppBench.
DOMAINS = ("science", "games", "tools", "visualisation", "humanities", "lifestyle")
_FENCE = re.compile(r"```(?:json)?\s*\n(.*?)\n\s*```", re.S)


class DraftError(ValueError):
    """A draft that cannot be read (names the field); where it sat in the taxonomy."""

    def __init__(self, message: str, draft_id: str = "", domain: str = "", kind: str = ""):
        super().__init__(message)
        self.draft_id, self.domain, self.kind = draft_id, domain, kind


@dataclasses.dataclass(frozen=True)
class Draft:
    """One proposed task.

    Attributes:
      id: the task id it will have.
      request: the user's request (the task's prompt).
      rubrics: rubric dicts in the task format.
      reference: the reference app as a response (a fenced ```html block).
      domain, kind, difficulty: where it sits in the taxonomy (the drafter's word;
        difficulty is replaced by a measured one when answers are scored).
      provenance: who drafted it and how (model, prompt version, seed).
    """

    id: str
    request: str
    rubrics: tuple[dict, ...]
    reference: str
    domain: str
    kind: str
    difficulty: str
    provenance: dict

    def task(self, extra_meta: dict | None = None) -> dict:
        """The task dict (task format, version 1)."""
        meta = {"source": "rcca-synth", "domain": self.domain, "kind": self.kind,
                "difficulty": self.difficulty, "provenance": self.provenance}
        meta.update(extra_meta or {})
        return {"id": self.id, "prompt": self.request, "rubrics": list(self.rubrics), "meta": meta}

    def check(self) -> None:
        """Raises DraftError when the task it makes is not in the task format."""
        try:
            parse_task(self.task(), path=self.id)
        except FormatError as e:
            raise DraftError(str(e)) from None


def as_response(html: str) -> str:
    """An app as a chat model would answer it: one fenced html block."""
    return f"```html\n{html.strip()}\n```\n"


def _field(obj: dict, name: str, typ: type, where: str) -> Any:
    if name not in obj:
        raise DraftError(f"{where}: missing field '{name}'")
    if not isinstance(obj[name], typ):
        raise DraftError(f"{where}: field '{name}' must be {typ.__name__}, "
                         f"got {type(obj[name]).__name__}")
    return obj[name]


def parse_draft(text: str, draft_id: str, provenance: dict) -> Draft:
    """Reads a model's draft (JSON, bare or in one fenced block).

    Raises:
      DraftError: naming the draft and the field that is missing or of the wrong type, or
        the JSON error's position.
    """
    m = _FENCE.search(text)
    body = m.group(1) if m else text.strip()
    try:
        obj = json.loads(body)
    except json.JSONDecodeError as e:
        raise DraftError(f"{draft_id}: not JSON ({e.msg} at line {e.lineno} column {e.colno})") from None
    if not isinstance(obj, dict):
        raise DraftError(f"{draft_id}: a draft is a JSON object")
    request = _field(obj, "request", str, draft_id).strip()
    html = _field(obj, "reference_html", str, draft_id)
    rubrics = _field(obj, "rubrics", list, draft_id)
    if not request:
        raise DraftError(f"{draft_id}: empty 'request'")
    if not rubrics:
        raise DraftError(f"{draft_id}: no rubrics")
    for i, r in enumerate(rubrics):
        if not isinstance(r, dict):
            raise DraftError(f"{draft_id}: rubrics[{i}] is not an object")
    difficulty = obj.get("difficulty", "medium")
    draft = Draft(id=draft_id, request=request, rubrics=tuple(rubrics),
                  reference=as_response(html), domain=str(obj.get("domain", "")),
                  kind=str(obj.get("kind", "")),
                  difficulty=difficulty if difficulty in DIFFICULTIES else "medium",
                  provenance=provenance)
    draft.check()
    return draft


_WORD = re.compile(r"[a-z0-9]+")


def shingles(text: str, n: int = 3) -> frozenset[tuple[str, ...]]:
    """Word n-grams of a lower-cased text (the whole text when shorter than n words)."""
    words = _WORD.findall(text.lower())
    if len(words) < n:
        return frozenset([tuple(words)])
    return frozenset(tuple(words[i:i + n]) for i in range(len(words) - n + 1))


def similarity(a: frozenset, b: frozenset) -> float:
    """Jaccard similarity of two shingle sets."""
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)
