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
  # --no-compile: pip compiles serially; the step below compiles on every core
  { .venv/bin/pip install --disable-pip-version-check --no-compile -r envs/requirements.lock \
      && .venv/bin/pip install --disable-pip-version-check --no-deps -e . ; } \
    > .venv/pip.log 2>&1 || { tail -n 40 .venv/pip.log >&2; exit 1; }
  .venv/bin/python -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '2.13.0')" \
    || { echo "torch 2.13.0 was replaced; check envs/requirements.lock" >&2; exit 1; }
  echo "$wanted" > "$stamp"
fi
# Byte-compile every installed module once, and this package on each call. Jobs run with
# PYTHONDONTWRITEBYTECODE set (and pip's --no-compile above) would otherwise recompile from
# source whatever they import (torch, pandas, scipy, and snakemake's lazily imported helpers)
# in every job and every snakemake call: about 10% of the tiny test workflow's time.
compile="import compileall, sys; [compileall.compile_dir(p, quiet=2, workers=0) for p in sys.argv[1:]]"
purelib=$(.venv/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
if [ "$(cat .venv/.bytecode 2>/dev/null)" != "$wanted" ]; then
  env -u PYTHONDONTWRITEBYTECODE .venv/bin/python -c "$compile" "$purelib"
  echo "$wanted" > .venv/.bytecode
fi
env -u PYTHONDONTWRITEBYTECODE .venv/bin/python -c "$compile" miarepro
