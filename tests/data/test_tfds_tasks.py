"""The tfds builder (array_record, no TensorFlow) and the grain pipeline over it."""

from __future__ import annotations

import json

import pytest

from rcca_jax.data import tfds_tasks


def test_taskfamily_dataset_round_trips(tmp_path):
    src = tfds_tasks.prepare(tmp_path, tfds_tasks.tasks_config("taskfamily", 6, 1))
    tasks = [tfds_tasks.decode(src[i]) for i in range(len(src))]
    assert len(tasks) == 6 and all(t["rubrics"] for t in tasks)
    assert list((tmp_path / "rcca_tasks").glob("*/2.0.0/*.array_record*"))
    again = tfds_tasks.prepare(tmp_path, tfds_tasks.tasks_config("taskfamily", 6, 1))  # reuses files
    assert [tfds_tasks.decode(again[i])["id"] for i in range(6)] == [t["id"] for t in tasks]


def test_interactscience_dataset(tmp_path, interactscience):
    src = tfds_tasks.prepare(tmp_path, tfds_tasks.tasks_config(str(interactscience / "tasks.jsonl")))
    ids = {tfds_tasks.decode(src[i])["id"] for i in range(len(src))}
    assert len(ids) == 150


def test_bad_jsonl_line_is_named(tmp_path):
    bad = tmp_path / "tasks.jsonl"
    bad.write_text(json.dumps({"id": "a", "prompt": "p", "rubrics": []}) + "\n{oops\n")
    with pytest.raises(ValueError, match=r"tasks.jsonl:2: field '<line>': invalid JSON"):
        tfds_tasks.prepare(tmp_path / "d", tfds_tasks.tasks_config(str(bad)))


def test_stream_is_seeded_and_repeats(tmp_path):
    src = tfds_tasks.prepare(tmp_path, tfds_tasks.tasks_config("taskfamily", 4, 0))
    a = [t["id"] for t, _ in zip(tfds_tasks.task_stream(src, 3), range(12))]
    b = [t["id"] for t, _ in zip(tfds_tasks.task_stream(src, 3), range(12))]
    assert a == b and len(set(a)) == 4
    assert sorted(a[:4]) == sorted(a[4:8])  # each epoch is a permutation


def test_held_out_split_is_by_task_id_and_disjoint(tmp_path):
    cfg = tfds_tasks.tasks_config("taskfamily", 40, 0, eval_fraction=0.25)
    train = tfds_tasks.prepare(tmp_path, cfg, "train")
    held = tfds_tasks.prepare(tmp_path, cfg, "eval")
    t_ids = {tfds_tasks.decode(train[i])["id"] for i in range(len(train))}
    h_ids = {tfds_tasks.decode(held[i])["id"] for i in range(len(held))}
    assert t_ids.isdisjoint(h_ids) and len(t_ids | h_ids) == 40
    assert 4 <= len(h_ids) <= 16  # a quarter, give or take what 40 hashes draw
    assert all(tfds_tasks.is_held_out(t, 0.25) for t in h_ids)
    # Per task: a task held out of 40 is held out of 80 too (the hash of its id decides).
    more = tfds_tasks.split_tasks(tfds_tasks.tasks_config("taskfamily", 80, 0, eval_fraction=0.25))[1]
    assert h_ids <= {t["id"] for t in more}
    assert not any(tfds_tasks.is_held_out(t, 0.0) for t in t_ids | h_ids)


def test_eval_source_holds_out_its_tasks(tmp_path):
    from evaluators.tasks import family as taskfamily

    tasks = taskfamily.generate(6, seed=2)
    src, held = tmp_path / "all.jsonl", tmp_path / "held.jsonl"
    src.write_text("".join(json.dumps(t) + "\n" for t in tasks))
    held.write_text("".join(json.dumps(t) + "\n" for t in tasks[:2]))
    train, ev = tfds_tasks.split_tasks(tfds_tasks.tasks_config(str(src), eval_source=str(held)))
    assert [t["id"] for t in ev] == [t["id"] for t in tasks[:2]]
    assert [t["id"] for t in train] == [t["id"] for t in tasks[2:]]


def test_malformed_task_is_named_with_its_field(tmp_path):
    bad = tmp_path / "tasks.jsonl"
    bad.write_text(json.dumps({"id": "a", "prompt": "p", "rubrics": [{"id": "r", "text": "t",
                                                                        "kind": "later",
                                                                        "importance": "core"}]}) + "\n")
    from evaluators.tasks import FormatError

    with pytest.raises(FormatError, match=r"tasks.jsonl:1: field 'rubrics\[0\]\.kind'"):
        tfds_tasks.read_tasks(str(bad))
