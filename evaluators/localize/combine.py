"""The combiner: the one place where blame is collected, demoted, dropped and merged.

Rules (``evaluators.localize.rules``) decide *what* to blame; they never touch the collected
items. A rule is a generator: it yields operations and the combiner applies each one
(``Combiner.run``), so a rule is a pure function of the case and of what was blamed before it
(``Combiner.items``, read-only). Three operations, each tagged with the id of the rule that
yielded it:

- ``Blame``: a span into S_dir (``dir``) or S_ctx (``ctx``), with the facts behind it;
- ``Demote``: direct items that match a test move to the context, because execution showed
  they are not where this failure happened; the item keeps the rule that blamed it and records
  the rule that demoted it (``demoted_by``), so a benchmark can ask both;
- ``Drop``: items that a narrower blame replaces (a long function whose statements a slice
  blamed), recorded in ``dropped`` with the dropping rule.

The value a ``Demote`` or ``Drop`` yield evaluates to, inside the rule, is how many items it
moved or removed.

Ordering and fallback are declared with the chains in ``evaluators.localize.spans``: the chain
of a (method, kind) is a tuple of steps run in order; a step marked ``fallback`` runs only
when the steps before it blamed nothing directly. ``result`` merges what is left: S_dir is
the union of the direct items, S_ctx the union of the context items minus S_dir, and the
evidence lists each distinct (set, span) once, in the order first blamed, with every rule that
blamed it (``rule`` first, then ``also``).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Generator, Iterable, Sequence, Union

from evaluators.localize.model import Span


@dataclasses.dataclass(frozen=True)
class Localization:
    """The spans one diagnostic blames.

    Attributes:
        s_dir: Directly responsible code, merged and sorted.
        s_ctx: Context (callers, callees, state, HTML), merged, sorted, without S_dir.
        evidence: ``{"span", "set", "why", "by", "rule"[, "demoted_by"][, "also"]}`` per
            distinct (set, span), in the order first blamed: ``rule`` blamed it first (its
            ``why`` and ``by`` are kept), ``also`` lists the other rules that blamed the
            same span in the same set, ``demoted_by`` the rule that moved a direct blame
            of it to the context.
    """

    s_dir: tuple[Span, ...] = ()
    s_ctx: tuple[Span, ...] = ()
    evidence: tuple[dict, ...] = ()

    def fields(self) -> dict:
        """The JSON fields added to a diagnostic."""
        return {"s_dir": [list(s) for s in self.s_dir], "s_ctx": [list(s) for s in self.s_ctx],
                "evidence": [dict(e) for e in self.evidence]}


@dataclasses.dataclass(frozen=True)
class Blame:
    """One blamed span.

    Attributes:
        set: ``dir`` or ``ctx``.
        span: ``[start, end)`` in response coordinates.
        why: The reason in words (for people; nothing reads it back).
        by: The kind of fact behind it: graph, stack, coverage, flow or text.
        fn: The graph function whose running the blame depends on; None when it does not
            depend on one running (top-level code, HTML, CSS).
        rule: Id of the rule that blamed it.
        demoted_by: Id of the rule that moved it from S_dir to S_ctx, if one did.
    """

    set: str
    span: Span
    why: str
    by: str
    fn: int | None
    rule: str = ""
    demoted_by: str = ""


@dataclasses.dataclass(frozen=True)
class Demote:
    """Moves the direct items for which ``test`` holds to the context.

    Attributes:
        test: Which direct items to demote.
        because: Appended to each demoted item's ``why``.
        by: The fact that demotes them (their ``by`` becomes it).
        rule: Id of the rule demoting them (kept as the items' ``demoted_by``).
    """

    test: Callable[[Blame], bool]
    because: str
    by: str = "coverage"
    rule: str = ""


@dataclasses.dataclass(frozen=True)
class Drop:
    """Removes the items for which ``test`` holds (a narrower blame replaces them).

    Attributes:
        test: Which items to remove.
        rule: Id of the rule dropping them.
    """

    test: Callable[[Blame], bool]
    rule: str = ""


Op = Union[Blame, Demote, Drop]
# What a rule is: a generator of operations; it may return a value to the rule calling it.
Ops = Generator[Op, Any, Any]


def merge_spans(spans: Iterable[Span]) -> list[Span]:
    """Sorted union of spans; empty spans dropped, touching spans joined."""
    out: list[list[int]] = []
    for s, e in sorted(spans):
        if e <= s:
            continue
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def subtract_spans(spans: Sequence[Span], holes: Sequence[Span]) -> list[Span]:
    """``spans`` minus ``holes``; both merged and sorted."""
    out, k = [], 0
    for s, e in spans:
        while k < len(holes) and holes[k][1] <= s:
            k += 1
        j = k
        while j < len(holes) and holes[j][0] < e:
            if holes[j][0] > s:
                out.append((s, holes[j][0]))
            s = max(s, holes[j][1])
            j += 1
        if s < e:
            out.append((s, e))
    return out


class Combiner:
    """The blame of one diagnostic, changed only through ``blame``, ``demote`` and ``drop``."""

    def __init__(self) -> None:
        self._items: list[Blame] = []
        self.dropped: list[tuple[Blame, str]] = []  # (item, id of the rule that dropped it)

    @property
    def items(self) -> tuple[Blame, ...]:
        """What is blamed now, in the order blamed (read-only: rules read, never write)."""
        return tuple(self._items)

    def run(self, ops: Ops) -> Any:
        """Applies every operation ``ops`` yields, in order; returns what the generator
        returns. Each operation is applied before the generator resumes, so a rule sees its
        own earlier blame in ``items``."""
        value = None
        while True:
            try:
                op = ops.send(value)
            except StopIteration as stop:
                return stop.value
            value = self.apply(op)

    def apply(self, op: Op) -> int | None:
        """Applies one operation; a demotion or a drop returns how many items it changed."""
        if isinstance(op, Blame):
            return self.blame(op)
        if isinstance(op, Demote):
            return self.demote(op.test, op.because, op.rule, op.by)
        if isinstance(op, Drop):
            return self.drop(op.test, op.rule)
        raise TypeError(f"a localization rule yielded {op!r}, not a Blame, Demote or Drop")

    def blame(self, item: Blame) -> None:
        if item.span[1] > item.span[0]:
            self._items.append(item)

    def has(self, which: str) -> bool:
        return any(i.set == which for i in self._items)

    def direct_functions(self) -> set[int]:
        """The functions of the direct items that depend on one running."""
        return {i.fn for i in self._items if i.set == "dir" and i.fn is not None}

    def demote(self, test: Callable[[Blame], bool], because: str, rule: str,
               by: str = "coverage") -> int:
        """Moves the direct items for which ``test`` holds to the context; returns how many.

        Args:
            test: Which direct items to demote.
            because: Appended to each demoted item's ``why``.
            rule: Id of the rule demoting them (kept as ``demoted_by``).
            by: The fact that demotes them (their ``by`` becomes it).
        """
        n = 0
        for k, i in enumerate(self._items):
            if i.set == "dir" and test(i):
                self._items[k] = dataclasses.replace(i, set="ctx", by=by, why=i.why + because,
                                                     demoted_by=rule)
                n += 1
        return n

    def drop(self, test: Callable[[Blame], bool], rule: str) -> int:
        """Removes the items for which ``test`` holds (a narrower blame replaces them)."""
        keep = []
        for i in self._items:
            if test(i):
                self.dropped.append((i, rule))
            else:
                keep.append(i)
        n, self._items = len(self._items) - len(keep), keep
        return n

    def result(self, n: int) -> Localization:
        """S_dir, S_ctx and the evidence, spans clipped to ``[0, n)``."""
        clip = [(i, (max(0, i.span[0]), min(n, i.span[1]))) for i in self._items]
        s_dir = merge_spans(s for i, s in clip if i.set == "dir")
        s_ctx = subtract_spans(merge_spans(s for i, s in clip if i.set == "ctx"), s_dir)
        first: dict[tuple, dict] = {}
        evidence = []
        for i, s in clip:
            if s[1] <= s[0]:
                continue
            e = first.get((i.set, s))
            if e is None:
                e = first[(i.set, s)] = {"span": list(s), "set": i.set, "why": i.why,
                                         "by": i.by, "rule": i.rule}
                if i.demoted_by:
                    e["demoted_by"] = i.demoted_by
                evidence.append(e)
                continue
            if i.rule != e["rule"] and i.rule not in e.get("also", ()):
                e.setdefault("also", []).append(i.rule)
            if i.demoted_by and "demoted_by" not in e:  # direct blame of it was demoted
                e["demoted_by"] = i.demoted_by
        return Localization(tuple(s_dir), tuple(s_ctx), tuple(evidence))
