#!/usr/bin/env bash
# Create (or reuse) .venv with the pinned dependencies and this package.
# torch is pinned to 2.13.0 so pip never swaps a local CPU build for a CUDA download.
set -euo pipefail
cd "$(dirname "$0")"
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.requirements.sha256
wanted=$(cat envs/requirements.lock pyproject.toml | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]; then
  echo "Installing pinned dependencies into .venv (log: .venv/pip.log) ..."
  # --no-compile: byte-compiling 1.9 GB of packages up front takes longer than the install
  { .venv/bin/pip install --disable-pip-version-check --no-compile -r envs/requirements.lock \
      && .venv/bin/pip install --disable-pip-version-check --no-deps -e . ; } \
    > .venv/pip.log 2>&1 || { tail -n 40 .venv/pip.log >&2; exit 1; }
  .venv/bin/python -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '2.13.0')" \
    || { echo "torch 2.13.0 was replaced; check envs/requirements.lock" >&2; exit 1; }
  echo "$wanted" > "$stamp"
fi
# Byte-compile what the workflow imports, once. With PYTHONDONTWRITEBYTECODE set (and pip's
# --no-compile above), every job would otherwise recompile torch, pandas and scipy from source:
# about 10 s of each training job and 2 s of each scoring job.
compiled="$wanted $(sha256sum miarepro/warmup.py | cut -d' ' -f1)"
if [ "$(cat .venv/.bytecode 2>/dev/null)" != "$compiled" ]; then
  env -u PYTHONDONTWRITEBYTECODE .venv/bin/python -m miarepro.warmup
  echo "$compiled" > .venv/.bytecode
fi
