"""Reward functions by name: `"math"`, `"exact"`, `"code"` (`"code-fraction"`), `"rg"` (reasoning-gym),
`"tool_call"`, `"tool_call_exact"` (see `resrl.rewards.tools`; options as `"tool_call[format_weight=0.5]"`),
or a user function `"module:function"`.

A reward function is `f(completions: list[str], answers: list[str]) -> list[float]`, one score
per completion (the answers are the dataset's reference answers, as strings). It may expose a
`last_stats` dict after each call (e.g. {"timeouts": 2.0}); the trainer logs it.

User functions: `"my_pkg.rewards:score"` imports `my_pkg.rewards` and takes `score`;
`"path/to/file.py:score"` loads the file. A class is instantiated with no arguments.
User functions run in the caller's process: wrap anything that can hang with
`resrl.rewards.isolation.IsolatedPool`.
"""

from __future__ import annotations

from resrl.errors import InputError
from resrl.user_code import load_user_object

import inspect
from typing import Callable, Protocol


class RewardFunction(Protocol):
    def __call__(self, completions: list[str], answers: list[str]) -> list[float]: ...


BUILTIN_REWARDS = ("math", "exact", "code", "code-fraction", "rg", "tool_call", "tool_call_exact")


def load_reward_function(spec: str, *, timeout_s: float = 5.0, num_workers: int = 2) -> RewardFunction:
    """Build the reward function named by `spec` (see the module docstring).

    timeout_s / num_workers configure the "math" verifier's process pool, and for "code" the
    per-test time limit and the number of sandboxes run at once (ignored otherwise). "code" scores
    1 when every test passes; "code-fraction" the fraction of tests passed.
    Raises ValueError naming the module or function when `spec` cannot be resolved.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise InputError(f"reward function spec must be one of {list(BUILTIN_REWARDS)} or 'module:function', got {spec!r}")
    spec = spec.strip()
    if spec == "math":
        from resrl.rewards.math import MathReward

        return MathReward(timeout_s=timeout_s, num_workers=num_workers)
    if spec == "exact":
        from resrl.rewards.exact import ExactMatchReward

        return ExactMatchReward()
    if spec in ("code", "code-fraction"):
        from resrl.rewards.code import CodeReward

        return CodeReward(timeout_s=timeout_s, num_workers=num_workers, partial=spec == "code-fraction")
    if spec == "rg":  # reasoning-gym's own verifiers, for rg:TASK data (resrl.data.reasoning_gym)
        from resrl.rewards.reasoning_gym import ReasoningGymReward

        return ReasoningGymReward(timeout_s=timeout_s, num_workers=num_workers)
    if spec.startswith("tool_call"):
        from resrl.rewards.tools import tool_reward_from_spec

        reward = tool_reward_from_spec(spec)
        if reward is not None:
            return reward
    if ":" not in spec:
        raise InputError(f"unknown reward function {spec!r}: use one of {list(BUILTIN_REWARDS)} "
                         f"or 'module:function' (e.g. 'my_pkg.rewards:score' or 'rewards.py:score')")
    fn = load_user_object(spec, "reward function")
    if inspect.isclass(fn):
        fn = fn()
    if not callable(fn):
        raise InputError(f"reward function {spec!r}: '{spec.rpartition(':')[2]}' is not callable "
                         f"({type(fn).__name__})")
    return fn


def as_reward_function(fn: Callable | str) -> RewardFunction:
    """A spec string or an existing callable -> a reward function."""
    return load_reward_function(fn) if isinstance(fn, str) else fn


__all__ = ["RewardFunction", "load_reward_function", "as_reward_function", "BUILTIN_REWARDS"]
