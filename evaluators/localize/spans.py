"""Diagnostics -> the code they blame: S_dir (directly responsible) and S_ctx (context).

Every span is a half-open ``[start, end)`` of ``str`` indices into the response, as the graph
and the evaluator's diagnostics use. Each span comes with evidence: the rule and the facts
(``graph``: static structure; ``stack``: an exception's frames; ``coverage``: the functions
that ran before a probe failed; ``flow``: data flow among the statements that ran; ``text``:
matched excerpts) that put it there.

Three methods, selected by name in ``METHODS``:

- ``text``: the code graph and the diagnostic's words only (locators, messages, excerpts),
  as RCCA's rubric-to-code localization.
- ``grounded`` (default): ``text`` plus execution facts: exception stack frames are exact
  positions, and precise coverage confirms or narrows the blamed handlers and writers, and
  selects the statements whose values reach the checked element (a backward slice over the
  functions that ran) in place of whole long functions; when a probe compared readings with
  no element writes to start from (canvas snapshots), the statements the acted-on input's
  value reaches (a forward slice).
- ``naive``: the baseline: whole functions around the code that queries the failing element.

The strategies live in sibling modules: ``spans_common`` (result type, span algebra, the
case being localized, locators, failing probe steps), ``spans_probe`` (probe failures and
their execution grounding), ``spans_wiring`` (lookups and registrations that point at the
wrong element), ``spans_flow`` (the slice that narrows grounded blame, over ``flow``),
``spans_forward`` (where the acted-on input's value goes, and where a value read from it
that nothing uses should have gone), ``spans_errors`` (exceptions, syntax errors, runtime
failures, judge evidence) and ``spans_unset`` (null reads of state no code sets). This module
is the public entry point: it dispatches by method and kind and re-exports the public names.
"""

from __future__ import annotations

from typing import Callable

from evaluators.localize.graph import CodeGraph
from evaluators.localize.rules import RULES, LocalizeConfig, Rule
from evaluators.localize.spans_common import (
    _Case, Localization, merge_spans, ran_functions, resolve_locator, similar_names,
    subtract_spans,
)
from evaluators.localize.spans_errors import (
    _page_error_naive, _page_error_stack, _page_error_text, _runtime_failure, _syntax_error,
    _syntax_naive, spans_from_text_evidence,
)
from evaluators.localize.spans_probe import (
    _probe_grounded, _probe_naive, _probe_text,
)

__all__ = ["LOCALIZED_KINDS", "METHODS", "RULES", "LocalizeConfig", "Localization", "Rule",
           "localize", "merge_spans",
           "ran_functions", "resolve_locator", "similar_names", "spans_from_text_evidence",
           "subtract_spans"]

LOCALIZED_KINDS = frozenset(("syntax_error", "page_error", "probe_failure", "runtime_failure",
                             "no_app"))


# -- dispatch ----------------------------------------------------------------------------------

_Rules = dict[str, Callable[[_Case], None]]
_TEXT_RULES: _Rules = {"probe_failure": _probe_text, "page_error": _page_error_text,
                       "syntax_error": _syntax_error, "runtime_failure": _runtime_failure}
_GROUNDED_RULES: _Rules = {**_TEXT_RULES, "probe_failure": _probe_grounded,
                           "page_error": _page_error_stack}
_NAIVE_RULES: _Rules = {"probe_failure": _probe_naive, "page_error": _page_error_naive,
                        "syntax_error": _syntax_naive, "runtime_failure": _runtime_failure}
METHODS: dict[str, _Rules] = {"text": _TEXT_RULES, "grounded": _GROUNDED_RULES,
                              "naive": _NAIVE_RULES}


def localize(graph: CodeGraph, diagnostic: dict, method: str = "grounded",
             probe: dict | None = None, cfg: LocalizeConfig = LocalizeConfig()) -> Localization:
    """S_dir, S_ctx and evidence of one diagnostic.

    Args:
        graph: Graph of the response the diagnostic is about (built on the whole response).
        diagnostic: One entry of a record's ``diagnostics``.
        method: A key of ``METHODS``.
        probe: The probe of the diagnostic's rubric, when known: lets a failed ``assert``
            find the elements whose saved readings it compared.
        cfg: Which rules are switched off (`rules.LocalizeConfig`).

    Returns:
        The localization; empty for kinds that are not localized (info, ``no_app``).

    Raises:
        KeyError: unknown method.
    """
    rule = METHODS[method].get(diagnostic.get("kind"))
    if rule is None:
        return Localization()
    c = _Case(graph, diagnostic, probe, cfg.validate())
    rule(c)
    return c.result()
