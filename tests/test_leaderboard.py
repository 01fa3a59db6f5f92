"""Benchmark tables: Overall / Average / Perfect / reward, breakdowns, and the leaderboard command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evaluators import leaderboard as lb
from evaluators.__main__ import main
from evaluators.tasks import parse_task

EXAMPLES = Path(__file__).resolve().parents[1] / "evaluators" / "examples"


def _task(tid, n, difficulty, domain):
    return parse_task({"id": tid, "prompt": "p", "meta": {"difficulty": difficulty, "discipline": domain},
                       "rubrics": [{"id": f"r{i}", "text": "t", "kind": "dynamic", "importance": "behavior",
                                    "probe": {"steps": []} if i else None} for i in range(n)]})


TASKS = {"a": _task("a", 2, "easy", "Physics"), "b": _task("b", 4, "hard", "Chemistry")}


def _rec(tid, verdicts, reward=0.5, status="ok"):
    return {"task_id": tid, "status": status, "reward": reward if status == "ok" else None,
            "rubrics": [{"id": f"r{i}", "verdict": v} for i, v in enumerate(verdicts)]}


def test_figures_follow_the_definitions():
    recs = [_rec("a", ["unjudged", "pass"], 1.0), _rec("b", ["pass", "pass", "fail", "pass"], 0.4),
            _rec("a", ["pass", "pass"], 0.9), _rec("b", [], status="error")]
    f = lb.figures(recs, TASKS)
    assert f["n"] == 4 and f["errors"] == 1  # the evaluator's failure is in no figure
    assert f["Overall"] == pytest.approx(6 / 8)  # pooled: 1 + 3 + 2 passed of 2 + 4 + 2
    assert f["Average"] == pytest.approx((1 / 2 + 3 / 4 + 2 / 2) / 3)
    assert f["Perfect"] == pytest.approx(1 / 3)
    assert f["reward"] == pytest.approx((1.0 + 0.4 + 0.9) / 3)
    assert f["judged"] == pytest.approx(7 / 8)  # one rubric had no probe
    # Tasks are the unit: a's two answers make one value (0.95), b's one another (0.4).
    assert f["reward_se"] == pytest.approx(abs(0.95 - 0.4) / 2)


def test_standard_errors_take_the_task_as_the_unit():
    assert lb.task_rewards([_rec("a", [], 1.0), _rec("a", [], 0.0), _rec("b", [], 0.5),
                            _rec("b", [], status="error")]) == {"a": 0.5, "b": 0.5}
    m, se = lb.mean_se([0.2, 0.4, 0.9])
    assert m == pytest.approx(0.5)
    assert se == pytest.approx(((0.09 + 0.01 + 0.16) / 2 / 3) ** 0.5)
    assert lb.mean_se([0.3])[1] != lb.mean_se([0.3])[1]  # nan: one value says nothing
    # Paired over the tasks both hold: a shared task effect cancels, c (one side) is left out.
    d, se, n = lb.paired_difference({"a": 0.1, "b": 0.8, "c": 0.5}, {"a": 0.2, "b": 0.9})
    assert n == 2 and d == pytest.approx(0.1) and se == pytest.approx(0.0, abs=1e-12)


def test_breakdowns_by_difficulty_and_domain():
    rep = lb.report([_rec("a", ["pass", "pass"]), _rec("b", ["fail"] * 4)], TASKS)
    assert list(rep["by_difficulty"]) == ["easy", "hard"]
    assert rep["by_domain"]["Physics"]["Overall"] == 1.0 and rep["by_domain"]["Chemistry"]["Overall"] == 0.0
    md = lb.report_markdown("m", rep)
    assert "| m | 2 | 0 | 0.333 |" in md and "| Physics |" in md


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_leaderboard_reads_scored_records_one_row_per_file(tmp_path, capsys):
    tasks = _write(tmp_path / "tasks.jsonl", [t.raw for t in TASKS.values()])
    a = _write(tmp_path / "model-a.jsonl", [{**_rec("a", ["pass", "pass"]), "model": "A"},
                                           {**_rec("b", ["pass"] * 4), "model": "A"}])
    b = _write(tmp_path / "b.jsonl", [_rec("a", ["fail", "pass"]), _rec("b", ["fail"] * 4)])
    out = tmp_path / "lb.json"
    assert main(["leaderboard", "--tasks", str(tasks), "--responses", str(a), str(b),
                 "--json", str(out), "--markdown", str(tmp_path / "lb.md"), "--out", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    rows = [line.split()[0] for line in text.splitlines()[2:4]]
    assert rows == ["A", "b"]  # the rows' model field, else the file's name
    data = json.loads(out.read_text())
    assert data["A"]["all"]["Perfect"] == 1.0 and data["b"]["all"]["Overall"] == pytest.approx(1 / 6)
    assert "Overall by difficulty" in text and (tmp_path / "lb.md").read_text().count("By domain") == 2


def test_leaderboard_reports_a_bad_line(tmp_path, capsys):
    tasks = _write(tmp_path / "tasks.jsonl", [t.raw for t in TASKS.values()])
    bad = tmp_path / "r.jsonl"
    bad.write_text(json.dumps({"task_id": "zzz", "response": "x"}) + "\n")
    assert main(["leaderboard", "--tasks", str(tasks), "--responses", str(bad), "--out", str(tmp_path)]) == 2
    assert "r.jsonl:1: field 'task_id': unknown task 'zzz'" in capsys.readouterr().err


@pytest.mark.browser
def test_leaderboard_scores_responses_once(tmp_path, capsys):
    args = ["leaderboard", "--tasks", str(EXAMPLES / "tasks.jsonl"), "--responses",
            str(EXAMPLES / "responses.jsonl"), "--out", str(tmp_path), "--json", str(tmp_path / "a.json")]
    assert main(args) == 0
    cache = tmp_path / "responses.records.jsonl"
    records = [json.loads(x) for x in cache.read_text().splitlines()]
    assert len(records) == 8 and all(r["status"] == "ok" for r in records)
    first = json.loads((tmp_path / "a.json").read_text())
    stamp = cache.stat().st_mtime_ns
    assert main(args) == 0  # the cached records answer
    assert cache.stat().st_mtime_ns == stamp
    assert json.loads((tmp_path / "a.json").read_text()) == first
    f = next(iter(first.values()))["all"]
    passed = sum(v["verdict"] == "pass" for r in records for v in r["rubrics"])
    total = sum(len(r["rubrics"]) for r in records)
    assert f["Overall"] == pytest.approx(passed / total) and 0 < f["Overall"] < 1
