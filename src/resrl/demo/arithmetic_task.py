"""The pretrained-model demo task (`resrl demo --task smollm2-arithmetic`): short additions asked of
SmolLM2-135M-Instruct in its chat template, answered in `\\boxed{}`, scored by the math family's
verifier (Math-Verify). Run by the pretrained experiment kind (`resrl.experiments.kinds.PretrainedKind`).

    problem   "What is 7 + 58? Put the result in \\boxed{}."  (a user message; the model's chat template)
    answer    "65"
    reward    the `math` family reward (Math-Verify in its isolated pool): 1 when the final answer
              equals the sum, in training and evaluation alike; an answer that is an expression
              (`\\boxed{7+58}`, which Math-Verify evaluates) or a restatement of the question
              ("the result of 7 + 58 is found by ...") scores 0: only the number a completion
              states as its final answer is verified (`final_number`)
    format    a completion is well formatted when it holds a `\\boxed{...}` (`is_formatted`); accuracy,
              format rate and accuracy among well-formatted completions are reported apart, so a
              policy that only learns to write `\\boxed{}` shows up as format, not accuracy

Each term's digit count is drawn per problem from `digits` (one- and two-digit terms by default:
the range where the base model is right often enough for RL to have something to sharpen, and
wrong often enough to leave room). The held-out split, the dev split (where each method's
learning rate is chosen) and the training stream never meet (`ArithmeticTask`).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, replace

from resrl.data.problem import Problem
from resrl.data.synthetic import HeldOutSplitTask
from resrl.demo.config import TINY_TRAINING, BaseModel, ExperimentConfig, with_overrides
from resrl.eval.runner import EvalConfig

INSTRUCTION = "Put the result in \\boxed{}."


@dataclass
class ArithmeticConfig:
    """num_terms terms, each with a digit count drawn from `digits`; num_test held-out problems (the
    dev split has as many); seed: the splits' and streams' seed (the demo's seed)."""

    num_terms: int = 2
    digits: tuple = (1, 2)
    num_test: int = 64
    seed: int = 0
    instruction: str = INSTRUCTION

    def __post_init__(self) -> None:
        self.digits = tuple(int(d) for d in self.digits)
        if self.num_terms < 2 or not self.digits or min(self.digits) < 1:
            raise ValueError(f"ArithmeticConfig: num_terms must be >= 2 and digits >= 1, got {self.num_terms}, "
                             f"{self.digits}")
        values = sum(10 if d == 1 else 9 * 10 ** (d - 1) for d in set(self.digits))  # one digit: 0-9
        space = values ** self.num_terms
        if not 1 <= self.num_test <= space // 4:
            raise ValueError(f"ArithmeticConfig.num_test must be in [1, {space // 4}] (a quarter of the distinct "
                             f"problems: the held-out and dev splits must leave training problems), got {self.num_test}")


def _term(rng: random.Random, digits: int) -> int:
    return rng.randint(0 if digits == 1 else 10 ** (digits - 1), 10 ** digits - 1)


class ArithmeticTask(HeldOutSplitTask):
    """Additions with a held-out split, a dev split of as many problems, and a training stream that
    meets neither (`train_problems` skips both)."""

    stream_prefix = "resrl-arith"

    def __init__(self, config: ArithmeticConfig | None = None) -> None:
        super().__init__(config or ArithmeticConfig())
        # `train_problems` skips the dev split as well as the held-out one
        self._not_for_training = self._test_keys | {self.split_key(p) for p in self.dev_split(self.config.num_test)}

    def draw_problem(self, rng: random.Random) -> Problem:
        terms = tuple(_term(rng, rng.choice(self.config.digits)) for _ in range(self.config.num_terms))
        question = "What is " + " + ".join(map(str, terms)) + "?"
        if self.config.instruction:
            question += " " + self.config.instruction
        return Problem(id="+".join(map(str, terms)), prompt=[{"role": "user", "content": question}],
                       answer=str(sum(terms)), data_source="smollm2-arithmetic", extra={"terms": list(terms)})

    def split_key(self, problem: Problem):
        return tuple(problem.extra["terms"])


def is_formatted(completion: str) -> bool:
    """The answer format the instruction asks for: a `\\boxed{...}` with something in it."""
    from resrl.rewards.exact import last_boxed

    boxed = last_boxed(completion)
    return boxed is not None and boxed.strip() != ""


_NUMERAL = re.compile(r"[-+]?\d+(?:\.0*)?")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
# an arithmetic operator right before a number, or one (or "=") right after it: the number is an operand;
# a "≠" before it denies it ("4 + 2 ≠ 6." states no answer)
_OPERATOR_BEFORE = re.compile(r"(?:[+\-*/×÷^≠]|!=|\\(?:frac|times|cdot|div|neq|ne)\b)\s*$")
_OPERATOR_AFTER = re.compile(r"^\s*(?:[+\-*/×÷^=]|\\(?:times|cdot|div))")


def final_number(completion: str) -> str | None:
    """The completion's final answer as a numeral, or None when it states none.

    - With a `\\boxed{}`: the last box's content (`\\text{}` and `$` removed), which must be a
      numeral (`65`, `65.0`).
    - Without one: the last number in the text, which must stand on its own — no arithmetic operator
      right before it, none (nor "=") right after it.

    Why: Math-Verify compares answers symbolically and, without a box, takes the last expression it
    finds, so the question's own terms earn the reward without the sum being done — `\\boxed{7+58}`,
    and, found by GRPO on SmolLM2 at lr 1e-4 (dev Avg@4 0.77 with 0.8 % of the samples stating the
    sum), a restatement with no number after it: "To calculate the result of 7 + 58, we need to
    follow the order of operations: parentheses, addition, ...". Here only a number the completion
    states as its result is verified. (The sums are positive: a "-" before a number is an operator.)"""
    from resrl.rewards.exact import last_boxed

    boxed = last_boxed(completion)
    if boxed is not None:
        text = re.sub(r"\\text\{([^{}]*)\}", r"\1", boxed).replace("$", "").replace(" ", "").rstrip(".")
        return text.lstrip("+") if _NUMERAL.fullmatch(text) else None
    numbers = list(_NUMBER.finditer(completion))
    if not numbers:
        return None
    last = numbers[-1]
    if _OPERATOR_BEFORE.search(completion[:last.start()]) or _OPERATOR_AFTER.match(completion[last.end():]):
        return None
    return last.group(0)


_REWARD = None


def arithmetic_reward(completions: list[str], answers: list[str]) -> list[float]:
    """The math family's verifier (`resrl.tasks.rewards`, name `math`: Math-Verify in an isolated
    pool, one per process) on the number each completion states as its final answer
    (`final_number`, given to it as `\\boxed{number}`): 1.0 when it equals the sum, 0.0 otherwise
    or when the completion states no number."""
    global _REWARD
    if _REWARD is None:
        from resrl.tasks.rewards import load_reward_function

        _REWARD = load_reward_function("math")
    numbers = [final_number(c) for c in completions]
    scores = _REWARD([f"\\boxed{{{n}}}" if n is not None else "" for n in numbers], answers)
    return [float(s) if n is not None else 0.0 for n, s in zip(numbers, scores)]


def describe(t: ArithmeticConfig) -> str:
    return f"{t.num_terms} terms of {' or '.join(map(str, t.digits))} digits, answered in \\boxed{{}}"


def arithmetic_eval_config(**overrides) -> EvalConfig:
    """The evaluation of the pretrained demo: the chat template, the problem's own instruction (none
    added), sampling at the training temperature."""
    settings = dict(n=16, temperature=0.7, top_p=1.0, max_new_tokens=48, batch_size=64, seed=1234,
                    use_chat_template=True, instruction="", raw_prompts=False, progress=False, plot=False)
    settings.update(overrides)
    return EvalConfig(**settings)


# GRPO, ResRL as the paper sets it, ResRL with full-weight positives (λ_pos = 1), ResRL with the
# `token` alignment, and NSR (negative samples only: ResRL's update is mostly negative at λ_pos = 0.1)
PRETRAINED_ALGORITHMS = ("grpo", "resrl", "resrl/resrl.pos_scale=1.0", "resrl/resrl.hidden_alignment=token", "nsr")


def arithmetic_config(quick: bool = False) -> ExperimentConfig:
    """`resrl demo --task smollm2-arithmetic`: SmolLM2-135M-Instruct is the start (`BaseModel`).

    RL per method: 4 prompts x 8 samples per step (a group of 8 holds a positive and a negative at
    accuracies from ~10 % to ~90 %), 48 new tokens (the base model's worked answers to one- and
    two-digit sums fit; longer ones are cut and score 0), temperature 0.7 (the base model's sampled
    accuracy was 0.152 at 0.7 and 0.117 at 1.0, where most samples ramble past 48 tokens), lr 1e-5 (a
    method's own where its label sets train.learning_rate). Forward/backward one group (8
    completions) at a time: a whole update of 32 holds the 49 k-token vocabulary's logits of every
    completion, too much for two runs beside the evaluation in 24 GB. The last 8 of the 30 decoder
    layers (and the final norm) train, the rest is frozen (`model.trainable_layers`): the backward
    stops at layer 22, about half the cost of a full fine-tuning step (benchmarks/results/
    smollm2_step.md). Evaluation: 16 samples per problem at the training temperature, 48 new tokens,
    the chat template. `--quick`: 8 problems, 2 RL steps of 2 prompts x 4 samples, 16 new tokens, 2
    samples per problem."""
    cfg = ExperimentConfig(task_name="smollm2-arithmetic", train=TINY_TRAINING, start=BaseModel(),
                           eval=arithmetic_eval_config(), task=ArithmeticConfig(), algorithms=PRETRAINED_ALGORITHMS,
                           out="runs/demo-smollm2", is_quick=quick)
    shared = ("train.learning_rate=1.0e-5", "train.temperature=0.7", "model.trainable_layers=8")
    if quick:
        return replace(with_overrides(cfg, (*shared, "train.max_steps=2", "train.rollout_prompts=2", "train.group_size=4",
                                            "train.max_completion_length=16", "eval.n=2", "eval.max_new_tokens=16",
                                            "task.num_test=8")), algorithms=("grpo", "resrl"))
    return with_overrides(cfg, (*shared, "train.max_steps=20", "train.rollout_prompts=4",
                                "train.max_completion_length=48", "train.micro_batch_size=8", "checkpoint.save_steps=4"))



def __getattr__(name: str):
    """A name that left this module (PretrainedDemoConfig): an ImportError naming its new path (resrl._moved)."""
    from resrl._moved import moved_name

    raise moved_name(__name__, name)

__all__ = ["final_number", "ArithmeticConfig", "ArithmeticTask", "PRETRAINED_ALGORITHMS", "arithmetic_config", "INSTRUCTION", "arithmetic_reward", "is_formatted", "describe",
           "arithmetic_eval_config"]
