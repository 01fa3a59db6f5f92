"""Benchmark tables from scored records: the figures a paper reports, by difficulty and domain.

Per answer (one record: a task and one response):
  pass rate = rubrics passed / rubrics of the task.
Over a set of answers:
  Overall  = rubrics passed / all rubrics (pooled, as InteractScience reports it);
  Average  = mean of the answers' pass rates;
  Perfect  = share of answers with every rubric passed;
  reward   = mean gated reward; reward_se its standard error with the task as the unit
             (the answers to one task are not independent: `task_rewards`, `mean_se`);
  judged   = share of rubrics that got a verdict (pass or fail). A rubric with no
             probe is `unjudged` until a judge scores it: it counts in "all rubrics"
             and is never passed, so Overall is comparable with a runner that ran
             every test only where `judged` is 1.
Records with `status: error` (the evaluator failed, not the response) are left out
of every figure and counted in `errors`. With one answer per task, Average and
Perfect are InteractScience's per-task figures.

`python -m evaluators leaderboard --tasks T.jsonl --responses A.jsonl [B.jsonl ...]`
prints one row per responses file (scoring it first, or reading it as records
when its lines are already scored).
"""

from __future__ import annotations

import collections
import json
from pathlib import Path
from typing import Iterable, Mapping

from evaluators.summary import table
from evaluators.tasks import Task

COLUMNS = ("n", "errors", "Overall", "Average", "Perfect", "reward", "judged")
DOMAIN_KEYS = ("domain", "discipline", "family")


def domain_of(task: Task | None) -> str:
    meta = task.meta if task is not None else {}
    return next((str(meta[k]) for k in DOMAIN_KEYS if meta.get(k)), "-")


def difficulty_of(task: Task | None) -> str:
    return str((task.meta if task is not None else {}).get("difficulty") or "-")


def figures(records: Iterable[dict], tasks: Mapping[str, Task]) -> dict:
    """The COLUMNS of a set of records (see the module docstring)."""
    n = errors = passed = total = judged = perfect = 0
    rates, rewards = [], []
    for rec in records:
        n += 1
        if rec.get("status") != "ok":
            errors += 1
            continue
        task = tasks.get(rec.get("task_id"))
        verdicts = [v.get("verdict") for v in rec.get("rubrics") or ()]
        k = len(task.rubrics) if task is not None else len(verdicts)
        ok = sum(v == "pass" for v in verdicts)
        passed, total = passed + ok, total + k
        judged += sum(v in ("pass", "fail") for v in verdicts)
        if k:
            rates.append(ok / k)
            perfect += ok == k
        if rec.get("reward") is not None:
            rewards.append(float(rec["reward"]))
    mean = lambda xs: sum(xs) / len(xs) if xs else float("nan")  # noqa: E731
    return {"n": n, "errors": errors,
            "Overall": passed / total if total else float("nan"),
            "Average": mean(rates), "Perfect": perfect / len(rates) if rates else float("nan"),
            "reward": mean(rewards), "judged": judged / total if total else float("nan"),
            "reward_se": mean_se(list(task_rewards(records).values()))[1]}


def task_rewards(records: Iterable[dict]) -> dict[str, float]:
    """Mean gated reward of each task's scored answers (evaluator errors left out)."""
    by: dict[str, list[float]] = collections.defaultdict(list)
    for rec in records:
        if rec.get("status") == "ok" and rec.get("reward") is not None:
            by[str(rec.get("task_id"))].append(float(rec["reward"]))
    return {t: sum(v) / len(v) for t, v in sorted(by.items())}


def mean_se(values: list[float]) -> tuple[float, float]:
    """(mean, standard error of the mean) of independent values; the error is nan for fewer
    than two. With per-task means as the values, the answers' correlation within a task
    is accounted for (the clustered standard error when every task has as many answers)."""
    n = len(values)
    if n == 0:
        return float("nan"), float("nan")
    m = sum(values) / n
    if n < 2:
        return m, float("nan")
    return m, (sum((v - m) ** 2 for v in values) / (n - 1) / n) ** 0.5


def paired_difference(before: Mapping[str, float], after: Mapping[str, float]
                      ) -> tuple[float, float, int]:
    """(mean of after - before, its standard error, tasks) over the tasks both hold: a paired
    difference, far tighter than the two means' errors when the tasks vary more than the
    change does."""
    common = sorted(set(before) & set(after))
    m, se = mean_se([after[t] - before[t] for t in common])
    return m, se, len(common)


def breakdown(records: list[dict], tasks: Mapping[str, Task], key) -> dict[str, dict]:
    """`figures` per group, `key(task) -> group name`, groups sorted by name."""
    groups: dict[str, list[dict]] = collections.defaultdict(list)
    for rec in records:
        groups[key(tasks.get(rec.get("task_id")))].append(rec)
    return {g: figures(groups[g], tasks) for g in sorted(groups)}


def report(records: list[dict], tasks: Mapping[str, Task]) -> dict:
    """Everything for one set of records: overall figures, by difficulty, by domain."""
    return {"all": figures(records, tasks), "by_difficulty": breakdown(records, tasks, difficulty_of),
            "by_domain": breakdown(records, tasks, domain_of)}


def _cell(v) -> str:
    if isinstance(v, float):
        return "nan" if v != v else f"{v:.3f}"
    return str(v)


def markdown(rows: Mapping[str, Mapping], first: str = "model", columns=COLUMNS) -> str:
    """A Markdown table: one row per key of `rows`, one column per figure."""
    lines = ["| " + " | ".join((first, *columns)) + " |",
             "|" + "---|" * (len(columns) + 1)]
    lines += ["| " + " | ".join([name, *(_cell(r.get(c)) for c in columns)]) + " |"
              for name, r in rows.items()]
    return "\n".join(lines)


def report_markdown(name: str, rep: Mapping) -> str:
    """The Markdown of one `report`: the overall row, then by difficulty and by domain."""
    parts = [markdown({name: rep["all"]}), "", "By difficulty:", "",
             markdown(rep["by_difficulty"], "difficulty"), "", "By domain:", "",
             markdown(rep["by_domain"], "domain")]
    return "\n".join(parts)


def text_table(rows: Mapping[str, Mapping], first: str = "model") -> str:
    return table([first, *COLUMNS], [[name, *(r[c] for c in COLUMNS)] for name, r in rows.items()])


def is_scored(path: str | Path) -> bool:
    """Whether a JSON Lines file holds scored records (its first line has status and rubrics)."""
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                first = json.loads(line)
                return isinstance(first, dict) and "status" in first and "rubrics" in first
    return False


def model_name(path: str | Path, rows: list[dict]) -> str:
    names = {r.get("model") for r in rows if r.get("model")}
    return names.pop() if len(names) == 1 else Path(path).stem
