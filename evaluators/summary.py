"""Plain-text tables for the end of a scoring run."""

from __future__ import annotations

import collections


def table(header: list[str], rows: list[list]) -> str:
    """Formats rows as an aligned text table."""
    cells = [[str(c) for c in header]] + [[_fmt(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _fmt(c) -> str:
    return f"{c:.3f}" if isinstance(c, float) else str(c)


def summarize(records: list[dict], seconds: float) -> str:
    """Per-model (or overall) rewards, gates and verdict counts."""
    groups: dict[str, list[dict]] = collections.defaultdict(list)
    for r in records:
        groups[str(r.get("model", "all"))].append(r)
    if len(groups) > 1:
        groups["ALL"] = records
    rows = []
    for name, recs in groups.items():
        ok = [r for r in recs if r["status"] == "ok"]
        gates = collections.Counter(r["gate"] for r in ok)
        verdicts = collections.Counter(v["verdict"] for r in ok for v in r["rubrics"])
        mean = sum(r["reward"] for r in ok) / len(ok) if ok else float("nan")
        rows.append([name, len(recs), len(recs) - len(ok), mean, gates["format"], gates["source"],
                     gates["runtime"], gates[None], verdicts["pass"], verdicts["fail"],
                     verdicts["error"], verdicts["unjudged"]])
    head = ["model", "n", "errors", "reward", "F-fail", "S-fail", "E-fail", "all-gates",
            "pass", "fail", "error", "unjudged"]
    n = len(records)
    tail = f"\n{n} responses in {seconds:.1f} s ({n / max(seconds, 1e-9):.2f} apps/s)"
    return table(head, rows) + tail
