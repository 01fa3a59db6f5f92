"""The tfds builder (array_record, no TensorFlow) and the grain pipeline over it."""

from __future__ import annotations

import json

import pytest

from rcca_jax.data import tfds_tasks


def test_taskfamily_dataset_round_trips(tmp_path):
    src = tfds_tasks.prepare(tmp_path, tfds_tasks.tasks_config("taskfamily", 6, 1))
    tasks = [tfds_tasks.decode(src[i]) for i in range(len(src))]
    assert len(tasks) == 6 and all(t["rubrics"] for t in tasks)
    assert list((tmp_path / "rcca_tasks").glob("*/1.0.0/*.array_record*"))
    again = tfds_tasks.prepare(tmp_path, tfds_tasks.tasks_config("taskfamily", 6, 1))  # reuses files
    assert [tfds_tasks.decode(again[i])["id"] for i in range(6)] == [t["id"] for t in tasks]


def test_interactscience_dataset(tmp_path, interactscience):
    src = tfds_tasks.prepare(tmp_path, tfds_tasks.tasks_config(str(interactscience / "tasks.jsonl")))
    ids = {tfds_tasks.decode(src[i])["id"] for i in range(len(src))}
    assert len(ids) == 150


def test_bad_jsonl_line_is_named(tmp_path):
    bad = tmp_path / "tasks.jsonl"
    bad.write_text(json.dumps({"id": "a", "prompt": "p", "rubrics": []}) + "\n{oops\n")
    with pytest.raises(ValueError, match=r"tasks.jsonl:2"):
        tfds_tasks.prepare(tmp_path / "d", tfds_tasks.tasks_config(str(bad)))


def test_stream_is_seeded_and_repeats(tmp_path):
    src = tfds_tasks.prepare(tmp_path, tfds_tasks.tasks_config("taskfamily", 4, 0))
    a = [t["id"] for t, _ in zip(tfds_tasks.task_stream(src, 3), range(12))]
    b = [t["id"] for t, _ in zip(tfds_tasks.task_stream(src, 3), range(12))]
    assert a == b and len(set(a)) == 4
    assert sorted(a[:4]) == sorted(a[4:8])  # each epoch is a permutation
