"""Drafts from a model behind an OpenAI-compatible server (the judge's client and config).

Each draft is asked for a place in the taxonomy (domain x app kind x difficulty) or for a seed
request, with the versioned prompt in `prompts/<version>/` (`system.md`, `draft.md`). An answer
that cannot be read becomes a `DraftError` that names the field, and is counted as
`unparseable` by validation; a server that stops answering raises `JudgeUnavailable` (the
evaluator's side failing, never a draft's).
"""

from __future__ import annotations

import asyncio
import dataclasses
import string
from pathlib import Path

from evaluators.judge.client import ChatClient
from evaluators.judge.config import JudgeConfig
from evaluators.synth.draft import DIFFICULTIES, DOMAINS, Draft, DraftError, parse_draft

PROMPTS = Path(__file__).parent / "prompts"
APP_KINDS = ("canvas chart driven by inputs", "small game loop with a score",
             "form with validation rules and error messages", "multi-step wizard",
             "sortable and filterable table", "unit converter with chained fields",
             "simulation with sliders and a plot", "quiz with feedback and a score")


@dataclasses.dataclass(frozen=True)
class Spec:
    """Where one draft sits: the taxonomy cell, and a seed request to build on (or "")."""

    id: str
    domain: str
    kind: str
    difficulty: str
    seed: str = ""


def taxonomy(count: int, start: int = 0) -> list[Spec]:
    """`count` specs walking domain x kind x difficulty (domains fastest)."""
    out = []
    for i in range(start, start + count):
        d = DOMAINS[i % len(DOMAINS)]
        k = APP_KINDS[(i // len(DOMAINS)) % len(APP_KINDS)]
        level = DIFFICULTIES[(i // (len(DOMAINS) * len(APP_KINDS))) % len(DIFFICULTIES)]
        out.append(Spec(f"synth/llm-{i:05d}", d, k, level))
    return out


def from_seeds(requests: list[str]) -> list[Spec]:
    """One spec per seed request (the taxonomy cell left to the model)."""
    return [Spec(f"synth/seed-{i:05d}", "any", "any", "medium", r.strip())
            for i, r in enumerate(requests) if r.strip()]


def _messages(spec: Spec, version: str) -> list[dict]:
    folder = PROMPTS / version
    if not folder.is_dir():
        raise ValueError(f"prompt version {version!r}: no folder {folder}")
    system = (folder / "system.md").read_text(encoding="utf-8")
    seed = f"Build on this request (keep its idea, make it checkable):\n{spec.seed}\n" if spec.seed else ""
    user = string.Template((folder / "draft.md").read_text(encoding="utf-8")).substitute(
        domain=spec.domain, kind=spec.kind, difficulty=spec.difficulty, seed=seed)
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


async def _one(client: ChatClient, spec: Spec, cfg: JudgeConfig) -> Draft | DraftError:
    fmt = {"type": "json_object"} if cfg.structured != "prompt" else None
    done = await client.complete(_messages(spec, cfg.prompt_version), response_format=fmt)
    provenance = {"drafter": "model", "model": cfg.model, "prompt_version": cfg.prompt_version,
                  "spec": dataclasses.asdict(spec)}
    try:
        draft = parse_draft(done.content, spec.id, provenance)
    except DraftError as e:
        return DraftError(str(e), spec.id, spec.domain, spec.kind)
    # The cell asked for wins where the model left it out.
    return dataclasses.replace(draft, domain=draft.domain or spec.domain, kind=draft.kind or spec.kind)


async def draft_all(specs: list[Spec], cfg: JudgeConfig) -> list[Draft | DraftError]:
    """One draft per spec, in order (`cfg.concurrency` requests in flight)."""
    client = ChatClient(cfg)
    try:
        return list(await asyncio.gather(*(_one(client, s, cfg) for s in specs)))
    finally:
        await client.close()
