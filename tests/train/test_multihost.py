"""Two real JAX processes (local coordinator, CPU collectives) equal one process on the same data.

Each process samples its own share of a step's prompts, scores them in its own Chromium fleet,
gets the weights of its own rows back, and the global batch is assembled from both. Two RL
steps of `configs/ling_flash.py:mini` (8 devices: 2 processes x 4, or 1 x 8) must give the same
losses, rewards and updated parameters. The policy starts from a short SFT of the tiny model
and samples at temperature 1.5, so rewards and advantages vary within groups (a policy whose
rows all score alike would make every update zero, and the comparison empty).
"""

from __future__ import annotations

import json
import socket

import numpy as np
import pytest

from tests.train.conftest import finish, launcher, metrics, mini_args

CONFIG = "configs/ling_flash.py:mini"
RL = ["--config.sft.steps=0", "--config.eval.after_sft=False", "--config.eval.max_tasks=2",
      "--config.train.optimizer=sgd", "--config.train.learning_rate=0.05",
      "--config.sampler.temperature=1.5"]
KEYS = ("loss/pg", "loss/kl", "optim/grad_norm", "reward/mean", "advantage/mean_abs",
        "weights/mean", "reward/gate_format_frac")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _weights(folder) -> dict[str, np.ndarray]:
    from rcca_jax.models.safetensors_io import SafetensorsFile

    out = {}
    for f in sorted(folder.glob("*.safetensors")):
        st = SafetensorsFile(f)
        out.update({k: np.array(st.get(k)) for k in st.keys()})
    return out


def _records(folder) -> list[str]:
    """The task ids of an evaluation's records.jsonl, checking every record has an answer."""
    records = [json.loads(line) for line in (folder / "records.jsonl").read_text().splitlines()]
    assert all(r["response"] for r in records)
    return [r["task_id"] for r in records]


@pytest.fixture(scope="module")
def sft_policy(mini_files, tmp_path_factory):
    """The tiny model after 120 SFT steps on one device, exported."""
    work = tmp_path_factory.mktemp("sft")
    p = launcher(CONFIG, work, *mini_args(mini_files), "--config.mesh.data=1", "--config.mesh.fsdp=1",
                 "--config.mesh.expert=1", "--config.sft.steps=120", "--config.rl.steps=0",
                 "--config.eval.after_sft=False", "--config.eval.max_tasks=1",
                 "--config.eval.samples=1", "--config.data.sft_min_reward=-1")
    assert p.returncode == 0, p.stderr[-4000:]
    return work / "export" / "final"


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_two_processes_equal_one(mini_files, sft_policy, tmp_path):
    one = tmp_path / "one"
    p = launcher(CONFIG, one, *mini_args(mini_files, sft_policy), *RL, devices=8)
    assert p.returncode == 0, p.stderr[-4000:]

    two = tmp_path / "two"
    coordinator = f"127.0.0.1:{_free_port()}"
    procs = [launcher(CONFIG, two, *mini_args(mini_files, sft_policy), *RL, devices=4,
                      process=(coordinator, 2, i), wait=False) for i in range(2)]
    ends = finish(procs)
    for i, (code, tail) in enumerate(ends):
        assert code == 0, f"process {i} of 2 ended with {code}:\n{tail}"

    m1, m2 = metrics(one), metrics(two)
    assert sorted(m1) == sorted(m2) == [0, 1]
    assert m1[0]["advantage/mean_abs"] > 0.1 and m1[0]["optim/grad_norm"] > 0.1  # a real update
    assert m1[1]["loss/kl"] > 0  # the second step moved away from the reference
    for step in (0, 1):
        for key in KEYS:
            assert m2[step][key] == pytest.approx(m1[step][key], rel=1e-5, abs=1e-7), (step, key)
    # The held-out answers of both processes are written (one per process here), in task order.
    r1, r2 = (_records(run / "eval" / "rl") for run in (one, two))
    assert len(set(r1)) == 2 and r2 == r1, (r1, r2)
    init, w1, w2 = _weights(sft_policy), _weights(one / "export" / "final"), _weights(two / "export" / "final")
    moved = max(float(np.abs(w1[k] - init[k]).max()) for k in init)
    assert moved > 1e-3, moved
    for k in init:
        np.testing.assert_allclose(w2[k], w1[k], atol=1e-6, err_msg=k)
