"""The evaluator fleet (processes) and the command line, with real Chromium."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evaluators.config import EvalConfig
from evaluators.fleet.pool import EvaluatorPool, EvaluatorStartError
from evaluators.tasks import load_responses, load_tasks

pytestmark = pytest.mark.browser
REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "evaluators" / "examples"



def _cli(command: str, responses, out, *flags: str, timeout: int = 600) -> subprocess.CompletedProcess:
    """`python -m evaluators <command>` on the example tasks."""
    return subprocess.run([sys.executable, "-m", "evaluators", command,
                           "--tasks", str(EXAMPLES / "tasks.jsonl"), "--responses", str(responses),
                           "--out", str(out), *flags],
                          capture_output=True, text=True, cwd=REPO, timeout=timeout)

def test_pool_survives_a_dead_worker_and_keeps_order():
    tasks = load_tasks(EXAMPLES / "tasks.jsonl")
    rows = load_responses(EXAMPLES / "responses.jsonl", tasks)
    rows = [r for r in rows if r["model"] in ("correct", "partial: reset and class broken",
                                              "no code", "fetches an external URL")] * 3
    cfg = dataclasses.replace(EvalConfig(), browser=dataclasses.replace(
        EvalConfig().browser, pages_per_worker=4))
    with EvaluatorPool(tasks, cfg, workers=2) as pool:
        ids = pool.submit(rows)
        while not pool._done:  # the first record: the workers are up and scoring
            pool._pump(0.2)
        # Kill the busiest worker while it has apps in flight: they are rescored elsewhere.
        victim = max(pool._slots, key=lambda s: len(s.inflight))
        assert victim.inflight
        os.kill(victim.proc.pid, signal.SIGKILL)
        out = pool.collect(ids)
        assert pool.restarts >= 1
    assert [r["model"] for r in out] == [r["model"] for r in rows]
    assert all(r["status"] == "ok" for r in out)
    assert all("_rcca_pool_retry" not in r for r in out)
    # The rows the victim was still scoring were tried twice, and say so. (Rows whose records
    # it had sent just before the kill are not: there may be none left to retry.)
    assert all(len(r.get("faults") or ()) == r["attempts"] - 1 for r in out), out
    retried = [r for r in out if r["attempts"] > 1]
    assert all(r["faults"][0] == {"attempt": 1, "message": "evaluator fault: the evaluator "
                                  "worker died while scoring this row"} for r in retried), retried
    by_model = {r["model"]: r["reward"] for r in out}
    assert by_model["correct"] == 1.0 and by_model["no code"] == 0.0


def test_a_worker_that_keeps_a_row_past_its_deadline_writes_its_task_stacks_first(capfd, caplog):
    # The deadline is the last resort for a row stalled inside a worker whose loop still
    # turns; the kill must leave a record of where the row waited.
    tasks = load_tasks(EXAMPLES / "tasks.jsonl")
    row = next(r for r in load_responses(EXAMPLES / "responses.jsonl", tasks)
               if r["model"] == "correct")
    # Every load of this app holds the page's thread for 1.5 s, so the row is still being
    # scored when a 0.3 s deadline passes, however fast the machine (a plain app can be
    # scored within the parent's first one-second wait, and then no deadline is ever missed).
    stall = "<script>for (const t = Date.now(); Date.now() - t < 1500;) {}</script>"
    row = {**row, "response": row["response"].replace("<body>", "<body>" + stall, 1)}
    assert stall in row["response"]
    with EvaluatorPool(tasks, EvalConfig(), workers=1) as pool:
        [plain] = pool.collect(pool.submit([row]))  # the worker is up; its usual deadline
        assert plain["status"] == "ok" and pool.restarts == 0
        first = pool._deadline
        pool._deadline = lambda r: time.monotonic() + 0.3  # then its usual one, rescored
        [idx] = pool.submit([row])
        pool._deadline = first
        [rec] = pool.collect([idx])
        assert pool.restarts == 1
    assert rec["status"] == "ok" and rec["reward"] == plain["reward"] == 1.0
    assert any("kept a row past its deadline" in r.getMessage() for r in caplog.records)
    err = capfd.readouterr().err
    assert "--- Task" in err and "score_with_retries" in err


def test_pool_raises_when_its_workers_cannot_start():
    # No Chromium there: a broken installation is an error, not a pool restarting for ever.
    tasks = load_tasks(EXAMPLES / "tasks.jsonl")
    rows = load_responses(EXAMPLES / "responses.jsonl", tasks)[:1]
    cfg = dataclasses.replace(EvalConfig(), browser=dataclasses.replace(
        EvalConfig().browser, executable_path="/nonexistent/chromium"))
    t0 = time.monotonic()
    with pytest.raises(EvaluatorStartError, match=r"failed to start 3 times.*nonexistent/chromium"):
        list(EvaluatorPool(tasks, cfg, workers=1).score(rows))
    assert time.monotonic() - t0 < 120


def test_persistent_pool_streams_groups_with_back_pressure():
    tasks = load_tasks(EXAMPLES / "tasks.jsonl")
    rows = load_responses(EXAMPLES / "responses.jsonl", tasks)
    picked = {r["model"]: r for r in rows}
    g1 = [picked["correct"], picked["no code"]]
    g2 = [picked["partial: reset and class broken"], picked["correct"], picked["no code"]]
    with EvaluatorPool(tasks, EvalConfig(), workers=1, max_pending=2) as pool:
        pids = [s.proc.pid for s in pool._slots]
        ids1 = pool.submit(g1)
        assert pool.pending <= 2
        # Submitting a second group blocks until the queue has room: never more than 2 pending.
        ids2 = pool.submit(g2)
        assert pool.pending <= 2
        second = pool.collect(ids2)
        first = pool.collect(ids1)
        again = pool.collect(pool.submit([picked["correct"]]))
        assert [s.proc.pid for s in pool._slots] == pids  # the same workers throughout
        assert pool.pending == 0
    assert [r["model"] for r in first] == ["correct", "no code"]
    assert [r["model"] for r in second] == ["partial: reset and class broken", "correct", "no code"]
    assert [r["reward"] for r in first] == [1.0, 0.0] and again[0]["reward"] == 1.0
    assert 0.2 <= second[0]["reward"] < 1.0
    assert not pool.started


def test_cli_scores_and_keeps_input_fields(tmp_path):
    tasks = EXAMPLES / "tasks.jsonl"
    lines = (EXAMPLES / "responses.jsonl").read_text().splitlines()
    picked = [json.loads(x) for x in lines if json.loads(x)["model"] in ("correct", "JS syntax error")]
    for i, row in enumerate(picked):
        row["sample_id"] = i
    responses = tmp_path / "responses.jsonl"
    responses.write_text("".join(json.dumps(r) + "\n" for r in picked))
    out = tmp_path / "out.jsonl"
    proc = subprocess.run([sys.executable, "-m", "evaluators", "score", "--tasks", str(tasks),
                           "--responses", str(responses), "--out", str(out), "--workers", "1",
                           "--quiet"], capture_output=True, text=True, cwd=REPO, timeout=600)
    assert proc.returncode == 0, proc.stderr
    recs = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["sample_id"] for r in recs] == [0, 1]
    assert [r["model"] for r in recs] == ["correct", "JS syntax error"]
    assert [(r["reward"], r["gate"]) for r in recs] == [(1.0, None), (0.0, "source")]
    assert "apps/s" in proc.stdout and "JS syntax error" in proc.stdout


def test_cli_writes_every_record_after_a_lone_surrogate(tmp_path):
    # Issue 17, hole 4: a response holding a lone UTF-16 surrogate (a JSON "\ud800" escape)
    # is scored like any other, and its record and the ones after it are all written.
    lines = (EXAMPLES / "responses.jsonl").read_text().splitlines()
    by_model = {json.loads(x)["model"]: json.loads(x) for x in lines}
    odd = dict(by_model["correct"], model="lone surrogate")
    odd["response"] = odd["response"].replace("<h1>", "<!-- half a pair: \ud800 --><h1>", 1)
    assert "\ud800" in odd["response"]
    picked = [by_model["correct"], odd, by_model["JS syntax error"]]
    responses = tmp_path / "responses.jsonl"
    responses.write_text("".join(json.dumps(r) + "\n" for r in picked))
    out = tmp_path / "out.jsonl"
    proc = _cli("score", responses, out, "--quiet")
    assert proc.returncode == 0, proc.stderr
    recs = [json.loads(x) for x in out.read_bytes().decode("utf-8").splitlines()]
    assert [r["model"] for r in recs] == ["correct", "lone surrogate", "JS syntax error"]
    assert [(r["status"], r["reward"]) for r in recs] == [("ok", 1.0), ("ok", 1.0), ("ok", 0.0)]
    assert recs[1]["response"] == odd["response"]


def test_cli_rejects_a_bad_line_naming_it(tmp_path):
    responses = tmp_path / "bad.jsonl"
    responses.write_text(json.dumps({"task_id": "examples/counter", "response": "x"}) + "\n"
                         + json.dumps({"task_id": "examples/counter", "text": "x"}) + "\n")
    proc = _cli("score", responses, tmp_path / "o.jsonl", timeout=120)
    assert proc.returncode == 2
    assert f"{responses}:2: field 'response': missing" in proc.stderr


def test_cli_localize_adds_spans(tmp_path):
    lines = (EXAMPLES / "responses.jsonl").read_text().splitlines()
    picked = [x for x in lines if json.loads(x)["model"] == "partial: reset and class broken"]
    responses = tmp_path / "responses.jsonl"
    responses.write_text(picked[0] + "\n")
    out = tmp_path / "out.jsonl"
    proc = _cli("localize", responses, out, "--quiet")
    assert proc.returncode == 0, proc.stderr
    (rec,) = [json.loads(x) for x in out.read_text().splitlines()]
    reset = next(d for d in rec["diagnostics"]
                 if d["kind"] == "probe_failure" and d["rubric_id"] == "reset")
    # Execution grounding ran: the reset handler is in the coverage and in S_dir.
    assert reset["coverage"]["functions"]
    handler = "() => {\n  render();\n}"
    at = rec["response"].index(handler)
    assert any(s <= at and at + len(handler) <= e for s, e in reset["s_dir"]), reset["s_dir"]


@pytest.mark.slow
def test_ray_scorer_rescores_the_rows_of_a_killed_actor():
    # A Ray actor SIGKILLed mid-batch (issue 17): its rows are scored again on a new actor,
    # every record comes back in order, with the verdicts of the rows it was scoring.
    ray = pytest.importorskip("ray")
    import threading

    from evaluators.fleet.ray_fleet import RayScorer

    tasks = load_tasks(EXAMPLES / "tasks.jsonl")
    by_model = {r["model"]: r for r in load_responses(EXAMPLES / "responses.jsonl", tasks)}
    rows = [by_model[m] for m in ("correct", "partial: reset and class broken", "no code",
                                  "throws on load")] * 2
    try:
        with RayScorer(tasks, EvalConfig(), actors=2, per_actor=4) as scorer:
            victim = scorer.pids()[0]
            # Both actors are scoring their first batch of 4 (each takes well over 5 s).
            threading.Timer(5.0, os.kill, (victim, signal.SIGKILL)).start()
            out = scorer.score(rows)
            replaced = scorer.replaced
    finally:
        ray.shutdown()
    assert replaced >= 1
    assert [r["model"] for r in out] == [r["model"] for r in rows]
    assert [(r["status"], r["reward"]) for r in out] == [("ok", 1.0), ("ok", 0.82), ("ok", 0.0),
                                                         ("ok", 0.1)] * 2
    retried = [r for r in out if r["attempts"] > 1]
    assert retried and all("Ray actor scoring this row died" in r["faults"][0]["message"]
                           for r in retried), [(r["attempts"], r.get("faults")) for r in out]
