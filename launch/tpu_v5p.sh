#!/usr/bin/env bash
# Runs rcca on every worker of a TPU v5p pod slice (Cloud TPU VM).
#
#   TPU_NAME=my-v5p ZONE=us-east5-a BUCKET=gs://my-bucket bash launch/tpu_v5p.sh configs/ling_flash.py
#
# Each worker installs the package with the [tpu] extra (libtpu) and starts the
# same launcher; jax.distributed.initialize() finds the other workers from the
# TPU environment, and every process reads its own shard of prompts.
set -euo pipefail
CONFIG=${1:?usage: launch/tpu_v5p.sh configs/<name>.py [extra launcher flags]}
shift || true
: "${TPU_NAME:?set TPU_NAME}" "${ZONE:?set ZONE}" "${BUCKET:?set BUCKET (gs://...)}"
: "${REPO:?set REPO to the git URL of your rcca clone}"
RUN=${RUN:-$(basename "$CONFIG" .py)-$(date +%Y%m%d-%H%M%S)}

gcloud compute tpus tpu-vm ssh "$TPU_NAME" --zone "$ZONE" --worker=all --command "
  set -e
  [ -d rcca ] || git clone $REPO rcca
  cd rcca && git pull --ff-only
  python3 -m venv .venv && .venv/bin/pip install -q -e '.[tpu]'
  .venv/bin/python -m rcca_jax.launch --config=$CONFIG --workdir=$BUCKET/runs/$RUN $*
"
