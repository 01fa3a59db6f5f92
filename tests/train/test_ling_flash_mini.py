"""The CPU twin of ling_flash: `configs/ling_flash.py:mini` runs the real run's path end to end.

A tiny `bailing_hybrid` checkpoint written by transformers (random weights, KDA + MLA + MoE
layers, MTP off) with a byte-level BPE and a chat template; tasks from a tasks.jsonl; 8 CPU
devices as data 2 x fsdp 2 x expert 2 with capacity dispatch. SFT (rejection-sampled by our
evaluator), 2 RL steps with real Chromium and the KL reference, held-out evaluation, the
export, then a resume.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tests.train.conftest import REPO, launcher, metrics, mini_args

CONFIG = "configs/ling_flash.py:mini"


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.timeout(3000)
def test_mini_twin_runs_the_real_path_then_resumes(mini_files, tmp_path):
    import jax.numpy as jnp
    import torch
    from transformers import BailingHybridForCausalLM

    from rcca_jax.train.config import ModelConfig
    from rcca_jax.train.policy import open_policy

    work = tmp_path / "run"
    first = launcher(CONFIG, work, *mini_args(mini_files), "--config.rl.steps=1", devices=8)
    assert first.returncode == 0, first.stderr[-4000:]
    assert "sft/examples=" in first.stderr and "sft/below_reward_dropped=0" in first.stderr
    m = metrics(work)
    assert set(m) == {0, 1, 2, 3, 4}  # 4 SFT steps, then RL step 4
    assert {"loss/pg", "loss/kl", "reward/mean", "optim/learning_rate"} <= set(m[4])
    for tag in ("sft", "rl"):
        report = json.loads((work / "eval" / tag / "report.json").read_text())
        assert report["meta"]["tasks"] == 2 and report["meta"]["answers"] == 4  # 2 held-out x 2
        assert set(report) >= {"all", "by_difficulty", "by_domain"}
    assert (work / "reference").is_dir()  # the frozen KL reference, saved once

    second = launcher(CONFIG, work, *mini_args(mini_files), "--config.rl.steps=2", devices=8)
    assert second.returncode == 0, second.stderr[-4000:]
    assert "resuming" in second.stderr and "at step 5" in second.stderr
    m2 = metrics(work)
    assert 5 in m2 and m2[5]["loss/kl"] >= 0.0
    assert second.stdout.strip().splitlines()[-1].startswith("mean reward: sft=")

    export = work / "export" / "final"
    tokens = [[3, 17, 40, 9, 101, 7, 250, 33]]
    with torch.no_grad():
        want = BailingHybridForCausalLM.from_pretrained(export).eval()(torch.tensor(tokens)).logits.numpy()
    ours = open_policy(ModelConfig(str(export)), export).load()
    np.testing.assert_allclose(np.asarray(ours(jnp.asarray(tokens))), want, atol=1e-4)
    src = json.loads((mini_files[2] / "config.json").read_text())
    assert json.loads((export / "config.json").read_text())["hidden_size"] == src["hidden_size"]

    # Standalone evaluation of the export: the same tables, without training.
    cmd = [sys.executable, "-m", "rcca_jax.evaluate", f"--config={CONFIG}", f"--workdir={work}",
           f"--checkpoint={export}", "--tag=standalone", *mini_args(mini_files)[1:]]
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    env["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
    ev = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=1200, env=env)
    assert ev.returncode == 0, ev.stderr[-4000:]
    assert "Overall" in ev.stdout and "Perfect" in ev.stdout
    alone = json.loads((work / "eval" / "standalone" / "report.json").read_text())
    assert alone["meta"]["answers"] == 4 and (work / "eval" / "standalone" / "report.md").is_file()
