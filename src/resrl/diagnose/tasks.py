"""What `resrl diagnose --data` accepts, as prompts + answers + a reward (+ the correct chain when known).

    chain, chain-1digit    the demo's chained-addition task (2-digit / 1-digit terms), held-out
                           split; it knows the correct chain, so tokens of wrong completions are
                           classed as shared prefix / first wrong token / after it
    NAME or FILE           any data set `resrl eval` reads (benchmark names, jsonl, parquet, a task
                           family's data such as rg:TASK[?k=v&...]), its held-out split where it has
                           one, scored by `--reward` (default: the data's reward by the rule of `resrl
                           train` and `resrl eval`, `resrl.tasks.registry.reward_for_data`: rg for
                           reasoning-gym, code for code rows, else math)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from resrl.data.synthetic import ChainAdditionConfig, ChainAdditionTask, chain_reward, chain_target

CHAIN_TASKS = {
    "chain": ChainAdditionConfig(num_test=256),                                       # the demo's task
    "chain-1digit": ChainAdditionConfig(num_terms=3, min_value=1, max_value=9, num_test=48),  # demo --quick
}


@dataclass
class DiagnoseTask:
    """prompts: final model input texts; answers: reference answers; reward(completions, answers)
    -> scores (correct = score > 0, as in training); targets: the correct completion of each
    prompt when the task knows it (token classes), else None."""

    name: str
    prompts: list[str]
    answers: list[str]
    reward: Callable[[list[str], list[str]], list[float]]
    targets: list[str] | None = None
    add_special_tokens: bool = False
    close: Callable[[], None] | None = None
    seed_key: str | None = None  # what seeds each group's sampling with the prompt's index (default: name)


def load_task(spec: str, tokenizer, limit: int | None = None, seed: int = 0, reward: str | None = None,
              data_dir: str | None = None, instruction: str | None = None,
              use_chat_template: bool | None = None) -> DiagnoseTask:
    """Resolve `--data` (see the module docstring). limit: the first N problems."""
    if spec in CHAIN_TASKS:
        from dataclasses import replace

        task = ChainAdditionTask(replace(CHAIN_TASKS[spec], seed=seed))
        problems = task.test[:limit] if limit else task.test
        return DiagnoseTask(spec, [p.prompt for p in problems], [p.answer for p in problems], chain_reward,
                            [chain_target(p) for p in problems])
    from resrl.tasks.data import load_problems
    from resrl.data.prompts import DEFAULT_INSTRUCTION, render_prompts
    from resrl.tasks.rewards import load_reward_function
    from resrl.tasks.registry import family_for_data, reward_for_data

    family = family_for_data(spec)
    if family is not None and family.load is not None:  # a family's data: its held-out split
        problems = family.load(spec, split="test", limit=limit)
    else:
        problems = load_problems(spec, data_dir=data_dir, limit=limit)
    reward = reward or reward_for_data([spec], {spec: problems})
    prompts = render_prompts(problems, tokenizer, instruction if instruction is not None else DEFAULT_INSTRUCTION,
                             use_chat_template)
    fn = load_reward_function(reward)
    return DiagnoseTask(spec, prompts, [p.answer for p in problems], fn, close=getattr(fn, "close", None),
                        seed_key=_file_key(spec))


def _file_key(spec: str) -> str | None:
    """A data file's samples are seeded by its content, not its path: the same file gives the same
    groups wherever it lies (a temporary directory, another checkout)."""
    import hashlib
    import os

    if not os.path.isfile(spec):
        return None
    with open(spec, "rb") as f:
        return "sha256:" + hashlib.sha256(f.read()).hexdigest()[:16]


__all__ = ["CHAIN_TASKS", "DiagnoseTask", "load_task"]
