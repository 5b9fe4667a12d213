"""Competitive-programming rows a user brings (resrl.tasks.code.contests): LiveCodeBench
`code_generation_lite` rows (JSON or base64(zlib(pickle)) private tests, decoded by a restricted
unpickler that refuses any payload able to run code), CodeForces, CodeContests and APPS rows;
`resrl eval` on a LiveCodeBench-format file with Avg@n / Pass@k as LiveCodeBench computes them; and
`resrl code-report` (per difficulty, a CodeForces rating)."""

from __future__ import annotations

import base64
import io
import json
import math
import pickle
import pickletools
import zlib
from fractions import Fraction

import pytest

from resrl.errors import DataError
from resrl.tasks.code.safe_pickle import RestrictedUnpickler, decode_lcb_payload
from resrl.tasks.code.sandbox.code_tests import parse_tests
from resrl.tasks.code.synth import PROBLEMS, encode_private, problem_tests, reference_program, synth_rows
from resrl.tasks.data import load_problems


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def b64z(data: bytes) -> str:
    return base64.b64encode(zlib.compress(data)).decode()


# ---- LiveCodeBench rows ---------------------------------------------------------------------------
def test_lcb_private_tests_json_or_encoded_load_the_same(tmp_path):
    rows = synth_rows()[:3] + synth_rows()[16:17]
    encoded = load_problems(write_jsonl(tmp_path / "lite.jsonl", rows))
    plain_rows = [{**r, "private_test_cases": json.dumps(json.loads(pickle.loads(zlib.decompress(  # our own payload
        base64.b64decode(r["private_test_cases"])))))} for r in rows]
    plain = load_problems(write_jsonl(tmp_path / "original.jsonl", plain_rows))
    assert [p.answer for p in encoded] == [p.answer for p in plain]
    p = encoded[0]
    tests = parse_tests(p.answer)
    public, private = problem_tests(PROBLEMS[0])
    assert tests["inputs"] == [t["input"] for t in public + private]  # public first, then private (LCB's order)
    assert tests["outputs"] == [t["output"] for t in public + private]
    assert tests["prelude"] == "lcb" and tests["format"] == "stdio"
    assert p.id == "synth-00-a-plus-b" and p.extra["difficulty"] == "easy" and p.extra["platform"] == "atcoder"
    fn = parse_tests(encoded[3].answer)
    assert fn["format"] == "call" and fn["fn_name"] == "sumOfSquares" and fn["compare"] == "exact"
    fpublic, fprivate = problem_tests(PROBLEMS[16])
    assert fn["inputs"] == [[json.loads(t["input"])] for t in fpublic + fprivate]  # one JSON value per line
    assert fn["outputs"] == [json.loads(t["output"]) for t in fpublic + fprivate]  # decoded: no JSON-text ambiguity


class _Open:  # pickles as builtins.open(path, "w"): creates the file when unpickled by plain pickle
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def _malicious_payloads(marker):
    """(name, pickle bytes) that would create `marker` (or call a global) when plainly unpickled."""
    proto0 = f"c__builtin__\nopen\n(V{marker}\nVw\ntR.".encode()  # GLOBAL + REDUCE, protocol 0
    inst = f"(V{marker}\nVw\ni__builtin__\nopen\n.".encode()  # INST
    wrapped = pickle.dumps([{"input": "1"}, _Open(str(marker))], protocol=4)  # hidden in a list: STACK_GLOBAL, REDUCE
    ext = b"\x80\x02\x82\x01."  # EXT1: the copyreg extension registry (reaches find_class)
    persid = b"Px\n."  # PERSID
    return [("protocol 4 reduce", pickle.dumps(_Open(str(marker)), protocol=4)), ("GLOBAL", proto0),
            ("INST", inst), ("a call inside a list", wrapped), ("EXT1", ext), ("PERSID", persid)]


def test_plain_pickle_would_run_the_payload(tmp_path):
    """The payloads are live: plain `pickle.loads` (what LiveCodeBench's loader calls) creates the file."""
    marker = tmp_path / "pwned"
    pickle.loads(_malicious_payloads(marker)[0][1])
    assert marker.exists()


@pytest.mark.parametrize("index", range(6))
def test_malicious_private_tests_are_refused_naming_the_row(tmp_path, index):
    marker = tmp_path / "pwned"
    name, payload = _malicious_payloads(marker)[index]
    opcodes = {op.name for op, _, _ in pickletools.genops(payload)} if name != "EXT1" else {"EXT1"}
    good = synth_rows()[0]
    bad = {**synth_rows()[1], "private_test_cases": b64z(payload)}
    path = write_jsonl(tmp_path / "evil.jsonl", [good, bad])
    with pytest.raises(DataError) as err:
        load_problems(path)
    msg = str(err.value)
    assert "evil.jsonl: row 2: 'private_test_cases'" in msg and "refused" in msg, msg
    assert any(f"opcode {op}" in msg for op in opcodes & {"GLOBAL", "STACK_GLOBAL", "INST", "REDUCE", "EXT1",
                                                          "PERSID"}), msg
    assert not marker.exists()


def test_the_second_layer_alone_refuses_globals(tmp_path):
    """Even without the opcode check, the restricted unpickler resolves no global."""
    marker = tmp_path / "pwned"
    for name, payload in _malicious_payloads(marker):
        with pytest.raises(Exception):
            RestrictedUnpickler(io.BytesIO(payload)).load()
    assert not marker.exists()
    assert RestrictedUnpickler(io.BytesIO(pickle.dumps({"a": [1, 2.5, "x", None, True]}))).load() == {
        "a": [1, 2.5, "x", None, True]}


def test_bad_encodings_and_bombs_are_refused():
    with pytest.raises(DataError, match="row 9: neither JSON nor base64"):
        decode_lcb_payload("%%% not base64", "row 9")
    with pytest.raises(DataError, match="not zlib-compressed"):
        decode_lcb_payload(base64.b64encode(b"plain bytes").decode(), "row 9")
    with pytest.raises(DataError, match="decompresses to more than 4096 bytes"):
        decode_lcb_payload(b64z(b"\x00" * 1_000_000), "row 9", max_bytes=4096)
    with pytest.raises(DataError, match="not a valid pickle"):
        decode_lcb_payload(b64z(b"\x80\x04\x95garbage"), "row 9")
    with pytest.raises(DataError, match="decoded payload is not JSON"):
        decode_lcb_payload(b64z(pickle.dumps("not json")), "row 9")
    assert decode_lcb_payload(encode_private([{"input": "1", "output": "2", "testtype": "stdin"}]), "r") == [
        {"input": "1", "output": "2", "testtype": "stdin"}]


def test_lcb_row_errors_name_the_row_and_key(tmp_path):
    row = synth_rows()[0]
    cases = [
        ({**row, "public_test_cases": "[{\"input\": 1}]"}, "public_test_cases\\[0\\]"),
        ({**row, "private_test_cases": json.dumps([{"input": "1", "output": "1", "testtype": "functional"}])},
         "mixes stdin and functional"),
        ({**synth_rows()[16], "metadata": "{}"}, "func_name"),
        ({**row, "public_test_cases": "[]", "private_test_cases": ""}, "no tests"),
        ({**row, "public_test_cases": json.dumps([{"input": "1", "output": "1", "testtype": "file"}])}, "testtype"),
    ]
    for i, (bad, match) in enumerate(cases):
        with pytest.raises(DataError, match=rf"bad{i}.jsonl: row 1: .*{match}"):
            load_problems(write_jsonl(tmp_path / f"bad{i}.jsonl", [bad]))


# ---- functional tests with huge integers, judged as LiveCodeBench's testing_util judges them -----------
# LiveCodeBench's evaluation process raises Python's int <-> str limit to 50,000 digits; its
# `grade_call_based` json.loads every input line and every output before running anything (one that fails
# fails the whole problem), calls `method(*args)`, turns a returned tuple into a list and compares with ==.
# Restated here (from lcb_runner/evaluation/testing_util.py; not copied), run in a child so that this
# process keeps its own digit limit.
_LCB_CALL_REFERENCE = r"""
import json, sys
sys.set_int_max_str_digits(50000)
job = json.loads(sys.stdin.read())
try:
    args = [[json.loads(line) for line in t.split("\n")] for t in job["inputs"]]
    want = [json.loads(t) for t in job["outputs"]]
    scope = {}
    exec(job["prelude"] + "\n\n" + job["code"], scope)
    target = scope["Solution"]() if "class Solution" in job["code"] else None
    method = getattr(target, job["fn_name"]) if target is not None else scope[job["fn_name"]]
    ok = True
    for a, w in zip(args, want):
        got = method(*a)
        if isinstance(got, tuple):
            got = list(got)
        if not got == w:
            ok = False
            break
except Exception:
    ok = False
print(int(ok))
"""


def lcb_call_verdict(code: str, inputs: list[str], outputs: list[str], fn_name: str) -> bool:
    import subprocess
    import sys

    from resrl.tasks.code.sandbox.code_tests import LCB_PRELUDE

    job = json.dumps({"code": code, "inputs": inputs, "outputs": outputs, "fn_name": fn_name, "prelude": LCB_PRELUDE})
    out = subprocess.run([sys.executable, "-I", "-c", _LCB_CALL_REFERENCE], input=job.encode(), capture_output=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr.decode()[-500:]
    return out.stdout.strip() == b"1"


def _lcb_functional_row(inputs: list[str], outputs: list[str], fn_name: str = "f") -> dict:
    tests = [{"input": x, "output": y, "testtype": "functional"} for x, y in zip(inputs, outputs)]
    return {"question_content": "A number.", "platform": "leetcode", "question_id": "big-int", "contest_id": "c",
            "contest_date": "2024-01-01T00:00:00", "difficulty": "easy",
            "starter_code": f"class Solution:\n    def {fn_name}(self, *args):\n        ",
            "public_test_cases": json.dumps(tests[:1]), "private_test_cases": encode_private(tests[1:]),
            "metadata": json.dumps({"func_name": fn_name})}


_D5000 = "1" + "0" * 4998 + "7"  # 10**4999 + 7: over Python's 4,300-digit default, under LiveCodeBench's 50,000
_D10K = "9" * 10_000
BIG_INT_CASES = {  # name: (program, inputs, outputs)
    "a 5,000-digit answer": ("class Solution:\n    def f(self, k):\n        return 10 ** k + 7\n",
                             ["4999", "3"], [_D5000, "1007"]),
    "the same answer, last digit wrong": ("class Solution:\n    def f(self, k):\n        return 10 ** k + 8\n",
                                          ["4999"], [_D5000]),
    "a 10,000-digit argument, echoed": ("class Solution:\n    def f(self, n):\n        return n\n", [_D10K], [_D10K]),
    "two 10,000-digit arguments, their 20,000-digit product": (
        "class Solution:\n    def f(self, a, b):\n        return a * b\n", [f"{_D10K}\n{_D10K}"], ["<product>"]),
    "a tuple of big ints against a list": ("class Solution:\n    def f(self, n):\n        return (n, n + 1)\n",
                                           [_D5000], [f"[{_D5000}, {_D5000[:-1]}8]"]),
    "a 60,000-digit return value where a small one is expected": (
        "class Solution:\n    def f(self, k):\n        return 10 ** k\n", ["60000"], ["5"]),
}


def _big_case(name):
    code, inputs, outputs = BIG_INT_CASES[name]
    if outputs == ["<product>"]:  # 10**20000 - 2 * 10**10000 + 1, written out (str() would hit the limit)
        outputs = ["9" * 9_999 + "8" + "0" * 9_999 + "1"]
    return code, inputs, outputs


@pytest.mark.parametrize("name", list(BIG_INT_CASES))
def test_functional_big_ints_get_livecodebenchs_verdict(tmp_path, name):
    """A LiveCodeBench functional row with integers over Python's 4,300-digit default loads (its answer is
    written out with every digit) and the sandbox's verdict equals the restated testing_util's."""
    from resrl.tasks.code.reward import run_tests

    code, inputs, outputs = _big_case(name)
    want = lcb_call_verdict(code, inputs, outputs, "f")
    (problem,) = load_problems(write_jsonl(tmp_path / "lcb.jsonl", [_lcb_functional_row(inputs, outputs)]))
    got = run_tests(code, problem.answer, 10.0)
    assert got.passed == want, (name, want, got.error)
    expected_verdict = not name.startswith(("the same answer", "a 60,000"))
    assert want == expected_verdict  # the cases are what their names say, for LiveCodeBench too


def test_a_functional_answer_over_livecodebenchs_limit_is_refused_naming_the_row(tmp_path):
    """Over 50,000 digits LiveCodeBench's json.loads fails, and with it the whole problem (no program can
    pass); here the row is refused when the file loads, naming file, row and test (deliberate: the data
    cannot be judged). Restated LiveCodeBench gives 0 to the right program."""
    over = "1" + "0" * 50_000
    code = "class Solution:\n    def f(self, k):\n        return 10 ** k\n"
    assert lcb_call_verdict(code, ["50000"], [over], "f") is False
    with pytest.raises(DataError, match=r"over.jsonl: row 1: the output of functional test 0: an integer of 50001 digits"):
        load_problems(write_jsonl(tmp_path / "over.jsonl", [_lcb_functional_row(["50000"], [over])]))
    with pytest.raises(DataError, match=r"arg.jsonl: row 1: test 0: a functional test input: an integer of 50001"):
        load_problems(write_jsonl(tmp_path / "arg.jsonl", [_lcb_functional_row([over], ["1"])]))


def test_big_int_tests_load_from_any_row_and_score_through_the_reward(tmp_path):
    """The other places a tests object is written out: a `{"problem", "tests"}` row whose tests (JSON text)
    hold a 6,000-digit answer, and a tests dict handed to the training reward as the answer."""
    from resrl.tasks.code.reward import run_tests
    from resrl.tasks.rewards import load_reward_function

    answer = "1" + "0" * 5_999
    tests_text = '{"fn_name": "f", "inputs": [[5999]], "outputs": [' + answer + '], "compare": "exact"}'
    (problem,) = load_problems(write_jsonl(tmp_path / "mine.jsonl", [{"problem": "10 ** k", "tests": tests_text}]))
    assert answer in problem.answer
    assert run_tests("def f(k):\n    return 10 ** k\n", problem.answer, 10.0).passed
    assert not run_tests("def f(k):\n    return 10 ** k + 1\n", problem.answer, 10.0).passed
    reward = load_reward_function("code", timeout_s=10.0, num_workers=1)
    try:
        as_dict = parse_tests(tests_text)
        as_dict = {k: v for k, v in as_dict.items() if k != "format"}
        assert reward(["```python\ndef f(k):\n    return 10 ** k\n```"], [as_dict]) == [1.0]
    finally:
        reward.close()


def test_dumps_json_writes_every_digit_and_reads_back():
    """`dumps_json` (the answer of a code problem) against `loads_json`: ints past the process's limit at any
    depth, negative ones, strings that look like its placeholders; json.dumps's own text when it can."""
    import sys
    from decimal import Decimal

    from resrl.tasks.code.sandbox.code_tests import dumps_json, loads_json

    big = int(Decimal("7" * 12_000))
    value = {"outputs": [[big, -big, 3], {"k": [-big]}], "text": 'resrl-int-00-0 "x"', "tuple": (big,), "n": 5}
    text = dumps_json(value, sort_keys=True, ensure_ascii=False)
    assert ("7" * 12_000) in text and ("-" + "7" * 12_000) in text
    back = loads_json(text)
    assert back == {**value, "tuple": [big]}
    small = {"a": [1, 2.5, None, True, "é"], "b": {"c": 10 ** 100}}
    assert dumps_json(small, sort_keys=True, ensure_ascii=False) == json.dumps(small, sort_keys=True, ensure_ascii=False)
    before = sys.get_int_max_str_digits()  # this process's limit is left as it was
    dumps_json(value)
    assert sys.get_int_max_str_digits() == before


# ---- CodeForces / CodeContests / APPS ---------------------------------------------------------------
CF_ROW = {"id": "9999A", "contest_id": "9999", "index": "A", "title": "Double", "time_limit": 1.0,
          "memory_limit": 256.0, "description": "Print twice n.", "input_format": "One integer n.",
          "output_format": "2n.", "note": "Easy.", "examples": [{"input": "2\n", "output": "4\n"}],
          "official_tests": [{"input": "2\n", "output": "4\n"}, {"input": "-5\n", "output": "-10\n"}],
          "rating": 800, "tags": ["math"], "input_mode": "stdio", "interaction_format": None}


def test_codeforces_rows(tmp_path):
    from resrl.tasks.code.reward import run_tests

    (p,) = load_problems(write_jsonl(tmp_path / "cf.jsonl", [CF_ROW]))
    tests = parse_tests(p.answer)
    assert tests["inputs"] == ["2\n", "-5\n"]  # the example, then the official tests not already in it
    assert (tests["time_limit_s"], tests["memory_limit_mb"]) == (1.0, 256)
    assert p.id == "9999A" and p.extra["rating"] == 800.0 and p.extra["platform"] == "codeforces"
    text = p.prompt[0]["content"]
    assert "time limit per test: 1 seconds" in text and "## Example 1" in text and "standard input" in text
    assert run_tests("print(2 * int(input()))", p.answer, 5.0).passed
    assert not run_tests("print(4)", p.answer, 5.0).passed  # the example's answer, hard-coded
    for bad, match in [({"interaction_format": "Interact."}, "interactive"), ({"input_mode": "file"}, "input_mode"),
                       ({"examples": [], "official_tests": []}, "no tests"),
                       ({"official_tests": [{"input": 1, "output": "2"}]}, "official_tests\\[0\\]")]:
        with pytest.raises(DataError, match=rf"cf_bad.jsonl: row 1: .*{match}"):
            load_problems(write_jsonl(tmp_path / "cf_bad.jsonl", [{**CF_ROW, **bad}]))


def test_codecontests_and_apps_rows(tmp_path):
    cc = {"name": "1548_A. Triple", "description": "Print 3n.", "public_tests": {"input": ["1\n"], "output": ["3\n"]},
          "private_tests": {"input": ["2\n"], "output": ["6\n"]}, "generated_tests": {"input": ["7\n"], "output": ["21\n"]},
          "time_limit": {"seconds": 2, "nanos": 500000000}, "memory_limit_bytes": 268435456, "cf_rating": 1200,
          "cf_contest_id": 1548, "cf_index": "A", "difficulty": 7, "source": 2}
    apps_stdio = {"problem_id": 12, "question": "Print n + 1.", "difficulty": "introductory",
                  "input_output": json.dumps({"inputs": ["1\n", "5\n"], "outputs": ["2\n", "6\n"]})}
    apps_call = {"problem_id": 13, "question": "Return a + b.", "starter_code": "def add(a, b):\n",
                 "input_output": json.dumps({"fn_name": "add", "inputs": [[1, 2], [3, 4]], "outputs": [[3], [7]]})}
    problems = load_problems(write_jsonl(tmp_path / "mix.jsonl", [cc, apps_stdio, apps_call]))
    t = parse_tests(problems[0].answer)
    assert t["inputs"] == ["1\n", "2\n", "7\n"] and (t["time_limit_s"], t["memory_limit_mb"]) == (2.5, 256)
    assert problems[0].extra["rating"] == 1200.0 and problems[0].id == "1548_A. Triple"
    assert parse_tests(problems[1].answer)["format"] == "stdio" and problems[1].extra["difficulty"] == "introductory"
    call = parse_tests(problems[2].answer)
    assert call["format"] == "call" and "def add(a, b)" in problems[2].prompt[0]["content"]
    from resrl.tasks.code.reward import CodeExecutor

    with CodeExecutor(num_workers=2, timeout_s=5.0) as ex:
        res = ex.run_many([("print(3 * int(input()))", problems[0].answer), ("print(int(input()) + 1)", problems[1].answer),
                           ("def add(a, b):\n    return a + b\n", problems[2].answer)])
    assert [r.passed for r in res] == [True, True, True]


# ---- evaluation as LiveCodeBench reports it --------------------------------------------------------
def lcb_estimate_pass_at_k(n: int, c: int, k: int) -> float:
    """LiveCodeBench's pass_k_utils.estimate_pass_at_k, restated: 1 - C(n - c, k) / C(n, k) exactly."""
    return 1.0 if n - c < k else float(1 - Fraction(math.comb(n - c, k), math.comb(n, k)))


PATTERN = [[1, 1, 1, 1], [1, 0, 0, 1], [0, 0, 0, 0], [0, 1, 0, 0]]  # per problem, per sample: reference or wrong


class ReferenceOrWrong:
    def __init__(self, problems):
        self.index = {p.id: i for i, p in enumerate(problems)}

    def __call__(self, jobs):
        from resrl.eval import Sample

        out = []
        for job in jobs:
            i = self.index[job.problem_id]
            code = reference_program(job.problem_id) if PATTERN[i][job.sample_index] else "print('no idea')\n"
            out.append(Sample(text=f"Plan.\n```python\n{code}```", num_tokens=30, truncated=False))
        return out


def test_eval_on_a_livecodebench_file_and_code_report(tmp_path, capsys):
    from resrl.cli import main
    from resrl.eval import EvalConfig, evaluate
    from resrl.tasks.data import load_benchmarks

    rows = [synth_rows()[i] for i in (0, 5, 13, 16)]  # easy, medium, hard (stdin) and a LeetCode-style one
    path = write_jsonl(tmp_path / "lcb_release.jsonl", rows)
    benchmarks = load_benchmarks([str(path)])
    problems = benchmarks["lcb_release"]
    config = EvalConfig(n=4, ks=(1, 2, 4), reward="code", batch_size=8, progress=False, reward_workers=2,
                        reward_timeout_s=6.0)
    summary = evaluate(None, benchmarks, config, tmp_path / "run", generator=ReferenceOrWrong(problems))
    m = summary["benchmarks"]["lcb_release"]
    c = [sum(r) for r in PATTERN]
    assert m["avg@4"] == pytest.approx(sum(ci / 4 for ci in c) / 4)  # LiveCodeBench's pass@1: mean of c/n
    for k in (1, 2, 4):
        assert m["pass@k"][str(k)] == pytest.approx(sum(lcb_estimate_pass_at_k(4, ci, k) for ci in c) / 4)

    # the per-difficulty table and a rating, with made-up CodeForces ratings added to the rows
    rated = [{**r, "metadata": json.dumps({**json.loads(r["metadata"]), "rating": d})}
             for r, d in zip(rows, (800, 1200, 1600, 2000))]
    write_jsonl(path, rated)
    assert main(["code-report", str(tmp_path / "run"), "--data", str(path), "--k", "1,2,4"]) == 0
    report = json.loads((tmp_path / "run" / "code_report.json").read_text())["lcb_release"]
    assert report["overall"]["avg"] == pytest.approx(m["avg@4"])
    assert report["by_difficulty"]["easy"]["num_problems"] == 2  # a-plus-b and sum-of-squares
    assert report["by_difficulty"]["hard"]["avg"] == 0.0 and report["by_difficulty"]["medium"]["avg"] == 0.5
    from resrl.tasks.code.rating import rating_from_problems

    want = rating_from_problems([800, 1200, 1600, 2000], c, [4] * 4)
    assert report["rating"]["rating"] == pytest.approx(want.rating) and report["rating"]["solved"] == sum(c)
    assert "CodeForces rating estimate" in capsys.readouterr().out


# ---- payloads bounded before they allocate (issue 52) -------------------------------------------------
def _memo_bomb() -> bytes:
    """LONG_BINPUT 2**26 on a None: the C unpickler sizes its memo array to the index (1 GB), 96 characters
    of base64 once compressed."""
    return b"\x80\x04N" + b"r" + (1 << 26).to_bytes(4, "little") + b"."


def _alias_bomb(levels: int = 30) -> bytes:
    """A 100-character string, then lists of two references to the level below, 30 deep: a few hundred
    bytes that stand for 2**30 copies of the string once anything writes them out."""
    out = b"\x80\x04" + b"X" + (100).to_bytes(4, "little") + b"x" * 100 + b"\x94"  # BINUNICODE, MEMOIZE (0)
    for k in range(levels):
        out += b"(" + b"h" + bytes([k]) + b"h" + bytes([k]) + b"l" + b"\x94"  # MARK, BINGET k twice, LIST, MEMOIZE
    return out + b"."


def _deep_bomb(depth: int = 100_000) -> bytes:
    return b"(" * depth + b"l" * depth + b"."


def _zlib_bomb_b64(gib: float = 1.0) -> str:
    comp = zlib.compressobj(9)
    chunk = b"\0" * (64 << 20)
    parts = [comp.compress(chunk) for _ in range(int(gib * 16))]
    return base64.b64encode(b"".join(parts) + comp.flush()).decode()


BOMBS = {
    "memo index 2**26": (lambda: b64z(_memo_bomb()), "memo index"),
    "aliasing, 2**30 copies": (lambda: b64z(_alias_bomb()), "expands to more than"),
    "nested 100,000 deep (pickle)": (lambda: b64z(_deep_bomb()), "nests deeper than"),
    "nested 100,000 deep (JSON text)": (lambda: "[" * 100_000 + "]" * 100_000, "nested too deeply"),
    "zlib bomb, 1 GiB of zeros": (lambda: _zlib_bomb_b64(1.0), "decompresses to more than"),
}


@pytest.mark.parametrize("name", list(BOMBS))
def test_pickle_memory_bombs_are_refused_cheaply_naming_the_row(tmp_path, name):
    """Each bomb is a DataError naming the file, the row and the key, and the decoding child that refused
    it peaked under 300 MB of memory (the trainer's process never held the payload's expansion)."""
    from resrl.tasks.code import safe_pickle

    make, reason = BOMBS[name]
    good = synth_rows()[0]
    bad = {**synth_rows()[1], "private_test_cases": make()}
    path = write_jsonl(tmp_path / "bombs.jsonl", [good, bad])
    safe_pickle.last_decode_peak_kb = None
    with pytest.raises(DataError) as err:
        load_problems(path)
    msg = str(err.value)
    assert "bombs.jsonl: row 2: 'private_test_cases'" in msg and reason in msg, msg
    if not name.endswith("(JSON text)"):
        assert safe_pickle.last_decode_peak_kb is not None and 0 < safe_pickle.last_decode_peak_kb < 300 * 1024, (
            safe_pickle.last_decode_peak_kb)


def test_the_bombs_are_live_without_the_bounds():
    """Unbounded, the memo bomb alone makes the unpickler ask for its 2**26-entry memo (MemoryError under a
    512 MB address space), and the alias bomb's value, written out, is 2**30 strings long."""
    import subprocess
    import sys

    code = ("import pickle, resource, sys\nresource.setrlimit(resource.RLIMIT_AS, (512 << 20, 512 << 20))\n"
            "try:\n    pickle.loads(sys.stdin.buffer.read())\n    print('loaded')\nexcept MemoryError:\n"
            "    print('MemoryError')\n")
    out = subprocess.run([sys.executable, "-I", "-S", "-c", code], input=_memo_bomb(), capture_output=True,
                         timeout=120)
    assert out.stdout.decode().strip() == "MemoryError", out.stderr.decode()[-500:]
    value = pickle.loads(_alias_bomb(levels=12))  # small enough to count: 2**12 copies
    flat = json.dumps(value)
    assert flat.count("x" * 100) == 2 ** 12


def test_legit_payloads_still_decode_with_the_bounds():
    """What the bounds accept: LiveCodeBench's real shape (a pickled JSON string) and plain nested data with
    shared strings, decoded in the child."""
    tests = [{"input": "1 2\n" * 1000, "output": "3", "testtype": "stdin"}] * 5
    assert decode_lcb_payload(encode_private(tests), "r") == tests
    shared = "y" * 50
    data = {"a": [shared, shared, [shared, {"b": (1, 2.5, None, True)}]]}
    assert decode_lcb_payload(b64z(pickle.dumps(data, protocol=4)), "r") == json.loads(json.dumps(data))
