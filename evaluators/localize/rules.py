"""The registry of localization rules: every rule has a stable id, and can be switched off.

A rule is a function of the case being localized (``spans_common._Case``) that adds blame
items; `rule` registers it under its id. While a rule runs, the items it adds (directly or
through the helpers it calls) carry its id, so every blamed span in a record names the rule
that blamed it (``evidence[].rule``), the localization benchmark can count each rule's hits,
and `LocalizeConfig.disabled_rules` ablates a rule (the chain runs as if it added nothing;
rules after it see what the others added).
"""

from __future__ import annotations

import dataclasses
import functools
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
    """Registers a rule function under ``rule_id``; ``off`` is what it returns when disabled."""

    def register(fn: Callable) -> Callable:
        if rule_id in RULES:
            raise ValueError(f"localization rule id {rule_id!r} registered twice")
        doc = (fn.__doc__ or "").strip().splitlines()
        RULES[rule_id] = Rule(rule_id, fn.__name__, fn.__module__, doc[0] if doc else "")

        @functools.wraps(fn)
        def run(c, *args, **kwargs):
            if rule_id in c.cfg.disabled_rules:
                return off
            c.rules.append(rule_id)
            try:
                return fn(c, *args, **kwargs)
            finally:
                c.rules.pop()

        run.rule_id = rule_id
        return run

    return register


@dataclasses.dataclass(frozen=True)
class LocalizeConfig:
    """Settings of localization.

    Attributes:
      disabled_rules: Ids of `RULES` to switch off (ablation); an unknown id is an error.
    """

    disabled_rules: frozenset[str] = frozenset()

    def __post_init__(self):
        object.__setattr__(self, "disabled_rules", frozenset(self.disabled_rules))

    def validate(self) -> "LocalizeConfig":
        """Checks the ids against the registry (once every rule module is imported)."""
        unknown = sorted(self.disabled_rules - set(RULES))
        if unknown:
            raise ValueError(f"LocalizeConfig.disabled_rules: unknown rule {unknown[0]!r} "
                             f"(known: {sorted(RULES)})")
        return self
