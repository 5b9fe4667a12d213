"""Project reward functions -> TRL reward functions.

A project reward is `f(completions: list[str], answers: list[str]) -> list[float]` (see
`resrl.rewards.registry`), optionally exposing a `last_stats` dict after each call (e.g. the
number of Math-Verify items that timed out). TRL calls `f(prompts, completions, **columns)`
with chat completions as message lists; this adapter converts and forwards the stats to TRL's
per-step metrics as `reward/<key>`.
"""

from __future__ import annotations

from resrl.errors import InputError

import math
from typing import Callable


def completion_text(completion) -> str:
    """TRL completion (a string, or a list of chat messages) -> the assistant's text."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list):
        return "".join(m.get("content", "") if isinstance(m.get("content"), str) else "" for m in completion
                       if isinstance(m, dict) and m.get("role", "assistant") == "assistant")
    raise TypeError(f"unexpected completion type {type(completion).__name__}")


class RewardAdapter:
    """TRL reward function around a project reward function; the dataset needs an `answer` column."""

    def __init__(self, fn: Callable[[list[str], list[str]], list[float]], name: str | None = None,
                 answer_column: str = "answer"):
        if not callable(fn):
            raise TypeError(f"reward function must be callable, got {fn!r}")
        self.fn = fn
        self.answer_column = answer_column
        self.__name__ = name or getattr(fn, "__name__", None) or type(fn).__name__

    def __call__(self, prompts, completions, log_metric=None, **columns) -> list[float]:
        if self.answer_column not in columns:
            raise InputError(f"the training dataset has no '{self.answer_column}' column for the reward "
                             f"(columns: {sorted(k for k in columns if k not in ('trainer_state', 'log_extra'))})")
        texts = [completion_text(c) for c in completions]
        answers = ["" if a is None else str(a) for a in columns[self.answer_column]]
        scores = list(self.fn(texts, answers))
        if len(scores) != len(texts):
            raise InputError(f"reward function {self.__name__} returned {len(scores)} scores for {len(texts)} completions")
        out = []
        for i, s in enumerate(scores):
            s = float(s) if s is not None else 0.0
            out.append(s if math.isfinite(s) else 0.0)
        stats = getattr(self.fn, "last_stats", None)
        if log_metric is not None and isinstance(stats, dict):
            for key, value in sorted(stats.items()):
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    log_metric(f"reward/{key}", float(value))
        return out


def _score_one(fn, completion: str, answer: str) -> float:
    return float(fn([completion], [answer])[0])


class IsolatedReward:
    """A user reward scored item by item in `resrl.rewards.isolation.IsolatedPool` workers: an item
    that runs past `timeout_s` (or crashes its worker) scores 0 and is counted in
    `last_stats["timeouts"]` / `["errors"]`; training never hangs on it."""

    def __init__(self, fn, timeout_s: float = 5.0, num_workers: int = 2):
        from resrl.rewards.isolation import IsolatedPool

        self.fn = fn
        self.__name__ = getattr(fn, "__name__", None) or type(fn).__name__
        self._pool = IsolatedPool(_ScoreOne(fn), timeout_s=timeout_s, num_workers=num_workers)
        self.last_stats: dict[str, float] = {}

    def __call__(self, completions: list[str], answers: list[str]) -> list[float]:
        results = self._pool.map(list(zip(completions, answers)))
        scores = [float(r.value) if (not r.timed_out and r.error is None) else 0.0 for r in results]
        self.last_stats = {"timeouts": float(sum(r.timed_out for r in results)),
                           "errors": float(sum(r.error is not None and not r.timed_out for r in results))}
        return scores

    def close(self) -> None:
        self._pool.close()


class _ScoreOne:
    """Picklable callable (spawn platforms): one completion through the user's batch function."""

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, completion: str, answer: str) -> float:
        return _score_one(self.fn, completion, answer)


class EnvironmentReward:
    """TRL reward function for multi-turn rollouts: the environment's own reward of each trajectory,
    which the rollout function hands over as the `env_reward` column (resrl.engines.multiturn)."""

    __name__ = "env"

    def __call__(self, prompts, completions, env_reward=None, log_metric=None, **columns) -> list[float]:
        if env_reward is None:
            raise InputError("reward.function 'env' needs multi-turn rollouts (config section env): "
                             "no env_reward came with the completions")
        out = []
        for r in env_reward:
            value = float(r) if r is not None else 0.0
            out.append(value if math.isfinite(value) else 0.0)
        return out
