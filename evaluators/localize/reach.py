"""Which chain steps run each registered rule: the registry as a table.

A rule is run by the chain steps of ``spans.CHAINS`` (per method and diagnostic kind), directly
or through other rules (``yield from``). This reads the package's source (the ``yield from``
calls of its generator functions) and lists, per rule id, the (method, kind, phase) of every
step that can reach it, so one can ask which diagnostics a rule handles and when it runs, and
a rule that no chain reaches is visible (``tests/localize/test_rules.py`` fails on one).

  python -m evaluators.localize.reach      # the table: id, kinds, phases, what it blames
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

from evaluators.localize import spans
from evaluators.localize.rules import RULES

_PACKAGE = Path(__file__).parent


def _calls() -> dict[str, set[str]]:
    """{function name: names it calls with ``yield from``}, over the package's modules (a
    name defined in two modules gets the union: the listing errs towards reaching)."""
    out: dict[str, set[str]] = {}
    for path in sorted(_PACKAGE.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.FunctionDef):
                continue
            called = out.setdefault(node.name, set())
            for y in ast.walk(node):
                if isinstance(y, ast.YieldFrom) and isinstance(y.value, ast.Call):
                    f = y.value.func
                    options = (f.body, f.orelse) if isinstance(f, ast.IfExp) else (f,)
                    called |= {o.id for o in options if isinstance(o, ast.Name)}
    return out


@functools.lru_cache(maxsize=1)
def reach() -> dict[str, frozenset[tuple[str, str, str]]]:
    """{rule id: (method, kind, phase) of the chain steps that can run it}."""
    calls = _calls()
    ids: dict[str, list[str]] = {}
    for rid, r in RULES.items():
        ids.setdefault(r.function, []).append(rid)
    found: dict[str, set] = {rid: set() for rid in RULES}
    for method, chains in spans.CHAINS.items():
        for kind, chain in chains.items():
            for step in chain:
                seen, todo = set(), [step.run.__name__]
                while todo:
                    name = todo.pop()
                    if name in seen:
                        continue
                    seen.add(name)
                    for rid in ids.get(name, ()):
                        found[rid].add((method, kind, step.phase))
                    todo += calls.get(name, ())
    return {rid: frozenset(v) for rid, v in found.items()}


def rows() -> list[list[str]]:
    """Per rule: id, the diagnostic kinds it handles, its phases, methods, what it blames."""
    out = []
    for rid, where in sorted(reach().items()):
        kinds = sorted({k for _, k, _ in where}) or ["(a record's diagnostics)"]
        out.append([rid, ", ".join(kinds), ", ".join(sorted({p for *_, p in where})),
                    ", ".join(sorted({m for m, *_ in where})), RULES[rid].summary[:70]])
    return out


if __name__ == "__main__":
    from evaluators.summary import table

    print(table(["rule", "kinds", "phase", "methods", "blames"], rows()))
