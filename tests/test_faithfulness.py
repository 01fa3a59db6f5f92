"""Our verdicts against InteractScience's official Playwright results, on a fixed subset.

The full comparison is `benchmarks/faithfulness.py`; this runs every 10th task
(by id) of the benchmark and holds it to the same threshold.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.browser]
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))


def test_agreement_with_official_results_on_a_fixed_subset(interactscience):
    import faithfulness
    from evaluators.tasks import load_tasks

    ids = sorted(load_tasks(interactscience / "tasks.jsonl"))[::10]
    res = faithfulness.run(faithfulness.MODEL, ids, workers=1, pages=4)
    assert res["total"] >= 40, "the subset must hold enough comparable rubrics to mean something"
    assert not res["errors"], res["errors"]
    # The whole table: pytest cuts a long repr, and a failure must say which probes drifted.
    assert res["agreement"] >= 0.95, "\n" + faithfulness.disagreement_table(res["disagreements"])
