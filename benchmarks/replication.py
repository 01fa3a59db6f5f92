"""Plain GRPO vs gated-reward GRPO vs RCCA on our task family, from the same SFT start and seeds.

  python benchmarks/replication.py [--config configs/tiny.py] [--steps 24] [--target 0.5]

Runs SFT once (the first variant's launcher run), then every variant's RL from
that same SFT checkpoint, with the same prompts and sampling keys:
  rcca        token weights from localized diagnostics, the gated reward
  grpo-gated  flat weights, the gated reward
  grpo-plain  flat weights, reward = share of rubrics passed (no gates)
The later variants start from a copy of the first one's workdir cut back to the
end of SFT; the loop resumes there exactly (tests/train/test_loop.py checks
resume exactness), so only RL differs between them.

Prints, side by side: the gated reward of each RL batch (the task's own reward,
whatever the variant trains on), its 3-step moving average, per-rubric pass
rates over the first and last 5 steps, the evaluation before/after RL
(`eval.samples` answers per held-out task), and the RL steps each variant needs
for the moving average to reach --target.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VARIANTS = {
    "rcca": ["--config.rl.method=rcca", "--config.rl.reward=gated"],
    "grpo-gated": ["--config.rl.method=grpo", "--config.rl.reward=gated"],
    "grpo-plain": ["--config.rl.method=grpo", "--config.rl.reward=pass_rate"],
}
WINDOW = 3


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


def report(curves: dict[str, list[dict]], results: dict[str, dict], target: float) -> None:
    names = list(curves)
    gated = {n: [r["reward/gated_mean"] for r in curves[n]] for n in names}
    avg = {n: moving(gated[n]) for n in names}
    print("step | " + " | ".join(f"{n} gated (avg{WINDOW})" for n in names))
    for i in range(max(len(c) for c in curves.values())):
        print(f"{i} | " + " | ".join(f"{gated[n][i]:.3f} ({avg[n][i]:.3f})" if i < len(gated[n]) else "-"
                                     for n in names))
    print()
    rubrics = sorted({k for c in curves.values() for r in c for k in r if k.startswith("rubric/")})
    print("rubric pass rate, first 5 -> last 5 steps | " + " | ".join(names))
    for k in rubrics:
        cells = []
        for n in names:
            a = [r[k] for r in curves[n][:5] if k in r]
            b = [r[k] for r in curves[n][-5:] if k in r]
            cells.append(f"{sum(a) / len(a):.2f} -> {sum(b) / len(b):.2f}" if a and b else "-")
        print(f"{k[len('rubric/'):]} | " + " | ".join(cells))
    print()
    print(f"variant | eval after SFT | eval after RL | RL steps until avg{WINDOW} >= {target}")
    for n in names:
        hit = next((i for i, v in enumerate(avg[n]) if v >= target), None)
        print(f"{n} | {results[n]['sft']:.3f} | {results[n]['rcca']:.3f} | "
              f"{hit if hit is not None else 'not reached'}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="configs/tiny.py")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--target", type=float, default=0.5)
    ap.add_argument("--out", default="runs/replication")
    ap.add_argument("--only", nargs="*", default=list(VARIANTS), choices=list(VARIANTS))
    args = ap.parse_args()
    results, curves, base = {}, {}, None
    for name in args.only:
        wd = REPO / args.out / name
        if base is not None:
            fork_at_sft(base, wd, first_rl_step(base))
        cmd = [sys.executable, "-m", "rcca_jax.launch", f"--config={args.config}", f"--workdir={wd}",
               f"--config.rl.steps={args.steps}", *VARIANTS[name]]
        subprocess.run(cmd, cwd=REPO, check=True)
        base = base or wd
        results[name] = json.loads((wd / "result.json").read_text())
        first = first_rl_step(wd)
        curves[name] = [r for r in metrics(wd) if r["step"] >= first]
    report(curves, results, args.target)


if __name__ == "__main__":
    main()
