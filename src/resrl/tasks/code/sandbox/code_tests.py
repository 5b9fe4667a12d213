"""Code test formats and how a program's outputs are judged against them (pure functions; the
parent side of `resrl.tasks.code.reward`, which documents the formats).

`parse_tests` validates a tests object and normalises it; `fn_output_matches` is EvalPlus's
comparison for function-level tests, `call_output_matches` the function-call (LeetCode / TACO)
one, `normalize_output` the stdin/stdout one. Return values reach here decoded into builtin
data by `resrl.tasks.code.sandbox.code_values`, so no comparison ever calls a method a program defined.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from resrl.errors import DataError
from resrl.tasks.code.sandbox.code_values import BadValue, decode, decode_structure

FORMATS = ("check", "stdio", "call", "fn")


def _text(value: Any, where: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "\n".join(value)  # some data sets store the lines of an input / output
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    raise DataError(f"{where}: expected a string, got {type(value).__name__}")


def _check_python_name(value: Any, key: str, where: str) -> None:
    if not isinstance(value, str) or not re.fullmatch(r"[A-Za-z_]\w*", value):
        raise DataError(f"{where}: {key!r} {value!r} is not a Python name")


def _check_io_lists(inputs: Any, outputs: Any, where: str) -> None:
    """`inputs` and `outputs`: two non-empty lists of equal length."""
    if not isinstance(inputs, list) or not isinstance(outputs, list):
        raise DataError(f"{where}: 'inputs' and 'outputs' must be lists")
    if len(inputs) != len(outputs):
        raise DataError(f"{where}: {len(inputs)} inputs but {len(outputs)} outputs")
    if not inputs:
        raise DataError(f"{where}: 'inputs' is empty")


def parse_tests(tests: Any, where: str = "tests") -> dict:
    """Validate a tests object (a dict, or its JSON text) and return it normalised, with a "format"
    key ("check" | "stdio" | "call"). DataError (a ValueError) names the key that is wrong."""
    if isinstance(tests, (str, bytes)):
        try:
            tests = json.loads(tests)
        except json.JSONDecodeError as exc:
            raise DataError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(tests, dict):
        raise DataError(f"{where}: expected a JSON object, got {type(tests).__name__}")
    if "entry_point" in tests and "inputs" in tests and "test" not in tests:
        return _parse_fn(tests, where)
    if "test" in tests or "entry_point" in tests:
        for key in ("entry_point", "test"):
            if not isinstance(tests.get(key), str) or not tests[key].strip():
                raise DataError(f"{where}: HumanEval-style tests need a non-empty string '{key}'")
        _check_python_name(tests["entry_point"], "entry_point", where)
        prompt = tests.get("prompt", "")
        if not isinstance(prompt, str):
            raise DataError(f"{where}: 'prompt' must be a string")
        return {"format": "check", "entry_point": tests["entry_point"], "test": tests["test"], "prompt": prompt}
    if "inputs" not in tests or "outputs" not in tests:
        raise DataError(f"{where}: expected 'entry_point'+'test', or 'inputs'+'outputs' (keys: {sorted(tests)[:8]})")
    inputs, outputs = tests["inputs"], tests["outputs"]
    _check_io_lists(inputs, outputs, where)
    fn_name = tests.get("fn_name")
    if fn_name:
        _check_python_name(fn_name, "fn_name", where)
        args = []
        for i, a in enumerate(inputs):
            if isinstance(a, str):  # TACO stores call arguments as JSON text, one argument per line
                try:
                    a = [json.loads(line) for line in a.splitlines() if line.strip()]
                except json.JSONDecodeError:
                    raise DataError(f"{where}: 'inputs'[{i}] is a string that is not JSON arguments") from None
            if not isinstance(a, list):
                raise DataError(f"{where}: 'inputs'[{i}] must be a list of arguments")
            args.append(a)
        return {"format": "call", "fn_name": fn_name, "inputs": args, "outputs": list(outputs)}
    return {"format": "stdio", "inputs": [_text(x, f"{where}: 'inputs'[{i}]") for i, x in enumerate(inputs)],
            "outputs": [_text(y, f"{where}: 'outputs'[{i}]") for i, y in enumerate(outputs)]}


def _parse_fn(tests: dict, where: str) -> dict:
    entry = tests.get("entry_point")
    _check_python_name(entry, "entry_point", where)
    inputs, outputs = tests.get("inputs"), tests.get("outputs")
    _check_io_lists(inputs, outputs, where)
    for i, a in enumerate(inputs):
        if not isinstance(a, list):
            raise DataError(f"{where}: 'inputs'[{i}] must be a list of arguments")
    prompt = tests.get("prompt", "")
    if not isinstance(prompt, str):
        raise DataError(f"{where}: 'prompt' must be a string")
    atol = tests.get("atol", 0)
    if isinstance(atol, bool) or not isinstance(atol, (int, float)) or not atol >= 0:
        raise DataError(f"{where}: 'atol' must be a number >= 0, got {atol!r}")
    encoding = tests.get("encoding", "plain")
    if encoding not in ("plain", "exact"):
        raise DataError(f"{where}: 'encoding' must be 'plain' or 'exact', got {encoding!r}")
    oracle = tests.get("oracle")
    if oracle not in (None, "find_zero"):
        raise DataError(f"{where}: unknown 'oracle' {oracle!r} (known: find_zero)")
    base = tests.get("base_count")
    if base is not None and (isinstance(base, bool) or not isinstance(base, int) or not 0 < base <= len(inputs)):
        raise DataError(f"{where}: 'base_count' must be an int in 1..{len(inputs)}, got {base!r}")
    out = {"format": "fn", "entry_point": entry, "prompt": prompt, "inputs": inputs, "outputs": outputs,
           "atol": float(atol), "encoding": encoding}
    if oracle:
        out["oracle"] = oracle
    if base is not None:
        out["base_count"] = base
    if encoding == "exact":  # decoded now: a bad expected value is the data's fault, named here
        values = []
        for i, y in enumerate(outputs):
            try:
                values.append(decode_structure(y))
            except BadValue as exc:
                raise DataError(f"{where}: 'outputs'[{i}] is not an exact-encoded value ({exc})") from None
        out["_expected"] = values  # keys starting with "_" are derived: never hashed or written out
    return out


def value_cap(tests: dict) -> int:
    """The largest encoded return value a function-level item accepts: twice its largest expected
    output (HumanEval+ has outputs of several MB), at least the sandbox's output limit."""
    if "_value_cap" not in tests:
        outs = tests["outputs"]
        biggest = max((len(y) if isinstance(y, str) else len(json.dumps(y)) for y in outs), default=0)
        tests["_value_cap"] = 2 * biggest + 4096
    return tests["_value_cap"]


def expected_values(tests: dict) -> list:
    """The expected outputs of a function-level tests object as Python values (decoded once)."""
    if "_expected" not in tests:
        outs = tests["outputs"]
        tests["_expected"] = [decode_structure(y) for y in outs] if tests.get("encoding") == "exact" else list(outs)
    return tests["_expected"]


def _plain(value: Any) -> Any:
    """A return value as plain JSON would hold it (tuples -> lists), for data whose outputs are JSON."""
    t = type(value)
    if t is tuple or t is list:
        return [_plain(v) for v in value]
    if t is dict:
        return {k: _plain(v) for k, v in value.items()}
    return value


def _is_floats(x: Any) -> bool:
    """EvalPlus's `is_floats`: a float, or a non-empty list / tuple of floats."""
    if isinstance(x, float):
        return True
    if isinstance(x, (list, tuple)) and x:
        return all(isinstance(i, float) for i in x)
    return False


def _poly(xs: list, x: float) -> float:
    return sum(coeff * math.pow(x, i) for i, coeff in enumerate(xs))


def fn_output_matches(got: Any, want: Any, atol: float = 0.0, oracle: str | None = None,
                      args: list | None = None) -> bool:
    """EvalPlus's comparison of one return value with the expected one (both builtin data):
    `got == want`; else, when the expected value is a float or a non-empty list/tuple of floats
    (tolerance 1e-6 when the task's atol is 0) or the task has an atol, the same type, the same
    length and numpy.allclose(got, want, rtol=1e-7, atol). HumanEval's find_zero is judged by
    |poly(xs, got)| <= atol. (EvalPlus carries an atol raised to 1e-6 by one float output over to
    the task's later inputs; here each input has its own.)"""
    try:
        if oracle == "find_zero":
            return abs(_poly(*args, got)) <= atol
        if got == want:
            return True
        if atol == 0 and _is_floats(want):
            atol = 1e-6
        if atol == 0 or type(got) is not type(want):
            return False
        if isinstance(want, (list, tuple)) and len(got) != len(want):
            return False
        import numpy as np

        return bool(np.allclose(got, want, rtol=1e-07, atol=atol))
    except Exception:  # noqa: BLE001 - incomparable values (numpy on strings, overflow...): not a match
        return False


def normalize_output(text: str) -> list[str]:
    """stdout -> comparable lines: blanks collapsed, lines stripped, trailing empty lines dropped."""
    lines = [" ".join(line.split()) for line in text.replace("\r\n", "\n").split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def _values_equal(got: Any, want: Any) -> bool:
    if isinstance(got, bool) or isinstance(want, bool):
        return got is want if isinstance(got, bool) and isinstance(want, bool) else False
    if isinstance(got, (int, float)) and isinstance(want, (int, float)):
        if isinstance(got, int) and isinstance(want, int):
            return got == want
        return math.isclose(got, want, rel_tol=1e-6, abs_tol=1e-9)
    if isinstance(got, list) and isinstance(want, list):
        return len(got) == len(want) and all(_values_equal(g, w) for g, w in zip(got, want))
    if isinstance(got, dict) and isinstance(want, dict):
        return got.keys() == want.keys() and all(_values_equal(got[k], want[k]) for k in got)
    return got == want


def call_output_matches(ret_json: str, want: Any) -> bool:
    """A function-call test: the program's return value (JSON text) against the expected value."""
    try:
        got = json.loads(ret_json)
    except (json.JSONDecodeError, RecursionError):
        return False
    if _values_equal(got, want):
        return True
    if isinstance(want, str):  # LiveCodeBench-style data stores the expected value as JSON text
        try:
            decoded = json.loads(want)
        except (json.JSONDecodeError, RecursionError):
            return False
        return _values_equal(got, decoded)
    return isinstance(want, list) and len(want) == 1 and _values_equal(got, want[0])


def fn_record_matches(record: dict, want: Any, tests: dict, i: int) -> bool:
    """A function-level test's record from the sandbox (its encoded return value) against the
    expected value of input i."""
    if "ret" not in record or not isinstance(record["ret"], str):
        return False
    try:
        got = decode(record["ret"])
    except BadValue:
        return False
    if tests.get("encoding") != "exact":
        got = _plain(got)
    return fn_output_matches(got, want, tests.get("atol", 0.0), tests.get("oracle"), tests["inputs"][i])


__all__ = ["FORMATS", "parse_tests", "expected_values", "fn_output_matches", "fn_record_matches", "normalize_output",
           "call_output_matches", "value_cap"]
