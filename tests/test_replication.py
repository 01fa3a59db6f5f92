"""The replication report: paired bootstrap over seeds and tasks, its table and figure."""

from __future__ import annotations

import numpy as np
import pytest

import json
import types

from benchmarks import replication
from benchmarks.replication import (KL_MEASURED, SECONDARY, VARIANTS, figure, markdown,
                                    paired_bootstrap, read_runs, run_seed, secondary, summary)


def test_the_interval_covers_the_differences_spread_over_seeds_and_tasks():
    rng = np.random.default_rng(0)
    # 5 seeds x 20 tasks; the arm is 0.1 better, task noise 0.2, and seed 4 was unlucky.
    diffs = {s: {f"t{t}": 0.1 + rng.normal(0, 0.2) - (0.3 if s == 4 else 0.0) for t in range(20)}
             for s in range(5)}
    m, lo, hi = paired_bootstrap(diffs)
    assert lo < m < hi
    assert m == pytest.approx(np.mean([v for d in diffs.values() for v in d.values()]))
    # Resampling seeds carries the unlucky seed's spread: wider than tasks alone would give.
    pooled = {0: {f"{s}/{t}": v for s, d in diffs.items() for t, v in d.items()}}
    _, plo, phi = paired_bootstrap(pooled)
    assert hi - lo > 1.3 * (phi - plo)
    # No difference at all: a degenerate interval at 0.
    assert paired_bootstrap({0: {"a": 0.0, "b": 0.0}}) == (0.0, 0.0, 0.0)
    assert all(np.isnan(paired_bootstrap({0: {}})))


def _runs():
    tasks = {"a": 0.2, "b": 0.4}
    arm = lambda bump: {"sft": 0.3, "rl": 0.3 + bump, "gated": [0.4, 0.5, 0.6, 0.6, 0.7],  # noqa: E731
                        "tasks": {t: v + bump for t, v in tasks.items()},
                        "bug": [0.5, 0.4] * 5 if bump else []}
    return {s: {"rcca": arm(0.05), "grpo-gated": arm(0.0)} for s in (0, 1)}


def test_the_table_reads_the_paired_difference_to_the_reference(tmp_path):
    rows = summary(_runs(), "grpo-gated", 0.5)
    assert rows[0][:5] == ["rcca", "2", "0.300", "0.350", "+0.050 [+0.050, +0.050]"]
    assert rows[1][4] == "-" and rows[0][5] == "2/2 (median 2)"
    assert rows[0][7] == "0.46 -> 0.44" and rows[1][7] == "-"
    text = markdown(rows, "grpo-gated", 0.5)
    assert text.splitlines()[0].startswith("| arm | seeds |") and "+0.050" in text
    assert figure(_runs(), tmp_path / "r.png") and (tmp_path / "r.png").stat().st_size > 1000


def test_every_arm_is_a_valid_run_config():
    from evaluators.localize.spans import METHODS
    from rcca_jax.train.credit import CREDIT
    from rcca_jax.rl.loss import WEIGHT_NORMS

    for flags in VARIANTS.values():
        opts = dict(f.removeprefix("--config.").split("=", 1) for f in flags)
        assert opts["rl.method"] in CREDIT
        assert opts.get("train.weight_norm", "row_mean") in WEIGHT_NORMS
        assert opts.get("rl.localization", "grounded") in METHODS


def test_finished_arms_are_read_back_not_run_again(tmp_path, monkeypatch):
    args = types.SimpleNamespace(only=["grpo-gated", "rcca"], out=str(tmp_path), config="c.py",
                                 steps=3, launcher=[])
    runs = _runs()
    for seed in (0, 1):
        for arm in args.only:
            flags = ["--config=c.py", f"--config.seed={seed}", "--config.rl.steps=3",
                     KL_MEASURED, *VARIANTS[arm]]
            secondary_metrics = {k: [0.1 * seed, 0.2] for k in SECONDARY.values()}
            (tmp_path / f"seed{seed}" / arm).mkdir(parents=True)
            (tmp_path / f"seed{seed}" / arm / "arm.json").write_text(json.dumps(
                {**runs[seed][arm], "flags": flags, "secondary": secondary_metrics}))

    def no_launch(*a, **k):
        raise AssertionError("a finished arm was run again")

    monkeypatch.setattr(replication.subprocess, "run", no_launch)
    got = run_seed(1, args)
    assert list(got) == ["grpo-gated", "rcca"] and got["rcca"]["rl"] == runs[1]["rcca"]["rl"]
    # Other flags (more steps) are another run: the launcher is called.
    with pytest.raises(AssertionError, match="run again"):
        run_seed(1, types.SimpleNamespace(**{**vars(args), "steps": 4}))
    back = read_runs(tmp_path, ["rcca", "grpo-gated"])
    assert list(back) == [0, 1] and list(back[0]) == ["rcca", "grpo-gated"]
    assert summary(back, "grpo-gated", 0.5)[0][4] == "+0.050 [+0.050, +0.050]"
    table = secondary(back).splitlines()
    assert table[0].startswith("| arm | KL to SFT, last 5 steps |") and len(table) == 4
    # Seeds 0 and 1 end their last 5 steps at means 0.1 and 0.15: their mean is 0.125.
    assert table[2] == "| rcca | " + " | ".join(["0.125"] * len(SECONDARY)) + " |"
    # A new arm beside finished ones whose runs are gone cannot share their SFT: refused.
    with pytest.raises(SystemExit, match="same SFT"):
        run_seed(1, types.SimpleNamespace(**{**vars(args), "only": ["grpo-gated", "placebo"]}))
    # Stray folders are not seeds; an arm run with other shared flags is not mixed in.
    (tmp_path / "seed0_old" / "rcca").mkdir(parents=True)
    (tmp_path / "seed0_old" / "rcca" / "arm.json").write_text("{}")
    assert list(read_runs(tmp_path, ["rcca", "grpo-gated"])) == [0, 1]
    odd = tmp_path / "seed2" / "rcca"
    odd.mkdir(parents=True)
    (odd / "arm.json").write_text(json.dumps({**runs[0]["rcca"], "flags": [
        "--config=c.py", "--config.seed=2", "--config.rl.steps=9", *VARIANTS["rcca"]]}))
    with pytest.raises(SystemExit, match="must not mix"):
        read_runs(tmp_path, ["rcca", "grpo-gated"])


def test_the_report_holds_every_arm_of_any_seed():
    runs = _runs()
    runs[1]["placebo"] = runs[1]["rcca"]  # only seed 1 has it
    rows = summary(runs, "grpo-gated", 0.5)
    assert [r[0] for r in rows] == ["rcca", "grpo-gated", "placebo"] and rows[2][1] == "1"
