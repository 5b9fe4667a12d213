#!/usr/bin/env bash
# The code sandbox as users run it (issue 52): the sandbox tests and the whole reward-hacking suite as
# a NON-ROOT user, with a venv of the system python that this user owns (pytest, pyseccomp), the
# sources of this checkout on PYTHONPATH and no conftest (it imports torch, which this venv lacks and
# these tests do not need). RESRL_SANDBOX_SITUATION=nonroot makes the suite assert that its uid really
# is not 0 and that programs really ran under bubblewrap in a user namespace. Run as root (CI does):
# it creates the user `resrltester` if missing. The checkout must be readable by others.
#   bash scripts/sandbox-as-user.sh [pytest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
USER_NAME=${RESRL_TEST_USER:-resrltester}
start=$(date +%s)
[ "$(id -u)" = 0 ] || { echo "sandbox-as-user.sh: run as root (it switches to $USER_NAME)" >&2; exit 1; }
id "$USER_NAME" >/dev/null 2>&1 || useradd -m "$USER_NAME"
HOME_DIR=$(getent passwd "$USER_NAME" | cut -d: -f6)
SYSPY=/usr/bin/python3
"$SYSPY" -c "import ensurepip" 2>/dev/null || { apt-get install -y -q python3-venv >/dev/null; }
VENV="$HOME_DIR/resrl-sandbox-venv"
if [ ! -x "$VENV/bin/python" ]; then
  runuser -u "$USER_NAME" -- "$SYSPY" -m venv "$VENV"
fi
cp constraints.txt "$HOME_DIR/.resrl-constraints.txt" && chmod 644 "$HOME_DIR/.resrl-constraints.txt"
runuser -u "$USER_NAME" -- env HOME="$HOME_DIR" "$VENV/bin/python" -m pip install -q \
  -c "$HOME_DIR/.resrl-constraints.txt" pytest pytest-timeout pytest-xdist pyseccomp 2>&1 | grep -v "^WARNING: Location" || true
runuser -u "$USER_NAME" -- test -r "$REPO/src/resrl/__init__.py" \
  || { echo "sandbox-as-user.sh: $USER_NAME cannot read $REPO (make the checkout readable by others)" >&2; exit 1; }
echo "== sandbox tests + hack suite as $USER_NAME (uid $(id -u "$USER_NAME")), venv ready in $(( $(date +%s) - start )) s"
cd "$REPO"
runuser -u "$USER_NAME" -- env -i PATH=/usr/bin:/bin HOME="$HOME_DIR" LANG=C.UTF-8 PYTHONPATH="$REPO/src" \
  RESRL_SANDBOX_SITUATION=nonroot "$VENV/bin/python" -m pytest -q -p no:cacheprovider --noconftest \
  -n "${RESRL_TEST_WORKERS:-2}" tests/test_code_sandbox.py tests/test_code_reward_hacking.py tests/test_code_contests.py \
  --deselect tests/test_code_contests.py::test_eval_on_a_livecodebench_file_and_code_report "$@"
# (that one test runs `resrl eval`, which needs the model stack this venv lacks; the main suite runs it)
echo "== sandbox-as-user: $(( $(date +%s) - start )) s"
