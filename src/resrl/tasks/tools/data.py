"""Tool-calling rows -> problems: the tools' schemas go into a system message, the expected calls
become the reference answer (a JSON string that `resrl.tasks.tools.reward` reads).

Row format (one JSON object per jsonl line; ToolRL / ToolACE style):
    {"id"?: str,
     "tools": [JSON-schema function docs: {"name", "description", "parameters": {...}}],
     "messages" | "conversation": [{"role": "user" | "assistant" | "tool" | "system", "content": str}],
     "expected" | "answer": [{"name": str, "arguments": {...}}]     (exact expected calls)
                            or a BFCL possible answer [{"func": {"param": [allowed values]}}]
                            or [] (no call should be made)}

The system message (Hermes / Qwen convention, which Qwen chat models were trained on) lists the
tools inside <tools></tools> and asks for `<tool_call>{"name": ..., "arguments": ...}</tool_call>`
blocks; `style="python"` asks for BFCL's `[func(a=1)]` syntax instead.
"""

from __future__ import annotations

import json
from typing import Any, Sequence

from resrl.errors import DataError

HERMES_INSTRUCTION = (
    "You may call one or more functions to assist with the user query. The available functions are "
    "listed in JSON schema inside <tools></tools>:\n<tools>\n{tools}\n</tools>\n\n"
    "For each function call, return a JSON object with the function name and arguments inside "
    "<tool_call></tool_call> tags:\n<tool_call>\n{{\"name\": <function-name>, \"arguments\": "
    "<args-json-object>}}\n</tool_call>\n"
    "Call several functions with several blocks. If no function fits the request, answer in plain "
    "text without any <tool_call> block.")

PYTHON_INSTRUCTION = (
    "You are an expert in composing functions. Given a question and a set of possible functions, "
    "make one or more function calls to achieve the purpose. If none of the functions can be used, "
    "point it out in plain text. If the question lacks the parameters a function requires, point "
    "it out as well.\nIf you decide to call functions, answer with nothing but the calls in the "
    "format [func_name1(params_name1=params_value1, params_name2=params_value2...), "
    "func_name2(params)].\nHere is the list of functions you can invoke, in JSON format:\n{tools}")


def tool_system_prompt(functions: Sequence[dict], style: str = "hermes") -> str:
    """The system message describing `functions` and the call format ("hermes" or "python")."""
    if style == "hermes":
        return HERMES_INSTRUCTION.format(tools="\n".join(json.dumps(f, ensure_ascii=False) for f in functions))
    if style == "python":
        return PYTHON_INSTRUCTION.format(tools=json.dumps(list(functions), ensure_ascii=False, indent=1))
    raise DataError(f"tool prompt style must be 'hermes' or 'python', got {style!r}")


def tool_messages(functions: Sequence[dict], messages: Sequence[dict], style: str = "hermes") -> list[dict]:
    """Chat messages with the tool system prompt first (merged into an existing system message)."""
    system = tool_system_prompt(functions, style)
    msgs = [{"role": str(m["role"]), "content": str(m["content"])} for m in messages]
    if msgs and msgs[0]["role"] == "system":
        msgs[0] = {"role": "system", "content": f"{msgs[0]['content']}\n\n{system}"}
    else:
        msgs.insert(0, {"role": "system", "content": system})
    return msgs


def is_tool_row(row: Any) -> bool:
    return isinstance(row, dict) and "tools" in row and ("messages" in row or "conversation" in row)


def tool_row_to_problem(row: dict, index: int, source: str, where: str, style: str = "hermes"):
    """A tool-calling row (module docstring) -> `resrl.data.loaders.Problem`; ValueError with `where`."""
    from resrl.data.problem import Problem, check_chat as _check_chat
    from resrl.tasks.tools.bfcl_match import parse_reference

    tools = row["tools"]
    if isinstance(tools, str):  # some data sets store the schema list as a JSON string
        try:
            tools = json.loads(tools)
        except json.JSONDecodeError as exc:
            raise DataError(f"{where}: 'tools' is a string but not JSON ({exc.msg})") from None
    if not isinstance(tools, list) or not all(isinstance(t, dict) and isinstance(t.get("name"), str) for t in tools):
        raise DataError(f"{where}: 'tools' must be a list of function docs with a 'name'")
    messages = _check_chat(row.get("messages", row.get("conversation")), where)
    if "expected" not in row and "answer" not in row:
        raise DataError(f"{where}: tool row needs 'expected' (the expected calls, [] for none)")
    expected = row.get("expected", row.get("answer"))
    try:
        possible, _ = parse_reference(expected if not isinstance(expected, str) else expected)
    except ValueError as exc:
        raise DataError(f"{where}: {exc}") from None
    answer = json.dumps({"ground_truth": possible, "functions": tools}, ensure_ascii=False)
    extra = {k: v for k, v in row.items() if k not in ("id", "tools", "messages", "conversation", "expected", "answer")}
    return Problem(id=str(row.get("id", f"{source}-{index}")), prompt=tool_messages(tools, messages, style),
                   answer=answer, data_source=str(row.get("source") or source), extra=extra)


SYNTHETIC_TOOLS = [
    {"name": "add", "description": "Add two integers.", "parameters": {"type": "dict", "required": ["a", "b"],
     "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}},
    {"name": "weather", "description": "Weather in a city.", "parameters": {"type": "dict", "required": ["city"],
     "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["C", "F"]}}}},
]


def synthetic_tool_rows(n: int, seed: int = 0) -> list[dict]:
    """`n` tiny tool-calling rows (row format above) for offline smoke runs: an addition, a weather
    question (one or two cities, i.e. parallel calls) or a request no tool serves (no call)."""
    import random

    rng = random.Random(seed)
    cities = ["Paris", "Oslo", "Lima", "Rome", "Cairo", "Quito"]
    rows = []
    for i in range(n):
        kind = rng.choice(["add", "weather", "weather2", "none"])
        if kind == "add":
            a, b = rng.randint(1, 50), rng.randint(1, 50)
            q, calls = f"What is {a} plus {b}?", [{"name": "add", "arguments": {"a": a, "b": b}}]
        elif kind == "weather":
            c = rng.choice(cities)
            q, calls = f"Weather in {c}?", [{"name": "weather", "arguments": {"city": c}}]
        elif kind == "weather2":
            c1, c2 = rng.sample(cities, 2)
            q = f"Weather in {c1} and {c2}, in F?"
            calls = [{"name": "weather", "arguments": {"city": c, "unit": "F"}} for c in (c1, c2)]
        else:
            q, calls = rng.choice(["Tell me a joke.", "Who wrote Hamlet?", "Translate 'cat' to French."]), []
        rows.append({"id": f"synthetic-tools-{i}", "tools": SYNTHETIC_TOOLS,
                     "messages": [{"role": "user", "content": q}], "expected": calls})
    return rows


__all__ = ["tool_system_prompt", "tool_messages", "is_tool_row", "tool_row_to_problem", "synthetic_tool_rows",
           "HERMES_INSTRUCTION", "PYTHON_INSTRUCTION", "SYNTHETIC_TOOLS"]


if __name__ == "__main__":  # python -m resrl.tasks.tools.data N OUT.jsonl [SEED]
    import sys

    count, out_path = int(sys.argv[1]), sys.argv[2]
    with open(out_path, "w", encoding="utf-8") as f:
        for r in synthetic_tool_rows(count, int(sys.argv[3]) if len(sys.argv) > 3 else 0):
            f.write(json.dumps(r) + "\n")
    print(f"wrote {count} rows to {out_path}")
