"""The credit-assignment testbed: SFT references that carry one realistic local bug each.

To ask whether localized weights help, the policy must make localized mistakes at places we
know. `inject` puts one single-fault mutation (`evaluators.synth.faults.FAULTS`: a wrong id in
a lookup, a swapped operator, a changed constant, a removed state update, a handler bound to
the wrong event) into a reference, chosen by the task id and a seed, and returns where it is as
`Bug`: the new text with the reference's text on each side. A policy fine-tuned on such
references writes the bug with some probability, at that place; `find` locates it in a
sampled answer (the same text between the same neighbours), which is what the `oracle`
localization blames: the upper bound of localization.
"""

from __future__ import annotations

import dataclasses
import hashlib
import random

from evaluators.localize.graph import build_graph, find_html_region

# The text kept on each side of the bug: enough to find it again in a sampled answer,
# short enough that an answer differing elsewhere still matches.
CONTEXT = 24
# Kinds a fine-tuned policy can copy as a local mistake (CSS values are left out: a changed
# colour rarely fails a rubric of the task family).
KINDS = ("query_id", "operator", "constant", "state_update", "handler")


@dataclasses.dataclass(frozen=True)
class Bug:
    """One injected bug: `new` replaced the reference's text between `before` and `after`.

    Attributes:
      kind: the fault kind (a key of `evaluators.synth.faults.FAULTS`).
      before, new, after: the bugged reference around the fault, and the fault's text
        (empty when code was removed).
    """

    kind: str
    before: str
    new: str
    after: str

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @staticmethod
    def from_json(obj: dict) -> "Bug":
        return Bug(**{f.name: str(obj[f.name]) for f in dataclasses.fields(Bug)})


def selected(task_id: str, fraction: float, seed: int) -> bool:
    """Whether a task's reference gets a bug (a hash of the id and seed, below `fraction`)."""
    h = hashlib.sha256(f"sft-bug:{seed}:{task_id}".encode()).hexdigest()
    return int(h[:8], 16) / 2 ** 32 < fraction


def inject(reference: str, task_id: str, seed: int) -> tuple[str, Bug] | None:
    """The reference with one bug, and the bug; None when no kind has a usable site in it.

    The neighbours grow from `CONTEXT` characters until the bug with them is in the bugged
    reference once and nowhere in the clean one (a wrong id may be another lookup's right
    one), so that `find` never takes correct code for the bug.
    """
    from evaluators.synth.faults import FAULTS

    rng = random.Random(f"sft-bug:{seed}:{task_id}")
    g = build_graph(reference, find_html_region(reference))
    kinds = list(KINDS)
    rng.shuffle(kinds)
    for kind in kinds:
        sites = FAULTS[kind](g, rng)
        rng.shuffle(sites)
        for m in sites:
            bugged = m.apply(reference)
            bug = _with_context(kind, bugged, reference, *m.fault)
            if bug is not None:
                return bugged, bug
    return None


def _with_context(kind: str, bugged: str, clean: str, start: int, end: int) -> Bug | None:
    n = CONTEXT
    while True:
        bug = Bug(kind, bugged[max(0, start - n):start], bugged[start:end], bugged[end:end + n])
        text = bug.before + bug.new + bug.after
        if text not in clean and bugged.count(text) == 1:
            return bug
        if start - n <= 0 and end + n >= len(bugged):
            return None  # the bug leaves the text as it was, or repeats it
        n *= 2


def find(response: str, bug: Bug) -> tuple[int, int] | None:
    """The bug's span in an answer: its text between both neighbours (an empty bug, removed
    code, is the one character after where it was); None when the answer does not hold it.
    One neighbour alone is not enough: the clean reference may hold it next to correct code."""
    at = response.find(bug.before + bug.new + bug.after)
    if at < 0:
        return None
    start = at + len(bug.before)
    return start, start + max(1, len(bug.new))
