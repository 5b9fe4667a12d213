"""BFCL's possible-answer matching, and reference answers read as BFCL possible answers.

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

Reference answers (`parse_reference`): a JSON list of expected calls [{"name", "arguments"}], a BFCL
possible answer [{"func": {"param": [allowed values]}}], {"ground_truth": either, "functions":
[docs]}, {"any_call": true}, or ToolRL's ground-truth text with `<tool_call>` lines (`<response>`
for no call); `canonical_calls` renders one concrete call list a possible answer accepts.
"""

from __future__ import annotations

import json
import re
from typing import Any, Sequence

from resrl.errors import DataError
from resrl.tasks.tools.parsing import json_call, parse_tool_calls

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


def value_ok(value, allowed: list, doc_type: str | None, items_type: str | None) -> bool:
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
        if not value_ok(value, expected_params[param], spec.get("type") if doc is not None else None,
                         items.get("type")):
            return False
    return all(p in args or "" in allowed for p, allowed in expected_params.items())


def find_doc(functions: Sequence[dict] | None, name: str) -> dict | None:
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
        doc = find_doc(functions, name)
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
            call = json_call(item)
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
        doc = find_doc(functions, name)
        props = ((doc or {}).get("parameters") or {}).get("properties")
        calls.append({"name": name, "arguments": {
            k: _first_allowed(v) for k, v in params.items()
            if any(x != "" for x in v) and not (props is not None and k not in props and "" in v)}})
    return calls


__all__ = ["bfcl_match", "value_ok", "find_doc", "parse_reference", "canonical_calls"]
