#!/usr/bin/env bash
# The test suite: installs what it needs, then runs pytest. Extra arguments go
# to pytest (e.g. `-m "not slow"` for a quick run).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest "$@"
