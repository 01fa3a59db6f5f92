"""Readers for the task format (spec: shared/specs/task-format.md, version 1).

Tasks and responses are JSON Lines. A malformed line is an error naming the
file, the line number and the field; nothing is skipped silently. Probes are
kept as raw JSON here: a probe whose steps are malformed is the probe's
problem, reported as an `error` verdict when it runs, not a reason to reject
the whole task file.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, Iterator

KINDS = ("initial", "dynamic")
IMPORTANCES = ("core", "behavior", "rendering")


class FormatError(ValueError):
    """A malformed input line. The message names file, line and field."""

    def __init__(self, path: str, line: int, field: str, reason: str):
        self.path, self.line, self.field, self.reason = path, line, field, reason
        super().__init__(f"{path}:{line}: field '{field}': {reason}")


@dataclasses.dataclass(frozen=True)
class Rubric:
    """One checkable requirement of a task."""

    id: str
    text: str
    kind: str
    importance: str
    probe: dict | None
    meta: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Task:
    """A request x with its rubric set R."""

    id: str
    prompt: str
    rubrics: tuple[Rubric, ...]
    system: str | None = None
    meta: dict = dataclasses.field(default_factory=dict)
    raw: dict = dataclasses.field(default_factory=dict, repr=False, compare=False)

    def rubric(self, rubric_id: str) -> Rubric:
        for r in self.rubrics:
            if r.id == rubric_id:
                return r
        raise KeyError(rubric_id)


def _require(obj: dict, key: str, typ: type | tuple, where: tuple[str, int], field: str,
             optional: bool = False) -> Any:
    if key not in obj or obj[key] is None:
        if optional:
            return None
        raise FormatError(where[0], where[1], field, "missing")
    value = obj[key]
    if not isinstance(value, typ) or isinstance(value, bool) and typ is not bool:
        names = typ.__name__ if isinstance(typ, type) else "/".join(t.__name__ for t in typ)
        raise FormatError(where[0], where[1], field,
                          f"expected {names}, got {type(value).__name__}")
    return value


def _parse_rubric(obj: Any, where: tuple[str, int], field: str) -> Rubric:
    if not isinstance(obj, dict):
        raise FormatError(where[0], where[1], field, "expected an object")
    rid = _require(obj, "id", str, where, f"{field}.id")
    text = _require(obj, "text", str, where, f"{field}.text")
    kind = _require(obj, "kind", str, where, f"{field}.kind")
    if kind not in KINDS:
        raise FormatError(where[0], where[1], f"{field}.kind", f"'{kind}' is not one of {KINDS}")
    importance = _require(obj, "importance", str, where, f"{field}.importance")
    if importance not in IMPORTANCES:
        raise FormatError(where[0], where[1], f"{field}.importance",
                          f"'{importance}' is not one of {IMPORTANCES}")
    probe = obj.get("probe")
    if probe is not None:
        if not isinstance(probe, dict):
            raise FormatError(where[0], where[1], f"{field}.probe", "expected an object or null")
        if not isinstance(probe.get("steps"), list):
            raise FormatError(where[0], where[1], f"{field}.probe.steps", "expected a list")
    meta = _require(obj, "meta", dict, where, f"{field}.meta", optional=True) or {}
    return Rubric(id=rid, text=text, kind=kind, importance=importance, probe=probe, meta=meta)


def parse_task(obj: Any, path: str = "<task>", line: int = 1) -> Task:
    """Validates one decoded task object.

    Args:
      obj: the decoded JSON value of one line.
      path, line: where it came from, for error messages.

    Returns:
      The Task.

    Raises:
      FormatError: naming path, line and field.
    """
    where = (path, line)
    if not isinstance(obj, dict):
        raise FormatError(path, line, "<line>", "expected a JSON object")
    tid = _require(obj, "id", str, where, "id")
    prompt = _require(obj, "prompt", str, where, "prompt")
    system = _require(obj, "system", str, where, "system", optional=True)
    rubrics_raw = _require(obj, "rubrics", list, where, "rubrics")
    rubrics = tuple(_parse_rubric(r, where, f"rubrics[{i}]") for i, r in enumerate(rubrics_raw))
    seen: set[str] = set()
    for i, r in enumerate(rubrics):
        if r.id in seen:
            raise FormatError(path, line, f"rubrics[{i}].id", f"duplicate rubric id '{r.id}'")
        seen.add(r.id)
    meta = _require(obj, "meta", dict, where, "meta", optional=True) or {}
    return Task(id=tid, prompt=prompt, rubrics=rubrics, system=system, meta=meta, raw=obj)


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def iter_jsonl(path: str | Path) -> Iterator[tuple[int, Any]]:
    """Yields (line number, decoded object) for each non-blank line.

    Lines are read as bytes and decoded one by one, so that a line that is not UTF-8 is
    reported with its number like any other malformed line.

    Raises:
      FormatError: on a line that is not UTF-8 or not valid JSON (NaN and Infinity, which
        Python's reader would take, included; values nested too deeply to decode too).
    """
    with open(path, "rb") as f:
        for n, raw in enumerate(f, start=1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise FormatError(str(path), n, "<line>",
                                  f"not UTF-8: byte {e.start + 1} of the line is {raw[e.start]:#04x}"
                                  ) from None
            if not text.strip():
                continue
            try:
                yield n, json.loads(text, parse_constant=_not_json)
            except json.JSONDecodeError as e:
                raise FormatError(str(path), n, "<line>",
                                  f"invalid JSON: {e.msg} at column {e.colno}") from None
            except (ValueError, RecursionError) as e:
                reason = "nested too deeply" if isinstance(e, RecursionError) else str(e)
                raise FormatError(str(path), n, "<line>", f"invalid JSON: {reason}") from None


def load_tasks(path: str | Path) -> dict[str, Task]:
    """Reads a tasks.jsonl file into {task id: Task}.

    Raises:
      FormatError: on the first malformed line, or a task id seen twice.
    """
    tasks: dict[str, Task] = {}
    for n, obj in iter_jsonl(path):
        task = parse_task(obj, str(path), n)
        if task.id in tasks:
            raise FormatError(str(path), n, "id", f"duplicate task id '{task.id}'")
        tasks[task.id] = task
    return tasks


def load_responses(path: str | Path, tasks: dict[str, Task] | None = None) -> list[dict]:
    """Reads a responses file: JSON Lines with `task_id`, `response`, any other fields kept.

    Args:
      path: the file.
      tasks: when given, every `task_id` must name one of them.

    Raises:
      FormatError: naming the line and field.
    """
    rows = []
    for n, obj in iter_jsonl(path):
        where = (str(path), n)
        if not isinstance(obj, dict):
            raise FormatError(str(path), n, "<line>", "expected a JSON object")
        tid = _require(obj, "task_id", str, where, "task_id")
        _require(obj, "response", str, where, "response")
        if tasks is not None and tid not in tasks:
            raise FormatError(str(path), n, "task_id", f"unknown task '{tid}'")
        rows.append(obj)
    return rows
