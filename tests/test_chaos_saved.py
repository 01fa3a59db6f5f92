"""A saved chaos pass keeps what the later passes compare, and nothing of the answers."""

from __future__ import annotations

import json

from benchmarks.chaos import _saved, _save, compact, verdicts


def test_a_saved_pass_compares_as_the_records_did_and_holds_no_response(tmp_path):
    records = [
        {"name": "t1 m", "status": "ok", "gate": None, "reward": 0.8125, "response": "<html>A",
         "diagnostics": [{"kind": "probe_failure", "rubric_id": "b", "reason": "timeout",
                          "message": "waited for #out: <html>A"}],
         "rubrics": [{"id": "a", "verdict": "pass", "ran": True},
                     {"id": "b", "verdict": "fail", "evidence": "x", "severity": "severe",
                      "failed_step": 2, "duration_ms": 5000.0, "message": "waited"},
                     {"id": "c", "verdict": "skipped", "ran": False}]},
        {"name": "t4 m", "status": "ok", "gate": "E", "reward": 0.1, "rubrics": [],
         "diagnostics": [{"kind": "page_error", "reason": "uncaught_at_load"},
                         {"kind": "runtime_failure", "reason": "hang", "message": "<html>C"}]},
        {"name": "t2 m", "status": "error", "error": "\nbrowser died\nTraceback...",
         "response": "<html>B", "rubrics": []},
        {"name": "t3 m", "status": "error", "error": "", "rubrics": []},
    ]
    path = tmp_path / "calm.jsonl"
    head = {"commit": "abc", "code": "c1", "pass": "calm"}
    _save(path, head, records, {"wall_s": 1.0})
    back, foot = _saved(path, head)
    assert verdicts(back) == verdicts(records) and foot["wall_s"] == 1.0
    assert [r["error"] for r in back[2:]] == ["browser died", "(no message)"]
    assert back[1]["gate_causes"] == [["runtime_failure", "hang"]]  # why gate E failed
    assert "<html>" not in path.read_text() and "diagnostics" not in path.read_text()
    assert compact(records[0])["rubrics"][1] == {
        "id": "b", "verdict": "fail", "ran": True, "severity": "severe", "failed_step": 2,
        "duration_ms": 5000.0, "reason": "timeout"}  # why it failed, typed: no message
    assert _saved(path, {**head, "code": "other"}) is None  # another code's pass: not reused
    assert _saved(path, {**head, "commit": "other"}) is not None  # another commit, same code
    assert json.loads(path.read_text().splitlines()[-1])["done"] is True


def _rec(name, verdict, reward):
    return {"name": name, "status": "ok", "gate": None, "reward": reward,
            "rubrics": [{"id": "a", "verdict": verdict, "ran": True}]}


def test_a_difference_calm_rescoring_gives_too_is_not_blamed_on_the_kills():
    from benchmarks.chaos import classify, differing

    rows = [{"name": "real 1", "hostile": False}, {"name": "real 2", "hostile": False},
            {"name": "hostile 1", "hostile": True}]
    calm_records = [_rec("real 1", "pass", 1.0), _rec("real 2", "pass", 1.0),
                    _rec("hostile 1", "pass", 1.0)]
    chaos = [_rec("real 1", "fail", 0.5), _rec("real 2", "fail", 0.5), _rec("hostile 1", "fail", 0.5)]
    calm = verdicts(calm_records)
    assert differing(rows, calm, chaos) == [(0, "<reward>"), (0, "a"), (1, "<reward>"), (1, "a")]
    again = {0: [_rec("real 1", "pass", 1.0), _rec("real 1", "fail", 0.5)],  # races: noise
             1: [_rec("real 2", "pass", 1.0), {"name": "real 2", "status": "error",
                                                 "rubrics": []}]}
    lines, only_kills = classify(rows, calm, {"chaos": chaos}, again)
    assert only_kills == 2  # real 2's two verdicts: no calm rescoring gives them
    causes = {line[1]: line[-1] for line in lines}
    assert causes == {"real 1 / a": "run-to-run", "real 1 / <reward>": "run-to-run",
                      "real 2 / a": "not seen calm", "real 2 / <reward>": "not seen calm"}
    assert [line[4] for line in lines if line[1] == "real 2 / a"] == ["pass"]


def test_the_worker_kill_waits_for_a_third_scored_and_takes_a_busy_worker():
    import threading
    import types

    from benchmarks.chaos import Killer, _kill_worker

    idle = types.SimpleNamespace(inflight={}, proc=types.SimpleNamespace(pid=11))
    busy = types.SimpleNamespace(inflight={7: 0.0}, proc=types.SimpleNamespace(pid=22))
    pool = types.SimpleNamespace(pending=90, _slots=[idle, busy])
    killer = Killer(1e9, 0, 0)
    killed = []
    killer.kill = lambda pid, kind: killed.append((pid, kind))
    done = threading.Event()
    t = threading.Thread(target=_kill_worker, args=(pool, killer, 100, done))
    t.start()
    t.join(2.5)
    assert killed == []  # 10 of 100 scored: too early
    pool.pending = 60  # 40 scored: the worker with rows in flight dies, once
    t.join(5)
    assert killed == [(22, "worker")] and not t.is_alive()
    done.set()
