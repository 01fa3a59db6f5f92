"""The localization benchmark's ``--recheck``: a caught mutant counts only when its failure
comes back on a second scoring in Chromium and its original passes that again."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import localization as bench  # noqa: E402

from evaluators.tasks import load_responses, load_tasks  # noqa: E402

pytestmark = pytest.mark.browser
EXAMPLES = Path(__file__).resolve().parents[1] / "evaluators" / "examples"


def test_a_failure_that_does_not_come_back_is_not_counted(tmp_path, monkeypatch):
    monkeypatch.setattr(bench, "CACHE", tmp_path)
    tasks = load_tasks(EXAMPLES / "tasks.jsonl")
    answers = {r["model"]: r for r in load_responses(EXAMPLES / "responses.jsonl", tasks)}
    good = answers["correct"]
    # A mutant carries its original's model: its original is found by task and model.
    broken = {**answers["partial: reset and class broken"], "model": good["model"]}
    cfg = bench.BenchConfig(pages=2)
    original, mutant = bench.score_cached([good, broken], tasks, cfg)
    assert bench.all_pass(original) and bench.caught(mutant)
    # A catch that was the probe's, not the code's: the record says the rubrics failed, but
    # the app (the correct one, with a comment added) passes them when scored again.
    app = good["response"].replace("<script>", "<script>\n// unchanged", 1)
    assert app != good["response"]
    flaky = {**mutant, "response": app}
    kept = bench.reproduced([mutant, flaky], [original], tasks, cfg)
    assert [k["response"] for k in kept] == [broken["response"]]
    assert bench.failures(mutant) and not bench.failures(original)
    # The second scorings are cached apart from the first.
    assert (tmp_path / "rechecked.jsonl").read_text().count("\n") == 4
