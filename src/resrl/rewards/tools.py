"""Tool calls: parsing the formats models emit, BFCL's possible-answer matching, and two rewards.

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

Matching (`bfcl_match(calls, possible_answer, functions=None) -> bool`) follows the rules of
BFCL's AST checker (bfcl-eval 2026.3.23, `eval_checker/ast_eval/ast_checker.py`), re-implemented:
- the number of calls must equal the number of expected calls; calls are matched to expected
  calls order-free, greedily (each expected call in order takes the first unmatched call that
  satisfies it — BFCL's rule, not a maximum bipartite matching);
- a parameter's value must be one of its listed values; a list containing "" marks the
  parameter optional (it may be left out); a parameter that is not listed is an error;
- strings compare after removing spaces and `,./-_*^`, lowercasing and `'` -> `"`; lists and
  dicts compare element-wise with the same string rule; a list of dicts compares item by item;
- with `functions` (the JSON-schema docs of the entry) the types are checked as BFCL does
  (int given for a float is accepted, a value of the listed answers' type is a "variable",
  required parameters must be present, one-level nested item types for arrays);
  without `functions` no type is checked and only the possible answer is used.

Rewards (registry names, signature `f(completions, answers) -> list[float]`; an answer is a JSON
string: a list of expected calls [{"name", "arguments"}], a BFCL possible answer
[{"func": {"param": [allowed values]}}], or {"ground_truth": either, "functions": [docs]}; or
ToolRL's ground-truth text with `<tool_call>` lines, or `<response>` for no call):
- `tool_call_exact`: 1.0 when `bfcl_match` accepts the parsed calls, else 0.0. A completion whose
  calls do not parse counts as making no call (so it is right exactly when no call is expected,
  BFCL's irrelevance rule).
- `tool_call` (ToolRL, Qian et al. 2025, §3.3): `format_weight * F + C` with
  F = 1 when the answer has the expected structure: its calls parse, it makes calls exactly when
  the reference expects some (ToolRL checks for a <tool_call> block iff the reference has one)
  and, with `require_think`, a `<think>...</think>` comes first; else 0; C in [correct_min, correct_max] (default [-3, 3]):
  C = correct_min + (correct_max - correct_min) * S / S_max, where S = Jaccard(names) +
  sum over expected calls of the best unused predicted call with the same name of
  (Jaccard(parameter names) + number of parameters with a correct value), S_max = 1 + sum over
  expected calls of (1 + number of its parameters); Jaccard is over multisets, 1 when both are
  empty. An exact match gets correct_max; a parse failure gets correct_min.
  Options in the spec: `tool_call[format_weight=1,correct_max=3,correct_min=-3,require_think=0]`.
"""

from __future__ import annotations

import ast
import json
import re
from collections import Counter
from typing import Any, Sequence

from resrl.errors import DataError, InputError

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
def _json_call(obj: Any) -> dict:
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
    return [_json_call(v) for v in items]


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


# ---- BFCL possible-answer matching ---------------------------------------------------------------
_TYPES = {"string": str, "integer": int, "float": float, "boolean": bool, "array": list, "tuple": list,
          "dict": dict, "any": str}
_NESTED = ("array", "tuple")
_STRIP_RE = re.compile(r"[ ,./\-_*^]")


def _std(s: str) -> str:
    return _STRIP_RE.sub("", s).lower().replace("'", '"')


def _std_item(v: Any) -> Any:
    return _std(v) if type(v) is str else v


def _first_answer_type(allowed: list):
    return next((type(a) for a in allowed if a != ""), None)


def _type_ok(value, allowed: list, expected, nested) -> tuple[bool, bool]:
    """(valid, is_variable) for a value against a declared type (one nesting level, as BFCL)."""
    answer_type = _first_answer_type(allowed)
    is_variable = answer_type is not None and answer_type != expected
    if type(value) == expected:
        if nested is None:
            return True, is_variable
        for option in allowed:
            if type(option) == list and not all(_type_ok(v, option, nested, None)[0] for v in value):
                continue
            return True, is_variable
        return False, False  # BFCL: a failed nested check is final
    if answer_type is not None and type(value) == answer_type:
        return True, True
    return False, False


def _string_ok(value: str, allowed: list) -> bool:
    return _std(value) in [_std(a) for a in allowed if type(a) == str]


def _list_ok(value: list, allowed: list) -> bool:
    mine = [_std_item(v) for v in value]
    options = [[_std_item(x) for x in a] for a in allowed if isinstance(a, (list, str))]
    return mine in options


def _dict_ok(value: dict, allowed: list) -> bool:
    for option in allowed:
        if option == "" or not isinstance(option, dict):
            continue
        if all(k in option and _std_item(v) in [_std_item(x) for x in option[k]] for k, v in value.items()) \
                and all(k in value or "" in vs for k, vs in option.items()):
            return True
    return False


def _list_of_dicts_ok(value: list, allowed: list) -> bool:
    for option in allowed:
        if isinstance(option, (list, str)) and len(option) == len(value) \
                and all(_dict_ok(v, [o]) for v, o in zip(value, option)):
            return True
    return False


def _value_ok(value, allowed: list, doc_type: str | None, items_type: str | None) -> bool:
    """One parameter value against its allowed values (and its declared type when known)."""
    if doc_type is not None and doc_type in _TYPES:
        expected = _TYPES[doc_type]
        nested = _TYPES.get(items_type) if doc_type in _NESTED else None
        if doc_type == "float" and type(value) == int:
            value = float(value)
        valid, is_variable = _type_ok(value, allowed, expected, nested)
        if not valid:
            return False
    else:  # no declared type: compare by the value's own type, ints accepted for float answers
        is_variable, expected, nested = False, type(value), None
        if type(value) == int and _first_answer_type(allowed) == float:
            value = float(value)
        if type(value) == list and value and all(type(v) == dict for v in value):
            nested = dict
    if not is_variable:
        if expected == dict:
            return _dict_ok(value, allowed)
        if expected == list and nested == dict:
            return _list_of_dicts_ok(value, allowed)
        if expected == str:
            return _string_ok(value, allowed)
        if expected == list:
            return _list_ok(value, allowed)
    return value in allowed


def _call_ok(call: dict, expected_name: str, expected_params: dict, doc: dict | None) -> bool:
    if call.get("name") != expected_name:
        return False
    args = call.get("arguments") or {}
    props, required = {}, []
    if doc is not None:
        params = doc.get("parameters") or {}
        props, required = params.get("properties") or {}, params.get("required") or []
        if any(p not in args for p in required):
            return False
    for param, value in args.items():
        if param not in expected_params or (doc is not None and param not in props):
            return False
        spec = props.get(param) or {}
        items = spec.get("items") if isinstance(spec.get("items"), dict) else {}
        if not _value_ok(value, expected_params[param], spec.get("type") if doc is not None else None,
                         items.get("type")):
            return False
    return all(p in args or "" in allowed for p, allowed in expected_params.items())


def _find_doc(functions: Sequence[dict] | None, name: str) -> dict | None:
    if not functions:
        return None
    return next((f for f in functions if isinstance(f, dict) and f.get("name") == name), None)


def bfcl_match(calls: Sequence[dict], possible_answer: Sequence[dict], functions: Sequence[dict] | None = None) -> bool:
    """Whether `calls` (parse_tool_calls output) satisfy a BFCL possible answer (module docstring).

    possible_answer: BFCL's `ground_truth` list, [{func_name: {param: [allowed values]}}, ...]
    ([] = no call expected). functions: the entry's function docs (enables BFCL's type rules).
    """
    calls, possible_answer = list(calls), list(possible_answer)
    if len(calls) != len(possible_answer):
        return False
    used: set[int] = set()
    for expected in possible_answer:
        if not isinstance(expected, dict) or len(expected) != 1:
            raise DataError(f"a possible answer item must be {{function_name: {{param: [values]}}}}, got {expected!r}")
        (name, params), = expected.items()
        doc = _find_doc(functions, name)
        hit = next((i for i, c in enumerate(calls) if i not in used and isinstance(c, dict)
                    and _call_ok(c, name, params, doc)), None)
        if hit is None:
            return False
        used.add(hit)
    return True


# ---- reference answers ---------------------------------------------------------------------------
def _is_plain_call(item: Any) -> bool:
    return isinstance(item, dict) and "name" in item and ("arguments" in item or "parameters" in item)


def parse_reference(answer: str | list | dict) -> tuple[list[dict] | None, list[dict] | None]:
    """A reference answer (JSON text or decoded) -> (BFCL possible answer, function docs or None).

    Plain expected calls [{"name", "arguments"}] become possible answers with one allowed value per
    parameter, every parameter required. {"any_call": true} (BFCL's relevance categories: any
    well-formed call is right) gives possible answer None. ValueError naming the problem otherwise.
    """
    if isinstance(answer, str) and '"any_call"' in answer or isinstance(answer, dict) and "any_call" in answer:
        value = json.loads(answer) if isinstance(answer, str) else answer
        if isinstance(value, dict) and value.get("any_call") is True:
            return None, value.get("functions")
    value = answer
    if isinstance(answer, str) and not answer.lstrip().startswith(("[", "{")) and answer.strip():
        # ToolRL's ground truth text: "<think>..</think>\n<tool_call>\n{json per line}\n</tool_call>"
        # or "<think>..</think>\n<response>..</response>" (no call)
        calls = parse_tool_calls(answer)
        if calls.error is not None:
            raise DataError(f"tool-call reference text does not parse ({calls.error}): {answer[:80]!r}")
        if not calls and "<response>" not in answer and "<think>" not in answer:
            raise DataError(f"tool-call reference is neither JSON nor <tool_call>/<response> text: {answer[:80]!r}")
        value = [{"name": c["name"], "arguments": c["arguments"]} for c in calls]
    elif isinstance(answer, str):
        try:
            value = json.loads(answer) if answer.strip() else []
        except json.JSONDecodeError as exc:
            raise DataError(f"tool-call reference is not JSON ({exc.msg}): {answer[:80]!r}") from None
    functions = None
    if isinstance(value, dict) and "ground_truth" in value:
        functions = value.get("functions")
        value = value["ground_truth"]
    elif isinstance(value, dict):
        value = [value]
    if not isinstance(value, list):
        raise DataError(f"tool-call reference must be a list of calls, got {type(value).__name__}")
    possible = []
    for item in value:
        if _is_plain_call(item):
            call = _json_call(item)
            possible.append({call["name"]: {k: [v] for k, v in call["arguments"].items()}})
        elif isinstance(item, dict) and len(item) == 1 and isinstance(next(iter(item.values())), dict):
            possible.append(item)
        else:
            raise DataError(f"tool-call reference item must be {{'name', 'arguments'}} or "
                             f"{{func: {{param: [values]}}}}, got {str(item)[:80]}")
    return possible, functions


def _first_allowed(allowed: list):
    """The first listed value that is not the "optional" marker, made concrete (nested dicts too)."""
    if not isinstance(allowed, list):  # a raw value nested in a dict answer
        return allowed
    for a in allowed:
        if a == "":
            continue
        if isinstance(a, dict):
            return {k: _first_allowed(v) for k, v in a.items() if not isinstance(v, list) or any(x != "" for x in v)}
        if isinstance(a, list) and a and all(isinstance(x, dict) for x in a):
            return [_first_allowed([x]) for x in a]
        return a
    return None


def canonical_calls(possible_answer: Sequence[dict], functions: Sequence[dict] | None = None) -> list[dict]:
    """One concrete call list a BFCL possible answer accepts: for every parameter that is not
    optional-only, its first listed value (nested dicts likewise); optional parameters the
    function doc does not declare are left out. Used to render reference calls."""
    calls = []
    for item in possible_answer:
        (name, params), = item.items()
        doc = _find_doc(functions, name)
        props = ((doc or {}).get("parameters") or {}).get("properties")
        calls.append({"name": name, "arguments": {
            k: _first_allowed(v) for k, v in params.items()
            if any(x != "" for x in v) and not (props is not None and k not in props and "" in v)}})
    return calls


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


# ---- rewards -------------------------------------------------------------------------------------
def _jaccard(a: Sequence, b: Sequence) -> float:
    """Multiset Jaccard similarity; 1 when both are empty (ToolRL's name / key match score)."""
    if Counter(a) == Counter(b):
        return 1.0
    ca, cb = Counter(a), Counter(b)
    inter = sum((ca & cb).values())
    union = len(a) + len(b) - inter
    return inter / union if union else 0.0


def toolrl_correctness(calls: Sequence[dict], possible_answer: Sequence[dict],
                       functions: Sequence[dict] | None = None) -> float:
    """ToolRL's correctness fraction S / S_max in [0, 1] (module docstring).

    With BFCL possible answers, a parameter's expected names are its required ones (no "" listed)
    plus the optional ones the call gives; a value is correct when BFCL's rule accepts it.
    """
    if bfcl_match(calls, possible_answer, functions):
        return 1.0
    expected = [next(iter(e.items())) for e in possible_answer]
    score = _jaccard([n for n, _ in expected], [c.get("name") for c in calls])
    total = 1.0
    used: set[int] = set()
    for name, params in expected:
        mandatory = [p for p, allowed in params.items() if "" not in allowed]
        total += 1.0 + len(mandatory)
        doc = _find_doc(functions, name)
        props = ((doc or {}).get("parameters") or {}).get("properties") or {}
        best, best_i = 0.0, None
        for i, call in enumerate(calls):
            if i in used or call.get("name") != name:
                continue
            args = call.get("arguments") or {}
            wanted = mandatory + [p for p in args if p in params and p not in mandatory]
            keys = _jaccard(wanted, list(args))
            values = 0.0
            for p in mandatory:
                if p in args:
                    spec = props.get(p) or {}
                    items = spec.get("items") if isinstance(spec.get("items"), dict) else {}
                    values += _value_ok(args[p], params[p], spec.get("type") if doc else None, items.get("type"))
            if keys + values > best or best_i is None:
                best, best_i = keys + values, i
        if best_i is not None:
            used.add(best_i)
            score += best
    return min(1.0, score / total)


_THINK_FIRST_RE = re.compile(r"^\s*<think>.*?</think>", re.DOTALL)


class ToolCallExactReward:
    """`tool_call_exact`: 1.0 when the parsed calls satisfy the reference (BFCL rules), else 0.0.

    `last_stats`: parse_error_frac, no_call_frac.
    """

    __name__ = "tool_call_exact"

    def __init__(self) -> None:
        self.last_stats: dict[str, float] = {}

    def __call__(self, completions: list[str], answers: list[str]) -> list[float]:
        if len(completions) != len(answers):
            raise ValueError(f"{self.__name__}: {len(completions)} completions but {len(answers)} answers")
        out, errors, empty = [], 0, 0
        for text, answer in zip(completions, answers):
            possible, functions = parse_reference(answer)
            calls = parse_tool_calls(text)
            errors += calls.error is not None
            if calls.error is not None:
                calls = ToolCalls([])  # BFCL: output that does not decode holds no call
            empty += not calls
            ok = bool(calls) if possible is None else bfcl_match(calls, possible, functions)
            out.append(1.0 if ok else 0.0)
        n = max(1, len(completions))
        self.last_stats = {"parse_error_frac": errors / n, "no_call_frac": empty / n}
        return out


class ToolCallReward:
    """`tool_call`: ToolRL's format + correctness reward (module docstring); weights configurable.

    `last_stats`: format_mean, correctness_mean (the [0, 1] fraction), exact_frac, format_error_frac.
    """

    __name__ = "tool_call"

    def __init__(self, format_weight: float = 1.0, correct_max: float = 3.0, correct_min: float = -3.0,
                 require_think: bool = False) -> None:
        if correct_max < correct_min:
            raise InputError(f"tool_call reward: correct_max ({correct_max}) < correct_min ({correct_min})")
        self.format_weight, self.correct_max, self.correct_min = float(format_weight), float(correct_max), float(correct_min)
        self.require_think = bool(require_think)
        self.last_stats: dict[str, float] = {}

    def score_one(self, text: str, answer) -> tuple[float, float, float]:
        """(reward, format score, correctness fraction) of one completion."""
        possible, functions = parse_reference(answer)
        calls = parse_tool_calls(text)
        expects_calls = possible is None or len(possible) > 0
        fmt = float(calls.error is None and bool(calls) == expects_calls
                    and (not self.require_think or bool(_THINK_FIRST_RE.match(text or ""))))
        if calls.error is not None:
            frac = 0.0
        elif possible is None:  # any call is right
            frac = float(bool(calls))
        else:
            frac = toolrl_correctness(calls, possible, functions)
        correctness = self.correct_min + (self.correct_max - self.correct_min) * frac
        return self.format_weight * fmt + correctness, fmt, frac

    def __call__(self, completions: list[str], answers: list[str]) -> list[float]:
        if len(completions) != len(answers):
            raise ValueError(f"{self.__name__}: {len(completions)} completions but {len(answers)} answers")
        scored = [self.score_one(t, a) for t, a in zip(completions, answers)]
        n = max(1, len(scored))
        self.last_stats = {"format_mean": sum(s[1] for s in scored) / n,
                           "correctness_mean": sum(s[2] for s in scored) / n,
                           "exact_frac": sum(s[2] == 1.0 for s in scored) / n,
                           "format_error_frac": sum(s[1] == 0.0 for s in scored) / n}
        return [s[0] for s in scored]


_OPTION_RE = re.compile(r"^(tool_call(?:_exact)?)\s*(?:\[(.*)\])?$")


def tool_reward_name(spec: str) -> str | None:
    """The tool reward a spec names ("tool_call" or "tool_call_exact", options allowed), None otherwise."""
    m = _OPTION_RE.match(spec.strip())
    return m.group(1) if m else None


def tool_reward_from_spec(spec: str):
    """"tool_call", "tool_call[format_weight=0.5,correct_min=0]" or "tool_call_exact" -> reward; None
    when `spec` names no tool reward. ValueError naming a bad option."""
    m = _OPTION_RE.match(spec.strip())
    if not m:
        return None
    name, options = m.group(1), (m.group(2) or "").strip()
    if name == "tool_call_exact":
        if options:
            raise InputError(f"reward {spec!r}: tool_call_exact takes no options")
        return ToolCallExactReward()
    kwargs: dict[str, Any] = {}
    allowed = {"format_weight": float, "correct_max": float, "correct_min": float,
               "require_think": lambda s: s.strip().lower() in ("1", "true", "yes")}
    for part in filter(None, (p.strip() for p in options.split(","))):
        key, _, raw = part.partition("=")
        key = key.strip()
        if key not in allowed or not raw.strip():
            raise InputError(f"reward {spec!r}: unknown or empty option {part!r} (options: {sorted(allowed)})")
        try:
            kwargs[key] = allowed[key](raw)
        except ValueError:
            raise InputError(f"reward {spec!r}: option {key} needs a number, got {raw!r}") from None
    return ToolCallReward(**kwargs)


__all__ = ["ToolCalls", "parse_tool_calls", "bfcl_match", "parse_reference", "toolrl_correctness",
           "canonical_calls", "format_calls",
           "ToolCallReward", "ToolCallExactReward", "tool_reward_name", "tool_reward_from_spec", "MAX_PARSE_CHARS"]
