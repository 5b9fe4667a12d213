"""Math answers checked with Math-Verify, isolated so that no completion can hang or crash the caller.

`MathVerifier.score(completions, answers)` parses each completion (the last `\\boxed{}` first,
then "final answer" patterns, then any LaTeX / plain expression, as Math-Verify does) and checks
it against the reference answer with Math-Verify's numeric, symbolic, set and interval
equivalences. Every item runs in an `IsolatedPool` worker with a hard wall-clock timeout: a
timed-out or crashed item scores 0 (`correct=False`) and is reported in the result and in
`stats`. Inside the worker, Math-Verify's own `signal.alarm` timeouts stop most slow cases
gracefully; the parent's kill-and-respawn covers the ones stuck in C code.

`MathReward` is the project reward function `f(completions, answers) -> list[float]` around one
lazily created, reused `MathVerifier`, with `last_stats` for the training logs.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from typing import Sequence

from resrl.rewards.isolation import IsolatedPool


@dataclass
class ScoreResult:
    """Verdict for one completion.

    correct     the completion's final answer equals the reference (False on timeout / error)
    extracted   the answer text Math-Verify extracted from the completion, None if none
    timed_out   the item hit the wall-clock timeout (its worker was killed and replaced)
    error       exception text or "worker crashed ..." (None when all went well)
    seconds     time spent on the item
    normalized  canonical form of the extracted answer (sympy's string), used for majority votes
    """

    correct: bool
    extracted: str | None
    timed_out: bool = False
    error: str | None = None
    seconds: float = 0.0
    normalized: str | None = None


# ---- runs inside the worker processes -----------------------------------------------------------
_UNESCAPED_DOLLAR = re.compile(r"(?<!\\)\$")

def _inner_timeout(timeout_s: float) -> int:
    # Math-Verify's alarms take whole seconds. Long but honest expressions (Minerva's physics
    # formulas) need more than 1 s to parse, so each step gets nearly the whole budget; if parse +
    # verify together overrun, the parent's wall-clock kill still ends the item at timeout_s.
    return max(1, math.ceil(timeout_s) - 1)


@functools.lru_cache(maxsize=4096)
def _parse_gold(answer: str, inner_timeout: int):
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse

    from math_verify.errors import TimeoutException

    text = answer.strip()
    if "\\boxed" not in text and not _UNESCAPED_DOLLAR.search(text):
        text = f"${text}$"  # a bare reference like 3\sqrt{2}, \$18.90 or (1, 2] is LaTeX without anchors
    try:
        gold = parse(text, extraction_config=[LatexExtractionConfig(), ExprExtractionConfig()],
                     parsing_timeout=inner_timeout, raise_on_error=True)
    except TimeoutException:
        gold = []  # cached as a string below, so 16 samples of one problem do not pay it 16 times
    if not gold:  # e.g. a plain word answer: keep the string, verify compares strings then
        gold = [answer.strip()]
    return gold


def verify_one(completion: str, answer: str, timeout_s: float) -> tuple[bool, str | None, str | None]:
    """(correct, extracted text, normalized) for one pair. Runs in a worker; may raise."""
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify
    from math_verify.errors import TimeoutException

    inner = _inner_timeout(timeout_s)
    try:
        gold = _parse_gold(str(answer), inner)
        pred = parse(completion, extraction_config=[LatexExtractionConfig(boxed_match_priority=0),
                                                    ExprExtractionConfig()],
                     parsing_timeout=inner, raise_on_error=True)
        if not pred:
            return False, None, None
        extracted = str(pred[1]) if len(pred) > 1 else str(pred[0])
        normalized = str(pred[0])
        correct = bool(verify(gold, pred, timeout_seconds=inner, raise_on_error=True))
    except TimeoutException as exc:
        raise TimeoutError(f"Math-Verify timeout: {exc}") from None
    return correct, extracted, normalized


# ---- parent side --------------------------------------------------------------------------------
class MathVerifier:
    """Math-Verify scoring in a pool of `num_workers` processes with a per-item `timeout_s`.

    with MathVerifier(timeout_s=5.0, num_workers=2) as mv:
        results = mv.score(["... \\boxed{\\frac12}"], ["0.5"])   # [ScoreResult(correct=True, ...)]

    Workers start on the first `score` call and are reused; `close()` stops them. `stats`
    accumulates timeouts / crashes / respawns over the verifier's life.
    """

    def __init__(self, timeout_s: float = 5.0, num_workers: int = 2) -> None:
        self.timeout_s = float(timeout_s)
        self._pool = IsolatedPool(_verify_call, timeout_s=timeout_s, num_workers=num_workers,
                                  preload=["math_verify", "resrl.tasks.math.reward"])
        self._counts = {"items": 0, "timeouts": 0, "errors": 0}

    @property
    def stats(self) -> dict:
        """Life-time counts: items scored, timeouts (Math-Verify's own and hard kills), errors,
        plus the pool's crashes / respawns."""
        pool = self._pool.stats
        return {**self._counts, "hard_timeouts": pool["timeouts"], "crashes": pool["crashes"],
                "respawns": pool["respawns"]}

    def score(self, completions: Sequence[str], answers: Sequence[str]) -> list[ScoreResult]:
        if len(completions) != len(answers):
            raise ValueError(f"MathVerifier.score: {len(completions)} completions but {len(answers)} answers")
        calls = self._pool.map([(str(c), str(a), self.timeout_s) for c, a in zip(completions, answers)])
        out = []
        for call in calls:
            if call.timed_out or call.error is not None:
                timed_out = call.timed_out or (call.error or "").startswith("TimeoutError")
                out.append(ScoreResult(False, None, timed_out=timed_out, error=call.error, seconds=call.seconds))
            else:
                correct, extracted, normalized = call.value
                out.append(ScoreResult(correct, extracted, seconds=call.seconds, normalized=normalized))
        self._counts["items"] += len(out)
        self._counts["timeouts"] += sum(r.timed_out for r in out)
        self._counts["errors"] += sum(r.error is not None and not r.timed_out for r in out)
        return out

    def start(self) -> "MathVerifier":
        """Start the worker processes now (they otherwise start at the first `score`)."""
        self._pool.start()
        return self

    def close(self) -> None:
        self._pool.close()

    def __enter__(self) -> "MathVerifier":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _verify_call(completion: str, answer: str, timeout_s: float):
    return verify_one(completion, answer, timeout_s)


class MathReward:
    """Reward function: 1.0 when Math-Verify accepts the completion's answer, else 0.0.

    `last_stats` after each call: {"timeouts", "errors", "extracted_frac", "seconds"} for that batch.
    """

    __name__ = "math"

    def __init__(self, timeout_s: float = 5.0, num_workers: int = 2) -> None:
        self.verifier = MathVerifier(timeout_s=timeout_s, num_workers=num_workers)
        self.last_stats: dict[str, float] = {}

    def __call__(self, completions: list[str], answers: list[str]) -> list[float]:
        results = self.verifier.score(completions, answers)
        n = max(1, len(results))
        self.last_stats = {
            "timeouts": float(sum(r.timed_out for r in results)),
            "errors": float(sum(r.error is not None and not r.timed_out for r in results)),
            "extracted_frac": sum(r.extracted is not None for r in results) / n,
            "seconds": float(sum(r.seconds for r in results)),
        }
        return [1.0 if r.correct else 0.0 for r in results]

    def start(self) -> "MathReward":
        """Start the verifier's workers now, e.g. before loading the model (smaller, cleaner forks)."""
        self.verifier.start()
        return self

    def close(self) -> None:
        self.verifier.close()


__all__ = ["ScoreResult", "MathVerifier", "MathReward", "verify_one"]
