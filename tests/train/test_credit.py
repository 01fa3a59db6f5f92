"""The credit arms: placebo and contrastive transforms of the localized base weights."""

from __future__ import annotations

import numpy as np

from rcca_jax.train.credit import CREDIT, contrastive, placebo, shared_with_better


def _rows():
    # Two rows of one group; base weights over their ids with EOS (weight 1) appended.
    ids = [list(range(10, 22)), list(range(10, 16)) + [90, 91, 92, 93, 94, 95]]
    w = [np.array([1, 1, 3, 3, 1.5, 1, 1, 1, 1, 1, 1, 1, 1], np.float32),
         np.array([3] * 12 + [1], np.float32)]
    d = [w[0] > 1, w[1] > 1]
    return ids, w, d


def test_placebo_moves_each_rows_weights_and_keeps_how_many_of_each():
    ids, w, d = _rows()
    pw, pd = placebo(w, d, ids, np.zeros(2), 2, seed=0)
    for a, b, da, db in zip(w, pw, d, pd):
        assert sorted(zip(a[:-1].tolist(), da[:-1].tolist())) == sorted(
            zip(b[:-1].tolist(), db[:-1].tolist()))
        assert b[-1] == 1.0 and not db[-1]  # EOS stays put
        assert np.array_equal(db, b > 1)  # a weight travels with its mark
    assert not np.array_equal(pw[0], w[0])  # moved (seeded: this row's draw moves them)
    again, _ = placebo(w, d, ids, np.zeros(2), 2, seed=0)
    other, _ = placebo(w, d, ids, np.zeros(2), 2, seed=1)
    assert np.array_equal(again[0], pw[0]) and not np.array_equal(other[0], pw[0])
    assert np.array_equal(w[0][2:5], [3, 3, 1.5])  # the input is not changed


def test_contrastive_does_not_up_weight_what_a_better_row_also_wrote():
    ids, w, d = _rows()
    # Row 1 failed (reward 0) and shares its first 6 ids with row 0, which did better.
    cw, cd = contrastive(w, d, ids, np.array([1.0, 0.0]), 2, seed=0)
    assert np.array_equal(cw[1][:6], np.ones(6)) and np.array_equal(cw[1][6:12], np.full(6, 3))
    assert np.array_equal(cw[0], w[0])  # nothing in its group did better
    assert all(np.array_equal(a, b) for a, b in zip(cd, d))
    # Groups are separate: with groups of one, no row has a better neighbour.
    alone, _ = contrastive(w, d, ids, np.array([1.0, 0.0]), 1, seed=0)
    assert all(np.array_equal(a, b) for a, b in zip(alone, w))


def test_a_shared_run_must_be_long_enough_and_in_order():
    assert shared_with_better([1, 2, 3, 9], [[1, 2, 3, 7]]).tolist() == [False] * 4
    assert shared_with_better([1, 2, 3, 4, 9], [[0, 1, 2, 3, 4]]).tolist() == [True] * 4 + [False]
    assert shared_with_better([4, 3, 2, 1], [[1, 2, 3, 4]]).tolist() == [False] * 4


def test_every_arm_but_grpo_transforms_the_localized_weights():
    assert CREDIT["grpo"] is None
    ids, w, d = _rows()
    assert CREDIT["rcca"](w, d, ids, np.zeros(2), 2, 0) == (w, d)
    assert set(CREDIT) == {"rcca", "grpo", "placebo", "contrastive"}


def test_the_step_reports_how_often_answers_still_hold_the_testbed_bug():
    from evaluators.tasks import parse_task
    from evaluators.tasks.bugs import Bug
    from rcca_jax.train.rewards import Scored
    from rcca_jax.train.rl import reward_metrics, testbed_bugs

    bug = Bug("operator", "count ", "-", "= step;")
    tasks = {tid: parse_task({"id": tid, "prompt": "p", "rubrics": [
        {"id": "r", "text": "t", "kind": "initial", "importance": "core"}],
        "meta": {"sft_bug": bug.to_json()} if tid == "bugged" else {}})
        for tid in ("bugged", "clean")}
    bugs = testbed_bugs(tasks)
    assert list(bugs) == ["bugged"] and bugs["bugged"] == bug
    recs = [{"task_id": "bugged", "response": "x count -= step; y", "status": "ok", "reward": 0.2,
             "gate": None, "rubrics": []},
            {"task_id": "bugged", "response": "x count += step; y", "status": "ok", "reward": 1.0,
             "gate": None, "rubrics": []},
            {"task_id": "clean", "response": "count -= step;", "status": "ok", "reward": 1.0,
             "gate": None, "rubrics": []}]
    scored = Scored(np.array([0.2, 1.0, 1.0], np.float32), np.ones(3, bool), [], [], recs, 0.0, 0)
    m = reward_metrics(scored, np.zeros(3), bugs)
    assert m["testbed/bug_rate"] == 0.5  # of the two answers to the bugged task
    assert "testbed/bug_rate" not in reward_metrics(scored, np.zeros(3), {})
