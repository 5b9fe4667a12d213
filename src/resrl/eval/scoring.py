"""Any scorer -> one `Verdict` per completion.

Accepted scorers:
- None (the default family's reward, "math") or a reward name a task family registers an
  evaluation verifier for ("math": a `MathVerifier`, isolated Math-Verify with a per-item timeout),
  created here (`resrl.tasks.registry.eval_scorer`);
- any other reward name or "module:function": loaded with `resrl.tasks.rewards.load_reward_function`;
- an object with `.score(completions, answers) -> list[ScoreResult-like]` (e.g. MathVerifier);
- a `MathReward` (its verifier is used, so that extracted answers are kept);
- a callable `(completions, answers) -> list[bool | float]` (a reward function): correct when the
  value exceeds `correct_threshold`; if it has `extract_answer(completion)`, the extracted
  answers feed maj@k, otherwise maj@k is not reported.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Sequence


@dataclass
class Verdict:
    correct: bool
    extracted: str | None = None   # answer text found in the completion
    normalized: str | None = None  # canonical answer used for majority votes (None: no vote)
    timed_out: bool = False
    error: str | None = None
    seconds: float = 0.0
    correct_base: bool | None = None  # HumanEval+: correct on the base inputs (EvalPlus's "base" number)


class Scorer:
    """Uniform wrapper: `scorer(completions, answers) -> list[Verdict]`; `close()` frees what it made.

    has_answers: whether verdicts carry normalized answers (maj@k is computable).
    """

    def __init__(self, scorer=None, correct_threshold: float = 0.0, timeout_s: float = 5.0,
                 num_workers: int = 2) -> None:
        self._owned = None
        self.correct_threshold = correct_threshold
        if scorer is None or isinstance(scorer, str):
            from resrl.tasks.registry import default_reward, eval_scorer

            scorer = default_reward() if scorer is None else scorer
            verifier = eval_scorer(scorer)
            if verifier is not None:
                scorer = self._owned = verifier(timeout_s=timeout_s, num_workers=num_workers)
        if isinstance(scorer, str):
            from resrl.tasks.rewards import load_reward_function

            scorer = self._owned = load_reward_function(scorer, timeout_s=timeout_s, num_workers=num_workers)
        if hasattr(scorer, "verifier") and hasattr(scorer.verifier, "score"):  # MathReward
            scorer = scorer.verifier
        if not (hasattr(scorer, "score") or callable(scorer)):
            raise TypeError(f"scorer must be 'math', a reward spec, an object with .score() or a callable, got {scorer!r}")
        self.inner = scorer
        self.name = getattr(scorer, "__name__", None) or type(scorer).__name__
        self.has_answers = hasattr(scorer, "score") or hasattr(scorer, "extract_answer")

    def warm_up(self) -> None:
        """Start worker processes now (before tokenizers spin up threads), if the scorer has any."""
        if hasattr(self.inner, "start"):
            self.inner.start()

    def __call__(self, completions: Sequence[str], answers: Sequence[str]) -> list[Verdict]:
        completions, answers = list(completions), list(answers)
        if hasattr(self.inner, "score"):
            return [Verdict(correct=bool(r.correct), extracted=r.extracted,
                            normalized=getattr(r, "normalized", None) or r.extracted,
                            timed_out=bool(getattr(r, "timed_out", False)), error=getattr(r, "error", None),
                            seconds=float(getattr(r, "seconds", 0.0)), correct_base=getattr(r, "base_correct", None))
                    for r in self.inner.score(completions, answers)]
        start = time.perf_counter()
        values = list(self.inner(completions, answers))
        if len(values) != len(completions):
            raise ValueError(f"scorer {self.name} returned {len(values)} values for {len(completions)} completions")
        per_item = (time.perf_counter() - start) / max(1, len(values))
        extract: Callable | None = getattr(self.inner, "extract_answer", None)
        verdicts = []
        for c, v in zip(completions, values):
            correct = bool(v) if isinstance(v, bool) else (v is not None and float(v) > self.correct_threshold)
            answer = extract(c) if extract is not None else None
            verdicts.append(Verdict(correct=correct, extracted=answer, normalized=answer, seconds=per_item))
        return verdicts

    def close(self) -> None:
        if self._owned is not None and hasattr(self._owned, "close"):
            self._owned.close()


__all__ = ["Verdict", "Scorer"]
