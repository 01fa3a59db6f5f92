"""The generated task families, their references and the tokenizer trained on them."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from evaluators.checks.extract import extract_app
from evaluators.checks.source import check_source
from evaluators.checks.steps import check_probe
from evaluators.tasks import load_responses, load_tasks
from evaluators.tasks import family as tf
from rcca_jax.data import tokenizer as tk

REPO = Path(__file__).resolve().parents[2]
# The SFT demo's budget: a tiny model must be able to write a whole reference.
MIN_CHARS, MAX_CHARS = 250, 700


@pytest.fixture(scope="module")
def tasks() -> list[dict]:
    return tf.generate(140, seed=0)


@pytest.fixture(scope="module")
def tokenizer(tasks):
    return tk.train_tokenizer(tk.training_texts(tasks), vocab_size=1024)


def _write_jsonl(path: Path, rows: list[dict]) -> Path:
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    path.write_text(text, encoding="utf-8")
    return path


def test_generate_is_deterministic_and_prefix_stable():
    assert tf.generate(21, seed=3) == tf.generate(21, seed=3)
    assert tf.generate(21, seed=3) != tf.generate(21, seed=4)
    # A task depends only on (family, index, seed): asking for more tasks keeps the first ones.
    assert tf.generate(35, seed=3)[:21] == tf.generate(21, seed=3)


def test_families_round_robin_with_unique_ids():
    tasks = tf.generate(700, seed=1)
    assert [t["meta"]["family"] for t in tasks[:14]] == list(tf.FAMILIES) * 2
    ids = [t["id"] for t in tasks]
    assert len(set(ids)) == len(ids)
    assert all(re.fullmatch(r"rcca/[a-z]+-\d{4}", i) for i in ids)
    assert tasks[7]["id"] == "rcca/counter-0001"
    some = tf.generate(4, families=("slider", "tabs"))
    assert [t["id"] for t in some] == ["rcca/slider-0000", "rcca/tabs-0000", "rcca/slider-0001",
                                       "rcca/tabs-0001"]
    with pytest.raises(ValueError, match="unknown"):
        tf.generate(3, families=("counter", "chess"))


def test_every_task_loads_with_the_evaluator_reader(tasks, tmp_path):
    loaded = load_tasks(_write_jsonl(tmp_path / "tasks.jsonl", tasks))
    assert list(loaded) == [t["id"] for t in tasks]
    for task in loaded.values():
        assert 2 <= len(task.rubrics) <= 4
        assert {r.kind for r in task.rubrics} == {"initial", "dynamic"}
        assert task.meta["source"] == "rcca-taskfamily"
        assert task.meta["family"] in tf.FAMILIES
        assert task.meta["difficulty"] in ("easy", "medium", "hard")
        for r in task.rubrics:
            assert r.probe is not None and r.probe["timeout_ms"] == 2000
            check_probe(r.probe)  # raises ProbeError on any step outside the spec


def test_prompts_name_the_ids_the_probes_use(tasks):
    for task in tasks:
        for r in task["rubrics"]:
            for sel in re.findall(r"#[\w-]+", json.dumps(r["probe"])):
                named = sel in task["prompt"] or f'id="{sel[1:]}"' in task["prompt"]
                assert named, (task["id"], sel)


def test_references_are_short_fenced_html(tasks):
    for task in tasks:
        ref = tf.reference_response(task)
        assert MIN_CHARS <= len(ref) <= MAX_CHARS, (task["id"], len(ref))
        app = extract_app(ref)
        assert app is not None and app.method == "fenced"
        assert app.code.startswith("<!DOCTYPE html>") and app.code.endswith("</html>")
        blocks, issues = check_source(app.code)  # gate S without a browser
        assert [b.lang for b in blocks] == ["javascript"] and not issues, (task["id"], issues)
        assert not ref.startswith("```")  # a lead-in line, as a chat model answers


def test_cli_writes_tasks_and_references(tmp_path):
    out_tasks, out_refs = tmp_path / "t.jsonl", tmp_path / "r.jsonl"
    tf.main(["--n", "9", "--seed", "2", "--tasks", str(out_tasks), "--responses", str(out_refs)])
    loaded = load_tasks(out_tasks)
    rows = load_responses(out_refs, loaded)
    assert len(loaded) == len(rows) == 9
    assert {r["model"] for r in rows} == {"reference"}
    assert [r["response"] for r in rows] == [tf.reference_response(t) for t in tf.generate(9, 2)]


def test_to_fixed_follows_javascript():
    # Values whose decimal form sits on a tie: JS rounds the exact double, ties away from zero.
    assert tf._to_fixed(2.5, 0) == "3"
    assert tf._to_fixed(0.125, 2) == "0.13"
    assert tf._to_fixed(1.005, 2) == "1.00"  # 1.005 is 1.00499999... as a double
    assert tf._to_fixed(32.0, 1) == "32.0"


def test_taskfamily_does_not_import_jax():
    code = "import sys, evaluators.tasks.family; assert 'jax' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO, timeout=60)


def test_tokenizer_special_ids_and_size(tokenizer):
    assert (tokenizer.pad_token_id, tokenizer.eos_token_id, tokenizer.bos_token_id) == (0, 1, 2)
    assert len(tokenizer) <= 1024
    assert tokenizer("<bos>x<eos>")["input_ids"][0] == 2
    # Encoding adds no special tokens: callers frame sequences themselves.
    assert 1 not in tokenizer("hello")["input_ids"]


def test_tokenizer_round_trip_is_lossless(tokenizer, tasks):
    extra = ["héllo wörld 日本語 🎉", "  two  spaces , then .", "tab\tcr\r\nend\n", "",
             "Zoë café"]
    for text in tk.training_texts(tasks) + extra:
        assert tokenizer.decode(tokenizer(text)["input_ids"]) == text


def test_prompt_text_is_a_fixed_frame(tasks):
    text = tk.prompt_text(tasks[0])
    assert tasks[0]["prompt"] in text and text.endswith("\n")
    assert tk.prompt_text(tasks[1]).replace(tasks[1]["prompt"], "") == text.replace(
        tasks[0]["prompt"], "")


def test_tokenizer_saves_with_its_chat_template(tasks, tmp_path):
    from transformers import AutoTokenizer

    first = tk.train_tokenizer(tk.training_texts(tasks[:70]), vocab_size=512)
    first.save_pretrained(str(tmp_path / "tok"))
    again = AutoTokenizer.from_pretrained(str(tmp_path / "tok"))
    text = tk.training_texts(tasks[:1])[0]
    assert again(text)["input_ids"] == first(text)["input_ids"]
    assert again.decode(again(text)["input_ids"]) == text
    assert (again.pad_token_id, again.eos_token_id, again.bos_token_id) == (0, 1, 2)
    msgs = [{"role": "user", "content": tasks[0]["prompt"]}]
    assert again.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True) == \
        tk.prompt_text(tasks[0])
    full = again.apply_chat_template(msgs + [{"role": "assistant", "content": "X"}], tokenize=False)
    assert full == tk.prompt_text(tasks[0]) + "X<eos>"


def _without_script(response: str) -> str:
    return re.sub(r"<script>.*</script>\n", "", response, flags=re.S)


def _with_wrong_id(task: dict) -> str:
    """Renames, in the markup only, the element the first probe looks at."""
    ref = tf.reference_response(task)
    target = re.search(r"#([\w-]+)", json.dumps(task["rubrics"][0]["probe"])).group(1)
    assert f'id="{target}"' in ref
    return ref.replace(f'id="{target}"', f'id="{target}-old"')


@pytest.mark.browser
def test_references_score_full_reward_and_broken_ones_do_not(tmp_path):
    from evaluators.config import EvalConfig
    from evaluators.fleet.pool import EvaluatorPool

    tasks = tf.generate(len(tf.FAMILIES), seed=5)
    loaded = load_tasks(_write_jsonl(tmp_path / "tasks.jsonl", tasks))
    rows = []
    for t in tasks:
        ref = tf.reference_response(t)
        rows.append({"task_id": t["id"], "response": ref, "model": "reference"})
        rows.append({"task_id": t["id"], "response": _without_script(tf.reference_response(t)),
                     "model": "no script"})
        rows.append({"task_id": t["id"], "response": _with_wrong_id(t), "model": "wrong id"})
    recs = list(EvaluatorPool(loaded, EvalConfig(), workers=1).score(rows))
    assert len(recs) == len(rows)
    for rec in recs:
        assert rec["status"] == "ok", rec.get("error")
        verdicts = {r["id"]: r["verdict"] for r in rec["rubrics"]}
        if rec["model"] == "reference":
            assert rec["reward"] == 1.0 and rec["gate"] is None, (rec["task_id"], verdicts)
            assert set(verdicts.values()) == {"pass"}, (rec["task_id"], verdicts)
        else:
            assert rec["reward"] < 1.0, (rec["task_id"], rec["model"], verdicts)
            assert "fail" in verdicts.values()
