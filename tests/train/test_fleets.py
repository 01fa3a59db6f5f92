"""Both evaluator fleets score the same rollouts the same way (real Chromium)."""

from __future__ import annotations

import pytest

from evaluators.tasks import family as taskfamily
from rcca_jax.data.tokenizer import train_tokenizer, training_texts
from rcca_jax.train.config import EvaluatorConfig
from rcca_jax.train.rewards import FLEETS, Scored
from evaluators.config import BrowserConfig, EvalConfig
from evaluators.tasks import load_tasks


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    import json

    raw = taskfamily.generate(4, seed=5, families=("counter", "greeting"))
    path = tmp_path_factory.mktemp("t") / "tasks.jsonl"
    path.write_text("".join(json.dumps(t) + "\n" for t in raw))
    tok = train_tokenizer(training_texts(raw), vocab_size=512)
    good = [tok(taskfamily.reference_response(t), add_special_tokens=False)["input_ids"] for t in raw]
    broken = [tok(taskfamily.reference_response(t).replace("<script>", "<script>missingSetup();"),
                  add_special_tokens=False)["input_ids"] for t in raw]
    return load_tasks(path), [t["id"] for t in raw], tok, good, broken


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.parametrize("backend", ["local", "ray"])
def test_fleet_scores_and_weighs(setup, backend, monkeypatch):
    tasks, ids, tok, good, broken = setup

    def not_here(*a, **k):
        raise AssertionError("localized on the trainer host")

    # The workers localize: this process must not (its copy of the localizer is disabled).
    import evaluators.localize.api as api
    monkeypatch.setattr(api, "localize_record", not_here)
    scoring = EvalConfig(browser=BrowserConfig(pages_per_worker=2, probe_time_limit_ms=10000))
    cfg = EvaluatorConfig(workers=2, max_pending=3, scoring=scoring)
    fleet = FLEETS[backend](tasks, cfg, tok, "grounded")
    try:
        # Streamed in three parts, as the loop does, through one persistent fleet
        # whose queue holds at most 3 rows (back-pressure), collected out of order.
        parts = [fleet.submit(ids[:3], good[:3]), fleet.submit(ids[3:] + ids[:2], good[3:] + broken[:2]),
                 fleet.submit(ids[2:], broken[2:])]
        assert all(p.queue_depth <= 3 for p in parts)
        collected = {i: fleet.collect(parts[i]) for i in (2, 0, 1)}
        scored = Scored.concat([collected[i] for i in range(3)])
        again = fleet.score(ids[:1], broken[:1])  # the same workers answer a later step
        fleet.method = None  # plain GRPO: scored, not localized
        flat = fleet.score(ids[:1], broken[:1])
    finally:
        fleet.close()
    assert again.valid.all() and again.rewards[0] == scored.rewards[4]
    assert flat.rewards[0] == again.rewards[0] and again.diagnosed[0].any()
    assert (flat.weights_base[0] == 1).all() and not flat.diagnosed[0].any()
    assert scored.valid.all()
    assert list(scored.rewards[:4]) == [1.0] * 4
    assert all(r < 1.0 for r in scored.rewards[4:])
    assert [r["task_id"] for r in scored.records] == ids + ids  # order kept
    for w, d, t in zip(scored.weights_base, scored.diagnosed, good + broken):
        assert w.shape == (len(t),) and d.shape == (len(t),)
    assert any(d.any() for d in scored.diagnosed[4:]), "broken apps should have diagnosed tokens"
    # Each record was localized where it was scored, over the sampled ids it was sent with.
    assert all(r["localization"] == {"method": "grounded"} for r in scored.records)
    assert all("token_ids" not in r for r in scored.records)
    assert all(len(r["weights_base"]) == len(t) for r, t in zip(scored.records, good + broken))
    assert "localization" not in flat.records[0]  # plain GRPO: the workers were not asked


@pytest.mark.browser
def test_identical_rows_of_a_part_are_scored_once_and_share_the_record(setup):
    tasks, ids, tok, good, broken = setup
    scoring = EvalConfig(browser=BrowserConfig(pages_per_worker=2, probe_time_limit_ms=10000))
    fleet = FLEETS["local"](tasks, EvaluatorConfig(workers=1, scoring=scoring), tok, "grounded")
    sent: list[int] = []
    submit = fleet._submit
    fleet._submit = lambda rows: sent.append(len(rows)) or submit(rows)
    try:
        # A group of four answers to one task, three of them the same sampled ids.
        scored = fleet.score([ids[0]] * 4, [good[0], good[0], broken[0], good[0]])
    finally:
        fleet.close()
    assert sent == [2]
    assert list(scored.rewards) == [1.0, 1.0, scored.rewards[2], 1.0] and scored.rewards[2] < 1
    assert [r["rollout"] for r in scored.records] == [0, 1, 2, 3]
    # Each copy names the first row of the part that holds the same answer.
    assert [r.get("shared_with") for r in scored.records] == [None, 0, None, 0]
    assert scored.records[3]["rubrics"] == scored.records[0]["rubrics"]
    for i in (1, 3):
        assert (scored.weights_base[i] == scored.weights_base[0]).all()
