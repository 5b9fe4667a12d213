#!/usr/bin/env bash
# The project's one prepared GPU check (docs/gpu.md): install (offline if need be), then every part of
# scripts/gpu_check.py with its own time budget. Everything is written straight to files in OUT as
# it comes: gpu_check.md + gpu_check.json (rewritten after each part), progress.log, logs/<part>.log,
# generation.md / .json and install.log — a run cut short keeps what it wrote.
#
#   bash scripts/gpu-check.sh OUT                         # on any GPU machine (wheels/gpu beside it if offline)
#   bash scripts/gpu-check.sh OUT --device cpu --tiny     # the CPU rehearsal (tests/test_gpu_check.py)
#   RESRL_GPU_CHECK_PYTHON=.venv/bin/python bash scripts/gpu-check.sh OUT ...   # no install: use that Python
#
# Install (skipped with RESRL_GPU_CHECK_PYTHON): a venv with --system-site-packages (the machine's
# torch / transformers / accelerate are used as they are, never reinstalled), into which go the wheels
# of wheels/gpu (scripts/gpu-wheels.sh) that the machine does not already have, with
# `pip --no-index --no-deps`, then this project (`pip install --no-index --no-deps -e .`). Without a
# network nothing is fetched; with one and no wheels folder, scripts/gpu-wheels.sh downloads them first.
set -uo pipefail
OUT=${1:?usage: scripts/gpu-check.sh OUT [gpu_check.py options]}
shift
cd "$(dirname "$0")/.."
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
LOG="$OUT/install.log"
: > "$LOG"
say() { echo "gpu-check: $*" >> "$LOG"; echo "gpu-check: $*"; }  # to the file first, no pipe

if [ -n "${RESRL_GPU_CHECK_PYTHON:-}" ]; then
  PY=$RESRL_GPU_CHECK_PYTHON
  say "no install: using $PY as it is (RESRL_GPU_CHECK_PYTHON)"
else
  BASE=${PYTHON:-python3}
  WHEELS=${RESRL_GPU_WHEELS:-wheels/gpu}
  VENV=${RESRL_GPU_VENV:-/tmp/resrl-gpu-venv}
  if timeout 8 "$BASE" -c "import urllib.request as u; u.urlopen('https://pypi.org/simple/', timeout=3)" >/dev/null 2>&1; then
    NET=1; say "network: reachable"
  else
    NET=0; say "network: none (nothing will be downloaded)"
  fi
  if ! ls "$WHEELS"/*.whl >/dev/null 2>&1; then
    if [ "$NET" = 1 ]; then
      say "no wheels in $WHEELS: downloading them (scripts/gpu-wheels.sh)"
      PYTHON="$BASE" bash scripts/gpu-wheels.sh "$WHEELS" >>"$LOG" 2>&1 || say "gpu-wheels.sh failed (see above)"
    else
      say "no wheels in $WHEELS and no network: installing only the project; parts needing TRL will report it"
    fi
  fi
  TORCH_BEFORE=$("$BASE" -c "import torch; print(torch.__version__, torch.__file__)" 2>&1)
  say "machine's torch: $TORCH_BEFORE"
  if [ ! -x "$VENV/bin/python" ]; then
    "$BASE" -m venv --system-site-packages "$VENV" >>"$LOG" 2>&1 \
      || { say "venv with pip failed; trying --without-pip"; "$BASE" -m venv --system-site-packages --without-pip "$VENV" >>"$LOG" 2>&1; }
  fi
  PY=$VENV/bin/python
  USER_FLAG=()   # venv mode: no flag; target mode: --target DIR (never the machine's own site-packages)
  if [ ! -x "$PY" ]; then
    say "no venv could be made"; PY=$BASE
  elif ! "$PY" -c "import torch" >/dev/null 2>&1 && "$BASE" -c "import torch" >/dev/null 2>&1; then
    # $BASE is itself a venv (or torch sits outside its system site): a --system-site-packages venv
    # made from it does not see the machine's torch
    say "the venv does not see the machine's torch"; PY=$BASE
  fi
  if [ "$PY" = "$BASE" ]; then
    TARGET=${RESRL_GPU_TARGET:-/tmp/resrl-gpu-site}
    say "target mode: carried wheels go to $TARGET (on PYTHONPATH), the project runs from src/"
    mkdir -p "$TARGET"
    USER_FLAG=(--target "$TARGET")
    export PYTHONPATH="$TARGET${PYTHONPATH:+:$PYTHONPATH}"
  fi
  if "$PY" -m pip --version >/dev/null 2>&1; then PIP=("$PY" -m pip); else PIP=("$BASE" -m pip --python "$PY"); fi
  # the carried wheels whose distribution this Python does not have yet (never torch: not carried)
  MISSING=$("$PY" - "$WHEELS" <<'EOF'
import importlib.metadata as md, pathlib, re, sys
for whl in sorted(pathlib.Path(sys.argv[1]).glob("*.whl")):
    name = whl.name.split("-")[0]
    try:
        md.version(re.sub(r"[-_.]+", "-", name))
    except md.PackageNotFoundError:
        print(whl)
EOF
)
  if [ -n "$MISSING" ]; then
    say "installing (offline, --no-deps): $(echo $MISSING | xargs -n1 basename | tr '\n' ' ')"
    # shellcheck disable=SC2086
    if ! "${PIP[@]}" install --no-index --no-deps "${USER_FLAG[@]}" --find-links "$WHEELS" $MISSING >>"$LOG" 2>&1; then
      say "installing them together failed (see install.log); one at a time:"
      for whl in $MISSING; do
        "${PIP[@]}" install --no-index --no-deps "${USER_FLAG[@]}" "$whl" >>"$LOG" 2>&1 \
          || say "  could not install $(basename "$whl")"
      done
    fi
  else
    say "every carried wheel is installed already"
  fi
  if [ "$PY" != "$BASE" ] && ! "${PIP[@]}" install --no-index --no-deps --no-build-isolation -e . >>"$LOG" 2>&1; then
    SITE=$("$PY" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
    say "editable install failed; putting $(pwd)/src on the path ($SITE/resrl-src.pth)"
    echo "$(pwd)/src" > "$SITE/resrl-src.pth"
  fi
  "${PIP[@]}" check >>"$LOG" 2>&1 || say "pip check reports conflicts (see install.log); the check goes on"
  TORCH_AFTER=$("$PY" -c "import torch; print(torch.__version__, torch.__file__)" 2>&1)
  say "torch in the check's Python: $TORCH_AFTER"
  [ "$TORCH_AFTER" = "$TORCH_BEFORE" ] || say "WARNING: torch differs from the machine's"
fi
# everything the check loads is local: no hub look-ups or telemetry (they would hang without a network)
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1
# the source tree on the path too: the check runs this checkout even where the install above failed
export PYTHONPATH="$(pwd)/src${PYTHONPATH:+:$PYTHONPATH}"
exec "$PY" scripts/gpu_check.py "$OUT" "$@"
