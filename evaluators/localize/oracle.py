"""The oracle localization: exactly the injected bug's text, the upper bound of localization.

Only for the credit-assignment testbed (`evaluators.tasks.bugs`): a task whose SFT reference
carried a bug has it in `meta.sft_bug`, and `api.localize_diagnostics` hands it to this rule
with each diagnostic (never stored). Every counted diagnostic of an answer that holds the bug
blames the bug's span directly; an answer without it gets no blame (flat weights).
"""

from __future__ import annotations

from evaluators.localize.rules import rule
from evaluators.localize.spans_common import Ops, _Case
from evaluators.tasks.bugs import Bug, find


@rule("oracle.injected_bug")
def injected_bug(c: _Case) -> Ops:
    """The injected bug's span in the answer, when the answer holds it."""
    raw = c.d.get("sft_bug")
    if not isinstance(raw, dict):
        return
    span = find(c.g.text, Bug.from_json(raw))
    yield from c.add("dir", span, f"the injected {raw.get('kind')} bug", "text")
