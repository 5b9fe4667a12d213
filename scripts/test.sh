#!/usr/bin/env bash
# Set up (scripts/setup.sh) and run the whole test suite. pytest's exit 5 ("no tests ran") is a failure.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh || exit 1
.venv/bin/python -m pytest -q "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "scripts/test.sh: pytest collected no tests — treating as a failure" >&2
  exit 1
fi
exit "$rc"
