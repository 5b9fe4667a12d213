#!/usr/bin/env bash
# Set up (scripts/setup.sh) and run the whole test suite, in parallel: pytest-xdist with
# RESRL_TEST_WORKERS workers (default 2: the CI machine's cores), `--dist loadfile` (a file's tests
# share one worker, so its module-scoped fixtures are built once). RESRL_TEST_WORKERS=0 runs it in one
# process. Extra arguments go to pytest. pytest's exit 5 ("no tests ran") is a failure.
set -uo pipefail
cd "$(dirname "$0")/.."
if [ "${RESRL_SKIP_SETUP:-0}" != "1" ]; then
  bash scripts/setup.sh || exit 1
fi
WORKERS=${RESRL_TEST_WORKERS:-2}
.venv/bin/python -m pytest -q -n "$WORKERS" --dist loadfile "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "scripts/test.sh: pytest collected no tests — treating as a failure" >&2
  exit 1
fi
exit "$rc"
