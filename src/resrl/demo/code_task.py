"""`resrl demo --task code`: write a function from two examples; hidden tests decide.

A problem shows a linear function at two points and asks for its code:

    prompt      f(0)=37;f(1)=42;
    target      def f(x):return 5*x+37

The reward is the code family's own (`resrl.tasks.code.reward.CodeReward`): the completion runs in
the sandbox, `f` is called on six inputs, and the parent compares the return values the way
EvalPlus does. The first two inputs are the examples in the prompt (EvalPlus's "base" set); the
other four (2, 3, -2, 10) are hidden, so a completion that hard-codes the two shown values, or any
constant, earns nothing. Reward 1.0 only when every test passes.

Why it leaves RL something to learn: reading b is a copy, but a = f(1) - f(0) is a subtraction the
tiny model gets wrong often; the warm start stops at a low dev greedy accuracy (as the math demo
does), so sampling finds correct programs the greedy policy misses, and any correct spelling of the
function earns the same reward (`x*5+37`, `37+5*x`, ...), not only the one the warm start imitated.

Problems: a in [1, 9], b in [0, max_b] (450 distinct functions with max_b = 49); the held-out
split is a fixed set of 128 of them, the training streams never draw one of it. With max_b = 99 the
tiny model's warm start was still at 16 % dev greedy after 800 steps (12 minutes on the shared
cores); with 19 it jumped to 61 % by step 400, but 180 functions leave too few to hold out.
"""

from __future__ import annotations

import json
import random
import threading
from dataclasses import dataclass

from resrl.data.problem import Problem
from resrl.data.synthetic import HeldOutSplitTask

HIDDEN_INPUTS = (2, 3, -2, 10)  # after the two shown ones (0 and 1)
ALPHABET = "0123456789+-*=;:() defrtunx"  # every character of the prompts and the targets


@dataclass
class CodeFunctionsConfig:
    """Shape of the task.

    max_a       slopes a in [1, max_a]
    max_b       intercepts b in [0, max_b]
    num_test    size of the held-out split (distinct functions)
    seed        seed of the held-out split and of the training streams
    """

    max_a: int = 9
    max_b: int = 49
    num_test: int = 128
    seed: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.max_a, int) or not 1 <= self.max_a <= 9:
            raise ValueError(f"CodeFunctionsConfig.max_a must be an int in [1, 9], got {self.max_a!r}")
        if not isinstance(self.max_b, int) or self.max_b < 0:
            raise ValueError(f"CodeFunctionsConfig.max_b must be an int >= 0, got {self.max_b!r}")
        space = self.max_a * (self.max_b + 1)
        if not isinstance(self.num_test, int) or not 1 <= self.num_test <= space // 2:
            raise ValueError(f"CodeFunctionsConfig.num_test must be an int in [1, {space // 2}] (half of the "
                             f"{space} distinct functions), got {self.num_test!r}")


def function_tests(a: int, b: int) -> dict:
    """The problem's tests in the code family's function-level format: the two shown inputs first
    (`base_count`: EvalPlus's base set), then the hidden ones."""
    inputs = (0, 1) + HIDDEN_INPUTS
    return {"entry_point": "f", "inputs": [[x] for x in inputs], "outputs": [a * x + b for x in inputs],
            "base_count": 2}


def make_code_problem(a: int, b: int) -> Problem:
    """(5, 37) -> prompt `f(0)=37;f(1)=42;`, answer the tests as JSON, target in `extra`."""
    return Problem(id=f"code-{a}x+{b}", prompt=f"f(0)={b};f(1)={a + b};",
                   answer=json.dumps(function_tests(a, b)), data_source="demo-code",
                   extra={"target": f"def f(x):return {a}*x+{b}", "a": a, "b": b})


def code_target(problem: Problem) -> str:
    """The completion the warm start imitates: `def f(x):return 5*x+37`."""
    try:
        return problem.extra["target"]
    except KeyError:
        raise ValueError(f"problem {problem.id!r} is not a problem of the code demos (no target in extra; build it "
                         "with resrl.demo.code_task.make_code_problem or code_stdin_task.make_stdin_problem)") from None


class CodeFunctionsTask(HeldOutSplitTask):
    """Generator of function-from-examples problems with a fixed held-out split of functions."""

    stream_prefix = "resrl-code"

    def __init__(self, config: CodeFunctionsConfig | None = None) -> None:
        super().__init__(config or CodeFunctionsConfig())

    def draw_problem(self, rng: random.Random) -> Problem:
        return make_code_problem(rng.randint(1, self.config.max_a), rng.randint(0, self.config.max_b))

    def split_key(self, problem: Problem) -> tuple:
        return problem.extra.get("a"), problem.extra.get("b")


# -- the reward: the code family's sandboxed reward, one per process ---------------------------------

_REWARD = None
_REWARD_LOCK = threading.Lock()


def _code_reward():
    global _REWARD
    with _REWARD_LOCK:
        if _REWARD is None:
            from resrl.tasks.rewards import load_reward_function

            # the code family's CodeReward, through the registry (no family import outside resrl.tasks);
            # 1 s per test: the programs are one expression; a runaway one costs a second and a 0
            _REWARD = load_reward_function("code", timeout_s=1.0, num_workers=2)
        return _REWARD


class _DemoCodeReward:
    """1.0 when the completion's program passes all six tests in the sandbox, else 0.0: the code
    family's `CodeReward`, made on first use in each process (the demo's RL workers are processes).
    The same object scores training and the held-out evaluation; the evaluator reads its `.score`
    verdicts (extracted program, timeouts, errors, EvalPlus's base set in `base_correct`)."""

    __name__ = "code"

    def __call__(self, completions, answers) -> list[float]:
        return _code_reward()(list(completions), list(answers))

    def score(self, completions, answers):
        return _code_reward().score(list(completions), list(answers))

    def extract_answer(self, completion: str):
        return _code_reward().extract_answer(completion)


code_reward = _DemoCodeReward()


def describe_code(t: CodeFunctionsConfig) -> str:
    return f"f(x) = a*x + b from f(0), f(1); a in [1, {t.max_a}], b in [0, {t.max_b}]; 4 hidden tests"


def code_config(quick: bool = False):
    """`resrl demo --task code`'s settings (calibration: docs/demo.md, "Tasks"); `--quick`: one-digit
    intercepts, tiny budgets."""
    return code_experiment("code", CodeFunctionsConfig, quick, completion_tokens=24)


def code_experiment(task_name: str, config_type: type, quick: bool, completion_tokens: int):
    """The code tasks' budgets: `completion_tokens` for RL, 2 more for evaluation."""
    from resrl.demo.config import tiny_model_experiment

    lengths = (f"train.max_completion_length={completion_tokens}", f"eval.max_new_tokens={completion_tokens + 2}")
    task = config_type(max_a=5, max_b=9, num_test=16) if quick else config_type(num_test=128)
    return tiny_model_experiment(task_name, task, quick, quick_keys=lengths, keys=(
        "start.max_steps=1500", "start.check_every=20", "train.max_steps=150", *lengths))


__all__ = ["ALPHABET", "CodeFunctionsConfig", "CodeFunctionsTask", "code_config", "code_experiment", "code_reward", "code_target",
           "describe_code", "function_tests", "make_code_problem"]
