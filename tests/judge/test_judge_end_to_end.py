"""InteractScience's rubrics that have no probe, scored end to end: `python -m evaluators
score --judge-base-url ...` against the scripted OpenAI-compatible server on loopback, with
real Chromium for the probed rubrics and the judge for the rest."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from evaluators.judge.fake import FakeJudgeServer, Reply, asked_ids
from evaluators.records import validate_record
from evaluators.tasks import load_tasks

REPO = Path(__file__).resolve().parents[2]
TASKS = 2  # InteractScience tasks with judge-only rubrics, the first by id


def _fail_first(body: dict) -> Reply:
    """Fails the first rubric asked about (quoting the app's first script line), passes the
    others: a deterministic judge whose verdicts the test can predict."""
    ids = asked_ids(body)
    source = body["messages"][1]["content"]
    quoted = next((line.split("| ", 1)[1].strip() for line in source.splitlines()
                   if "| " in line and "function" in line), "<html")
    out = [{"id": i, "verdict": "pass", "severity": None, "issues": []} for i in ids]
    if out:
        out[0] = {"id": ids[0], "verdict": "fail", "severity": "major", "issues": [
            {"issue": "does not do what the rubric asks", "code": quoted, "line": None,
             "selector": None, "handler": None, "state": None}]}
    return Reply(json.dumps({"rubrics": out}))


@pytest.mark.browser
def test_judge_only_rubrics_are_scored_end_to_end(interactscience, tmp_path):
    tasks = load_tasks(interactscience / "tasks.jsonl")
    chosen = sorted(t for t, task in tasks.items() if any(r.probe is None for r in task.rubrics)
                    and len(task.rubrics) <= 6)[:TASKS]
    lines = {json.loads(x)["id"]: x for x in (interactscience / "tasks.jsonl").read_text(
        encoding="utf-8").splitlines() if x.strip()}
    (tmp_path / "tasks.jsonl").write_text("\n".join(lines[t] for t in chosen) + "\n")
    answers = [json.loads(x) for x in (interactscience / "answers" / "gpt-4o.jsonl").read_text(
        encoding="utf-8").splitlines() if x.strip()]
    rows = [{"task_id": a["task_id"], "response": a["response"]} for a in answers
            if a["task_id"] in chosen]
    (tmp_path / "responses.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with FakeJudgeServer(default=_fail_first) as server:
        proc = subprocess.run(
            [sys.executable, "-m", "evaluators", "score", "--tasks", str(tmp_path / "tasks.jsonl"),
             "--responses", str(tmp_path / "responses.jsonl"), "--out", str(tmp_path / "out.jsonl"),
             "--quiet", "--judge-base-url", server.base_url, "--judge-model", "fake-judge",
             "--judge-api-key-env", ""],
            cwd=REPO, capture_output=True, text=True, timeout=600)
        asked = [asked_ids(b) for b in server.requests]
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [r["task_id"] for r in records] == [r["task_id"] for r in rows]
    judged = 0
    for rec in records:
        validate_record(rec)
        task = tasks[rec["task_id"]]
        unprobed = [r.id for r in task.rubrics if r.probe is None]
        if rec["extraction"] is None:
            continue
        assert rec["judge"]["rubrics"] == unprobed
        by_id = {r["id"]: r for r in rec["rubrics"]}
        assert by_id[unprobed[0]]["verdict"] == "fail"
        assert all(by_id[i]["decided_by"] == "judge" for i in unprobed)
        assert all(by_id[i]["verdict"] == "pass" for i in unprobed[1:])
        assert all("decided_by" not in by_id[r.id] for r in task.rubrics if r.probe)
        findings = [d for d in rec["diagnostics"] if d["kind"] == "judge_finding"]
        assert [d["rubric_id"] for d in findings] == [unprobed[0]]
        judged += len(unprobed)
    assert judged and sorted(i for a in asked for i in a) == sorted(
        r.id for t in chosen for r in tasks[t].rubrics if r.probe is None)
