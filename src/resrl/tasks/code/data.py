"""Code problems: HumanEval and HumanEval+ (shipped with the package, `resrl.tasks.code.humanevalplus`),
`{"problem", "tests"}` jsonl, function-level rows and veRL rows whose `reward_model.ground_truth`
holds the tests as JSON.

A code problem becomes a `Problem` whose `answer` is its tests as canonical JSON text (what the
`code` reward reads from the answer column, in evaluation and in training alike), whose prompt is
a chat list that already carries the code instruction (so the math `\\boxed{}` instruction is never
appended), and whose `extra["task"]` is "code".

Names: `humaneval` (164 problems, HumanEval's own inputs = HumanEval+'s base inputs) and
`humanevalplus` (base + plus inputs; reports base and base + plus), both function-level tests
with expected outputs from EvalPlus's canonical solutions.

Row shapes recognised (`is_code_row`):
- {"problem": str, "tests": {...} | JSON text, "id"?, ...}
- function-level: {"entry_point", "inputs": [[args], ...], "outputs": [...], "prompt"?, "atol"?,
  "task_id"? | "id"?, ...} (the sandbox calls entry_point(*args); the parent compares)
- HumanEval-shaped rows: {"task_id", "prompt", "entry_point", "test", "tests"?, ...}: with "tests"
  (function-level) those are used, else the `check(candidate)` program in "test"
- veRL: {"prompt", "reward_model": {"ground_truth": tests as a dict or JSON text}, ...}
  (DeepCoder / PRIME / TACO style data)
- competitive programming (`resrl.tasks.code.contests`): LiveCodeBench `code_generation_lite`
  rows, CodeForces (open-r1/codeforces), CodeContests and APPS / TACO rows
Test formats: see `resrl.tasks.code.reward`.
"""

from __future__ import annotations

import json
from typing import Any

from resrl.errors import DataError, InputError

CODE_BENCHMARKS = ("humaneval", "humanevalplus", "stdin-synth")
BENCHMARK_KEYS = {"humaneval": "HumanEval", "humanevalplus": "HumanEvalPlus",
                  "stdin-synth": "stdin-synth"}  # names in reports
STDIN_SYNTH_FILE = "stdin-synth.jsonl"  # resrl/data/packaged/code: generated (resrl.tasks.code.synth), LCB row format

CODE_INSTRUCTION = ("Write a complete Python 3 program that solves the problem. Put the final code in a single "
                    "```python code block at the end of your answer.")
FUNCTION_INSTRUCTION = ("Complete the following Python function. Put the complete function, with the imports it "
                        "needs, in a single ```python code block at the end of your answer.")


def stdin_synth_problems(limit: int | None = None) -> list:
    """`stdin-synth`: the packaged generated stdin/stdout set (`resrl.tasks.code.synth`), read as
    LiveCodeBench rows."""
    from importlib import resources

    from resrl.tasks.code.contests import lcb_row_to_problem

    ref = resources.files("resrl.data") / "packaged" / "code" / STDIN_SYNTH_FILE
    try:
        lines = ref.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise DataError(f"the packaged {STDIN_SYNTH_FILE} is missing from the resrl package ({exc})") from None
    rows = [json.loads(line) for line in lines if line.strip()][:limit]
    return [lcb_row_to_problem(r, i, "stdin-synth", f"{STDIN_SYNTH_FILE}: row {i + 1}") for i, r in enumerate(rows)]


def code_benchmark_problems(name: str, limit: int | None = None, task_ids=None) -> list:
    """The problems of a shipped code benchmark (`humaneval`, `humanevalplus`, `stdin-synth`): the
    first `limit`, or the tasks named in `task_ids` ("HumanEval/31", ...)."""
    from resrl.tasks.code.humanevalplus import humaneval_rows

    key = name.lower()
    if key not in CODE_BENCHMARKS:
        raise InputError(f"unknown code benchmark {name!r} (known: {list(CODE_BENCHMARKS)})")
    if key == "stdin-synth":
        return stdin_synth_problems(limit)
    rows = humaneval_rows(plus=key == "humanevalplus", limit=limit, task_ids=task_ids)
    return [code_row_to_problem(r, i, BENCHMARK_KEYS[key], f"{key}: {r['task_id']}") for i, r in enumerate(rows)]


def _maybe_tests(value: Any) -> dict | None:
    """`value` as a tests dict when it looks like one (a dict or JSON text of a dict with test keys)."""
    if isinstance(value, (str, bytes)):
        text = value.strip()
        if not text.startswith("{"):
            return None
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            return None
    if isinstance(value, dict) and (("inputs" in value and "outputs" in value)
                                    or ("entry_point" in value and "test" in value)):
        return value
    return None


def _is_humaneval_row(row: dict) -> bool:
    return all(k in row for k in ("task_id", "prompt", "entry_point", "test"))


def _is_function_row(row: dict) -> bool:
    return all(k in row for k in ("entry_point", "inputs", "outputs"))


def is_code_row(row: Any) -> bool:
    """Whether a decoded data row is a code problem (see the module docstring)."""
    if not isinstance(row, dict):
        return False
    if "tests" in row and "problem" in row:
        return True
    from resrl.tasks.code.contests import contest_row_kind

    if contest_row_kind(row) is not None:
        return True
    if _is_humaneval_row(row) or _is_function_row(row):
        return True
    rm = row.get("reward_model")
    return isinstance(rm, dict) and _maybe_tests(rm.get("ground_truth")) is not None


def _chat(text: str, instruction: str) -> list[dict]:
    return [{"role": "user", "content": f"{text.rstrip()}\n\n{instruction}"}]


def code_row_to_problem(row: dict, index: int, source: str, where: str):
    """One code row -> Problem (answer = canonical tests JSON). ValueError prefixed with `where`."""
    from resrl.data.problem import Problem, check_chat as _check_chat
    from resrl.tasks.code.reward import parse_tests
    from resrl.tasks.code.sandbox.code_tests import dumps_json

    from resrl.tasks.code.contests import contest_row_kind, contest_row_to_problem

    if not ("tests" in row and "problem" in row) and contest_row_kind(row) is not None:
        return contest_row_to_problem(row, index, source, where)
    extra = {"task": "code"}
    if _is_humaneval_row(row) or _is_function_row(row):
        if isinstance(row.get("tests"), (dict, str)):  # shipped HumanEval(+): function-level tests
            tests = parse_tests(row["tests"], f"{where}: 'tests'")
        elif _is_function_row(row):
            keys = ("entry_point", "inputs", "outputs", "prompt", "atol")
            tests = parse_tests({k: row[k] for k in keys if k in row}, where)
        else:
            tests = parse_tests({"entry_point": row["entry_point"], "test": row["test"], "prompt": row["prompt"]}, where)
        text = row.get("prompt") or row.get("problem")
        if not isinstance(text, str) or not text.strip():
            raise DataError(f"{where}: a function-level row needs a non-empty 'prompt' (or 'problem')")
        prompt = _chat(f"```python\n{text.rstrip()}\n```" if row.get("prompt") else text, FUNCTION_INSTRUCTION)
        extra.update({k: v for k, v in row.items() if k not in ("task_id", "id", "prompt", "entry_point", "tests",
                                                                "inputs", "outputs")})
        extra["function_prompt"] = row.get("prompt", "")
        extra["entry_point"] = row["entry_point"]
        pid = str(row.get("task_id", row.get("id", f"{source}-{index}")))
        data_source = source
    elif "tests" in row and "problem" in row:
        if not isinstance(row["problem"], str) or not row["problem"].strip():
            raise DataError(f"{where}: 'problem' must be a non-empty string")
        tests = parse_tests(row["tests"], f"{where}: 'tests'")
        prompt = _chat(row["problem"], FUNCTION_INSTRUCTION if tests["format"] == "check" else CODE_INSTRUCTION)
        extra.update({k: v for k, v in row.items() if k not in ("id", "problem", "tests", "source")})
        pid = str(row.get("id", f"{source}-{index}"))
        data_source = str(row.get("source") or source)
    else:  # veRL
        tests = parse_tests(_maybe_tests(row["reward_model"]["ground_truth"]), f"{where}: 'reward_model.ground_truth'")
        prompt = row.get("prompt")
        if isinstance(prompt, list):
            prompt = _check_chat(prompt, where)  # veRL chat prompts carry their own instruction
        elif isinstance(prompt, str) and prompt.strip():
            prompt = _chat(prompt, CODE_INSTRUCTION)
        else:
            raise DataError(f"{where}: 'prompt' must be a string or a chat list")
        extra.update({k: v for k, v in row.items() if k not in ("prompt", "reward_model", "data_source")})
        info = row.get("extra_info") if isinstance(row.get("extra_info"), dict) else {}
        pid = str(row.get("id", info.get("id", info.get("index", f"{source}-{index}"))))
        data_source = str(row.get("data_source") or source)
    answer = dumps_json({k: v for k, v in tests.items() if k != "format" and not k.startswith("_")}, sort_keys=True,
                        ensure_ascii=False)  # ints of up to 50,000 digits, as parse_tests reads them
    return Problem(id=pid, prompt=prompt, answer=answer, data_source=data_source, extra=extra)


def is_code_problem(problem) -> bool:
    return isinstance(getattr(problem, "extra", None), dict) and problem.extra.get("task") == "code"


def code_reward_for(problems_by_benchmark: dict) -> str | None:
    """"code" when every problem is a code problem, None otherwise; a mix of code and non-code
    problems is an InputError asking for an explicit --reward (one scorer serves a run)."""
    kinds = {b: all(is_code_problem(p) for p in ps) for b, ps in problems_by_benchmark.items()}
    mixed = [b for b, ps in problems_by_benchmark.items() if any(is_code_problem(p) for p in ps) and not kinds[b]]
    if mixed or (any(kinds.values()) and not all(kinds.values())):
        raise InputError(f"--data mixes code and non-code problems ({sorted(kinds)}): pass --reward explicitly "
                         f"or evaluate them in separate runs")
    return "code" if kinds and all(kinds.values()) else None


def default_reward(problems_by_benchmark: dict) -> str:
    """The reward `resrl eval` uses when --reward is not given: "code" for code data sets, "math"
    otherwise; a mix of both needs an explicit --reward (one scorer serves a run)."""
    return code_reward_for(problems_by_benchmark) or "math"


__all__ = ["CODE_BENCHMARKS", "BENCHMARK_KEYS", "stdin_synth_problems", "CODE_INSTRUCTION", "FUNCTION_INSTRUCTION", "code_benchmark_problems",
           "is_code_row", "code_row_to_problem", "is_code_problem", "code_reward_for", "default_reward"]
