#!/usr/bin/env bash
# Installs what rcca needs, idempotently, on a Debian machine with Python 3.11:
# Debian's chromium, npm and openssl, a virtual environment at .venv with the
# package and its dev extras, and the offline CDN mirror (npm packages) at .cdn.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
need_apt=()
[ -x /usr/lib/chromium/chromium ] || need_apt+=(chromium)
command -v npm >/dev/null 2>&1 || need_apt+=(npm)
# The CDN mirror's loopback server speaks TLS with a self-signed certificate made by openssl.
command -v openssl >/dev/null 2>&1 || need_apt+=(openssl)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "installing Debian packages: ${need_apt[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null 2>&1 || PY=python3
[ -x .venv/bin/python ] || "$PY" -m venv .venv

# Reinstall only when the package metadata changed.
stamp=.venv/.rcca-setup-stamp
want=$(sha256sum setup.py | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  .venv/bin/python -m pip install -q --upgrade pip
  # torch for the parity tests, CPU build only: prefer a local wheel or the configured index
  # when it offers the +cpu build, else PyTorch's CPU index. Never a CUDA build.
  if ! .venv/bin/python -c "import torch" >/dev/null 2>&1; then
    torch_index=()
    if curl -fsI --max-time 5 https://download.pytorch.org/whl/cpu/torch/ >/dev/null 2>&1; then
      torch_index=(--extra-index-url https://download.pytorch.org/whl/cpu)
    fi
    .venv/bin/python -m pip install -q "${torch_index[@]}" torch==2.13.0
  fi
  if ! .venv/bin/python -c "import torch, sys; sys.exit(torch.version.cuda is not None)"; then
    echo "setup: a CUDA build of torch was installed; install torch==2.13.0+cpu instead" >&2
    exit 1
  fi
  .venv/bin/python -m pip install -q -e ".[dev]"
  echo "$want" > "$stamp"
fi

.venv/bin/python -m evaluators.cdn install
