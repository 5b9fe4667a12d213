"""Reward functions by name: the task families' rewards (`resrl.tasks.registry`, beside this
module): `"math"`, `"exact"`, `"code"` (`"code-fraction"`), `"rg"` (reasoning-gym), `"tool_call"`,
`"tool_call_exact"` (see `resrl.tasks.tools.reward`; options as `"tool_call[format_weight=0.5]"`),
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
from resrl.tasks import registry as tasks
from resrl.user_code import load_user_object

import inspect
from typing import Callable, Protocol


class RewardFunction(Protocol):
    def __call__(self, completions: list[str], answers: list[str]) -> list[float]: ...


def __getattr__(name: str):
    if name == "BUILTIN_REWARDS":  # the families' reward names ("math", "exact", "code", ...), registration order
        return tasks.reward_names()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def load_reward_function(spec: str, *, timeout_s: float = 5.0, num_workers: int = 2) -> RewardFunction:
    """Build the reward function named by `spec` (see the module docstring).

    timeout_s / num_workers configure the "math" verifier's process pool, and for "code" the
    per-test time limit and the number of sandboxes run at once (ignored otherwise). "code" scores
    1 when every test passes; "code-fraction" the fraction of tests passed.
    Raises ValueError naming the module or function when `spec` cannot be resolved.
    """
    builtin = tasks.reward_names()
    if not isinstance(spec, str) or not spec.strip():
        raise InputError(f"reward function spec must be one of {list(builtin)} or 'module:function', got {spec!r}")
    spec = spec.strip()
    found = tasks.reward_name_of(spec)
    if found is not None:
        family, name = found
        return family.rewards[name](spec, timeout_s=timeout_s, num_workers=num_workers)
    if ":" not in spec:
        raise InputError(f"unknown reward function {spec!r}: use one of {list(builtin)} "
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
