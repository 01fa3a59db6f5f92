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
        {"name": "t2 m", "status": "error", "error": "\nbrowser died\nTraceback...",
         "response": "<html>B", "rubrics": []},
        {"name": "t3 m", "status": "error", "error": "", "rubrics": []},
    ]
    path = tmp_path / "calm.jsonl"
    head = {"commit": "abc", "pass": "calm"}
    _save(path, head, records, {"wall_s": 1.0})
    back, foot = _saved(path, head)
    assert verdicts(back) == verdicts(records) and foot["wall_s"] == 1.0
    assert [r["error"] for r in back[1:]] == ["browser died", "(no message)"]
    assert "<html>" not in path.read_text() and "diagnostics" not in path.read_text()
    assert compact(records[0])["rubrics"][1] == {
        "id": "b", "verdict": "fail", "ran": True, "severity": "severe", "failed_step": 2,
        "duration_ms": 5000.0, "reason": "timeout"}  # why it failed, typed: no message
    assert _saved(path, {**head, "commit": "other"}) is None  # another code's pass: not reused
    assert json.loads(path.read_text().splitlines()[-1])["done"] is True
