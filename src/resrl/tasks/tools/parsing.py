"""Tool calls in model output: the formats models emit, parsed into {"name", "arguments"} calls,
and calls written back as text (`format_calls`).

Parsing (`parse_tool_calls(text) -> ToolCalls`, a list of {"name": str, "arguments": dict}):
- Hermes / Qwen blocks: `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`, one or several
  blocks, and inside a block one JSON object, several (one per line, as ToolRL writes them) or a
  JSON list; "parameters" is accepted for "arguments"; arguments given as a JSON string are decoded.
- a JSON list of such objects (or one object) as the whole answer, bare or in a ``` fence;
- Python-call syntax, BFCL's format: `func(a=1, b="x")` or `[f(a=1), g.h(b=[1, 2])]`, parsed with
  `ast` (never evaluated): literals, lists, tuples (as lists), dicts, negative numbers; a bare name
  is taken as a string (BFCL treats it as a variable name) and a nested call as its source text.
  Positional arguments are kept apart in the call's "positional" list (only when there are any):
  BFCL's single-turn decoder ignores them, its multi-turn executor passes them on.
Text around Hermes blocks, fenced blocks and one-line JSON / `[call, ...]` answers is allowed.
No call -> an empty list. A failure never raises: the returned
`ToolCalls` (a list) has `.error` set to the reason (and holds the calls that did parse) and
`.format` says which format was found ("hermes", "json", "python" or None).
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any, Sequence

MAX_PARSE_CHARS = 200_000  # longer completions are cut before parsing (bounded work per sample)

_TOOL_BLOCK_RE = re.compile(r"<tool_call>(.*?)(</tool_call>|$)", re.DOTALL)
_FENCE_RE = re.compile(r"```(?:[a-zA-Z0-9_+-]*)\n?(.*?)```", re.DOTALL)
_LOOKS_LIKE_CALL_RE = re.compile(r"^\s*\[?\s*[A-Za-z_][\w.]*\s*\(")


class ToolCalls(list):
    """A list of {"name": str, "arguments": dict} with `error` (None when everything parsed) and
    `format` ("hermes", "json", "python" or None when no call was found)."""

    def __init__(self, calls=(), error: str | None = None, format: str | None = None) -> None:
        super().__init__(calls)
        self.error = error
        self.format = format

    def __repr__(self) -> str:
        return f"ToolCalls({list.__repr__(self)}, error={self.error!r}, format={self.format!r})"


class _ParseError(ValueError):
    pass


# ---- JSON calls ----------------------------------------------------------------------------------
def json_call(obj: Any) -> dict:
    """One decoded JSON object -> {"name", "arguments"}; _ParseError naming what is wrong."""
    if not isinstance(obj, dict):
        raise _ParseError(f"a tool call must be a JSON object, got {type(obj).__name__}")
    if isinstance(obj.get("function"), dict) and "name" not in obj:  # OpenAI {"function": {...}}
        obj = obj["function"]
    name = obj.get("name")
    if not isinstance(name, str) or not name.strip():
        raise _ParseError(f"tool call without a string 'name' (keys: {sorted(obj)[:8]})")
    args = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(args, str):  # OpenAI style: arguments as a JSON string
        try:
            args = json.loads(args) if args.strip() else {}
        except json.JSONDecodeError as exc:
            raise _ParseError(f"call {name!r}: arguments string is not JSON ({exc.msg})") from None
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise _ParseError(f"call {name!r}: arguments must be an object, got {type(args).__name__}")
    return {"name": name.strip(), "arguments": args}


def _json_calls(value: Any) -> list[dict]:
    items = value if isinstance(value, list) else [value]
    return [json_call(v) for v in items]


def _decode_json_sequence(text: str) -> list[Any]:
    """Several JSON values written one after another (ToolRL puts one call per line)."""
    decoder, values, i = json.JSONDecoder(), [], 0
    text = text.strip()
    while i < len(text):
        while i < len(text) and text[i] in " \t\r\n,":
            i += 1
        if i >= len(text):
            break
        try:
            value, i = decoder.raw_decode(text, i)
        except json.JSONDecodeError as exc:
            raise _ParseError(f"invalid JSON ({exc.msg} at char {exc.pos})") from None
        values.append(value)
    return values


# ---- Python-call syntax --------------------------------------------------------------------------
def _dotted_name(node: ast.AST) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        raise _ParseError("a function name must be a (dotted) identifier")
    parts.append(node.id)
    return ".".join(reversed(parts))


def _literal(node: ast.AST) -> Any:
    """A value node -> a Python value, without evaluating anything."""
    if isinstance(node, ast.Constant):
        return "..." if node.value is Ellipsis else node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)) \
            and isinstance(node.operand, ast.Constant) and isinstance(node.operand.value, (int, float, complex)) \
            and not isinstance(node.operand.value, bool):
        return -node.operand.value if isinstance(node.op, ast.USub) else node.operand.value
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_literal(e) for e in node.elts]
    if isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):
            raise _ParseError("'**' inside a dict argument is not supported")
        return {_literal(k): _literal(v) for k, v in zip(node.keys, node.values)}
    if isinstance(node, ast.Name):  # a variable name: BFCL compares it as a string
        return node.id
    if isinstance(node, ast.Call):  # a nested call: kept as its source text
        return ast.unparse(node)
    raise _ParseError(f"unsupported argument expression {ast.unparse(node)[:60]!r} "
                      f"(only literals, lists, dicts and names)")


def _python_call(node: ast.AST) -> dict:
    if not isinstance(node, ast.Call):
        raise _ParseError(f"expected a function call, got {ast.unparse(node)[:60]!r}")
    call: dict = {"name": _dotted_name(node.func), "arguments": {}}
    for kw in node.keywords:
        if kw.arg is None:
            raise _ParseError(f"call {call['name']!r}: '**kwargs' is not supported")
        call["arguments"][kw.arg] = _literal(kw.value)
    positional = []
    for a in node.args:
        if isinstance(a, ast.Starred):
            raise _ParseError(f"call {call['name']!r}: '*args' is not supported")
        positional.append(_literal(a))
    if positional:
        call["positional"] = positional
    return call


def _python_calls(text: str) -> list[dict]:
    source = text.strip().strip("'").strip()
    try:
        tree = ast.parse(source, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise _ParseError(f"not valid Python call syntax ({type(exc).__name__}: {str(exc)[:80]})") from None
    body = tree.body
    nodes = body.elts if isinstance(body, (ast.List, ast.Tuple)) else [body]
    try:
        return [_python_call(n) for n in nodes]
    except RecursionError:
        raise _ParseError("call nested too deeply") from None


# ---- the entry point -----------------------------------------------------------------------------
def _parse_hermes(text: str) -> ToolCalls:
    calls, errors = [], []
    for match in _TOOL_BLOCK_RE.finditer(text):
        body, closed = match.group(1).strip(), bool(match.group(2))
        if not closed:
            errors.append("a <tool_call> block is not closed")
        try:
            if body.startswith(("{", "[")):
                for value in _decode_json_sequence(body):
                    calls += _json_calls(value)
            elif body:
                calls += _python_calls(body)
            else:
                errors.append("empty <tool_call> block")
        except _ParseError as exc:
            errors.append(str(exc))
    return ToolCalls(calls, "; ".join(errors) or None, "hermes")


def _candidates(text: str) -> list[str]:
    """Places where a bare JSON / Python call answer may sit: fenced blocks, the whole text, and
    single lines that are a JSON value or a bracketed call list. A bare `f(x)` line inside prose or
    code is not taken as a call (BFCL's decoder would not decode such an answer either)."""
    out = [m.group(1) for m in _FENCE_RE.finditer(text)]
    out.append(text)
    out += [line for line in text.splitlines() if line.strip().startswith(("[", "{"))]
    return out


def parse_tool_calls(text: str) -> ToolCalls:
    """The tool calls in a completion (see the module docstring); never raises."""
    if not isinstance(text, str):
        return ToolCalls([], f"completion is {type(text).__name__}, not a string")
    text = text[:MAX_PARSE_CHARS]
    if "<tool_call>" in text:
        return _parse_hermes(text)
    first_error = None
    for candidate in _candidates(text):
        c = candidate.strip().strip("`").strip()
        if not c:
            continue
        if c[0] in "[{":  # JSON first; a Python list of calls also starts with "["
            try:
                values = _decode_json_sequence(c)
                return ToolCalls([call for v in values for call in _json_calls(v)], None, "json")
            except _ParseError as exc:
                first_error = first_error or f"JSON: {exc}"
        if _LOOKS_LIKE_CALL_RE.match(c):
            try:
                return ToolCalls(_python_calls(c), None, "python")
            except _ParseError as exc:
                first_error = first_error or f"Python call: {exc}"
    stripped = text.strip()
    if first_error and (stripped.startswith(("[", "{")) or _LOOKS_LIKE_CALL_RE.match(stripped)
                        or stripped.startswith("```")):
        return ToolCalls([], first_error, None)  # the answer is meant as calls but does not parse
    return ToolCalls([], None, None)


def format_calls(calls: Sequence[dict], style: str = "hermes") -> str:
    """Calls -> text a model would write: "hermes" (<tool_call> JSON blocks), "json" (a list) or
    "python" (`[f(a=1), g(b='x')]`, values as Python literals)."""
    if style == "hermes":
        return "\n".join("<tool_call>\n" + json.dumps({"name": c["name"], "arguments": c["arguments"]},
                                                        ensure_ascii=False) + "\n</tool_call>" for c in calls)
    if style == "json":
        return json.dumps([{"name": c["name"], "arguments": c["arguments"]} for c in calls], ensure_ascii=False)
    if style == "python":
        return "[" + ", ".join(f"{c['name']}(" + ", ".join([repr(v) for v in c.get("positional", [])] +
                                                            [f"{k}={v!r}" for k, v in c["arguments"].items()]) + ")"
                               for c in calls) + "]"
    raise ValueError(f"call style must be 'hermes', 'json' or 'python', got {style!r}")


__all__ = ["ToolCalls", "parse_tool_calls", "json_call", "format_calls", "MAX_PARSE_CHARS"]
