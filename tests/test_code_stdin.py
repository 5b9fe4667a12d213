"""Stdin/stdout programs: outputs compared as LiveCodeBench's `testing_util.grade_stdio` does
(restated independently below and checked on its documented cases), the optional float
tolerance, per-problem time and memory limits, LiveCodeBench's import prelude, and the packaged
generated set `stdin-synth` (every reference program passes in the sandbox; wrong ones fail)."""

from __future__ import annotations

import hashlib
import json
from decimal import Decimal, InvalidOperation

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from resrl.tasks.code.reward import CodeExecutor, run_tests
from resrl.tasks.code.sandbox.code_tests import normalize_output, parse_tests, stdout_matches
from resrl.tasks.code.sandbox.runner import SandboxLimits

LIMITS = SandboxLimits(memory_mb=512, processes=16, output_kb=256, tmpfs_mb=8)


def lcb_grade_stdio_compare(prediction: str, gt_out: str) -> bool:
    """LiveCodeBench's comparison in `grade_stdio`, restated from its description (not its code):
    strip the text, split at newlines, strip each line; the line counts must agree; a line pair
    matches when equal, else when both lines' whitespace tokens all convert to Decimal and the two
    lists are equal; any conversion or comparison failure is a wrong answer."""
    pred = [x.strip() for x in prediction.strip().split("\n")]
    want = [x.strip() for x in gt_out.strip().split("\n")]
    if len(pred) != len(want):
        return False
    for a, b in zip(pred, want):
        if a == b:
            continue
        try:
            da = [Decimal(t) for t in a.split()]
            db = [Decimal(t) for t in b.split()]
            if da != db:
                return False
        except (InvalidOperation, ValueError):
            return False
    return True


# LiveCodeBench's own comments name these: exact lines, decimal comparison instead of np.isclose
# (np.isclose(50000000000000000, 50000000000000001) is True; Decimal tells them apart), line counts.
DOCUMENTED = [
    ("3\n", "3", True),
    ("  3  \n\n", "3\n", True),                      # stripped text and lines
    ("1 2\r\n3\r\n", "1 2\n3", True),                # CRLF: the \r goes with the line's strip
    ("YES\r\nNO \r\n", "YES\nNO", True),              # ... on text lines too
    (" ab \n cd", "ab\ncd", True),
    ("2.50", "2.5", True),                           # equal as decimals
    ("1  2", "1 2", True),                           # numeric line: tokens compared as decimals
    ("a  b", "a b", False),                          # text line: blanks inside count
    ("50000000000000000", "50000000000000001", False),  # the np.isclose gotcha
    ("0.333333", "0.3333333", False),                # no float tolerance
    ("1e2", "100", True),
    ("YES", "yes", False),
    ("1\n2", "1 2", False),                          # line counts differ
    ("1 2 3", "1 2", False),
    ("", "", True),
    ("\n\n", "", True),
    ("sNaN", "1", False),                            # Decimal refuses the comparison: a wrong answer
    ("NaN", "NaN", True),                            # equal text
    ("NaN 1", "NaN 1.0", False),                     # NaN != NaN as decimals
]


@pytest.mark.parametrize("got, want, ok", DOCUMENTED)
def test_documented_cases(got, want, ok):
    assert lcb_grade_stdio_compare(got, want) is ok
    assert stdout_matches(got, want) is ok


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.sampled_from("0123456789.-e ab\n\r\t"), max_size=24),
       st.text(alphabet=st.sampled_from("0123456789.-e ab\n\r\t"), max_size=24))
def test_agrees_with_the_restated_lcb_rule(got, want):
    assert stdout_matches(got, want) == lcb_grade_stdio_compare(got, want)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from("0123456789.- a\n"), max_size=24))
def test_output_matches_itself_and_its_reformatting(text):
    assert stdout_matches(text, text)
    assert stdout_matches("\n" + "\r\n".join(f" {line}  " for line in text.split("\n")) + "\n\n", text)


def test_float_tolerance_is_absolute_or_relative():
    assert stdout_matches("0.3333333", "0.333333", float_tol=1e-6)
    assert not stdout_matches("0.33334", "0.333333", float_tol=1e-6)
    assert stdout_matches("1000000.5", "1000000", float_tol=1e-6)        # relative: 0.5 <= 1e-6 * 1e6
    assert not stdout_matches("1.5", "1", float_tol=1e-6)
    assert stdout_matches("x 1.0000001", "x 1", float_tol=1e-6)           # text tokens must be equal
    assert not stdout_matches("y 1", "x 1", float_tol=1e-6)
    assert not stdout_matches("nan", "1", float_tol=1e-6) and not stdout_matches("inf", "inf1", float_tol=1e-6)
    assert not stdout_matches("1 2", "1", float_tol=1e-6)


def test_options_are_validated_and_kept():
    spec = {"inputs": ["1"], "outputs": ["1"], "float_tol": 1e-6, "time_limit_s": 2, "memory_limit_mb": 256,
            "prelude": "lcb"}
    t = parse_tests(spec)
    assert (t["float_tol"], t["time_limit_s"], t["memory_limit_mb"], t["prelude"]) == (1e-6, 2.0, 256, "lcb")
    for bad, key in [({"float_tol": -1}, "float_tol"), ({"time_limit_s": 0}, "time_limit_s"),
                     ({"memory_limit_mb": 1.5}, "memory_limit_mb"), ({"prelude": "java"}, "prelude")]:
        with pytest.raises(ValueError, match=key):
            parse_tests({"inputs": ["1"], "outputs": ["1"], **bad}, where="row 3")
    with pytest.raises(ValueError, match="compare"):
        parse_tests({"fn_name": "f", "inputs": [[1]], "outputs": [1], "compare": "fuzzy"})


def test_sandbox_uses_the_lcb_comparison_and_the_tolerance():
    tests = {"inputs": ["1 3\n", "10 4\n"], "outputs": ["0.333333", "2.50"]}
    prints_repr = "a, b = map(int, input().split())\nprint(a / b)\n"  # 0.3333333333333333 and 2.5
    res = run_tests(prints_repr, tests, 5.0, limits=LIMITS)
    assert res.statuses == ["wrong", "pass"]  # 2.5 == 2.50 as decimals; 0.3333333333333333 != 0.333333
    assert run_tests(prints_repr, {**tests, "float_tol": 1e-6}, 5.0, limits=LIMITS).passed
    fixed = "a, b = map(int, input().split())\nprint(f'{a / b:.6f}')\n"  # 2.500000 == 2.50
    assert run_tests(fixed, tests, 5.0, limits=LIMITS).passed


def test_problem_time_limit_replaces_the_default():
    sleeper = "import time\ntime.sleep(1.5)\nprint(1)\n"
    tests = {"inputs": [""], "outputs": ["1"]}
    assert run_tests(sleeper, tests, 5.0, limits=LIMITS).passed
    res = run_tests(sleeper, {**tests, "time_limit_s": 0.5}, 5.0, limits=LIMITS)
    assert not res.passed and res.timed_out and res.statuses == ["timeout"] and "timed out after 0.5" in res.error


def test_problem_memory_limit_replaces_the_default():
    hog = "x = bytearray(150 << 20)\nprint(len(x) >> 20)\n"
    tests = {"inputs": [""], "outputs": ["150"]}
    assert run_tests(hog, tests, 5.0, limits=LIMITS).passed  # 512 MB by default here
    res = run_tests(hog, {**tests, "memory_limit_mb": 100}, 5.0, limits=LIMITS)
    assert not res.passed and res.memory_limit in ("rlimit_as", "cgroup"), (res.error, res.memory_limit)


def test_lcb_prelude_runs_before_the_program():
    uses_deque = "q = deque(map(int, input().split()))\nq.rotate(1)\nprint(*q)\n"  # no import: LCB's prelude has it
    tests = {"inputs": ["1 2 3\n"], "outputs": ["3 1 2"]}
    res = run_tests(uses_deque, tests, 5.0, limits=LIMITS)
    assert not res.passed and "NameError" in res.error
    assert run_tests(uses_deque, {**tests, "prelude": "lcb"}, 5.0, limits=LIMITS).passed
    future = "from __future__ import annotations\nimport sys\nprint(sys.getrecursionlimit())\n"
    assert run_tests(future, {"inputs": [""], "outputs": ["50000"], "prelude": "lcb"}, 5.0, limits=LIMITS).passed
    call = {"fn_name": "f", "inputs": [[[3, 1, 2]]], "outputs": [[1, 2, 3]], "prelude": "lcb"}
    assert run_tests("def f(xs: List[int]) -> List[int]:\n    return sorted(xs)\n", call, 5.0, limits=LIMITS).passed


def test_exact_functional_comparison_is_lcbs_equality():
    lenient = {"fn_name": "f", "inputs": [[1]], "outputs": [[0.1]]}
    close = "def f(x):\n    return 0.1 + 1e-9\n"
    assert run_tests(close, lenient, 5.0, limits=LIMITS).passed  # one-element list and 1e-6 tolerance
    assert not run_tests(close, {**lenient, "outputs": [0.1], "compare": "exact"}, 5.0, limits=LIMITS).passed
    assert run_tests("def f(x):\n    return 0.1\n", {**lenient, "outputs": [0.1], "compare": "exact"}, 5.0,
                     limits=LIMITS).passed


# ---- the packaged generated set ----------------------------------------------------------------
def test_packaged_stdin_synth_is_what_the_generator_writes(tmp_path):
    from importlib import resources

    from resrl.tasks.code.synth import write_jsonl

    write_jsonl(tmp_path / "again.jsonl")
    packaged = (resources.files("resrl.data") / "packaged" / "code" / "stdin-synth.jsonl").read_bytes()
    assert hashlib.sha256((tmp_path / "again.jsonl").read_bytes()).hexdigest() == hashlib.sha256(packaged).hexdigest()


def test_every_reference_passes_and_wrong_programs_fail():
    from resrl.tasks.code.synth import reference_program
    from resrl.tasks.data import load_problems

    problems = load_problems("stdin-synth")
    assert len(problems) == 18 and {p.extra["difficulty"] for p in problems} == {"easy", "medium", "hard"}
    kinds = [parse_tests(p.answer)["format"] for p in problems]
    assert kinds.count("stdio") == 16 and kinds.count("call") == 2
    assert all(p.extra["num_public_tests"] == 1 and p.extra["num_private_tests"] == 8 for p in problems)
    items = [(reference_program(p.id), p.answer) for p in problems]
    items += [("print(0)\n", p.answer) for p in problems if parse_tests(p.answer)["format"] == "stdio"]
    # the quadratic pair count: right on every small test, out of time on the large one
    pairs = next(p for p in problems if p.id.endswith("pair-sums"))
    slow = ("n, k = map(int, input().split())\na = list(map(int, input().split()))\n"
            "print(sum(a[i] + a[j] == k for i in range(n) for j in range(i + 1, n)))\n")
    items.append((slow, pairs.answer))
    with CodeExecutor(num_workers=2, timeout_s=3.0, limits=LIMITS) as ex:
        res = ex.run_many(items)
    refs = res[:len(problems)]
    assert all(r.passed for r in refs), [(p.id, r.error) for p, r in zip(problems, refs) if not r.passed]
    assert not any(r.passed for r in res[len(problems):-1])
    assert res[-1].statuses[:-1] == ["pass"] * 8 and res[-1].statuses[-1] == "timeout"


def test_stdin_synth_prompts_say_what_to_write():
    from resrl.tasks.data import load_problems

    problems = {p.id: p for p in load_problems("stdin-synth")}
    stdin = problems["synth-00-a-plus-b"].prompt[0]["content"]
    assert "standard input" in stdin and "Example" in stdin and "```python" in stdin
    functional = problems["synth-16-sum-of-squares"].prompt[0]["content"]
    assert "class Solution" in functional and "def sumOfSquares" in functional
    assert json.loads(problems["synth-16-sum-of-squares"].answer)["compare"] == "exact"
    assert normalize_output(json.loads(problems["synth-00-a-plus-b"].answer)["outputs"][0])


def test_stdin_inputs_larger_than_the_items_tmpfs_fit():
    """The stdin files live on the item's /tmp: inputs bigger than `tmpfs_mb` (12 MB of input, an 8 MB
    tmpfs) still run (the harness used to stop with ENOSPC before the first test)."""
    big = ["1 " * (2 << 20) + "\n" for _ in range(3)]
    tests = {"inputs": big, "outputs": [str(2 << 20)] * 3}
    res = run_tests("import sys\nprint(sum(map(int, sys.stdin.read().split())))", tests, 10.0,
                    limits=SandboxLimits(memory_mb=512, processes=16, tmpfs_mb=8))
    assert res.passed, res.error


def test_reward_counts_and_logs_why_items_fail(caplog):
    import logging

    from resrl.tasks.rewards import load_reward_function

    tests = json.dumps({"inputs": ["2\n"], "outputs": ["4"]})
    comps = ["```python\nprint(2 * int(input()))\n```", "```python\nprint(5)\n```", "```python\nwhile True: pass\n```",
             "```python\nimport sys\nwhile True:\n    sys.stdout.write('9' * 65536)\n```",
             "```python\nraise SystemExit(3)\n```", "   "]
    reward = load_reward_function("code", timeout_s=1.0, num_workers=2)
    try:
        with caplog.at_level(logging.DEBUG, logger="resrl.tasks.code.reward"):
            assert reward(comps, [tests] * len(comps)) == [1.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    finally:
        reward.close()
    st = reward.last_stats
    assert (st["wrong_answers"], st["timeouts"], st["output_limits"], st["errors"], st["no_code"]) == (1, 1, 1, 1, 1)
    logged = caplog.text
    for reason in ("item 1 earns 0.0: wrong answer on test 0", "item 2 earns 0.0: test 0: timed out",
                   "item 3 earns 0.0: test 0: output over", "item 4 earns 0.0: test 0: exit status 3",
                   "item 5 earns 0.0: no code found"):
        assert reason in logged, logged
