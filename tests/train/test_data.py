"""SFT data: responses files, the held-out rule, rejection sampling with its cache, seq_len;
the tasks file that processes sharing a workdir write."""

from __future__ import annotations

import json
import threading

import pytest

from evaluators.tasks import FormatError
from rcca_jax.train.config import DataConfig
from rcca_jax.train.data import (IndexStream, SFTExample, filter_by_reward, load_task_data,
                                 read_sft_examples, tokenize_examples, write_atomically)
from tests.train import mini


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    tasks_path, refs_path, tasks = mini.write_tasks(root, n=16)
    cfg = DataConfig(source=str(tasks_path), eval_fraction=0.25, sft_source=str(refs_path))
    return root, cfg, load_task_data(cfg, root / "work"), tasks


def test_responses_of_held_out_tasks_never_reach_sft(data):
    root, cfg, td, tasks = data
    examples, counts = read_sft_examples(cfg, td)
    assert td.eval_ids and counts["sft/held_out_dropped"] == len(td.eval_ids)
    assert {e.task_id for e in examples} == set(td.train_ids)
    assert counts["sft/read"] == len(tasks)
    refs, _ = read_sft_examples(DataConfig(source=cfg.source, eval_fraction=0.25,
                                           sft_source="references"), td)
    assert {(e.task_id, e.response) for e in refs} == {(e.task_id, e.response) for e in examples}


def test_unknown_task_in_a_responses_file_names_the_line(data, tmp_path):
    root, cfg, td, _ = data
    bad = tmp_path / "answers.jsonl"
    bad.write_text(json.dumps({"task_id": td.train_ids[0], "response": "x"}) + "\n"
                   + json.dumps({"task_id": "nope", "response": "x"}) + "\n")
    with pytest.raises(FormatError, match=r"answers\.jsonl:2: field 'task_id': unknown task 'nope'"):
        read_sft_examples(DataConfig(source=cfg.source, eval_fraction=0.25, sft_source=str(bad)), td)


def test_rejection_sampling_keeps_the_best_and_scores_each_response_once(tmp_path):
    examples = [SFTExample("t1", "good", "f"), SFTExample("t1", "bad", "f"), SFTExample("t2", "fault", "f")]
    calls = []

    def score(todo):
        calls.append([e.response for e in todo])
        return [{"good": 1.0, "bad": 0.1, "fault": None}[e.response] for e in todo]

    kept, counts = filter_by_reward(examples, 0.5, tmp_path / "cache.jsonl", score)
    assert [e.response for e in kept] == ["good"]
    assert counts == {"sft/below_reward_dropped": 1, "sft/evaluator_error_dropped": 1}
    again, _ = filter_by_reward(examples, 0.1, tmp_path / "cache.jsonl", score)
    assert calls == [["good", "bad", "fault"]]  # the cache answered the second time
    assert [e.response for e in again] == ["good", "bad"]  # 0.1 >= 0.1; an error is never kept


def test_too_long_examples_are_skipped_whole_and_counted():
    examples = [SFTExample("a", "x" * 3, "f"), SFTExample("b", "x" * 9, "f")]
    pairs, too_long = tokenize_examples(examples, lambda t: [1, 2], lambda r: [7] * len(r) + [0], 8)
    assert pairs == [([1, 2], [7, 7, 7, 0])] and too_long == 1


def test_index_stream_resumes_exactly():
    a = IndexStream(5, seed=1)
    a.next(7)
    b = IndexStream(5, seed=1, state=a.state())
    assert a.next(6) == b.next(6)
    assert sorted(IndexStream(5, seed=2).next(5)) == [0, 1, 2, 3, 4]


def test_the_testbed_puts_one_known_bug_into_a_share_of_training_references(tmp_path):
    from evaluators.tasks.bugs import Bug, find

    cfg = DataConfig(source="taskfamily", num_tasks=24, eval_fraction=0.25,
                     sft_source="references", sft_bug_fraction=0.5)
    td = load_task_data(cfg, tmp_path / "work")
    clean = load_task_data(DataConfig(source="taskfamily", num_tasks=24, eval_fraction=0.25),
                           tmp_path / "clean")
    bugged = [t for t in td.train_ids if "sft_bug" in td.tasks[t].meta]
    assert td.counts["sft/bugged"] == len(bugged) and 0 < len(bugged) < len(td.train_ids)
    for t in td.train_ids:
        ref, was = td.raw[t]["meta"]["reference"], clean.raw[t]["meta"]["reference"]
        if t not in bugged:
            assert ref == was
            continue
        bug = Bug.from_json(td.tasks[t].meta["sft_bug"])
        assert find(ref, bug) is not None and find(was, bug) is None and ref != was
    assert all(td.raw[t] == clean.raw[t] for t in td.eval_ids)  # held-out tasks untouched
    examples, _ = read_sft_examples(cfg, td)  # SFT learns the bugged references
    assert {e.task_id: e.response for e in examples}[bugged[0]] == td.raw[bugged[0]]["meta"]["reference"]


def test_tasks_file_is_never_seen_half_written(tmp_path):
    """Processes sharing a workdir each write tasks.jsonl and read it back at once."""
    path = tmp_path / "tasks.jsonl"
    texts = {"".join(f'{{"id": "t{i}", "v": {k}}}\n' for i in range(20000)) for k in range(2)}
    write_atomically(path, min(texts))
    stop, seen = threading.Event(), []

    def read():
        while not stop.is_set():
            seen.append(path.read_text("utf-8"))

    reader = threading.Thread(target=read)
    reader.start()
    for k in range(60):
        write_atomically(path, sorted(texts)[k % 2])
    stop.set()
    reader.join()
    assert len(seen) > 10 and all(s in texts for s in seen), sum(s not in texts for s in seen)
