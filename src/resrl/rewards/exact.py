"""Exact-match reward for tasks with a single canonical answer (e.g. the synthetic arithmetic task).

The final answer of a completion is, in order of preference: the content of the last
`\\boxed{...}`, the text after the last `####` (GSM8K style), the text after the last
"answer is" / "answer:", or else the last number in the completion. Both sides are normalised
(whitespace, `$`, `\\text{}`, trailing period, thousands separators, `+` sign, numeric forms such
as `100.0` == `100`) and compared as strings. No symbolic math: use the "math" reward for that.
"""

from __future__ import annotations

import re
from fractions import Fraction

_NUMBER_RE = re.compile(r"-?\d[\d,]*(?:\.\d+)?|-?\.\d+")
_ANSWER_IS_RE = re.compile(r"answer(?:\s+is|\s*:)\s*(.+)", re.IGNORECASE)


def last_boxed(text: str) -> str | None:
    """Content of the last `\\boxed{...}` (or `\\fbox{...}`) with braces matched, None if absent."""
    start = max(text.rfind("\\boxed"), text.rfind("\\fbox"))
    if start < 0:
        return None
    i = text.find("{", start)
    if i < 0:
        return None
    depth = 0
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[i + 1:j]
    return None  # unbalanced: the completion was cut inside the box


def extract_final_answer(text: str) -> str | None:
    """The final answer string of a completion (not normalised), None if nothing looks like one."""
    boxed = last_boxed(text)
    if boxed is not None:
        return boxed
    if "####" in text:
        tail = text.rsplit("####", 1)[1].strip()
        return tail.splitlines()[0] if tail else None
    matches = list(_ANSWER_IS_RE.finditer(text))
    if matches:
        return matches[-1].group(1).strip().splitlines()[0]
    numbers = _NUMBER_RE.findall(text)
    return numbers[-1] if numbers else None


def normalize_answer(answer: str | None) -> str | None:
    """Canonical string: `$ 1,000.0 $.` -> `1000`, `\\text{ yes }` -> `yes`, `3/6` stays `3/6`."""
    if answer is None:
        return None
    s = str(answer).strip()
    s = re.sub(r"\\text\{([^{}]*)\}", r"\1", s)
    s = s.replace("$", "").replace("\\!", "").replace("\\,", "").replace("\\ ", "")
    s = s.strip().rstrip(".").strip()
    if re.fullmatch(r"[+-]?\d{1,3}(,\d{3})+(\.\d+)?", s):  # thousands separators
        s = s.replace(",", "")
    if re.fullmatch(r"[+-]?(\d+(\.\d*)?|\.\d+)", s):
        value = Fraction(s)  # exact: 100.0 -> 100, 0.50 -> 1/2
        return str(value.numerator) if value.denominator == 1 else str(float(value))
    return " ".join(s.split()).lower()


class ExactMatchReward:
    """Reward function: 1.0 when the normalised final answer equals the normalised reference.

    `last_stats` after each call: {"extracted_frac"} (share of completions with any answer).
    """

    __name__ = "exact"

    def __init__(self) -> None:
        self.last_stats: dict[str, float] = {}

    def extract_answer(self, completion: str) -> str | None:
        return normalize_answer(extract_final_answer(completion))

    def __call__(self, completions: list[str], answers: list[str]) -> list[float]:
        if len(completions) != len(answers):
            raise ValueError(f"exact reward: {len(completions)} completions but {len(answers)} answers")
        got = [self.extract_answer(c) for c in completions]
        self.last_stats = {"extracted_frac": sum(g is not None for g in got) / max(1, len(got))}
        return [1.0 if g is not None and g == normalize_answer(a) else 0.0 for g, a in zip(got, answers)]


__all__ = ["ExactMatchReward", "extract_final_answer", "normalize_answer", "last_boxed"]
