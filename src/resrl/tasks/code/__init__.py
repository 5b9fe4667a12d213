"""The code family: HumanEval / HumanEval+ and the generated `stdin-synth` (shipped), code rows in
data files (LiveCodeBench, CodeForces, CodeContests, APPS among them), the `"code"` /
`"code-fraction"` rewards that run programs against their tests in the sandbox, and
`resrl code-report` (per-difficulty Pass@k, a CodeForces rating).
"""

from resrl.tasks.code.data import BENCHMARK_KEYS, CODE_BENCHMARKS
from resrl.tasks.registry import RowFormat, TaskFamily


def _load(spec: str, split: str = "train", limit: int | None = None) -> list:
    from resrl.tasks.code.data import code_benchmark_problems

    return code_benchmark_problems(spec, limit=limit)


def _is_row(row) -> bool:
    from resrl.tasks.code.data import is_code_row

    return is_code_row(row)


def _to_problem(row: dict, index: int, source: str, where: str):
    from resrl.tasks.code.data import code_row_to_problem

    return code_row_to_problem(row, index, source, where)


def _reward(spec: str, *, timeout_s: float = 5.0, num_workers: int = 2):
    from resrl.tasks.code.reward import CodeReward

    return CodeReward(timeout_s=timeout_s, num_workers=num_workers, partial=spec == "code-fraction")


def _problems_reward(problems_by_benchmark: dict) -> str | None:
    from resrl.tasks.code.data import code_reward_for

    return code_reward_for(problems_by_benchmark)


FAMILY = TaskFamily(name="code", names=CODE_BENCHMARKS, load=_load, report_name=lambda spec: BENCHMARK_KEYS[spec.lower()],
                    rows=RowFormat(_is_row, _to_problem), rewards={"code": _reward, "code-fraction": _reward},
                    data_reward="code", problems_reward=_problems_reward, commands=("resrl.tasks.code.command",))
