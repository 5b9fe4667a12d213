"""Reward `rg`: reasoning-gym's own verifier (`score_answer` of the task) on rg: problems.

The answer column holds the JSON key written by `resrl.tasks.reasoning_gym.data` (task, seed, size,
options, index); the entry is regenerated from it (deterministic) and scored with
`reasoning_gym.get_score_answer_fn(task)(extracted, entry)`, a float in [0, 1].

Extraction from the completion, in order: the last `\\boxed{...}`, the last `<answer>...</answer>`
(reasoning-gym's own format), the text after a final "answer is" / "answer:" / "answer is:", the
text after the last "=" of the last line, else the last non-empty line. Scoring runs in an isolated process pool with a wall-clock timeout per item: a
verifier that hangs or crashes (or an answer key that is not one) scores 0, and is counted in
`last_stats` ("timeouts", "errors").
"""

from __future__ import annotations

import json
import logging
import re

from resrl.rewards.exact import last_boxed
from resrl.rewards.isolation import IsolatedPool

logger = logging.getLogger(__name__)
_ANSWER_TAG = re.compile(r"<answer>\s?(.*?)\s?</answer>", re.DOTALL)
_ANSWER_IS = re.compile(r"answer(?:\s+is\s*:?|\s*[:=])\s*(.+?)\s*\.?\s*$", re.IGNORECASE | re.DOTALL)


def extract_rg_answer(completion: str) -> str:
    """The final answer text of a completion (see the module docstring); "" if it is empty."""
    boxed = last_boxed(completion)
    if boxed is not None:
        return boxed.strip()
    tags = _ANSWER_TAG.findall(completion)
    if tags:
        return tags[-1].strip()
    lines = [ln.strip() for ln in completion.strip().splitlines() if ln.strip()]
    if not lines:
        return ""
    m = _ANSWER_IS.search(lines[-1])
    if m:
        return m.group(1).strip()
    if "=" in lines[-1]:  # "4 + 1 = 5": what follows the last "="
        return lines[-1].rsplit("=", 1)[1].strip().rstrip(".").strip()
    return lines[-1]


def score_rg(completion: str, answer_key: str) -> float:
    """One completion against one rg answer key -> score in [0, 1] (raises on a malformed key)."""
    import reasoning_gym

    from resrl.tasks.reasoning_gym.data import rg_entry

    key = json.loads(answer_key)
    if not isinstance(key, dict) or "task" not in key or "index" not in key:
        raise ValueError(f"not a reasoning-gym answer key: {answer_key[:80]!r}")
    entry = rg_entry(key)
    score = reasoning_gym.get_score_answer_fn(key["task"])(extract_rg_answer(completion), entry)
    return min(1.0, max(0.0, float(score)))


class ReasoningGymReward:
    """Reward function `f(completions, answers) -> scores` with reasoning-gym's verifiers, isolated."""

    __name__ = "rg"

    def __init__(self, timeout_s: float = 5.0, num_workers: int = 2) -> None:
        self.pool = IsolatedPool(score_rg, timeout_s=timeout_s, num_workers=num_workers,
                                 preload=["reasoning_gym", "resrl.tasks.reasoning_gym.data"])
        self.last_stats: dict[str, float] = {}

    def __call__(self, completions: list[str], answers: list[str]) -> list[float]:
        results = self.pool.map([(c, a) for c, a in zip(completions, answers)])
        scores, timeouts, errors = [], 0, 0
        for r in results:
            if r.timed_out:
                timeouts += 1
                scores.append(0.0)
            elif r.error is not None:
                errors += 1
                logger.warning("rg reward: scoring failed, score 0: %s", r.error.strip().splitlines()[-1][:200])
                scores.append(0.0)
            else:
                scores.append(float(r.value))
        self.last_stats = {"timeouts": float(timeouts), "errors": float(errors)}
        return scores

    def close(self) -> None:
        self.pool.close()


__all__ = ["extract_rg_answer", "score_rg", "ReasoningGymReward"]
