"""The reasoning-gym family: `rg:TASK?...` procedural data and the `"rg"` reward, reasoning-gym's own
verifiers (optional extra `rg`; the package is imported when data is generated or scored).
"""

from resrl.tasks.registry import TaskFamily


def _load(spec: str, split: str = "train", limit: int | None = None) -> list:
    from resrl.tasks.reasoning_gym.data import load_rg_problems

    return load_rg_problems(spec, split=split, limit=limit)


def _reward(spec: str, *, timeout_s: float = 5.0, num_workers: int = 2):
    from resrl.tasks.reasoning_gym.reward import ReasoningGymReward

    return ReasoningGymReward(timeout_s=timeout_s, num_workers=num_workers)


FAMILY = TaskFamily(name="reasoning_gym", prefixes=("rg:",), load=_load, report_names_unique=False,
                    rewards={"rg": _reward}, data_reward="rg")
