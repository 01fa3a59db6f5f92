"""Credit-assignment arms from one SFT start per seed, with paired bootstrap intervals.

  python benchmarks/replication.py [--config configs/tiny.py:testbed] [--steps 20] [--seeds 0 1 2 3 4]
      [--only rcca grpo-gated placebo ...] [--reference grpo-gated] [--target 0.5]
      [--config.<field>=<value> ...]   (passed to every launcher run)

Short version (2 seeds, 4 arms, few steps; see the README for its time):
  python benchmarks/replication.py --config configs/tiny.py:testbed --seeds 0 1 --steps 4 \
      --only grpo-gated rcca placebo oracle --config.eval.samples=1

Per seed (`--config.seed`), SFT runs once (the first arm's launcher run), then every arm's
RL from that same SFT checkpoint, with the same prompts and sampling keys:
  rcca          token weights from localized diagnostics, rescaled to mean 1 per row (the
                demo's `train.weight_norm=row_mean`), the gated reward
  rcca-given    the paper's weights as given (`train.weight_norm=none`)
  placebo       as many blamed tokens per row at each weight, at random places
  contrastive   rcca, but a blamed token shared with a better row of the group stays at 1
  oracle        exactly the injected bug's tokens blamed (`rl.localization=oracle`): the
                upper bound of localization, for the testbed (`configs/tiny.py:testbed`,
                whose SFT references carry known bugs); elsewhere it blames nothing
  grpo-gated    flat weights, the gated reward
  grpo-plain    flat weights, reward = share of rubrics passed (no gates)
(`rcca_jax.train.credit` holds the arms.) The later arms start from a copy of the first
one's workdir cut back to the end of SFT; the loop resumes there exactly
(tests/train/test_loop.py checks resume exactness), so only RL differs between them.

Each finished arm leaves `seed<N>/<arm>/arm.json` (its summary, launcher flags, commit and
wall time); a later call with the same flags reads it back instead of running the arm again,
so the experiment can be run a seed at a time (`--seeds 2`, on other days or machines sharing
--out), and `--report` runs nothing and reports every finished arm under --out.

Writes into --out: `replication.md` (the tables) and, with matplotlib, `replication.png`
(batch gated reward over RL steps per arm, the mean over seeds with a band of one standard
error), and prints the table. The primary figure is each arm's held-out gated reward after
RL minus the reference arm's, paired by seed and task, with a 95% bootstrap interval that
resamples seeds and, within each, tasks. With one seed the interval covers tasks only.
A second table holds, per arm, the last 5 RL steps of the KL to the SFT policy, the entropy
on blamed and on other tokens, and the share of answers failing the runtime gate; the first
holds the share of answers to bugged testbed tasks that still write the injected bug (the
sampled estimate of the probability the policy gives it).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from benchmarks.revision import code_version  # noqa: E402
from evaluators.leaderboard import task_rewards  # noqa: E402

VARIANTS = {
    "rcca": ["--config.rl.method=rcca", "--config.rl.reward=gated"],
    "rcca-given": ["--config.rl.method=rcca", "--config.rl.reward=gated",
                   "--config.train.weight_norm=none"],
    "placebo": ["--config.rl.method=placebo", "--config.rl.reward=gated"],
    "contrastive": ["--config.rl.method=contrastive", "--config.rl.reward=gated"],
    "oracle": ["--config.rl.method=rcca", "--config.rl.reward=gated",
               "--config.rl.localization=oracle"],
    "grpo-gated": ["--config.rl.method=grpo", "--config.rl.reward=gated"],
    "grpo-plain": ["--config.rl.method=grpo", "--config.rl.reward=pass_rate"],
}
WINDOW = 3
# Every arm reports its KL to the SFT policy it starts from (a secondary figure) without
# it entering the loss (`TrainConfig.kl_measure`; a `--config.train.kl_coef` still can).
KL_MEASURED = "--config.train.kl_measure=True"


def metrics(workdir: Path) -> list[dict]:
    return [json.loads(x) for x in (workdir / "metrics.jsonl").read_text().splitlines()]


def first_rl_step(workdir: Path) -> int:
    return min(r["step"] for r in metrics(workdir) if "reward/mean" in r)


def fork_at_sft(src: Path, dst: Path, sft_steps: int) -> None:
    """A copy of `src` as it was when SFT ended: data, the initial policy folder, the SFT evaluation
    and metrics, the RL-start checkpoint."""
    if dst.exists():
        shutil.rmtree(dst)
    dst.mkdir(parents=True)
    for name in ("tasks.jsonl", "init", "tfds", "sft_rewards.jsonl", "eval/sft"):
        if (src / name).is_dir():
            shutil.copytree(src / name, dst / name)
        elif (src / name).exists():
            (dst / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src / name, dst / name)
    shutil.copytree(src / "checkpoints" / str(sft_steps), dst / "checkpoints" / str(sft_steps))
    kept = [json.dumps(r) for r in metrics(src) if r["step"] < sft_steps]
    (dst / "metrics.jsonl").write_text("".join(x + "\n" for x in kept))


def moving(xs: list[float], k: int = WINDOW) -> list[float]:
    return [sum(xs[max(0, i - k + 1):i + 1]) / len(xs[max(0, i - k + 1):i + 1]) for i in range(len(xs))]


def paired_bootstrap(diffs: dict[int, dict[str, float]], resamples: int = 2000,
                     seed: int = 0) -> tuple[float, float, float]:
    """(mean, 2.5%, 97.5%) of per-(seed, task) differences: seeds resampled, then tasks
    within each drawn seed (two-stage), the mean over all drawn pairs each time.

    Args:
      diffs: {seed: {task: arm's reward minus the reference's}}; seeds with no task are left out.
    """
    groups = [np.asarray(list(d.values()), float) for d in diffs.values() if d]
    if not groups:
        return float("nan"), float("nan"), float("nan")
    point = float(np.mean(np.concatenate(groups)))
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    for b in range(resamples):
        drawn = [groups[i] for i in rng.integers(len(groups), size=len(groups))]
        means[b] = np.mean(np.concatenate([g[rng.integers(len(g), size=len(g))] for g in drawn]))
    lo, hi = np.percentile(means, [2.5, 97.5])
    return point, float(lo), float(hi)


def steps_to(values: list[float], target: float) -> int | None:
    return next((i for i, v in enumerate(moving(values)) if v >= target), None)


def summary(runs: dict[int, dict[str, dict]], reference: str, target: float) -> list[list[str]]:
    """Rows: arm, seeds, held-out after SFT and after RL (mean over seeds), the paired
    difference to `reference` with its interval, steps to `target`, last-5-step batch reward,
    and on the testbed the share of answers still holding the injected bug."""
    arms = arm_names(runs)
    rows = []
    for arm in arms:
        per = [runs[s][arm] for s in runs if arm in runs[s]]
        diffs = {s: {t: runs[s][arm]["tasks"][t] - runs[s][reference]["tasks"][t]
                     for t in runs[s][arm]["tasks"] if t in runs[s][reference]["tasks"]}
                 for s in runs if arm in runs[s] and reference in runs[s]}
        m, lo, hi = paired_bootstrap(diffs)
        hits = [h for h in (steps_to(r["gated"], target) for r in per) if h is not None]
        reached = f"{len(hits)}/{len(per)}" + (f" (median {statistics.median(hits):g})" if hits else "")
        bug = [r["bug"] for r in per if r.get("bug")]
        rows.append([arm, str(len(per)), f"{statistics.fmean(r['sft'] for r in per):.3f}",
                     f"{statistics.fmean(r['rl'] for r in per):.3f}",
                     "-" if arm == reference else f"{m:+.3f} [{lo:+.3f}, {hi:+.3f}]", reached,
                     f"{statistics.fmean(statistics.fmean(r['gated'][-5:]) for r in per):.3f}",
                     f"{statistics.fmean(statistics.fmean(b[:5]) for b in bug):.2f} -> "
                     f"{statistics.fmean(statistics.fmean(b[-5:]) for b in bug):.2f}" if bug else "-"])
    return rows


def markdown(rows: list[list[str]], reference: str, target: float) -> str:
    head = ["arm", "seeds", "held-out after SFT", "held-out after RL",
            f"after RL minus {reference} [95% CI]", f"seeds reaching avg{WINDOW} >= {target} (steps)",
            "batch gated reward, last 5 steps", "answers holding the testbed bug, first -> last 5 steps"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def figure(runs: dict[int, dict[str, dict]], path: Path) -> bool:
    """Batch gated reward per RL step, mean over seeds with a one-standard-error band."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(7, 4))
    for arm in arm_names(runs):
        curves = [runs[s][arm]["gated"] for s in runs if arm in runs[s]]
        n = min(len(c) for c in curves)
        y = np.array([c[:n] for c in curves])
        mean = y.mean(0)
        se = y.std(0, ddof=1) / np.sqrt(len(y)) if len(y) > 1 else np.zeros(n)
        ax.plot(range(n), mean, label=arm)
        ax.fill_between(range(n), mean - se, mean + se, alpha=0.2)
    ax.set_xlabel("RL step")
    ax.set_ylabel("batch gated reward")
    ax.set_title(f"{len(runs)} seed(s); band: one standard error over seeds")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


SECONDARY = {"KL to SFT": "loss/kl", "entropy, blamed tokens": "policy/entropy_diagnosed",
             "entropy, other tokens": "policy/entropy_other",
             "runtime-gate share": "reward/gate_runtime_frac"}


def arm_summary(wd: Path) -> dict:
    """What the report needs from one finished arm's workdir (its result, held-out records
    and RL metrics)."""
    result = json.loads((wd / "result.json").read_text())
    lines = (wd / "eval" / "rl" / "records.jsonl").read_text().splitlines()
    records = [json.loads(x) for x in lines]
    first = first_rl_step(wd)
    rl = [r for r in metrics(wd) if r["step"] >= first]
    return {"sft": result["sft"], "rl": result["rcca"], "tasks": task_rewards(records),
            "gated": [r["reward/gated_mean"] for r in rl],
            "bug": [r["testbed/bug_rate"] for r in rl if "testbed/bug_rate" in r],
            "secondary": {k: [r[k] for r in rl if k in r] for k in SECONDARY.values()}}


def _write_json(path: Path, obj: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(obj))
    tmp.replace(path)  # a call stopped mid-write leaves no half file behind


def _finished(wd: Path, flags: list[str]) -> dict | None:
    done = wd / "arm.json"
    if done.exists():
        got = json.loads(done.read_text())
        if got["flags"] == flags:
            return got
    return None


def _has_sft(wd: Path) -> bool:
    """Whether an arm's run is still on disk to fork others from (metrics, SFT checkpoint)."""
    if not (wd / "metrics.jsonl").exists():
        return False
    return (wd / "checkpoints" / str(first_rl_step(wd))).exists()


def run_seed(seed: int, args) -> dict[str, dict]:
    """Every arm of one seed. An arm whose `arm.json` holds the same launcher flags is read
    back, not run again: a long experiment can be run a seed or an arm at a time. The arms
    run here fork from the seed's SFT: that of a finished arm still on disk, else the SFT
    that the first arm run here makes."""
    arms = {name: (REPO / args.out / f"seed{seed}" / name,
                   [f"--config={args.config}", f"--config.seed={seed}",
                    f"--config.rl.steps={args.steps}", KL_MEASURED, *args.launcher,
                    *VARIANTS[name]])
            for name in args.only}
    out = {n: got for n, (wd, flags) in arms.items() if (got := _finished(wd, flags))}
    base = next((arms[n][0] for n in out if _has_sft(arms[n][0])), None)
    if out and base is None and len(out) < len(arms):
        raise SystemExit(f"seed {seed}: {', '.join(out)} finished, but none of their runs is on "
                         "disk to start the other arms from the same SFT; use a new --out")
    for name, (wd, flags) in arms.items():
        if name in out:
            continue
        if base is not None:
            fork_at_sft(base, wd, first_rl_step(base))
        commit, t0 = code_version(), time.monotonic()
        subprocess.run([sys.executable, "-m", "rcca_jax.launch", f"--workdir={wd}", *flags],
                       cwd=REPO, check=True)
        base = base or wd
        out[name] = {**arm_summary(wd), "flags": flags, "commit": commit,
                     "sft_from": base.name, "wall_s": time.monotonic() - t0}
        _write_json(wd / "arm.json", out[name])
    return {name: out[name] for name in args.only}


def arm_names(runs: dict[int, dict[str, dict]]) -> list[str]:
    """Every arm of any seed, in the order first seen."""
    return list(dict.fromkeys(a for r in runs.values() for a in r))


def _shared_flags(arm: str, got: dict) -> list[str]:
    """An arm's launcher flags less its seed and its variant's own: equal across a report."""
    return [f for f in got["flags"]
            if not f.startswith("--config.seed=") and f not in VARIANTS.get(arm, ())]


def read_runs(out: Path, arms: list[str]) -> dict[int, dict[str, dict]]:
    """Every finished arm under `out` (``seed<N>/<arm>/arm.json``), for a report of runs made
    apart. Arms run with other shared flags (steps, config) than the first are refused."""
    runs: dict[int, dict[str, dict]] = {}
    first: tuple[Path, list[str]] | None = None
    for path in sorted(out.glob("seed*/*/arm.json")):
        seed, arm = path.parent.parent.name.removeprefix("seed"), path.parent.name
        if not seed.isdigit() or arm not in arms:
            continue
        got = json.loads(path.read_text())
        shared = _shared_flags(arm, got)
        if first is None:
            first = (path, shared)
        elif shared != first[1]:
            raise SystemExit(f"{path} was run with {shared}, {first[0]} with {first[1]}: "
                             "one report must not mix them")
        runs.setdefault(int(seed), {})[arm] = got
    return {s: {a: runs[s][a] for a in arms if a in runs[s]} for s in sorted(runs)}


def secondary(runs: dict[int, dict[str, dict]]) -> str:
    """Per arm, the mean over seeds of the last 5 RL steps of each `SECONDARY` metric."""
    arms = arm_names(runs)
    lines = ["| arm | " + " | ".join(f"{k}, last 5 steps" for k in SECONDARY) + " |",
             "|---|" + "---|" * len(SECONDARY)]
    for arm in arms:
        cells = []
        for key in SECONDARY.values():
            got = [statistics.fmean(v[-5:]) for s in runs if arm in runs[s]
                   for v in [runs[s][arm].get("secondary", {}).get(key, [])] if v]
            cells.append(f"{statistics.fmean(got):.3f}" if got else "-")
        lines.append(f"| {arm} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="configs/tiny.py")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--target", type=float, default=0.5)
    ap.add_argument("--out", default="runs/replication")
    ap.add_argument("--only", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    ap.add_argument("--reference", default="grpo-gated", choices=list(VARIANTS))
    ap.add_argument("--report", action="store_true",
                    help="run nothing: the report of every finished arm under --out")
    args, args.launcher = ap.parse_known_args()
    bad = [a for a in args.launcher if not a.startswith("--config.")]
    if bad:
        ap.error(f"unknown arguments {bad} (only --config.* flags go on to the launcher)")
    if args.reference not in args.only:
        ap.error(f"--reference {args.reference} must be one of the arms run (--only)")
    out = REPO / args.out
    t0 = time.monotonic()
    runs = read_runs(out, args.only) if args.report else {s: run_seed(s, args) for s in args.seeds}
    runs = {s: r for s, r in runs.items() if args.reference in r}
    if not runs:
        raise SystemExit(f"no seed under {out} has the reference arm {args.reference} finished")
    arms = [a for r in runs.values() for a in r.values()]
    commits = sorted({a.get("commit", "unknown") for a in arms})
    text = (markdown(summary(runs, args.reference, args.target), args.reference, args.target)
            + "\n" + secondary(runs)
            + f"\n{len(runs)} seed(s), commit(s) {', '.join(commits)}; arms ran "
            f"{sum(a.get('wall_s', 0) for a in arms) / 60:.0f} min in all"
            + ("" if args.report else f", this call {(time.monotonic() - t0) / 60:.0f} min") + "\n")
    (out / "replication.md").write_text(text)
    drew = figure(runs, out / "replication.png")
    print(text + (f"\nfigure: {out / 'replication.png'}" if drew
                  else "\n(no matplotlib: no figure)"))


if __name__ == "__main__":
    main()
