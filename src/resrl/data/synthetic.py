"""A synthetic verifiable task with a known worked chain: chained addition.

A problem is `a+b+c=`; the target completion reduces the expression one addition at a time,

    prompt  "17+45+38="        target  "62+38=100"        answer "100"

so a completion is a short chain of reduced expressions whose last number is the answer. Because
the whole correct chain is known, the first wrong token of a negative completion is known exactly
(`first_error_index`), which is what the demo uses to show where ResRL's weights ω land (spec §2).

The held-out split is a fixed set of distinct problems drawn from the seed; training problems are
drawn from a separate stream and never coincide with a held-out problem. Everything is
deterministic given the seed (Python's `random.Random`, no global state).
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from resrl.data.problem import Problem

# the final number of a completion: after the last "=", up to the end (spaces allowed around)
_ANSWER_RE = re.compile(r"=\s*(-?\d+)\s*$")


@dataclass
class ChainAdditionConfig:
    """Shape of the task.

    num_terms   terms per problem (>= 3); the chain has num_terms - 1 additions
    min_value   smallest term
    max_value   largest term
    num_test    size of the held-out split (distinct problems)
    seed        seed of the held-out split and of the training stream
    """

    num_terms: int = 3
    min_value: int = 10
    max_value: int = 99
    num_test: int = 128
    seed: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.num_terms, int) or self.num_terms < 3:
            # with 2 terms the target is a bare sum with no `=` in the completion, which the chain
            # reward (the number after the completion's last `=`) could never grade as correct
            raise ValueError(f"ChainAdditionConfig.num_terms must be an int >= 3, got {self.num_terms!r}")
        if not (isinstance(self.min_value, int) and isinstance(self.max_value, int)) or not (
            0 <= self.min_value <= self.max_value
        ):
            raise ValueError(
                f"ChainAdditionConfig.min_value/max_value must be ints with 0 <= min_value <= max_value, "
                f"got {self.min_value!r}, {self.max_value!r}"
            )
        if not isinstance(self.num_test, int) or self.num_test < 1:
            raise ValueError(f"ChainAdditionConfig.num_test must be a positive int, got {self.num_test!r}")
        space = (self.max_value - self.min_value + 1) ** self.num_terms
        if self.num_test > space // 2:
            raise ValueError(
                f"ChainAdditionConfig.num_test={self.num_test} leaves too few training problems "
                f"(only {space} distinct problems exist)"
            )


DATA_SOURCE = "chain"


def make_problem(terms: Sequence[int]) -> Problem:
    """`(17, 45, 38)` -> prompt `17+45+38=`, target `62+38=100`, answer "100".

    A chained-addition problem is an ordinary `resrl.data.loaders.Problem` (the project's one
    problem type): id `chain-17+45+38`, data_source "chain", the answer as a string, and the terms
    and the worked chain in `extra` (read them with `chain_terms` / `chain_target`)."""
    terms = tuple(int(t) for t in terms)
    if len(terms) < 2:
        raise ValueError(f"make_problem: need at least 2 terms, got {terms}")
    expression = "+".join(map(str, terms))
    steps, acc = [], terms[0]
    for i in range(1, len(terms)):
        acc += terms[i]
        steps.append("+".join(map(str, (acc,) + terms[i + 1:])))
    return Problem(id=f"{DATA_SOURCE}-{expression}", prompt=expression + "=", answer=str(acc),
                   data_source=DATA_SOURCE, extra={"terms": terms, "target": "=".join(steps)})


def chain_terms(problem: Problem) -> tuple[int, ...]:
    """The terms of a chained-addition problem (`make_problem`)."""
    return tuple(_chain_extra(problem, "terms"))


def chain_target(problem: Problem) -> str:
    """The correct completion of a chained-addition problem: the worked chain, e.g. `62+38=100`."""
    return _chain_extra(problem, "target")


def _chain_extra(problem: Problem, key: str):
    try:
        return problem.extra[key]
    except KeyError:
        raise ValueError(f"problem {problem.id!r} is not a chained-addition problem (no {key!r} in extra; "
                         "build it with resrl.data.synthetic.make_problem)") from None


class HeldOutSplitTask:
    """A problem generator with a fixed held-out split and training streams that never meet it.

    A subclass says how to draw one problem (`draw_problem(rng)`), what identifies a problem for
    the split (`split_key(problem)`: two problems with the same key are the same problem, e.g. the
    same terms, or the same call under another phrasing) and the name of its random streams
    (`stream_prefix`). `config` needs `num_test` and `seed`. The held-out split is the first
    `num_test` distinct keys drawn from the stream `<prefix>-test-<seed>` (the first problem drawn
    for a key is kept); `train_problems(n, stream)` draws from `<prefix>-<stream>-<seed>` and skips
    every held-out key.
    """

    stream_prefix: str

    def __init__(self, config) -> None:
        self.config = config
        rng = random.Random(f"{self.stream_prefix}-test-{config.seed}")
        test: dict = {}
        while len(test) < config.num_test:
            problem = self.draw_problem(rng)
            test.setdefault(self.split_key(problem), problem)
        self.test: list[Problem] = list(test.values())
        self._test_keys = set(test)
        self._not_for_training = self._test_keys  # the keys `train_problems` skips (a subclass may add its dev split)

    def draw_problem(self, rng: random.Random) -> Problem:
        raise NotImplementedError

    def split_key(self, problem: Problem):
        raise NotImplementedError

    def train_problems(self, n: int, stream: str | int = "train") -> list[Problem]:
        """`n` training problems (repeats allowed, held-out problems never), deterministic per
        (seed, stream): different streams give independent problem sets (e.g. "sft" and "rl")."""
        if n < 0:
            raise ValueError(f"train_problems: n must be >= 0, got {n}")
        rng = random.Random(f"{self.stream_prefix}-{stream}-{self.config.seed}")
        out = []
        while len(out) < n:
            problem = self.draw_problem(rng)
            if self.split_key(problem) not in self._not_for_training:
                out.append(problem)
        return out

    def dev_split(self, n: int) -> list[Problem]:
        """The first `n` distinct problems of the stream "dev" (the one the demo's warm start stops on),
        none of them held out: the split on which settings are chosen, disjoint from `test`."""
        rng = random.Random(f"{self.stream_prefix}-dev-{self.config.seed}")
        dev: dict = {}
        while len(dev) < n:
            problem = self.draw_problem(rng)
            key = self.split_key(problem)
            if key not in self._test_keys:
                dev.setdefault(key, problem)
        return list(dev.values())

    def is_test(self, problem: Problem) -> bool:
        return self.split_key(problem) in self._test_keys


class ChainAdditionTask(HeldOutSplitTask):
    """Generator of chained-addition problems with a fixed held-out split."""

    stream_prefix = "resrl-chain"

    def __init__(self, config: ChainAdditionConfig | None = None) -> None:
        super().__init__(config or ChainAdditionConfig())

    def _draw(self, rng: random.Random) -> tuple[int, ...]:
        c = self.config
        return tuple(rng.randint(c.min_value, c.max_value) for _ in range(c.num_terms))

    def draw_problem(self, rng: random.Random) -> Problem:
        return make_problem(self._draw(rng))

    def split_key(self, problem: Problem) -> tuple[int, ...]:
        return chain_terms(problem)


def extract_answer(completion: str) -> int | None:
    """The number after the last `=` at the end of the completion, or None if there is none."""
    m = _ANSWER_RE.search(completion)
    return int(m.group(1)) if m else None


def is_correct(completion: str, answer: int | str) -> bool:
    """Exact check of the final answer (the chain itself is not graded, as with math verifiers)."""
    got = extract_answer(completion)
    return got is not None and got == int(answer)


class ChainReward:
    """The task's reward function (`f(completions, answers)`, see resrl.rewards): 1.0 for a correct
    final answer, else 0.0. Training uses it as `reward_fn`, evaluation as the scorer of
    `resrl.eval.runner.evaluate` (its `extract_answer` gives the extracted answers and maj@k), so
    "correct" is the same rule in both."""

    __name__ = "chain_reward"

    def extract_answer(self, completion: str) -> str | None:
        got = extract_answer(completion)
        return None if got is None else str(got)

    def __call__(self, completions: Sequence[str], answers: Sequence[int | str]) -> list[float]:
        return [1.0 if is_correct(c, a) else 0.0 for c, a in zip(completions, answers)]


chain_reward = ChainReward()


def first_error_index(token_texts: Sequence[str], target: str, eos_text: str | None = None) -> int | None:
    """Index of the first token of a completion that leaves the correct chain, or None if none does.

    token_texts: decoded text of each completion token (specials included, e.g. the eos token);
    target: the correct completion text; eos_text: the text of the end-of-sequence token, which
    is the correct continuation right after the target. A token is wrong as soon as the text up
    to and including it is no longer a prefix of `target + eos`. With a character-level tokenizer
    this is exact per character; with multi-character tokens it is exact per token.
    Returns None when every token stays on the chain (a correct prefix)."""
    full = target + (eos_text or "")
    pos = 0
    for i, text in enumerate(token_texts):
        if full[pos:pos + len(text)] != text or (not text and pos >= len(full)):
            return i
        pos += len(text)
        if eos_text is not None and pos >= len(full) and i + 1 < len(token_texts):
            # anything after the end of the sequence is off the chain (should never be sampled)
            return i + 1
    return None


def write_jsonl(problems: Iterable[Problem], path: str | Path) -> Path:
    """Write `{"id", "problem", "answer", "target"}` rows, read back by the project's data loaders
    (`resrl.tasks.data.load_problems`; the target lands in the problem's `extra`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        for p in problems:
            f.write(json.dumps({"id": p.id, "problem": p.prompt, "answer": p.answer, "target": chain_target(p)}) + "\n")
    return path


__all__ = [
    "ChainAdditionConfig", "ChainAdditionTask", "HeldOutSplitTask", "Problem", "make_problem", "chain_terms", "chain_target",
    "extract_answer", "is_correct", "ChainReward", "chain_reward", "first_error_index", "write_jsonl",
]
