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
