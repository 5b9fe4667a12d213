"""Held-out evaluation of the demo: greedy accuracy, Avg@k and unbiased Pass@k (spec §5).

Sampling goes through `resrl.eval.generate_samples` (the project's evaluator); only the
chained-addition scoring and the summary the demo's report needs live here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from resrl.data.synthetic import Problem, extract_answer, is_correct
from resrl.metrics import avg_at_k, ks_up_to, pass_at_k


@dataclass
class EvalConfig:
    num_samples: int = 16  # n samples per problem; Pass@k for every power of two k <= n
    temperature: float = 1.0  # the RL sampling temperature: what the policy itself would draw
    top_p: float = 1.0
    max_new_tokens: int = 24
    batch_size: int = 512  # rows (prompt x sample) per generate call
    seed: int = 1234


@dataclass
class EvalResult:
    greedy: float
    avg: float  # Avg@n
    pass_at: dict[int, float]  # k -> mean unbiased Pass@k
    mean_length: float  # sampled completion tokens
    truncated: float  # fraction of samples that hit max_new_tokens
    correct: np.ndarray = field(repr=False)  # (P, n) bool

    def to_dict(self) -> dict:
        return {"greedy": self.greedy, "avg": self.avg, "pass_at": {str(k): v for k, v in self.pass_at.items()},
                "mean_length": self.mean_length, "truncated": self.truncated}


def greedy_completions(model, tokenizer, prompts: Sequence[str], max_new_tokens: int, batch_size: int) -> list[str]:
    from resrl.eval import generate_samples

    samples = generate_samples(model, tokenizer, list(prompts), n=1, temperature=0.0, top_p=1.0,
                               max_new_tokens=max_new_tokens, batch_size=batch_size, seed=0)
    return [s[0].text for s in samples]


def evaluate(model, tokenizer, problems: Sequence[Problem], config: EvalConfig,
             on_progress: Callable[[int], None] | None = None) -> EvalResult:
    """Greedy accuracy plus n samples per problem at config.temperature -> EvalResult.

    on_progress(num_problems_done) is called after each chunk (the demo's progress bar)."""
    from resrl.eval import generate_samples

    prompts = [p.prompt for p in problems]
    greedy = greedy_completions(model, tokenizer, prompts, config.max_new_tokens, config.batch_size)
    greedy_acc = float(np.mean([is_correct(t, p.answer) for t, p in zip(greedy, problems)]))
    chunk = max(1, config.batch_size // config.num_samples)  # prompts per generate call
    samples = []
    for i, start in enumerate(range(0, len(prompts), chunk)):
        # one seed per chunk, so chunks do not replay each other's random streams
        samples += generate_samples(model, tokenizer, prompts[start:start + chunk], n=config.num_samples,
                                    temperature=config.temperature, top_p=config.top_p,
                                    max_new_tokens=config.max_new_tokens, batch_size=config.batch_size,
                                    seed=config.seed * 100_003 + i)
        if on_progress is not None:
            on_progress(len(samples))
    correct = np.array([[is_correct(s.text, p.answer) for s in row] for row, p in zip(samples, problems)])
    n = config.num_samples
    num_correct = correct.sum(axis=1)
    pass_at = {k: float(pass_at_k(np.full(len(problems), n), num_correct, k).mean()) for k in ks_up_to(n)}
    lengths = [s.num_tokens for row in samples for s in row]
    truncated = [s.truncated for row in samples for s in row]
    return EvalResult(greedy=greedy_acc, avg=float(avg_at_k(correct).mean()), pass_at=pass_at,
                      mean_length=float(np.mean(lengths)), truncated=float(np.mean(truncated)), correct=correct)


__all__ = ["EvalConfig", "EvalResult", "evaluate", "ks_up_to", "greedy_completions", "extract_answer"]
