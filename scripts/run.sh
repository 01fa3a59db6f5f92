#!/usr/bin/env bash
# The main job on the small embedded default: scores the bundled example set
# in headless Chromium and prints the result table.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m evaluators demo "$@"
