"""The judge against a real OpenAI-compatible server: `transformers serve` on loopback with a
tiny random causal LM and a real tokenizer with a chat template, written here. Its verdicts
are noise; the protocol is real: the request and usage round-trip, a junk answer gets its one
repair, and its rubrics become judge errors that cost nothing, never a crashed record."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from evaluators.config import RewardConfig
from evaluators.judge.config import JudgeConfig
from evaluators.judge.judge import Judge, judge_record
from evaluators.records import validate_record
from tests.judge.test_judge import RESPONSE, TASK, _record


def _tiny_model(folder: Path) -> Path:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from evaluators.tasks import family
    from rcca_jax.data.tokenizer import train_tokenizer, training_texts

    tok = train_tokenizer(training_texts(family.generate(8, seed=1)), vocab_size=384)
    torch.manual_seed(0)
    cfg = LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=2, vocab_size=len(tok),
                      max_position_embeddings=16384, pad_token_id=tok.pad_token_id,
                      eos_token_id=tok.eos_token_id, bos_token_id=tok.eos_token_id)
    LlamaForCausalLM(cfg).save_pretrained(folder)
    tok.save_pretrained(str(folder))
    return folder


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    model = _tiny_model(tmp_path_factory.mktemp("judge") / "model")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    exe = Path(sys.executable).with_name("transformers")
    proc = subprocess.Popen([str(exe), "serve", str(model), "--host", "127.0.0.1", "--port",
                             str(port)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("transformers serve did not start:\n" + proc.stdout.read()[-3000:])
                time.sleep(1)
        yield f"http://127.0.0.1:{port}/v1", str(model)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.slow
@pytest.mark.parametrize("structured", ["json_schema", "prompt"])
def test_a_real_server_round_trips_and_its_junk_is_a_judge_error(server, structured):
    base_url, model = server
    judge = Judge(JudgeConfig(base_url=base_url, model=model, structured=structured,
                              max_tokens=24, timeout_s=120, retries=1))

    async def go():
        try:
            return await judge_record(judge, TASK, RESPONSE, _record(), RewardConfig())
        finally:
            await judge.close()
    rec = asyncio.run(go())
    usage = rec["judge"]["usage"]
    assert usage["requests"] == 2 and usage["attempts"] == 2  # the answer and one repair
    assert usage["prompt_tokens"] > 500 and usage["completion_tokens"] > 0
    assert "unusable after repair" in rec["judge"]["error"]
    judged = [r for r in rec["rubrics"] if r["id"] in ("adds", "looks")]
    assert all((r["verdict"], r["error_source"]) == ("error", "judge") for r in judged)
    assert rec["status"] == "ok" and rec["reward"] == 1.0  # judge errors cost nothing
    validate_record(rec)
    json.dumps(rec)


@pytest.mark.slow
@pytest.mark.browser
def test_an_interactscience_answer_is_scored_through_the_cli_with_the_real_server(
        server, interactscience, tmp_path):
    """One InteractScience answer with rubrics that have no probe, end to end: Chromium for
    the probes, the real server for the rest (its junk answers end as judge errors)."""
    from evaluators.tasks import load_tasks

    base_url, model = server
    tasks = load_tasks(interactscience / "tasks.jsonl")
    tid = sorted(t for t, task in tasks.items() if any(r.probe is None for r in task.rubrics)
                 and len(task.rubrics) <= 5)[0]
    line = next(x for x in (interactscience / "tasks.jsonl").read_text(encoding="utf-8")
                .splitlines() if x.strip() and json.loads(x)["id"] == tid)
    answer = next(json.loads(x) for x in (interactscience / "answers" / "gpt-4o.jsonl")
                  .read_text(encoding="utf-8").splitlines() if json.loads(x)["task_id"] == tid)
    (tmp_path / "t.jsonl").write_text(line + "\n")
    (tmp_path / "r.jsonl").write_text(json.dumps({"task_id": tid,
                                                  "response": answer["response"]}) + "\n")
    proc = subprocess.run(
        [sys.executable, "-m", "evaluators", "score", "--tasks", str(tmp_path / "t.jsonl"),
         "--responses", str(tmp_path / "r.jsonl"), "--out", str(tmp_path / "o.jsonl"), "--quiet",
         "--judge-base-url", base_url, "--judge-model", model, "--judge-api-key-env", "",
         "--judge-max-tokens", "16"],
        cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (rec,) = [json.loads(x) for x in (tmp_path / "o.jsonl").read_text().splitlines()]
    validate_record(rec)
    unprobed = [r.id for r in tasks[tid].rubrics if r.probe is None]
    assert rec["status"] == "ok" and rec["judge"]["rubrics"] == unprobed
    assert rec["judge"]["usage"]["prompt_tokens"] > 1000
    by_id = {r["id"]: r for r in rec["rubrics"]}
    assert all(by_id[i]["decided_by"] == "judge" for i in unprobed)
