#!/usr/bin/env bash
# The wheel works on its own (issue 18): build it, install it into a fresh venv with the tested
# versions (constraints.txt; torch first, from the same file), then from a directory outside the
# checkout run `python -m resrl --help`, `resrl make-tiny-model`, `resrl eval --data aime24 --limit 2`
# (the packaged benchmark, read from the installed wheel) and `resrl demo --quick`, and check
# what they wrote, not only their exit codes, and run the reward-hacking suite against the installed
# package. pip's cache is reused (torch comes from it / the disk).
#   bash scripts/wheel-check.sh            # work dir: a new temp dir, removed at the end
#   WHEEL_CHECK_DIR=/tmp/wc bash scripts/wheel-check.sh   # keep everything there
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
PY=${PYTHON:-python3}
if [ -n "${WHEEL_CHECK_DIR:-}" ]; then
  WORK=$WHEEL_CHECK_DIR; rm -rf "$WORK"; mkdir -p "$WORK"
else
  # not under /tmp: the sandbox's own /tmp would hide an install there by accident, and the hack suite
  # below must show that the wheel's package data is hidden on purpose
  WORK=$(mktemp -d /var/tmp/resrl-wheel-check.XXXXXX); trap 'rm -rf "$WORK"' EXIT
fi
fail() { echo "wheel-check: FAILED: $*" >&2; exit 1; }
pipq() { "$@" >>"$WORK/pip.log" 2>&1 || { tail -30 "$WORK/pip.log"; fail "$*"; }; }  # pip's chatter to a log
start=$(date +%s)
TORCH=$(grep -E '^torch==' constraints.txt) || fail "constraints.txt has no torch== line"

# 1. build (isolated build env, as any user's `python -m build`); the build tool itself in a small venv
"$PY" -m venv "$WORK/build-venv"
pipq "$WORK/build-venv/bin/python" -m pip install -q -c constraints.txt build
"$WORK/build-venv/bin/python" -m build -q --wheel --sdist --outdir "$WORK/dist" "$REPO" >"$WORK/build.log" 2>&1 \
  || { tail -30 "$WORK/build.log"; fail "python -m build"; }
WHEEL=$(ls "$WORK"/dist/resrl-*.whl)
echo "wheel-check: built $(basename "$WHEEL") ($(du -k "$WHEEL" | cut -f1) KiB) in $(( $(date +%s) - start )) s"

# 2. the wheel holds the package data, the provenance and licences, and __main__
"$PY" - "$WHEEL" <<'EOF' || fail "wheel contents"
import json, sys, zipfile
names = set(zipfile.ZipFile(sys.argv[1]).namelist())
need = ["resrl/__main__.py", "resrl/data/packaged/math/manifest.json", "resrl/data/packaged/math/PROVENANCE.md"]
manifest = json.loads(zipfile.ZipFile(sys.argv[1]).read("resrl/data/packaged/math/manifest.json"))
need += [f"resrl/data/packaged/math/{f}" for f in manifest["files"]]
missing = [n for n in need if n not in names]
licences = [n for n in names if n.startswith("resrl/data/packaged/math/LICENSES/")]
assert not missing, f"missing from the wheel: {missing}"
assert len(licences) >= 5, licences
assert not any(n.startswith(("tests/", "src/")) for n in names), "test or src/ paths in the wheel"
print(f"wheel-check: wheel has __main__, {len(manifest['files'])} packaged math files, PROVENANCE.md, {len(licences)} licence files")
EOF

# 3. a fresh venv: torch first (the tested one, from constraints.txt), then the wheel with the constraints
"$PY" -m venv "$WORK/venv"
V="$WORK/venv/bin"
pipq "$V/python" -m pip install -q --upgrade "pip>=24"
pipq "$V/python" -m pip install -q "$TORCH"
pipq "$V/python" -m pip install -q -c constraints.txt "$WHEEL"
echo "wheel-check: installed into a fresh venv in $(( $(date +%s) - start )) s"

# 4. run it from outside the checkout (nothing of the repository on the path)
RUN="$WORK/run"; mkdir -p "$RUN"; cd "$RUN"
export OMP_NUM_THREADS=1
unset PYTHONPATH RESRL_DATA_DIR
"$V/python" - <<'EOF' || fail "resrl is imported from the checkout, not the installed wheel"
import resrl, sys
assert "site-packages" in resrl.__file__, resrl.__file__
EOF
"$V/python" -m resrl --help >help.txt || fail "python -m resrl --help"
grep -q "make-tiny-model" help.txt && grep -q "usage: resrl" help.txt || fail "python -m resrl --help: unexpected output"
"$V/resrl" make-tiny-model tiny >make.log 2>&1 || { cat make.log; fail "resrl make-tiny-model"; }
[ -f tiny/config.json ] || fail "make-tiny-model wrote no tiny/config.json"
"$V/resrl" eval --model tiny --data aime24 --limit 2 --n 2 --max-new-tokens 8 --out ev --no-progress >eval.log 2>&1 \
  || { tail -20 eval.log; fail "resrl eval"; }
"$V/python" - <<'EOF' || fail "resrl eval output"
import json
rows = [json.loads(l) for l in open("ev/samples.jsonl")]
assert len(rows) == 4, len(rows)  # 2 problems x 2 samples
# the first two AIME 2024 problems of the packaged copy (answers from PROVENANCE.md's source)
assert sorted({(r["problem_id"], r["answer"]) for r in rows}) == [("aime24-0", "204"), ("aime24-1", "113")], rows
summary = json.load(open("ev/summary.json"))
assert summary["benchmarks"]["aime24"]["num_problems"] == 2 and summary["benchmarks"]["aime24"]["n"] == 2
print("wheel-check: eval on the packaged aime24: 2 problems x 2 samples, answers 204 and 113")
EOF
"$V/resrl" demo --quick --out demo >demo.log 2>&1 || { tail -30 demo.log; fail "resrl demo --quick"; }
[ -s demo/report.md ] || fail "resrl demo --quick wrote no demo/report.md"
for alg in grpo w-reinforce resrl; do grep -qi -- "$alg" demo/report.md || fail "demo/report.md does not mention $alg"; done
ls demo/*.png >/dev/null 2>&1 || fail "resrl demo --quick wrote no PNG plot"

# 5. the whole reward-hacking suite against the installed wheel, not the checkout (issue 52): its package
# data (stdin-synth's private tests) is on disk in site-packages; RESRL_SANDBOX_SITUATION=wheel makes the
# suite assert that, and that programs cannot see it. No conftest (the suite needs none).
hack=$(date +%s)
pipq "$V/python" -m pip install -q -c "$REPO/constraints.txt" pytest pytest-timeout pytest-xdist
mkdir -p "$RUN/tests" && cp "$REPO/tests/test_code_reward_hacking.py" "$REPO/tests/test_code_contests.py" "$RUN/tests/"
RESRL_SANDBOX_SITUATION=wheel "$V/python" -m pytest -q -p no:cacheprovider --noconftest \
  -n "${RESRL_TEST_WORKERS:-2}" tests/test_code_reward_hacking.py tests/test_code_contests.py \
  --deselect tests/test_code_contests.py::test_eval_on_a_livecodebench_file_and_code_report >hack.log 2>&1 || { tail -40 hack.log; fail "hack suite against the wheel"; }
echo "wheel-check: hack suite against the installed wheel: $(tail -1 hack.log) ($(( $(date +%s) - hack )) s)"
echo "wheel-check: OK in $(( $(date +%s) - start )) s (python -m resrl --help, make-tiny-model, eval aime24, demo --quick, hack suite)"
