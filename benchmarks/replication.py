"""Plain GRPO vs gated-reward GRPO vs RCCA on our task family, from the same SFT start and seeds.

  python benchmarks/replication.py [--config configs/tiny.py] [--steps 20] [--target 0.8]

Runs the launcher three times with the same config and seed (so SFT, prompts
and sampling keys are identical up to the first RL update):
  grpo-plain  flat weights, reward = share of rubrics passed (no gates)
  grpo-gated  flat weights, the gated reward
  rcca        token weights from localized diagnostics, the gated reward
then prints the reward curve and per-rubric pass rates side by side, and the
number of RL steps each needs to reach --target mean (gated) reward.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VARIANTS = {
    "grpo-plain": ["--config.rl.method=grpo", "--config.rl.reward=pass_rate"],
    "grpo-gated": ["--config.rl.method=grpo", "--config.rl.reward=gated"],
    "rcca": ["--config.rl.method=rcca", "--config.rl.reward=gated"],
}


def curve(workdir: Path, first_rl_step: int) -> list[dict]:
    rows = [json.loads(x) for x in (workdir / "metrics.jsonl").read_text().splitlines()]
    return [r for r in rows if r["step"] >= first_rl_step]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="configs/tiny.py")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--target", type=float, default=0.8)
    ap.add_argument("--out", default="runs/replication")
    args = ap.parse_args()
    results, curves = {}, {}
    for name, flags in VARIANTS.items():
        wd = REPO / args.out / name
        cmd = [sys.executable, "-m", "rcca_jax.launch", f"--config={args.config}", f"--workdir={wd}",
               f"--config.rl.steps={args.steps}", *flags]
        subprocess.run(cmd, cwd=REPO, check=True)
        results[name] = json.loads((wd / "result.json").read_text())
        first = min(r["step"] for r in map(json.loads, (wd / "metrics.jsonl").read_text().splitlines())
                    if "reward/mean" in r)
        curves[name] = curve(wd, first)
    print("step | " + " | ".join(f"{n} reward" for n in VARIANTS))
    for i in range(args.steps):
        print(f"{i} | " + " | ".join(f"{curves[n][i]['reward/mean']:.3f}" if i < len(curves[n]) else "-"
                                     for n in VARIANTS))
    print()
    rubrics = sorted({k for c in curves.values() for r in c for k in r if k.startswith("rubric/")})
    print("rubric (mean pass rate over the last 5 steps) | " + " | ".join(VARIANTS))
    for k in rubrics:
        vals = []
        for n in VARIANTS:
            xs = [r[k] for r in curves[n][-5:] if k in r]
            vals.append(f"{sum(xs) / len(xs):.2f}" if xs else "-")
        print(f"{k} | " + " | ".join(vals))
    print()
    print("variant | greedy reward after SFT | after RL | RL steps to reach batch mean >= target")
    for n in VARIANTS:
        hit = next((i for i, r in enumerate(curves[n]) if r.get("reward/mean", 0) >= args.target), None)
        print(f"{n} | {results[n]['sft']:.3f} | {results[n]['rcca']:.3f} | {hit if hit is not None else 'not reached'}")


if __name__ == "__main__":
    main()
