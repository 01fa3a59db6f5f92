"""Synthesis against a real OpenAI-compatible server (`transformers serve` on loopback with a
tiny random model, the judge's fixture): the drafting requests round-trip for real, and the
junk a random model writes is dropped as unparseable drafts, never a crash or a kept task."""

from __future__ import annotations

import json

import pytest

from evaluators.__main__ import main
from tests.judge.test_real_server import server  # noqa: F401  (the fixture)


@pytest.mark.slow
@pytest.mark.parametrize("structured", ["json_schema", "prompt"])
def test_a_real_server_drafts_and_its_junk_is_dropped(server, structured, tmp_path):  # noqa: F811
    base_url, model = server
    out, refs = tmp_path / "tasks.jsonl", tmp_path / "refs.jsonl"
    rc = main(["synth", "--base-url", base_url, "--model", model, "--count", "2",
               "--max-drafts", "2", "--max-tokens", "64", "--structured", structured,
               "--out", str(out), "--references", str(refs), "--workers", "1", "--pages", "2"])
    assert rc == 0
    report = json.loads((tmp_path / "tasks.report.json").read_text())
    assert report["drafts"] == 2 and report["kept"] == 0
    assert report["dropped"] == {"unparseable": 2}
    assert {d["check"] for d in report["drops"]} == {"unparseable"}
    assert out.read_text() == "" and refs.read_text() == ""
