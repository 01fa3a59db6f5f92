"""The registry of localization rules: every rule has a stable id, and can be switched off.

A rule is a generator function of the case being localized (``spans_common._Case``): it reads
the case (graph, diagnostic, probe, settings, and what was blamed before it) and yields blame
operations (``combine.Blame``, ``Demote``, ``Drop``), which ``combine.Combiner.run`` applies;
it changes nothing itself. `rule` registers it under its id and tags every operation it
yields (itself, or through the helpers it calls with ``yield from``) that no inner rule
tagged, so every blamed span in a record names the rule that blamed it (``evidence[].rule``),
the localization benchmark can count each rule's hits, and `LocalizeConfig.disabled_rules`
ablates a rule (it yields nothing and returns ``off``; rules after it see what the others
blamed). A rule calling another does so with ``yield from``; ``tests/localize/test_rules.py``
checks every call of a rule or blaming helper is one.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
from typing import Any, Callable


@dataclasses.dataclass(frozen=True)
class Rule:
    """A registered rule: its id, where it lives and what it does (its docstring's first line)."""

    id: str
    function: str
    module: str
    summary: str


RULES: dict[str, Rule] = {}


def rule(rule_id: str, off: Any = None) -> Callable:
    """Registers a rule (a generator function) under ``rule_id``; ``off`` is what it returns
    when disabled."""

    def register(fn: Callable) -> Callable:
        if rule_id in RULES:
            raise ValueError(f"localization rule id {rule_id!r} registered twice")
        if not inspect.isgeneratorfunction(fn):
            raise TypeError(f"localization rule {rule_id!r} ({fn.__name__}) must be a "
                            "generator function yielding Blame, Demote and Drop")
        doc = (fn.__doc__ or "").strip().splitlines()
        RULES[rule_id] = Rule(rule_id, fn.__name__, fn.__module__, doc[0] if doc else "")

        @functools.wraps(fn)
        def run(c, *args, **kwargs):
            if rule_id in c.cfg.disabled_rules:
                return off
            ops = fn(c, *args, **kwargs)
            value = None
            while True:  # `yield from`, tagging what no inner rule tagged
                try:
                    op = ops.send(value)
                except StopIteration as stop:
                    return stop.value
                value = yield op if op.rule else dataclasses.replace(op, rule=rule_id)

        run.rule_id = rule_id
        return run

    return register


def declare(rule_id: str, module: str, summary: str) -> str:
    """Registers a rule that works across a record's diagnostics rather than on one case
    (``corroborate``): it has an id, can be switched off, and names itself in the evidence
    it writes, like the others. Returns the id."""
    if rule_id in RULES:
        raise ValueError(f"localization rule id {rule_id!r} registered twice")
    RULES[rule_id] = Rule(rule_id, rule_id.split(".")[-1], module, summary)
    return rule_id


# The kinds of fact the scored combiner weighs (`LocalizeConfig.rank_weights`): `Blame.by`
# of the rules' blame, `spectrum` for Ochiai 1, `other` for every kind not listed.
RANK_FACTS = ("stack", "flow", "coverage", "graph", "text", "spectrum", "other")


@dataclasses.dataclass(frozen=True)
class LocalizeConfig:
    """Settings of localization.

    Attributes:
      disabled_rules: Ids of `RULES` to switch off (ablation); an unknown id is an error.
      long_context: Characters over which a function blamed as context is cut to its head
        and the statements around the failure.
      around: Statements kept on each side of the failure in such a function.
      fills: Most statements blamed for filling an array read as undefined.
      fill_limit: Longest of them (characters).
      whole: Characters up to which a function the slice narrows stays blamed whole.
      big: Characters over which a statement the slice reaches is context, not direct.
      hops: Definitions followed from a value read from the acted-on input.
      forward_limit: Most statements the forward slice blames.
      siblings: Statements looked at on each side of a dead value's definition.
      near_limit: Longest statement blamed as where a missing use belongs (characters).
      path_limit: Longest statement blamed as the code just before a read (characters).
      run_limit: Longest run of sibling assignments blamed with the gaps between them.
      run_statements: Most start-up statements blamed before a frame.
      entry_functions: Names of top-level functions taken for an app's start-up code (p5's
        ``setup`` and ``preload``, and the usual hand-written entry points): a frame in one
        blames the start-up statements before it, and when an action ran no code they are
        context of the wiring that should have bound its handler.
      kind_words: Words that say what kind of element an id or variable names, not which
        one (``slider`` in ``trimSlider``): dropped before comparing the topic of two names.
      role_suffixes: Endings that say a variable holds an element (``outputEl``): dropped
        before matching a variable to an element id.
      similar_ratio: difflib ratio from which two names count as ones a model could have
        confused (after equal-up-to-separators and same-words-reordered, which always count).
      judge_fuzzy: difflib ratio from which an app line counts as the line a judge quoted,
        when the quote is not in the app as written (``spans_judge``).
      rank_weights: (fact, weight) pairs of the scored combiner (``rank``, method
        ``ranked``): what one blame by that kind of fact (``Blame.by``; ``spectrum`` for
        Ochiai 1, ``other`` for kinds not listed) adds per character.
      rank_ctx_weight: a context blame's weight relative to a direct one.
      rank_focus: characters up to which a blame counts fully; a longer one counts
        (focus / length) ** 0.5 per character.
      rank_budget: the largest share of the app's characters S_dir may take beyond its
        top-scoring run.

    The word lists are the rules' only knowledge of how apps name things; the platform's own
    vocabulary (DOM properties, event names, what each check reads) stays with the rules as
    module constants, since it is a fact of the browser, not a setting.
    """

    disabled_rules: frozenset[str] = frozenset()
    long_context: int = 1500
    around: int = 2
    fills: int = 6
    fill_limit: int = 600
    whole: int = 400
    big: int = 600
    hops: int = 3
    forward_limit: int = 24
    siblings: int = 4
    near_limit: int = 600
    path_limit: int = 600
    run_limit: int = 1200
    run_statements: int = 12
    entry_functions: frozenset[str] = frozenset(("setup", "preload", "init", "main",
                                                 "initialize"))
    kind_words: frozenset[str] = frozenset((
        "slider", "range", "btn", "button", "input", "select", "checkbox", "radio", "toggle",
        "label", "field", "control", "ctrl", "value", "val", "display", "el", "elem",
        "element", "node", "ref"))
    role_suffixes: tuple[str, ...] = ("el", "elem", "element", "node", "ref")
    similar_ratio: float = 0.8
    judge_fuzzy: float = 0.8
    rank_weights: tuple[tuple[str, float], ...] = (
        ("stack", 3.0), ("flow", 2.0), ("coverage", 1.5), ("graph", 1.0), ("text", 1.0),
        ("spectrum", 1.0), ("other", 1.0))
    rank_ctx_weight: float = 0.4
    rank_focus: int = 300
    rank_budget: float = 0.05

    def __post_init__(self):
        for name in ("disabled_rules", "entry_functions", "kind_words"):
            object.__setattr__(self, name, frozenset(getattr(self, name)))
        object.__setattr__(self, "role_suffixes", tuple(self.role_suffixes))
        weights = tuple((str(k), float(v)) for k, v in dict(self.rank_weights).items())
        for k, v in weights:
            if k not in RANK_FACTS or not math.isfinite(v) or v < 0:
                raise ValueError(f"LocalizeConfig.rank_weights: {k!r}: {v} (keys: "
                                 f"{', '.join(RANK_FACTS)}; weights finite and >= 0)")
        object.__setattr__(self, "rank_weights", weights)
        if not (0 < self.rank_budget <= 1 and self.rank_focus >= 1
                and math.isfinite(self.rank_ctx_weight) and self.rank_ctx_weight >= 0):
            raise ValueError("LocalizeConfig: rank_budget must be in (0, 1], rank_focus >= 1 "
                             f"and rank_ctx_weight >= 0, got {self.rank_budget}, "
                             f"{self.rank_focus}, {self.rank_ctx_weight}")

    def validate(self) -> "LocalizeConfig":
        """Checks the ids against the registry (once every rule module is imported)."""
        unknown = sorted(self.disabled_rules - set(RULES))
        if unknown:
            raise ValueError(f"LocalizeConfig.disabled_rules: unknown rule {unknown[0]!r} "
                             f"(known: {sorted(RULES)})")
        return self
