"""The tool-call rewards (`resrl.tasks.rewards` names `tool_call`, `tool_call_exact`): parsed
calls (`resrl.tasks.tools.parsing`) against the reference answer (`resrl.tasks.tools.bfcl_match`).

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

import re
from collections import Counter
from typing import Any, Sequence

from resrl.errors import InputError
from resrl.tasks.tools.bfcl_match import bfcl_match, find_doc, parse_reference, value_ok
from resrl.tasks.tools.parsing import ToolCalls, parse_tool_calls

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
        doc = find_doc(functions, name)
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
                    values += value_ok(args[p], params[p], spec.get("type") if doc else None, items.get("type"))
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


__all__ = ["toolrl_correctness", "ToolCallReward", "ToolCallExactReward", "tool_reward_name", "tool_reward_from_spec"]
