"""Competitive-programming rows: LiveCodeBench, CodeForces, CodeContests and APPS / TACO, from a
user's file (none of these data sets ships with resrl; `stdin-synth` is a generated set in
LiveCodeBench's format, `resrl.tasks.code.synth`).

Each row becomes a code `Problem` whose answer is a stdin/stdout tests object (or, for LeetCode-style
rows, a function-call one; formats in `resrl.tasks.code.reward`) and whose `extra` keeps what the
reports need: `platform`, `difficulty`, `rating` (CodeForces' problem rating, when the row has
one), `contest_id`, `contest_date`, `tags`.

Row shapes (`contest_row_kind`):

- **LiveCodeBench** `code_generation_lite` (`lcb_runner/benchmarks/code_generation.py`):
  question_title, question_content, platform, question_id, contest_id, contest_date, starter_code,
  difficulty, public_test_cases (JSON text), private_test_cases (JSON text, or
  base64(zlib(pickle(JSON text))) — decoded by `resrl.tasks.code.safe_pickle`, which refuses any
  pickle that could run code), metadata (JSON text; `func_name` for LeetCode's functional tests).
  The tests are public + private, as LiveCodeBench evaluates them, each `{input, output, testtype}`;
  testtype "stdin" -> the stdin/stdout format, "functional" -> function calls of
  `Solution().<func_name>` with LiveCodeBench's exact `==` (inputs: one JSON value per line,
  output: JSON). Both run after LiveCodeBench's standard imports ("prelude": "lcb").
- **CodeForces** (open-r1/codeforces): id | contest_id + index, title, description, input_format,
  output_format, note, examples and official_tests (lists of {input, output}), time_limit
  (seconds), memory_limit (MB), rating, tags. Tests: the examples, then the official tests; the
  problem's time and memory limits bind. Interactive problems (an `interaction_format`) and
  problems that read a file (`input_mode` other than "stdio") are refused.
- **CodeContests** (deepmind/code_contests): name, description, public_tests / private_tests /
  generated_tests ({"input": [...], "output": [...]}), time_limit ({seconds, nanos}),
  memory_limit_bytes, cf_rating, cf_contest_id, cf_index, cf_tags. Tests: public, private, generated.
- **APPS / TACO**: question, input_output (JSON text {"inputs", "outputs", "fn_name"?}),
  starter_code, difficulty, problem_id.
"""

from __future__ import annotations

import json
from typing import Any

from resrl.errors import DataError

STDIN_INSTRUCTION = ("Write a complete Python 3 program that reads the input from standard input and writes the answer "
                     "to standard output. Put the final code in a single ```python code block at the end of your answer.")
STARTER_INSTRUCTION = ("Complete the starter code below: write the whole solution, starting from it, in a single "
                       "```python code block at the end of your answer.")

LCB_KEYS = ("question_content", "public_test_cases")


def contest_row_kind(row: Any) -> str | None:
    """"livecodebench" | "codeforces" | "codecontests" | "apps" for a row of that shape, else None."""
    if not isinstance(row, dict):
        return None
    if all(k in row for k in LCB_KEYS):
        return "livecodebench"
    if "description" in row and "public_tests" in row:
        return "codecontests"
    if "description" in row and ("official_tests" in row or "examples" in row) and (
            "input_format" in row or "contest_id" in row):
        return "codeforces"
    if "question" in row and "input_output" in row:
        return "apps"
    return None


def _json_field(row: dict, key: str, where: str, default=None):
    value = row.get(key, default)
    if isinstance(value, str):
        try:
            return json.loads(value) if value.strip() else default
        except json.JSONDecodeError as exc:
            raise DataError(f"{where}: {key!r} is not valid JSON ({exc.msg} at column {exc.colno})") from None
        except RecursionError:
            raise DataError(f"{where}: {key!r} is JSON nested too deeply; refused") from None
    return value


def _str(row: dict, key: str, where: str, required: bool = True) -> str:
    value = row.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value.strip()):
        raise DataError(f"{where}: {key!r} must be a non-empty string")
    return value


def _chat(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


# ---- LiveCodeBench ------------------------------------------------------------------------------
def _lcb_tests(value: Any, key: str, where: str) -> list[dict]:
    if not isinstance(value, list):
        raise DataError(f"{where}: {key!r} must be a list of tests, got {type(value).__name__}")
    out = []
    for i, t in enumerate(value):
        if not isinstance(t, dict) or not isinstance(t.get("input"), str) or not isinstance(t.get("output"), str):
            raise DataError(f"{where}: {key}[{i}] must be an object with string 'input' and 'output'")
        kind = t.get("testtype", "stdin")
        if kind not in ("stdin", "functional"):
            raise DataError(f"{where}: {key}[{i}]: unknown testtype {kind!r} (known: stdin, functional)")
        out.append({"input": t["input"], "output": t["output"], "testtype": kind})
    return out


def _functional_args(text: str, where: str) -> list:
    from resrl.tasks.code.sandbox.code_tests import loads_json

    try:
        return [loads_json(line) for line in text.split("\n") if line.strip()]
    except json.JSONDecodeError:
        raise DataError(f"{where}: a functional test input is not JSON values, one per line") from None
    except ValueError as exc:  # an int over 50,000 digits: LiveCodeBench's json.loads fails on it too
        raise DataError(f"{where}: a functional test input: {exc}") from None


def lcb_row_to_problem(row: dict, index: int, source: str, where: str):
    from resrl.data.problem import Problem
    from resrl.tasks.code.safe_pickle import decode_lcb_payload
    from resrl.tasks.code.sandbox.code_tests import parse_tests

    content = _str(row, "question_content", where)
    public = _lcb_tests(_json_field(row, "public_test_cases", where, []), "public_test_cases", where)
    private_raw = row.get("private_test_cases", "")
    if isinstance(private_raw, str):
        private = decode_lcb_payload(private_raw, f"{where}: 'private_test_cases'") if private_raw.strip() else []
    else:
        private = private_raw if private_raw is not None else []
    private = _lcb_tests(private, "private_test_cases", where)
    tests = public + private
    if not tests:
        raise DataError(f"{where}: no tests (public_test_cases and private_test_cases are empty)")
    kinds = {t["testtype"] for t in tests}
    if len(kinds) > 1:
        raise DataError(f"{where}: mixes stdin and functional tests; one kind per problem")
    metadata = _json_field(row, "metadata", where, {}) or {}
    if not isinstance(metadata, dict):
        raise DataError(f"{where}: 'metadata' must be a JSON object")
    starter = row.get("starter_code") or ""
    if not isinstance(starter, str):
        raise DataError(f"{where}: 'starter_code' must be a string")
    if kinds == {"functional"}:  # LeetCode: Solution().func_name(*args), compared with ==, as LiveCodeBench does
        from resrl.tasks.code.sandbox.code_tests import loads_json

        fn = metadata.get("func_name")
        if not isinstance(fn, str) or not fn:
            raise DataError(f"{where}: functional (LeetCode-style) tests need 'metadata' with a 'func_name'")
        outputs = []
        for i, t in enumerate(tests):
            try:
                outputs.append(loads_json(t["output"]))
            except json.JSONDecodeError:
                raise DataError(f"{where}: the output of functional test {i} is not JSON") from None
            except ValueError as exc:  # an int over 50,000 digits: LiveCodeBench's json.loads fails on it too
                raise DataError(f"{where}: the output of functional test {i}: {exc}") from None
        spec = {"fn_name": fn, "inputs": [_functional_args(t["input"], f"{where}: test {i}") for i, t in enumerate(tests)],
                "outputs": outputs, "compare": "exact", "prelude": "lcb"}
    else:
        spec = {"inputs": [t["input"] for t in tests], "outputs": [t["output"] for t in tests], "prelude": "lcb"}
    tests_obj = parse_tests(spec, where)
    text = f"### Question:\n{content.strip()}\n\n"
    if starter.strip():
        text += f"{STARTER_INSTRUCTION}\n\n```python\n{starter.rstrip()}\n```\n"
    else:
        text += STDIN_INSTRUCTION
    pid = str(row.get("question_id") or f"{source}-{index}")
    extra = {"task": "code", "format": "livecodebench", "platform": row.get("platform"),
             "difficulty": row.get("difficulty"), "contest_id": row.get("contest_id"),
             "contest_date": row.get("contest_date"), "title": row.get("question_title"),
             "starter_code": starter, "num_public_tests": len(public), "num_private_tests": len(private)}
    if isinstance(metadata.get("rating"), (int, float)):
        extra["rating"] = metadata["rating"]
    return Problem(id=pid, prompt=_chat(text), answer=_answer(tests_obj), data_source=source, extra=extra)


# ---- CodeForces / CodeContests / APPS -----------------------------------------------------------
def _io_pairs(value: Any, key: str, where: str) -> list[tuple[str, str]]:
    """[{input, output}, ...] (CodeForces) or {"input": [...], "output": [...]} (CodeContests) -> pairs."""
    if value is None:
        return []
    if isinstance(value, str):
        value = _json_field({key: value}, key, where, [])
    if isinstance(value, dict):
        ins, outs = value.get("input", []), value.get("output", [])
        if not isinstance(ins, list) or not isinstance(outs, list) or len(ins) != len(outs):
            raise DataError(f"{where}: {key!r} must hold lists 'input' and 'output' of equal length")
        value = [{"input": i, "output": o} for i, o in zip(ins, outs)]
    if not isinstance(value, list):
        raise DataError(f"{where}: {key!r} must be a list of {{input, output}}")
    pairs = []
    for i, t in enumerate(value):
        if not isinstance(t, dict) or not isinstance(t.get("input"), str) or not isinstance(t.get("output"), str):
            raise DataError(f"{where}: {key}[{i}] must have string 'input' and 'output'")
        pairs.append((t["input"], t["output"]))
    return pairs


def _unique(pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    seen, out = set(), []
    for p in pairs:
        if p[0] not in seen:
            seen.add(p[0])
            out.append(p)
    return out


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else None


def _limits_text(time_s: float | None, memory_mb: float | None) -> str:
    parts = ([f"time limit per test: {time_s:g} seconds"] if time_s else []) + (
        [f"memory limit per test: {memory_mb:g} megabytes"] if memory_mb else [])
    return ("; ".join(parts) + "\n\n") if parts else ""


def _stdio_spec(pairs, time_s, memory_mb) -> dict:
    spec = {"inputs": [i for i, _ in pairs], "outputs": [o for _, o in pairs]}
    if time_s:
        spec["time_limit_s"] = round(time_s, 3)
    if memory_mb:
        spec["memory_limit_mb"] = max(16, int(memory_mb))
    return spec


def codeforces_row_to_problem(row: dict, index: int, source: str, where: str):
    from resrl.data.problem import Problem
    from resrl.tasks.code.sandbox.code_tests import parse_tests

    if row.get("interaction_format"):
        raise DataError(f"{where}: an interactive problem (it has an 'interaction_format'): not supported; filter "
                        f"these rows out")
    mode = row.get("input_mode") or "stdio"
    if mode != "stdio":
        raise DataError(f"{where}: input_mode {mode!r} (the program reads a file): only stdin/stdout problems "
                        f"are supported; filter these rows out")
    examples = _io_pairs(row.get("examples"), "examples", where)
    pairs = _unique(examples + _io_pairs(row.get("official_tests"), "official_tests", where))
    if not pairs:
        raise DataError(f"{where}: no tests ('examples' and 'official_tests' are empty)")
    time_s, memory_mb = _number(row.get("time_limit")), _number(row.get("memory_limit"))
    tests_obj = parse_tests(_stdio_spec(pairs, time_s, memory_mb), where)
    title = row.get("title") or ""
    parts = [f"# {title}\n" if title else "", _limits_text(time_s, memory_mb), _str(row, "description", where).strip()]
    for head, key in (("Input", "input_format"), ("Output", "output_format")):
        if isinstance(row.get(key), str) and row[key].strip():
            parts.append(f"\n\n## {head}\n\n{row[key].strip()}")
    for i, (inp, out) in enumerate(examples):
        parts.append(f"\n\n## Example {i + 1}\n\nInput:\n```\n{inp.rstrip()}\n```\nOutput:\n```\n{out.rstrip()}\n```")
    if isinstance(row.get("note"), str) and row["note"].strip():
        parts.append(f"\n\n## Note\n\n{row['note'].strip()}")
    contest, letter = row.get("contest_id"), row.get("index")
    pid = str(row.get("id") or (f"{contest}{letter}" if contest and letter else f"{source}-{index}"))
    extra = {"task": "code", "format": "codeforces", "platform": "codeforces", "contest_id": contest, "index": letter,
             "title": title, "tags": row.get("tags"), "has_checker": bool(row.get("generated_checker")),
             "official_tests_complete": row.get("official_tests_complete")}
    if _number(row.get("rating")):
        extra["rating"] = float(row["rating"])
    return Problem(id=pid, prompt=_chat("".join(parts) + "\n\n" + STDIN_INSTRUCTION), answer=_answer(tests_obj),
                   data_source=source, extra=extra)


_CODECONTESTS_DIFFICULTY = {0: "unknown", 1: "easy", 2: "medium", 3: "hard", 4: "harder", 5: "hardest", 6: "external"}


def codecontests_row_to_problem(row: dict, index: int, source: str, where: str):
    from resrl.data.problem import Problem
    from resrl.tasks.code.sandbox.code_tests import parse_tests

    pairs = _unique(_io_pairs(row.get("public_tests"), "public_tests", where)
                    + _io_pairs(row.get("private_tests"), "private_tests", where)
                    + _io_pairs(row.get("generated_tests"), "generated_tests", where))
    if not pairs:
        raise DataError(f"{where}: no tests (public, private and generated tests are empty)")
    tl = row.get("time_limit")
    time_s = None
    if isinstance(tl, dict):
        time_s = _number((tl.get("seconds") or 0) + (tl.get("nanos") or 0) / 1e9)
    mem = _number(row.get("memory_limit_bytes"))
    memory_mb = mem / (1 << 20) if mem else None
    tests_obj = parse_tests(_stdio_spec(pairs, time_s, memory_mb), where)
    name = row.get("name") or ""
    text = f"# {name}\n\n" if name else ""
    text += _limits_text(time_s, memory_mb) + _str(row, "description", where).strip() + "\n\n" + STDIN_INSTRUCTION
    pid = str(name or f"{source}-{index}")
    extra = {"task": "code", "format": "codecontests", "platform": "codeforces" if row.get("cf_contest_id") else None,
             "difficulty": _CODECONTESTS_DIFFICULTY.get(row.get("difficulty"), row.get("difficulty")),
             "contest_id": row.get("cf_contest_id"), "index": row.get("cf_index"), "tags": row.get("cf_tags")}
    if _number(row.get("cf_rating")):
        extra["rating"] = float(row["cf_rating"])
    return Problem(id=pid, prompt=_chat(text), answer=_answer(tests_obj), data_source=source, extra=extra)


def apps_row_to_problem(row: dict, index: int, source: str, where: str):
    from resrl.data.problem import Problem
    from resrl.tasks.code.sandbox.code_tests import parse_tests

    io = _json_field(row, "input_output", where, None)
    if not isinstance(io, dict):
        raise DataError(f"{where}: 'input_output' must be JSON of an object with 'inputs' and 'outputs'")
    spec = {k: io[k] for k in ("inputs", "outputs", "fn_name") if k in io}
    tests_obj = parse_tests(spec, f"{where}: 'input_output'")
    starter = row.get("starter_code") or ""
    text = _str(row, "question", where).strip() + "\n\n"
    if isinstance(starter, str) and starter.strip():
        text += f"{STARTER_INSTRUCTION}\n\n```python\n{starter.rstrip()}\n```\n"
    else:
        text += STDIN_INSTRUCTION
    pid = str(row.get("problem_id", row.get("id", f"{source}-{index}")))
    extra = {"task": "code", "format": "apps", "difficulty": row.get("difficulty"), "url": row.get("url")}
    return Problem(id=pid, prompt=_chat(text), answer=_answer(tests_obj), data_source=source, extra=extra)


def _answer(tests: dict) -> str:
    from resrl.tasks.code.sandbox.code_tests import dumps_json  # ints of up to 50,000 digits (LiveCodeBench's)

    return dumps_json({k: v for k, v in tests.items() if k != "format" and not k.startswith("_")}, sort_keys=True,
                      ensure_ascii=False)


CONVERTERS = {"livecodebench": lcb_row_to_problem, "codeforces": codeforces_row_to_problem,
              "codecontests": codecontests_row_to_problem, "apps": apps_row_to_problem}


def contest_row_to_problem(row: dict, index: int, source: str, where: str):
    """A competitive-programming row (any shape of the module docstring) -> Problem."""
    kind = contest_row_kind(row)
    if kind is None:
        raise DataError(f"{where}: not a LiveCodeBench, CodeForces, CodeContests or APPS row")
    return CONVERTERS[kind](row, index, source, where)


__all__ = ["STDIN_INSTRUCTION", "contest_row_kind", "contest_row_to_problem", "lcb_row_to_problem",
           "codeforces_row_to_problem", "codecontests_row_to_problem", "apps_row_to_problem"]
