#!/usr/bin/env bash
# The main job on the small embedded default: SFT warm-up then RCCA on our task
# family with real Chromium evaluation (configs/tiny.py); the last line reads
# `mean reward: sft=<x> (se <s>) rcca=<y> (se <s>); ...`. Extra arguments go to the launcher, e.g.
# `bash scripts/run.sh --config.rl.steps=40`. `bash scripts/run.sh --evaluator-demo`
# scores the bundled example apps instead and prints the evaluator's table.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if [[ "${1:-}" == "--evaluator-demo" ]]; then
  shift
  exec .venv/bin/python -m evaluators demo "$@"
fi
exec .venv/bin/python -m rcca_jax.launch --config=configs/tiny.py "$@"
