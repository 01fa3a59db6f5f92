"""The judge's prompt: versioned files (``prompts/<version>/``) filled with one response.

The files are the prompt; code only fills their ``$names``: the request, the rubrics asked
about, the app's source with line numbers, and what the browser observed (gate, uncaught
exceptions, failed probe steps, refused requests). A new prompt is a new folder, and the
version is part of the cache key.
"""

from __future__ import annotations

import functools
import json
import string
from pathlib import Path

from evaluators.judge.config import JudgeConfig
from evaluators.judge.verdicts import SCHEMA
from evaluators.tasks import Rubric, Task

PROMPTS = Path(__file__).parent / "prompts"
_OBSERVED = ("page_error", "probe_failure", "runtime_failure", "blocked_request",
             "syntax_error")


@functools.lru_cache(maxsize=None)
def _template(version: str, name: str) -> string.Template:
    path = PROMPTS / version / f"{name}.md"
    if not path.is_file():
        raise ValueError(f"JudgeConfig.prompt_version={version!r}: no prompt file {path.name} "
                         f"in {PROMPTS / version}")
    return string.Template(path.read_text(encoding="utf-8"))


def numbered(source: str, limit: int) -> tuple[str, str]:
    """The source with 1-based line numbers (``12| ...``), cut at ``limit`` characters."""
    note = "complete"
    if len(source) > limit:
        source, note = source[:limit], f"cut after {limit} characters"
    lines = source.split("\n")
    width = len(str(len(lines)))
    return "\n".join(f"{k + 1:>{width}}| {line}" for k, line in enumerate(lines)), note


def _rubric_lines(rubrics: list[Rubric]) -> str:
    return "\n".join(f"- id {r.id!r} ({r.importance}, {'after interaction' if r.kind == 'dynamic' else 'after load'}): "
                     f"{r.text}" for r in rubrics)


def observations(record: dict, limit: int = 20) -> str:
    """What the evaluator saw, one line each (at most ``limit``), from the record's
    typed fields; its messages are for people and are quoted as such."""
    lines = [f"- gate failed: {record['gate']}" if record.get("gate") else
             "- the app loaded and passed the format, source and runtime gates"]
    for d in (record.get("diagnostics") or ())[:200]:
        if d.get("kind") not in _OBSERVED or len(lines) > limit:
            continue
        where = f" (rubric {d['rubric_id']})" if d.get("rubric_id") else ""
        lines.append(f"- {d['kind']}{where}: {str(d.get('message') or '')[:300]}")
    return "\n".join(lines)


def messages(cfg: JudgeConfig, task: Task, rubrics: list[Rubric], app_source: str,
             record: dict) -> list[dict]:
    """The chat messages asking for verdicts on ``rubrics``."""
    source, note = numbered(app_source, cfg.max_source_chars)
    user = _template(cfg.prompt_version, "user").substitute(
        request=task.prompt, rubrics=_rubric_lines(rubrics), source=source, source_note=note,
        observations=observations(record))
    if cfg.structured == "prompt":
        user += _template(cfg.prompt_version, "schema").substitute(
            schema=json.dumps(SCHEMA, indent=1))
    system = _template(cfg.prompt_version, "system").substitute()
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def repair(cfg: JudgeConfig, error: str, ids: list[str]) -> dict:
    """The follow-up message after an answer that did not parse."""
    text = _template(cfg.prompt_version, "repair").substitute(
        error=error[:500], ids=", ".join(repr(i) for i in ids))
    return {"role": "user", "content": text}


def agent_note(cfg: JudgeConfig) -> str:
    """What an agentic judge is told about its tools (``agent.md``)."""
    return _template(cfg.prompt_version, "agent").substitute()
