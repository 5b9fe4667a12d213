"""Code test formats and how a program's outputs are judged against them (pure functions; the
parent side of `resrl.tasks.code.reward`, which documents the formats).

`parse_tests` validates a tests object and normalises it; `fn_output_matches` is EvalPlus's
comparison for function-level tests, `call_output_matches` the function-call (LeetCode / TACO)
one, `stdout_matches` the stdin/stdout one (LiveCodeBench's `testing_util`, or a numeric
tolerance as CodeForces checkers use). Return values reach here decoded into builtin data by
`resrl.tasks.code.sandbox.code_values`, so no comparison ever calls a method a program defined.

Options of the stdin/stdout and function-call formats (all optional; the loaders of
`resrl.tasks.code.contests` fill them from a data set's rows):

    time_limit_s     wall-time limit of each test in seconds (the problem's own, e.g. CodeForces'
                     `time_limit`); replaces the reward's default per-test timeout
    memory_limit_mb  memory of the program in MB (the problem's own); replaces the sandbox's
                     address-space and cgroup limits for this problem
    prelude          "lcb": run LiveCodeBench's standard imports (`LCB_PRELUDE`) before the program,
                     as its harness does
    float_tol        stdin/stdout only: numbers may differ by float_tol, absolute or relative
                     (|got - want| <= float_tol * max(1, |want|)); default None = LiveCodeBench's rule
    compare          function call only: "exact" = Python `==` of the decoded values (LiveCodeBench's
                     rule: no float tolerance, no one-element-list unwrapping); default "lenient"
"""

from __future__ import annotations

import json
import math
import re
from decimal import Decimal
from typing import Any

from resrl.errors import DataError
from resrl.tasks.code.sandbox.code_values import BadValue, decode, decode_structure

FORMATS = ("check", "stdio", "call", "fn")

# LiveCodeBench's harness runs every program after these imports (`import_string` in
# lcb_runner/evaluation/testing_util.py: the same modules, written out here); with "prelude": "lcb"
# the sandbox runs them in the program's namespace first, as LiveCodeBench does.
_LCB_STAR = ("string", "re", "datetime", "collections", "heapq", "bisect", "copy", "math", "random", "statistics",
             "itertools", "functools", "operator", "io", "sys", "json", "builtins", "typing")  # `from m import *`
_LCB_PLAIN = _LCB_STAR[:16]  # then `import m` of these
LCB_PRELUDE = ("".join(f"from {m} import *\n" for m in _LCB_STAR) + "".join(f"import {m}\n" for m in _LCB_PLAIN)
               + "sys.setrecursionlimit(50000)\n")
PRELUDES = {"lcb": LCB_PRELUDE}


# LiveCodeBench's evaluation process raises Python's limit on int <-> decimal text from 4,300 digits to
# 50,000 (`sys.set_int_max_str_digits(50000)`); the harness does the same inside the sandbox, and the
# parent reads JSON numbers up to that many digits without touching its own (process-wide) limit.
INT_MAX_STR_DIGITS = 50000


def _parse_int(text: str) -> int:
    if len(text) <= 4000:
        return int(text)
    if len(text.lstrip("-")) > INT_MAX_STR_DIGITS:
        raise ValueError(f"an integer of {len(text.lstrip('-'))} digits: over LiveCodeBench's limit of "
                         f"{INT_MAX_STR_DIGITS}")
    return int(Decimal(text))  # Decimal -> int does not go through the decimal-text limit


def loads_json(text: str | bytes) -> Any:
    """json.loads, with integers of up to INT_MAX_STR_DIGITS digits (LiveCodeBench's limit)."""
    return json.loads(text, parse_int=_parse_int)


def _int_text(n: int) -> str:
    """Decimal digits of an int of any size: Decimal's own conversion has no int <-> str digit limit."""
    return str(Decimal(n))


def dumps_json(value: Any, **kwargs: Any) -> str:
    """json.dumps, with integers of any size: what `loads_json` reads (LiveCodeBench's tests may hold
    answers of up to 50,000 digits; json.dumps stops at the process's limit, 4,300 by default, and this
    process's limit is left alone). Ints too long for json.dumps are written as placeholder strings
    (a random tag no data holds) and put back as digits."""
    try:
        return json.dumps(value, **kwargs)
    except ValueError as exc:
        if "integer string conversion" not in str(exc):
            raise
    import secrets
    import sys

    tag = f"resrl-int-{secrets.token_hex(12)}-"
    digits: list[str] = []
    # an int of b bits has about 0.30103 b digits: below 3 bits a digit of the limit, json.dumps writes it
    big_bits = 3 * sys.get_int_max_str_digits()

    def swap(v: Any) -> Any:
        t = type(v)
        if t is int and v.bit_length() > big_bits:
            digits.append(_int_text(v))
            return f"{tag}{len(digits) - 1}"
        if t is list or t is tuple:
            return [swap(x) for x in v]
        if t is dict:
            return {k: swap(x) for k, x in v.items()}
        return v

    text = json.dumps(swap(value), **kwargs)
    return re.sub('"' + re.escape(tag) + r'(\d+)"', lambda m: digits[int(m.group(1))], text)


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
            tests = loads_json(tests)
        except json.JSONDecodeError as exc:
            raise DataError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})") from None
        except ValueError as exc:  # an integer over LiveCodeBench's 50,000 digits
            raise DataError(f"{where}: {exc}") from None
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
                    a = [loads_json(line) for line in a.splitlines() if line.strip()]
                except (json.JSONDecodeError, ValueError):
                    raise DataError(f"{where}: 'inputs'[{i}] is a string that is not JSON arguments") from None
            if not isinstance(a, list):
                raise DataError(f"{where}: 'inputs'[{i}] must be a list of arguments")
            args.append(a)
        out = {"format": "call", "fn_name": fn_name, "inputs": args, "outputs": list(outputs)}
        compare = tests.get("compare", "lenient")
        if compare not in ("lenient", "exact"):
            raise DataError(f"{where}: 'compare' must be 'lenient' or 'exact', got {compare!r}")
        if compare == "exact":
            out["compare"] = "exact"
        return _run_options(tests, out, where)
    out = {"format": "stdio", "inputs": [_text(x, f"{where}: 'inputs'[{i}]") for i, x in enumerate(inputs)],
           "outputs": [_text(y, f"{where}: 'outputs'[{i}]") for i, y in enumerate(outputs)]}
    tol = tests.get("float_tol")
    if tol is not None:
        if isinstance(tol, bool) or not isinstance(tol, (int, float)) or not 0 <= tol < 1:
            raise DataError(f"{where}: 'float_tol' must be a number in [0, 1), got {tol!r}")
        out["float_tol"] = float(tol)
    return _run_options(tests, out, where)


def _run_options(tests: dict, out: dict, where: str) -> dict:
    """The per-problem limits and the prelude of the stdin/stdout and function-call formats."""
    t = tests.get("time_limit_s")
    if t is not None:
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 < t <= 600:
            raise DataError(f"{where}: 'time_limit_s' must be a number of seconds in (0, 600], got {t!r}")
        out["time_limit_s"] = float(t)
    m = tests.get("memory_limit_mb")
    if m is not None:
        if isinstance(m, bool) or not isinstance(m, (int, float)) or not 16 <= m <= 65536 or m != int(m):
            raise DataError(f"{where}: 'memory_limit_mb' must be a whole number of MB in [16, 65536], got {m!r}")
        out["memory_limit_mb"] = int(m)
    prelude = tests.get("prelude")
    if prelude is not None:
        if prelude not in PRELUDES:
            raise DataError(f"{where}: unknown 'prelude' {prelude!r} (known: {sorted(PRELUDES)})")
        out["prelude"] = prelude
    return out


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
    """The largest stdout / encoded return value an item accepts: twice its largest expected output
    (HumanEval+ has outputs of several MB, contest answers can pass 1 MiB, which LiveCodeBench
    accepts), at least the sandbox's output limit (`SandboxLimits.output_kb`, applied by the runner)."""
    if "_value_cap" not in tests:
        outs = tests.get("outputs") or []
        biggest = max((len(y.encode("utf-8", "surrogatepass")) if isinstance(y, str) else _json_size(y)
                       for y in outs), default=0)
        tests["_value_cap"] = 2 * biggest + 4096
    return tests["_value_cap"]


def _json_size(value: Any) -> int:
    """Length of the JSON text of `value`; for an int past the process's digit limit (which json.dumps
    cannot write) a bound from its size in memory."""
    try:
        return len(json.dumps(value))
    except ValueError:
        import sys

        return 3 * sys.getsizeof(value)


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
    """stdout -> the lines LiveCodeBench compares (`get_stripped_lines`): the whole text stripped,
    split at "\\n", each line stripped (so "\\r\\n" line ends, leading / trailing blank lines and
    blanks at line ends do not count; blanks inside a line do). Empty text -> []."""
    text = text.strip()
    return [line.strip() for line in text.split("\n")] if text else []


def _decimals(line: str) -> list[Decimal] | None:
    try:
        return [Decimal(tok) for tok in line.split()]
    except (ArithmeticError, ValueError):
        return None


def _finite(token: str) -> float | None:
    try:
        x = float(token)
    except ValueError:
        return None
    return x if math.isfinite(x) else None


def _line_matches(got: str, want: str, float_tol: float | None) -> bool:
    if got == want:
        return True
    if float_tol is None:  # LiveCodeBench: the lines' whitespace-separated tokens as decimal numbers, equal
        g, w = _decimals(got), _decimals(want)
        try:
            return g is not None and w is not None and g == w
        except ArithmeticError:  # a signalling NaN refuses comparison: not a match
            return False
    gt, wt = got.split(), want.split()
    if len(gt) != len(wt):
        return False
    for a, b in zip(gt, wt):
        if a == b:
            continue
        x, y = _finite(a), _finite(b)
        if x is None or y is None or not abs(x - y) <= float_tol * max(1.0, abs(y)):  # testlib's doubleCompare
            return False
    return True


def stdout_matches(got: str, want: str, float_tol: float | None = None) -> bool:
    """Whether a program's stdout `got` is the expected `want`.

    LiveCodeBench's rule (`grade_stdio` in lcb_runner/evaluation/testing_util.py, float_tol None):
    both texts as `normalize_output` lines, the same number of lines, and each line pair either
    equal, or both lines whitespace-separated tokens that all parse as decimal numbers with equal
    values (`Decimal`: "2.50" = "2.5" = "25e-1", "1 2" = "1  2"; no tolerance: 0.333333 != 0.3333333).
    With `float_tol` (CodeForces checkers' "absolute or relative error at most 1e-6"): the lines'
    tokens pair up, and each pair is equal text or two finite numbers with
    |got - want| <= float_tol * max(1, |want|)."""
    g, w = normalize_output(got), normalize_output(want)
    return len(g) == len(w) and all(_line_matches(a, b, float_tol) for a, b in zip(g, w))


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


def _exact_equal(got: Any, want: Any) -> bool:
    """Python `==` on two decoded JSON values (LiveCodeBench's functional comparison; a returned
    tuple arrives as a list, as LiveCodeBench converts it); a structure too deep to compare is no match."""
    try:
        return bool(got == want)
    except RecursionError:
        return False


def call_output_matches(ret_json: str, want: Any, compare: str = "lenient") -> bool:
    """A function-call test: the program's return value (JSON text) against the expected value.
    compare "exact": Python `==` of the decoded values, as LiveCodeBench compares functional tests."""
    try:
        got = loads_json(ret_json)
    except (ValueError, RecursionError):  # JSONDecodeError is a ValueError; so is an int over the limit
        return False
    if compare == "exact":
        return _exact_equal(got, want)
    if _values_equal(got, want):
        return True
    if isinstance(want, str):  # LiveCodeBench-style data stores the expected value as JSON text
        try:
            decoded = loads_json(want)
        except (ValueError, RecursionError):
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


__all__ = ["FORMATS", "LCB_PRELUDE", "PRELUDES", "parse_tests", "loads_json", "dumps_json", "expected_values", "fn_output_matches",
           "fn_record_matches", "normalize_output", "stdout_matches",
           "call_output_matches", "value_cap"]
