"""Diagnostics -> the code they blame: S_dir (directly responsible) and S_ctx (context).

Every span is a half-open ``[start, end)`` of ``str`` indices into the response, as the graph
and the evaluator's diagnostics use. Each span comes with evidence: the rule and the facts
(``graph``: static structure; ``stack``: an exception's frames; ``coverage``: the functions
that ran before a probe failed; ``flow``: data flow among the statements that ran; ``text``:
matched excerpts) that put it there.

Six methods, selected by name in ``CHAINS`` (``METHODS``):

- ``text``: the code graph and the diagnostic's words only (locators, messages, excerpts),
  as RCCA's rubric-to-code localization.
- ``grounded`` (default): ``text`` plus execution facts: exception stack frames are exact
  positions, the page's recorded DOM writes of the checked element (``trace_writers``) name
  the statement that wrote it, and precise coverage confirms or narrows the blamed handlers
  and writers, and selects the statements whose values reach the checked element (a
  backward slice over the functions that ran) in place of whole long functions; when a
  probe compared readings with no element writes to start from (canvas snapshots), the
  statements the acted-on input's value reaches (a forward slice).
- ``naive``: the baseline: whole functions around the code that queries the failing element.
- ``oracle``: the credit-assignment testbed's upper bound: exactly the bug injected into the
  task's SFT reference (``oracle``, ``tasks.bugs``), wherever the answer holds it.
- ``ranked``: ``grounded``'s blame of a probe failure and the spectrum, scored and ranked
  by one formula (``rank``): S_dir is the top of the ranking within a budget.
- ``sbfl``: spectrum-based suspiciousness alone (``spectrum``): the statements a failed probe's
  path ran that the fewest passing probes' paths ran. It reads no names; it needs passing
  probes' coverage (``BrowserConfig.coverage_passing``) and localizes probe failures only.

The strategies live in sibling modules: ``spans_common`` (result type, span algebra, the
case being localized, locators, failing probe steps), ``spans_probe`` (probe failures and
their execution grounding), ``spans_wiring`` (lookups and registrations that point at the
wrong element), ``spans_flow`` (the slice that narrows grounded blame, over ``flow``),
``spans_writers`` (the recorded writes of the element a failed step checked),
``spans_forward`` (where the acted-on input's value goes, and where a value read from it
that nothing uses should have gone), ``spans_errors`` (exceptions, syntax errors, runtime
failures, free-text evidence), ``spans_calls`` (what a call that threw was handed),
``spans_arguments`` (a parameter's value the caller handed: none, or of the wrong kind),
``spans_unset`` (null reads of state no code sets) and ``spans_judge`` (the code an LLM
judge's finding quotes or names). The blame they produce is collected, demoted, dropped and
merged by ``combine.Combiner``. This module is the public entry point: it declares, per
method and kind, the chain of steps (order and fallback) and re-exports the public names.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

from evaluators.localize import corroborate as _corroborate  # noqa: F401  (its rule's id)
from evaluators.localize.combine import Localization, Ops, merge_spans, subtract_spans
from evaluators.localize.graph import CodeGraph
from evaluators.localize.rules import RULES, LocalizeConfig, Rule
from evaluators.localize.spans_common import (
    _Case, ran_functions, resolve_locator, similar_names,
)
from evaluators.localize.spans_errors import (
    _page_error_naive, _page_error_stack, _page_error_text, _runtime_failure, _syntax_error,
    _syntax_naive, spans_from_text_evidence,
)
from evaluators.localize.spans_judge import judge_evidence, judge_naive
from evaluators.localize.oracle import injected_bug
from evaluators.localize.spectrum import spectrum_blame
from evaluators.localize.rank import rank_blame
from evaluators.localize.spans_writers import writer_blame
from evaluators.localize.spans_loops import enclosing_loops
from evaluators.localize.spans_probe import (
    _context_step, _definite_bugs_step, _ground_step, _load_bugs_step, _probe_fallback,
    _probe_naive, _probe_rules,
)

__all__ = ["CHAINS", "LOCALIZED_KINDS", "METHODS", "RULES", "SPECTRUM_METHODS", "LocalizeConfig", "Localization",
           "Rule", "Step", "localize", "merge_spans", "ran_functions", "resolve_locator",
           "similar_names", "spans_from_text_evidence", "subtract_spans"]

LOCALIZED_KINDS = frozenset(("syntax_error", "page_error", "probe_failure", "runtime_failure",
                             "no_app", "judge_finding"))


# -- the chains: which steps run, in which order, for each method and kind ---------------------

@dataclasses.dataclass(frozen=True)
class Step:
    """One step of a chain.

    Attributes:
        run: The step (a registered rule, or a thin step calling one): a generator function
            of the case whose operations the combiner applies.
        fallback: Runs only when the steps before it blamed nothing directly.
        phase: What the step does, for the registry's listing (``reach``): ``rules`` (what
            the diagnostic says), ``fallback``, ``grounding`` (execution facts confirm,
            narrow or demote) or ``context``.
    """

    run: Callable[[_Case], Ops]
    fallback: bool = False
    phase: str = "rules"


Chain = tuple[Step, ...]
_PROBE_TEXT: Chain = (Step(_probe_rules), Step(_probe_fallback, True, "fallback"),
                      Step(_context_step, phase="context"))
# Grounding runs after the fallback: coverage confirms or demotes whatever the text found.
_PROBE_GROUNDED: Chain = (Step(_probe_rules), Step(_probe_fallback, True, "fallback"),
                          Step(_ground_step, phase="grounding"),
                          Step(writer_blame, phase="grounding"),
                          Step(_definite_bugs_step, phase="grounding"),
                          Step(_context_step, phase="context"),
                          Step(enclosing_loops, phase="context"))
_ERROR_GROUNDED: Chain = (Step(_page_error_stack), Step(_load_bugs_step, phase="grounding"),
                          Step(enclosing_loops, phase="context"))
_TEXT: dict[str, Chain] = {
    "probe_failure": _PROBE_TEXT, "page_error": (Step(_page_error_text),),
    "syntax_error": (Step(_syntax_error),), "runtime_failure": (Step(_runtime_failure),),
    "judge_finding": (Step(judge_evidence),)}
CHAINS: dict[str, dict[str, Chain]] = {
    "text": _TEXT,
    "grounded": {**_TEXT, "probe_failure": _PROBE_GROUNDED, "page_error": _ERROR_GROUNDED},
    # The scored combiner: the grounded chain's blame and the spectrum, ranked (`rank`).
    "ranked": {**_TEXT, "probe_failure": _PROBE_GROUNDED + (Step(rank_blame, phase="ranking"),),
               "page_error": _ERROR_GROUNDED},
    # Spectrum-based suspiciousness alone (needs passing probes' coverage): the baseline
    # that reads no names. Other kinds are not localized by it.
    "sbfl": {"probe_failure": (Step(spectrum_blame),)},
    # The credit-assignment testbed's upper bound: the injected bug, for every kind.
    "oracle": {k: (Step(injected_bug),) for k in ("probe_failure", "page_error", "syntax_error",
                                                   "runtime_failure", "judge_finding")},
    "naive": {"probe_failure": (Step(_probe_naive),), "page_error": (Step(_page_error_naive),),
              "syntax_error": (Step(_syntax_naive),),
              "runtime_failure": (Step(_runtime_failure),),
              "judge_finding": (Step(judge_naive),)},
}
METHODS = CHAINS  # the method names (keys) the run config validates against
# Methods that read the paths of passing probes too (`BrowserConfig.coverage_passing`).
SPECTRUM_METHODS = frozenset(("sbfl", "ranked"))


def localize(graph: CodeGraph, diagnostic: dict, method: str = "grounded",
             probe: dict | None = None, cfg: LocalizeConfig = LocalizeConfig()) -> Localization:
    """S_dir, S_ctx and evidence of one diagnostic.

    Runs the chain of (method, kind) in order through one ``combine.Combiner``.

    Args:
        graph: Graph of the response the diagnostic is about (built on the whole response).
        diagnostic: One entry of a record's ``diagnostics``.
        method: A key of ``CHAINS``.
        probe: The probe of the diagnostic's rubric, when known: lets a failed ``assert``
            find the elements whose saved readings it compared.
        cfg: Which rules are switched off, and the limits (`rules.LocalizeConfig`).

    Returns:
        The localization; empty for kinds that are not localized (info, ``no_app``).

    Raises:
        KeyError: unknown method.
    """
    chain = CHAINS[method].get(diagnostic.get("kind"))
    if chain is None:
        return Localization()
    c = _Case(graph, diagnostic, probe, cfg.validate())
    for step in chain:
        if not (step.fallback and c.has("dir")):
            c.blame.run(step.run(c))
    return c.result()
