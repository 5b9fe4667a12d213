"""The math family: Math-Verify's equivalence check (`"math"`, `resrl.tasks.math.reward`) and the
plain final-answer match (`"exact"`, the generic `resrl.rewards.exact`). Its reward is the default
one: it scores the problem / answer data no other family claims (the packaged math sets, jsonl,
parquet and veRL files read by `resrl.data.loaders`).
"""

from resrl.tasks.registry import TaskFamily


def _math_reward(spec: str, *, timeout_s: float = 5.0, num_workers: int = 2):
    from resrl.tasks.math.reward import MathReward

    return MathReward(timeout_s=timeout_s, num_workers=num_workers)


def _exact_reward(spec: str, **_):
    from resrl.rewards.exact import ExactMatchReward

    return ExactMatchReward()


def _math_verifier(*, timeout_s: float = 5.0, num_workers: int = 2):
    from resrl.tasks.math.reward import MathVerifier

    return MathVerifier(timeout_s=timeout_s, num_workers=num_workers)


FAMILY = TaskFamily(name="math", rewards={"math": _math_reward, "exact": _exact_reward},
                    scorers={"math": _math_verifier}, default=True)
