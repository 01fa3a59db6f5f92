"""Drafts without a model: the task family's seven kinds and the interacting kinds of
`synth.kinds`, with parameters drawn per task. They go through the same validation as a
model's drafts (`synth.validate`)."""

from __future__ import annotations

import random

from evaluators.synth.draft import Draft, as_response
from evaluators.synth.kinds import KINDS
from evaluators.tasks import family

SOURCE = "rcca-synth-offline"
# The family's kinds, with the domain each sits in.
_FAMILY_DOMAINS = {"counter": "games", "toggle": "lifestyle", "greeting": "lifestyle",
                   "list": "lifestyle", "tabs": "humanities", "slider": "visualisation",
                   "converter": "science"}
ALL_KINDS: tuple[str, ...] = (*KINDS, *family.FAMILIES)


def _draft(kind: str, index: int, seed: int) -> Draft:
    provenance = {"drafter": "offline", "kind": kind, "seed": seed, "index": index}
    if kind in KINDS:
        built = KINDS[kind](random.Random(f"{SOURCE}:{seed}:{kind}:{index}"))
        return Draft(id=f"synth/{kind}-{index:05d}", request=built.request,
                     rubrics=tuple(built.rubrics), reference=as_response(built.html),
                     domain=built.domain, kind=kind, difficulty=built.difficulty,
                     provenance=provenance)
    task = family.make_task(kind, index, seed)
    return Draft(id=f"synth/{kind}-{index:05d}", request=task["prompt"],
                 rubrics=tuple(task["rubrics"]), reference=family.reference_response(task),
                 domain=_FAMILY_DOMAINS[kind], kind=kind, difficulty=task["meta"]["difficulty"],
                 provenance=provenance)


def drafts(count: int, seed: int = 0, kinds: tuple[str, ...] | None = None) -> list[Draft]:
    """`count` drafts, kinds taken round-robin (the interacting kinds first).

    Raises:
      ValueError: on an unknown kind.
    """
    names = tuple(dict.fromkeys(kinds or ALL_KINDS))
    unknown = [k for k in names if k not in ALL_KINDS]
    if unknown or not names:
        raise ValueError(f"unknown kinds {unknown or names}; expected some of {ALL_KINDS}")
    return [_draft(names[i % len(names)], i // len(names), seed) for i in range(count)]
