#!/usr/bin/env bash
# Download, on a machine with the package registry, the exact wheels `scripts/gpu-check.sh` needs on a
# GPU machine that has no network (docs/gpu.md): a CUDA machine with Python 3.12, torch, transformers,
# accelerate, peft, numpy, pyarrow, rich, tqdm, matplotlib, tensorboard and pyyaml (a typical CUDA
# image; the H100 and H200 the check ran on had exactly these) lacks TRL, datasets and Math-Verify.
#
#   bash scripts/gpu-wheels.sh            # -> wheels/gpu/ (git-ignored), prints the total size
#   then bring wheels/gpu to the GPU machine with the checkout (a USB stick, a shared folder, scp, ...);
#   gpu-check.sh installs what that machine lacks from it, offline. With a network it is not needed.
#
# Every wheel is named with its version (constraints.txt's, the tested set); nothing is pulled
# implicitly (--no-deps), so the list below IS the set: TRL and datasets, their dependencies that the
# machine lacks, Math-Verify's, and setuptools/wheel for the editable install. gpu-check.sh installs
# only those the machine does not already have, never torch.
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=${1:-wheels/gpu}
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] && PY=${PYTHON:-.venv/bin/python}

# name==version (versions from constraints.txt; setuptools and wheel are build tools it does not list)
PACKAGES=(
  trl==1.16.0 datasets==5.2.0                        # the TRL engine (not on the machine)
  dill==0.4.1 multiprocess==0.70.19 xxhash==4.1.0    # datasets' own dependencies
  pandas==3.1.1 python-dateutil==4.0.0 six==1.17.0   # TRL and datasets import pandas
  fsspec==2026.9.0                                   # datasets pins fsspec<=2026.9.0
  math-verify==0.9.0 latex2sympy2_extended==1.11.0 antlr4-python3-runtime==4.13.2  # the math reward
  setuptools==84.2.1 wheel==0.45.1                   # pip install -e . without build isolation (offline)
)

mkdir -p "$DEST"
for spec in "${PACKAGES[@]}"; do
  name=${spec%%==*}
  cons=(-c constraints.txt)
  case $name in setuptools|wheel) cons=() ;; esac
  "$PY" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --abi cp312 --abi abi3 --abi none \
    --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64 --platform any \
    "${cons[@]}" --dest "$DEST" "$spec"
done
echo "wheels in $DEST:"
ls -l "$DEST"/*.whl | awk '{printf "  %8.1f MiB  %s\n", $5 / 1048576, $9}'
total=$(cat "$DEST"/*.whl | wc -c)
echo "total: $(awk -v b="$total" 'BEGIN { printf "%.1f MiB (%d bytes)", b / 1048576, b }')"
