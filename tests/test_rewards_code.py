"""Code reward: the three test formats by hand (pass, wrong answer, exception, timeout, partial
pass), code extraction, the tests parser, the pool / cache and the reward function."""

from __future__ import annotations

import json

import pytest

from resrl.tasks.code.reward import (CodeExecutor, CodeReward, call_output_matches, candidate_program, extract_code,
                                normalize_output, parse_tests, run_tests)
from resrl.tasks.rewards import load_reward_function
from resrl.tasks.code.sandbox.runner import SandboxLimits

LIMITS = SandboxLimits(memory_mb=512, processes=16, output_kb=64, tmpfs_mb=8)
T = 1.0  # seconds per test: the timeouts below cost this much


def run(code, tests, **kw):
    return run_tests(code, tests, kw.pop("timeout_s", T), limits=LIMITS, **kw)


# ---- standard input / output -------------------------------------------------------------------
STDIO = {"inputs": ["1 2\n", "10 20\n", "-5 5\n"], "outputs": ["3\n", "30", "0\n\n"]}


def test_stdio_pass_and_whitespace_normalisation():
    res = run("a, b = map(int, input().split())\nprint(a + b, ' ')\nprint()\n", STDIO)
    assert res.passed and res.fraction == 1.0 and res.error is None and not res.timed_out


def test_stdio_wrong_answer():
    res = run("a, b = map(int, input().split())\nprint(a * b)\n", STDIO)
    assert not res.passed and res.statuses == ["wrong", "wrong", "wrong"] and res.error == "wrong answer on test 0"


def test_stdio_partial_pass_fraction():
    res = run("a, b = map(int, input().split())\nprint(a + b if a > 0 else 99)\n", STDIO)
    assert not res.passed and res.fraction == pytest.approx(2 / 3) and res.statuses == ["pass", "pass", "wrong"]


def test_stdio_exception():
    res = run("raise ValueError('boom')\n", STDIO)
    assert not res.passed and res.statuses == ["error"] * 3 and "ValueError: boom" in res.error


def test_stdio_timeout_and_partial():
    code = "a, b = map(int, input().split())\nwhile a < 0:\n    pass\nprint(a + b)\n"
    res = run(code, STDIO)
    assert res.statuses == ["pass", "pass", "timeout"] and res.timed_out and res.fraction == pytest.approx(2 / 3)


def test_stdio_exit_codes_and_reading_fd0():
    tests = {"inputs": ["4\n"], "outputs": ["8"]}
    assert run("import sys\nn = int(open(0).read())\nprint(2 * n)\nsys.exit(0)\n", tests).passed
    assert run("import sys\nprint(int(sys.stdin.buffer.read()) * 2)\n", tests).passed
    res = run("print(8)\nraise SystemExit(3)\n", tests)
    assert res.statuses == ["error"]


def test_stdio_syntax_error_fails_every_test():
    res = run("def f(:\n", STDIO)
    assert res.statuses == ["error"] * 3 and "SyntaxError" in res.error


# ---- function call -----------------------------------------------------------------------------
CALL = {"fn_name": "add", "inputs": [[1, 2], [10, 20], [-5, 5]], "outputs": [3, 30, 0]}


def test_call_top_level_function_and_solution_class():
    assert run("def add(a, b):\n    return a + b\n", CALL).passed
    assert run("class Solution:\n    def add(self, a, b):\n        return a + b\n", CALL).passed


def test_call_wrong_partial_exception_timeout():
    assert run("def add(a, b):\n    return a - b\n", CALL).statuses == ["wrong", "wrong", "wrong"]
    res = run("def add(a, b):\n    return a + b if a > 0 else 1\n", CALL)
    assert res.fraction == pytest.approx(2 / 3) and not res.passed
    res = run("def add(a, b):\n    return 1 / (a - 1)\n", CALL)
    assert res.statuses[0] == "error" and "ZeroDivisionError" in res.error
    res = run("def add(a, b):\n    while a < 0:\n        pass\n    return a + b\n", CALL)
    assert res.statuses == ["pass", "pass", "timeout"] and res.timed_out
    assert run("x = 1\n", CALL).statuses == ["error"] * 3  # no such function


def test_call_values_floats_tuples_and_wrapped_outputs():
    tests = {"fn_name": "f", "inputs": [[2]], "outputs": [[0.3333333333, [1, 2]]]}
    assert run("def f(x):\n    return (1 / 3, (1, 2))\n", tests).passed  # tuple -> list, float tolerance
    wrapped = {"fn_name": "f", "inputs": [[1]], "outputs": [[7]]}  # APPS/TACO wrap outputs in a list
    assert run("def f(x):\n    return 7\n", wrapped).passed
    assert not run("def f(x):\n    return object()\n", wrapped).passed  # not JSON: fails, no crash
    taco = parse_tests({"fn_name": "f", "inputs": ["[1, 2]\n3"], "outputs": [6]})
    assert taco["inputs"] == [[[1, 2], 3]]
    assert run("def f(xs, k):\n    return sum(xs) * 2\n", taco).passed


def test_call_output_matching_rules():
    assert call_output_matches("3", 3) and call_output_matches("3.0000001", 3)
    assert not call_output_matches("true", 1) and not call_output_matches("1", True)
    assert call_output_matches("[1, [2.5]]", [1, [2.5]]) and not call_output_matches("[1]", [1, 2])
    assert call_output_matches('{"a": 1}', {"a": 1}) and not call_output_matches("not json", 1)
    assert call_output_matches("[1, 2]", "[1, 2]") and call_output_matches('"ab"', "ab")  # JSON-text outputs
    assert not call_output_matches("3", "4") and not call_output_matches("3", "three")


# ---- HumanEval-style check(candidate) -----------------------------------------------------------
CHECK = {"entry_point": "inc", "prompt": "from typing import List\n\n\ndef inc(xs: List[int]) -> List[int]:\n"
                                         "    \"\"\"Add one to each element.\"\"\"\n",
         "test": "def check(candidate):\n    assert candidate([1, 2]) == [2, 3]\n    assert candidate([]) == []\n"}


def test_check_pass_full_function_and_completion_style_body():
    assert run("def inc(xs: List[int]) -> List[int]:\n    return [x + 1 for x in xs]\n", CHECK).passed
    assert run("    return [x + 1 for x in xs]\n", CHECK).passed  # body only: the prompt goes in front
    program = candidate_program("def inc(xs):\n    return xs\n", parse_tests(CHECK))
    assert program == "from typing import List\ndef inc(xs):\n    return xs\n"  # the prompt's imports, no test


def test_check_wrong_exception_timeout():
    res = run("def inc(xs):\n    return xs\n", CHECK)
    assert not res.passed and res.statuses == ["error"] and "AssertionError" in res.error
    res = run("def inc(xs):\n    raise KeyError('k')\n", CHECK)
    assert "KeyError" in res.error
    res = run("def inc(xs):\n    while True:\n        pass\n", CHECK)
    assert res.timed_out and res.statuses == ["timeout"] and res.fraction == 0.0, res.error


def test_check_cpu_bound_candidate_is_a_timeout_whichever_limit_fires_first():
    # CI once reported this loop as an error: the candidate's CPU limit (int(limit) + 1 = 1 s for a
    # limit just under a second) fired before the wall clock, the judge saw the candidate vanish and
    # printed a traceback. Two threads hashing (hashlib drops the GIL) burn CPU at twice wall speed,
    # so the CPU limit surely fires first here: the outcome must still be a timeout.
    spin = ("import hashlib, threading\n"
            "def _burn():\n    b = b'x' * (1 << 20)\n    while True:\n        hashlib.sha256(b).digest()\n"
            "def inc(xs):\n    for _ in range(2):\n        threading.Thread(target=_burn, daemon=True).start()\n"
            "    _burn()\n")
    for timeout_s in (0.9, 1.0):
        res = run(spin, CHECK, timeout_s=timeout_s)
        assert res.timed_out and res.statuses == ["timeout"] and res.fraction == 0.0, (timeout_s, res.error)
    res = run("import os, signal\ndef inc(xs):\n    os.kill(os.getpid(), signal.SIGXCPU)\n", CHECK)
    assert res.statuses == ["timeout"] and "CPU time" in res.error and not res.passed


# ---- extraction and parsing --------------------------------------------------------------------
def test_extract_code_rules():
    text = "<think>```python\nprint('thinking')\n```</think>Here:\n```python\nprint(1)\n```\nand a shell line\n```bash\nls\n```\n"
    assert extract_code(text) == "print(1)\n"  # python block first, think skipped
    assert extract_code("```py\nA\n```\n```python3\nB\n```") == "B\n"  # the last python block
    assert extract_code("```\nx = 1\n```") == "x = 1\n"  # any fenced block
    assert extract_code("x = 2\n") == "x = 2\n"  # no fence: the whole text
    assert extract_code("reasoning ...</think>\n```python\ny = 3\n```") == "y = 3\n"  # template-opened think
    assert extract_code("<think>never closed ```python\nz = 1\n```") is None
    assert extract_code("   \n") is None


def test_normalize_output():
    # LiveCodeBench's get_stripped_lines: the text stripped, split at newlines, each line stripped;
    # blanks inside a line are kept (a numeric line still matches "1 2", as decimals: test_code_stdin.py)
    assert normalize_output("\n 1  2 \r\n3\n\n\n") == ["1  2", "3"]
    assert normalize_output("") == [] and normalize_output("\n") == [] and normalize_output(" \r\n\t") == []
    assert normalize_output("a\n\nb") == ["a", "", "b"]  # inner blank lines count


@pytest.mark.parametrize("bad, key", [
    ("{not json", "not valid JSON"),
    ([1, 2], "expected a JSON object"),
    ({"inputs": ["1"]}, "'inputs'+'outputs'"),
    ({"inputs": ["1"], "outputs": []}, "1 inputs but 0 outputs"),
    ({"inputs": [], "outputs": []}, "'inputs' is empty"),
    ({"entry_point": "f"}, "'test'"),
    ({"entry_point": "f()", "test": "x"}, "'entry_point'"),
    ({"fn_name": "a b", "inputs": [[1]], "outputs": [1]}, "'fn_name'"),
    ({"fn_name": "f", "inputs": [5], "outputs": [1]}, "'inputs'[0]"),
    ({"inputs": [{"a": 1}], "outputs": ["1"]}, "'inputs'[0]"),
])
def test_parse_tests_errors_name_the_key(bad, key):
    with pytest.raises(ValueError, match="row 7") as err:
        parse_tests(bad, where="row 7")
    assert key in str(err.value)


def test_parse_tests_formats():
    assert parse_tests(json.dumps(STDIO))["format"] == "stdio"
    assert parse_tests(CALL)["format"] == "call"
    assert parse_tests(CHECK)["format"] == "check"
    assert parse_tests({"inputs": [["1", "2"]], "outputs": [3]})["inputs"] == ["1\n2"]


# ---- pool, cache, reward -----------------------------------------------------------------------
def test_executor_caches_and_keeps_order():
    good, bad = "def add(a, b):\n    return a + b\n", "def add(a, b):\n    return 0\n"
    with CodeExecutor(num_workers=2, timeout_s=T, limits=LIMITS) as ex:
        first = ex.run_many([(good, CALL), (bad, CALL), (good, CALL), (None, CALL)])
        assert [r.passed for r in first] == [True, False, True, False]
        assert first[2].cached and first[3].error == "no code found"
        again = ex.run_many([(bad, CALL), (good, CALL)])
        assert [r.passed for r in again] == [False, True] and all(r.cached for r in again)
        assert ex.stats["cache_hits"] == 3 and ex.stats["items"] == 6


def test_code_reward_binary_fraction_and_stats():
    tests = json.dumps(STDIO)
    completions = ["```python\na, b = map(int, input().split())\nprint(a + b)\n```",
                   "```python\na, b = map(int, input().split())\nprint(a + b if a > 0 else 9)\n```",
                   "I cannot solve this.</think>",
                   "```python\nwhile True:\n    pass\n```"]
    reward = CodeReward(timeout_s=T, num_workers=2, limits=LIMITS)
    try:
        assert reward(completions, [tests] * 4) == [1.0, 0.0, 0.0, 0.0]
        stats = reward.last_stats
        assert stats["no_code"] == 1.0 and stats["timeouts"] == 1.0 and stats["pass_rate"] == 0.25
    finally:
        reward.close()
    partial = load_reward_function("code-fraction", timeout_s=T, num_workers=2)
    try:
        scores = partial(completions[:2], [tests] * 2)
        assert scores == [1.0, pytest.approx(2 / 3)]
    finally:
        partial.close()


def test_code_reward_rejects_malformed_tests_naming_the_item():
    reward = load_reward_function("code", timeout_s=T, num_workers=1)
    with pytest.raises(ValueError, match="item 1"):
        reward(["print(1)", "print(1)"], [json.dumps(STDIO), "{\"inputs\": [1]}"])
    reward.close()


# ---- properties ---------------------------------------------------------------------------------
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from resrl.tasks.code.sandbox import code_harness  # noqa: E402

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4),
    max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_harness_json_writer_round_trips(value):
    # the harness writes its result lines without the json module: they must parse back exactly
    text = code_harness._json(value)
    assert json.loads(text) == value


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from("ab 1\t\r\n"), max_size=40))
def test_normalize_output_is_idempotent_and_ignores_trailing_blanks(text):
    once = normalize_output(text)
    assert normalize_output("\n".join(once)) == once
    assert normalize_output(text + " \n \n") == once


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from("xy=1 \n`"), max_size=30), st.text(alphabet=st.sampled_from("ab\n"), max_size=20))
def test_extract_code_finds_a_final_python_block(prose, body):
    body = body if body.endswith("\n") or not body else body + "\n"
    text = f"{prose}\n```python\nz = 1\n{body}```\n"
    code = extract_code(text)
    if "```" not in prose:
        assert code == f"z = 1\n{body}"


def test_large_correct_output_with_many_lines_passes():
    # 400 000 lines "1" (800 kB, under the 1 MiB default cap): the result line carries it JSON-escaped
    n = 400000
    tests = {"inputs": [f"{n}\n"], "outputs": ["1\n" * n]}
    res = run_tests("n = int(input())\nprint('1\\n' * (n - 1) + '1')\n", tests, 5.0)
    assert res.passed, res.error


# ---- function-level tests (EvalPlus semantics) ---------------------------------------------------
from resrl.tasks.code.reward import fn_output_matches  # noqa: E402
from resrl.tasks.code.sandbox.code_values import BadValue, NotData, decode, encode  # noqa: E402

FN = {"entry_point": "f", "prompt": "def f(x):\n    \"\"\"Twice x.\"\"\"\n", "inputs": [[1], [2], [3]],
      "outputs": [2, 4, 6]}


def test_fn_calls_every_input_in_one_process_and_the_parent_compares():
    assert run("    return 2 * x\n", FN).passed  # body after the prompt
    res = run("def f(x):\n    return 2 * x if x != 2 else 5\n", FN, stop_on_failure=False)
    assert res.statuses == ["pass", "wrong", "pass"] and res.fraction == pytest.approx(2 / 3)
    # one process for all inputs: module-level code runs once, state carries over between calls
    res = run("import os\nPID = os.getpid()\nSEEN = []\ndef f(x):\n    SEEN.append(x)\n"
              "    return 2 * x if len(SEEN) == x else -1\n", FN)
    assert res.passed


def test_fn_per_input_timeout_crash_and_restart_at_the_next_input():
    res = run("import os, time\ndef f(x):\n    if x == 1:\n        time.sleep(30)\n    if x == 2:\n        os._exit(0)\n"
              "    return 2 * x\n", FN, stop_on_failure=False)
    assert res.statuses == ["timeout", "error", "pass"], res.error  # input 3 ran in a fresh child
    assert res.seconds < 8
    # a program that does not load in time fails every input once, not once per restart
    res = run("import time\ntime.sleep(30)\ndef f(x):\n    return 2 * x\n", FN, stop_on_failure=False)
    assert res.statuses == ["timeout"] * 3 and "loading the program" in res.error and res.seconds < 5


def test_fn_return_values_are_exact_builtin_data():
    tests = {**FN, "inputs": [[1]], "outputs": [[1, 2]], "encoding": "exact"}  # exact: the list [1, 2]
    assert run("def f(x):\n    return [1, 2]\n", tests).passed
    assert not run("def f(x):\n    return (1, 2)\n", tests).passed  # a tuple is not a list (EvalPlus: == is False)
    assert not run("class L(list):\n    def __eq__(s, o): return True\ndef f(x):\n    return L([9])\n", tests).passed
    assert run("class L(list):\n    def __eq__(s, o): return True\ndef f(x):\n    return L([1, 2])\n", tests).passed
    assert not run("def f(x):\n    return object()\n", tests).passed
    flood = run("def f(x):\n    print('x' * 10_000_000)\n    return [1, 2]\n", tests)
    assert flood.passed  # stdout is not the verdict here (EvalPlus swallows it)


def test_fn_output_matches_follows_evalplus():
    assert fn_output_matches(True, 1) and fn_output_matches(1, 1.0)  # Python ==, as EvalPlus
    assert fn_output_matches(0.1 + 0.2, 0.3)  # float expected: atol 1e-6 even when the task says 0
    assert not fn_output_matches(0.3001, 0.3)
    assert fn_output_matches([1.0, 2.0000001], [1.0, 2.0]) and not fn_output_matches((1.0, 2.0), [1.0, 2.0])
    assert not fn_output_matches([1.0], [1.0, 2.0]) and not fn_output_matches("0.3", 0.3)
    assert fn_output_matches(3.00005, 3.0, atol=1e-4) and not fn_output_matches(3.0002, 3.0, atol=1e-4)
    assert not fn_output_matches(float("nan"), float("nan"))
    assert not fn_output_matches([], [0.5]) and fn_output_matches([], [])
    # HumanEval/32's oracle: a root of the polynomial, whichever one
    assert fn_output_matches(1.0, 123.0, atol=1e-4, oracle="find_zero", args=[[-1, 1]])
    assert not fn_output_matches(2.0, 1.0, atol=1e-4, oracle="find_zero", args=[[-1, 1]])


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
                    | st.binary() | st.complex_numbers(allow_nan=False),
                    lambda kids: st.lists(kids, max_size=4) | st.tuples(kids, kids)
                    | st.dictionaries(st.text(max_size=3) | st.integers(), kids, max_size=3)
                    | st.frozensets(st.integers(), max_size=3), max_leaves=12))
@settings(max_examples=200, deadline=None)
def test_exact_encoding_round_trips_types_and_values(value):
    back = decode(encode(value))
    assert back == value and _types(back) == _types(value)


def _types(v):
    if isinstance(v, (list, tuple)):
        return (type(v), [_types(x) for x in v])
    if isinstance(v, dict):
        return (dict, sorted((repr(k), _types(x)) for k, x in v.items()))
    return type(v)


def test_exact_encoding_never_calls_the_subclass_and_rejects_non_data():
    class S(str):
        def __eq__(self, o):
            return True

        def __str__(self):
            return "lie"

        __hash__ = str.__hash__

    class Fake:
        __class__ = property(lambda self: int)

    assert encode(S("ab")) == '"ab"' and type(decode(encode(S("ab")))) is str
    assert decode(encode(2 ** 20000)) == 2 ** 20000 and decode(encode(float("-inf"))) == float("-inf")
    for bad in (Fake(), object(), iter([1]), [1, object()]):
        with pytest.raises(NotData):
            encode(bad)
    nested = []
    for _ in range(200):
        nested = [nested]
    with pytest.raises(NotData):
        encode(nested)
    for text in ('{"x": 1}', '{"t": 1}', '{"s": [[1]]}', "nan", '{"f": "one"}', "[" * 100000):
        with pytest.raises(BadValue):
            decode(text)
