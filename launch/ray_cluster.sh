#!/usr/bin/env bash
# Starts a Ray cluster of evaluator hosts (CPU machines with Debian's chromium).
#
# On the head node:     bash launch/ray_cluster.sh head
# On each other host:   HEAD=<head-ip>:6379 bash launch/ray_cluster.sh worker
# Then train with:      --config.evaluator.backend=ray --config.evaluator.ray_address=auto
#                       --config.evaluator.workers=<number of Chromium actors>
#
# Every host runs scripts/setup.sh first (chromium, the CDN mirror, the package).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/pip install -q "ray==2.60.0"
case "${1:-}" in
  head)   .venv/bin/ray start --head --port=6379 --num-cpus="$(nproc)" --include-dashboard=false ;;
  worker) .venv/bin/ray start --address="${HEAD:?set HEAD=<head-ip>:6379}" --num-cpus="$(nproc)" ;;
  *) echo "usage: launch/ray_cluster.sh head|worker" >&2; exit 2 ;;
esac
