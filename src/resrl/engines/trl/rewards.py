"""Project reward functions -> TRL reward functions.

A project reward is `f(completions: list[str], answers: list[str]) -> list[float]` (see
`resrl.tasks.rewards`), optionally exposing a `last_stats` dict after each call (e.g. the
number of Math-Verify items that timed out). TRL calls `f(prompts, completions, **columns)`
with chat completions as message lists; this adapter converts and forwards the stats to TRL's
per-step metrics as `reward/<key>`.
"""

from __future__ import annotations

import inspect
import logging
import math
import numbers
import threading
from typing import Any, Callable

from resrl.errors import InputError

logger = logging.getLogger(__name__)


def completion_text(completion) -> str:
    """TRL completion (a string, or a list of chat messages) -> the assistant's text."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list):
        return "".join(m.get("content", "") if isinstance(m.get("content"), str) else "" for m in completion
                       if isinstance(m, dict) and m.get("role", "assistant") == "assistant")
    raise TypeError(f"unexpected completion type {type(completion).__name__}")


# What a reward function can do wrong with one item, each counted as `reward/<kind>` every step.
FAULT_KINDS = ("errors", "timeouts", "nonfinite", "wrong_type")
ON_ERROR = ("zero", "raise")


class RewardFaultError(InputError):
    """reward.on_error = "raise": a reward function failed on an item (the message names the
    reward, the fault and the row)."""


def _check_value(value) -> tuple[float | None, str | None, str]:
    """One returned score -> (score, fault kind or None, detail). None is TRL's "does not apply"
    (handed to TRL as None, not a fault: a row every reward function scores None is unscorable,
    advantage 0 and out of its group's statistics, as in GRPOTrainer); bool / int / float / numpy or
    0-d torch numbers are scores; a NaN or inf is a `nonfinite` fault; anything else (a string, a
    list, an object) is `wrong_type`."""
    if value is None:
        return None, None, ""
    if isinstance(value, (str, bytes)) or not isinstance(value, numbers.Real) and not _is_scalar_tensor(value):
        return 0.0, "wrong_type", f"returned {type(value).__name__} {str(value)[:40]!r}, not a number"
    x = float(value)
    if not math.isfinite(x):
        return 0.0, "nonfinite", f"returned {x}"
    return x, None, ""


def _check_values(values) -> tuple[list[float], list[tuple[int, str, str]]]:
    """`_check_value` of every returned score -> (scores, faults as (index, kind, detail))."""
    scores, faults = [], []
    for i, value in enumerate(values):
        x, kind, detail = _check_value(value)
        scores.append(x)
        if kind is not None:
            faults.append((i, kind, detail))
    return scores, faults


def _is_scalar_tensor(value) -> bool:
    return hasattr(value, "item") and getattr(value, "ndim", None) == 0 and not isinstance(value, (str, bytes))


def call_with_deadline(fn: Callable[[], Any], timeout_s: float | None, name: str):
    """fn(), or raise TimeoutError when it runs past `timeout_s` (None: no limit).

    In-process code cannot be killed: the call goes on in a daemon thread, abandoned (RewardAdapter
    then moves the reward to worker processes, which are; reward.isolate: true starts there)."""
    if timeout_s is None:
        return fn()
    box: dict = {}

    def run():
        try:
            box["value"] = fn()
        except BaseException as exc:  # handed to the caller's thread
            box["error"] = exc

    worker = threading.Thread(target=run, name=f"resrl-reward-{name}", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        raise TimeoutError(f"no result after {timeout_s:g} s")
    if "error" in box:
        raise box["error"]
    return box["value"]


# What TRL passes every reward function as keywords, beside the dataset's columns.
TRL_REWARD_KWARGS = ("prompts", "completions", "completion_ids", "trainer_state", "log_extra", "log_metric",
                     "environments")
# ... of which these cannot travel to an isolated worker process (objects of the trainer)
_LOCAL_ONLY = ("trainer_state", "log_extra", "log_metric", "environments")


def reward_style(fn, columns) -> str:
    """"trl" for TRL's convention, f(completions, **kwargs) called with keywords (prompts,
    completions, completion_ids, the dataset's columns, trainer_state, ...); "resrl" for
    f(completions, answers) called positionally. Decided from the signature: **kwargs whose required
    parameters TRL can all pass (its keywords, the dataset's columns), or named parameters that
    include `completions` and are all of those, is TRL's; two positional parameters is resrl's
    (`f(completions, answers, **kwargs)` too: TRL has no `answers` to pass, and calling it TRL's
    way would fail on every item and score 0 silently). InputError naming the function when
    neither fits."""
    name = getattr(fn, "__name__", None) or type(fn).__name__
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):  # a builtin without a signature: the project's convention
        return "resrl"
    P = inspect.Parameter
    passable = set(TRL_REWARD_KWARGS) | set(columns)  # what TRL's call can name
    named = [p.name for p in params if p.kind in (P.POSITIONAL_OR_KEYWORD, P.KEYWORD_ONLY)]
    required = [p for p in params if p.default is P.empty and p.kind not in (P.VAR_POSITIONAL, P.VAR_KEYWORD)]
    if any(p.kind is P.VAR_KEYWORD for p in params) and {p.name for p in required} <= passable:
        return "trl"
    if "completions" in named and set(named) <= passable:
        return "trl"
    positional = [p for p in params if p.kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD)]
    if (len(positional) >= 2 or any(p.kind is P.VAR_POSITIONAL for p in params)) and len(required) <= 2:
        return "resrl"
    raise InputError(
        f"reward function {name!r} has the signature {inspect.signature(fn)}, which fits neither resrl's "
        f"f(completions, answers) -> list[float] nor TRL's f(completions, **kwargs) -> list[float] (keywords: "
        f"{', '.join(TRL_REWARD_KWARGS)} and the dataset's columns {sorted(c for c in columns if c not in TRL_REWARD_KWARGS)})")


def _item(value, i: int, n: int):
    """Item i of a batch argument: a list of the batch's length is sliced to [value[i]]; anything
    else (trainer_state, a callback) passes as it is."""
    return [value[i]] if isinstance(value, (list, tuple)) and len(value) == n else value


class FaultLog:
    """Counts a reward's faults per kind, logs the first of each kind with the reward and the row,
    or raises `RewardFaultError` for the first one (on_error = "raise")."""

    def __init__(self, name: str, on_error: str = "zero"):
        if on_error not in ON_ERROR:
            raise InputError(f"config key 'reward.on_error' must be one of {list(ON_ERROR)}, got {on_error!r}")
        self.name, self.on_error = name, on_error
        self.logged: set[str] = set()

    def report(self, faults: list[tuple[int, str, str]], rows: list[str]) -> dict[str, float]:
        """faults: (item index, kind, detail); rows[i] names item i's data row. -> counts per kind."""
        counts = dict.fromkeys(FAULT_KINDS, 0.0)
        for i, kind, detail in faults:
            counts[kind] += 1
            where = f"reward {self.name!r}: {kind.replace('_', ' ')} on {rows[i]} (item {i}): {detail}"
            if self.on_error == "raise":
                raise RewardFaultError(f"{where} (reward.on_error: raise; 'zero' scores such items 0)")
            if kind not in self.logged:
                self.logged.add(kind)
                logger.warning("%s; scored 0, further ones counted in reward/%s", where, kind)
        return counts


def row_names(columns: dict, n: int) -> list[str]:
    """How a fault names item i's row: the dataset's `id` column, else the prompt's start."""
    ids = columns.get("id")
    if isinstance(ids, (list, tuple)) and len(ids) == n:
        return [f"row id {v!r}" for v in ids]
    prompts = columns.get("prompts") or [None] * n
    return [f"the row with prompt {completion_text(p)[:60]!r}" if p is not None else "a row" for p in prompts]


class RewardAdapter:
    """TRL reward function around a project reward function; the dataset needs an `answer` column.

    Faults of the function are the item's score 0 and a count in `reward/<kind>` (FAULT_KINDS),
    with one log line naming the reward and the row the first time, or one `RewardFaultError`
    (on_error = "raise"): an exception (the batch is then scored item by item, so that only the
    items that raise score 0), a call past `timeout_s` (in-process deadline of one call, None for
    none: the built-in rewards bound their own items; the batch is then scored item by item, so that
    one hanging item costs one score, and the function moves to worker processes that a deadline
    kills — the timed-out call's thread is the only one ever abandoned), a NaN / inf, a value that is
    not a number, a list of the wrong length. An isolated function (IsolatedReward) reports its items' faults in
    `last_faults`."""

    def __init__(self, fn: Callable[[list[str], list[str]], list[float]], name: str | None = None,
                 answer_column: str = "answer", on_error: str = "zero", timeout_s: float | None = None,
                 style: str | None = None):
        if not callable(fn):
            raise TypeError(f"reward function must be callable, got {fn!r}")
        self.fn = fn
        self.answer_column = answer_column
        self.timeout_s = timeout_s
        self.style = style  # "resrl" | "trl" | None: from the user function's signature at the first call
        self.__name__ = name or getattr(fn, "__name__", None) or type(fn).__name__
        self.faults = FaultLog(self.__name__, on_error)
        self._isolated: IsolatedReward | None = None  # set once a call times out (`_score`)

    def __call__(self, prompts, completions, log_metric=None, **columns) -> list[float]:
        if self.style is None:
            self.style = reward_style(getattr(self.fn, "user_fn", self.fn), columns)
        if self.style == "trl":  # TRL's call, as GRPOTrainer makes it
            args, kwargs = (), {"prompts": prompts, "completions": completions, "log_metric": log_metric, **columns}
            if not isinstance(self.fn, IsolatedReward):
                kwargs = _accepted(self.fn, kwargs)
            n = len(completions)
        else:
            if self.answer_column not in columns:
                raise InputError(f"the training dataset has no '{self.answer_column}' column for the reward "
                                 f"(columns: {sorted(k for k in columns if k not in ('trainer_state', 'log_extra'))})")
            texts = [completion_text(c) for c in completions]
            answers = ["" if a is None else str(a) for a in columns[self.answer_column]]
            args, kwargs, n = (texts, answers), {}, len(texts)
        scores, faults = self._score(args, kwargs, n)
        counts = self.faults.report(faults, row_names({**columns, "prompts": prompts}, n))
        stats = getattr(self.fn, "last_stats", None)
        stats = dict(stats) if isinstance(stats, dict) else {}
        if log_metric is not None:
            for kind in FAULT_KINDS:  # every step, 0 included: a dashboard shows when faults start
                extra = stats.pop(kind, 0.0)
                log_metric(f"reward/{kind}", counts[kind] + (float(extra) if isinstance(extra, (int, float)) else 0.0))
            for key, value in sorted(stats.items()):
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    log_metric(f"reward/{key}", float(value))
        return scores

    def _score(self, args: tuple, kwargs: dict, n: int) -> tuple[list[float], list[tuple[int, str, str]]]:
        if self._isolated is not None:  # a call of this reward timed out before: its items run in workers
            return self._score_isolated(args, kwargs, n)
        try:
            raw = call_with_deadline(lambda: self.fn(*args, **kwargs), self.timeout_s, self.__name__)
        except TimeoutError as exc:
            # like an exception: find the items that hang, so that one hanging item costs one score. An
            # in-process call cannot be stopped (its thread is abandoned): from now on this reward runs in
            # worker processes, which are killed at the deadline — one abandoned thread per run, not per step
            self._isolate(exc)
            return self._score_isolated(args, kwargs, n)
        except Exception as exc:  # noqa: BLE001 — user code: score item by item to find the items that raise
            return self._score_items(args, kwargs, n, exc)
        try:
            raw = list(raw)
        except TypeError:
            return [0.0] * n, [(i, "wrong_type", f"returned {type(raw).__name__}, not a list of {n} scores")
                               for i in range(n)]
        if len(raw) != n:
            return [0.0] * n, [(i, "wrong_type", f"returned {len(raw)} scores for {n} completions") for i in range(n)]
        scores, faults = _check_values(raw)
        for i, kind, detail in getattr(self.fn, "last_faults", None) or ():  # isolated items
            scores[i] = 0.0
            faults.append((i, kind, detail))
        return scores, faults

    def _isolate(self, exc: Exception) -> None:
        logger.warning("reward %r: a call ran past reward.timeout_s=%g s (%s); it cannot be stopped in-process, so "
                       "this reward now scores item by item in worker processes, killed at the deadline "
                       "(reward.isolate: true does so from the start)", self.__name__, self.timeout_s, exc)
        self._isolated = IsolatedReward(self.fn, timeout_s=self.timeout_s, num_workers=2)

    def _score_isolated(self, args: tuple, kwargs: dict, n: int):
        try:
            raw = self._isolated(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 — e.g. an argument that cannot travel to a worker
            return [0.0] * n, [(i, "errors", f"{type(exc).__name__}: {exc}") for i in range(n)]
        scores, faults = _check_values(raw)
        for i, kind, detail in self._isolated.last_faults:
            scores[i] = 0.0
            faults.append((i, kind, detail))
        return scores, faults

    def close(self) -> None:
        if self._isolated is not None:
            self._isolated.close()
            self._isolated = None

    def _score_items(self, args: tuple, kwargs: dict, n: int, batch_error: Exception):
        scores, faults = [], []
        for i in range(n):
            args_i = tuple(_item(a, i, n) for a in args)
            kwargs_i = {k: _item(v, i, n) for k, v in kwargs.items()}
            try:
                raw = call_with_deadline(lambda: self.fn(*args_i, **kwargs_i), self.timeout_s, self.__name__)
            except TimeoutError as exc:
                scores.append(0.0)
                faults.append((i, "timeouts", str(exc)))
                continue
            except Exception as exc:  # noqa: BLE001
                scores.append(0.0)
                faults.append((i, "errors", f"{type(exc).__name__}: {exc}"))
                continue
            raw = list(raw) if isinstance(raw, (list, tuple)) else None
            if raw is None or len(raw) != 1:
                scores.append(0.0)
                faults.append((i, "wrong_type", "returned no list of 1 score for 1 completion"))
                continue
            x, kind, detail = _check_value(raw[0])
            scores.append(x)
            if kind is not None:
                faults.append((i, kind, detail))
        if not faults:  # every item alone is fine: the batch call itself fails
            return [0.0] * n, [(i, "errors", f"{type(batch_error).__name__}: {batch_error} "
                                        "(the batch call; each item alone scores)") for i in range(n)]
        return scores, faults


def _accepted(fn, kwargs: dict) -> dict:
    """The keywords `fn` takes (all of them with **kwargs)."""
    params = inspect.signature(fn).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return kwargs
    names = {p.name for p in params}
    return {k: v for k, v in kwargs.items() if k in names}


def _score_one(fn, args: tuple, kwargs: dict):
    value = list(fn(*args, **kwargs))
    if len(value) != 1:
        raise ValueError(f"returned {len(value)} scores for 1 completion")
    return value[0] if value[0] is None or isinstance(value[0], (int, float)) else _plain(value[0])


def _plain(value):
    """A score as a picklable python value for the trip back from the worker (a numpy or 0-d torch
    number becomes a float; anything else goes back as its repr, to be reported as wrong_type)."""
    if _is_scalar_tensor(value) or isinstance(value, numbers.Real):
        return float(value)
    return f"<{type(value).__name__}>"


class IsolatedReward:
    """A user reward scored item by item in `resrl.rewards.isolation.IsolatedPool` workers: an item
    that runs past `timeout_s`, raises or crashes its worker scores 0 and is listed in `last_faults`
    ((index, kind, detail), for RewardAdapter to count, log or raise); training never hangs on it.
    Called like the user's function, positionally (texts, answers) or with TRL's keywords; the
    trainer's objects (trainer_state, log_metric, ...) stay behind."""

    def __init__(self, fn, timeout_s: float = 5.0, num_workers: int = 2):
        from resrl.rewards.isolation import IsolatedPool

        self.user_fn = fn
        self.__name__ = getattr(fn, "__name__", None) or type(fn).__name__
        self._pool = IsolatedPool(_ScoreOne(fn), timeout_s=timeout_s, num_workers=num_workers)
        self.timeout_s = timeout_s
        self.last_faults: list[tuple[int, str, str]] = []

    def __call__(self, *args, **kwargs) -> list:
        n = len(args[0]) if args else len(kwargs["completions"])
        kwargs = _accepted(self.user_fn, {k: v for k, v in kwargs.items() if k not in _LOCAL_ONLY})
        items = [(tuple(_item(a, i, n) for a in args), {k: _item(v, i, n) for k, v in kwargs.items()})
                 for i in range(n)]
        results = self._pool.map(items)
        self.last_faults = [(i, "timeouts", f"no result after {self.timeout_s:g} s") if r.timed_out
                            else (i, "errors", str(r.error))
                            for i, r in enumerate(results) if r.timed_out or r.error is not None]
        return [r.value if (not r.timed_out and r.error is None) else 0.0 for r in results]

    def close(self) -> None:
        self._pool.close()


class _ScoreOne:
    """Picklable callable (spawn platforms): one item through the user's batch function."""

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, args: tuple, kwargs: dict):
        return _score_one(self.fn, args, kwargs)


class EnvironmentReward:
    """TRL reward function for multi-turn rollouts: the environment's own reward of each trajectory,
    which the rollout function hands over as the `env_reward` column (resrl.engines.multiturn)."""

    __name__ = "env"

    def __init__(self, on_error: str = "zero"):
        self.faults = FaultLog(self.__name__, on_error)

    def __call__(self, prompts, completions, env_reward=None, log_metric=None, **columns) -> list[float]:
        if env_reward is None:
            raise InputError("reward.function 'env' needs multi-turn rollouts (config section env): "
                             "no env_reward came with the completions")
        out, faults = _check_values(env_reward)
        counts = self.faults.report(faults, row_names({**columns, "prompts": prompts}, len(out)))
        if log_metric is not None:
            for kind in FAULT_KINDS:
                log_metric(f"reward/{kind}", counts[kind])
        return out
