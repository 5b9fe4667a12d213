"""The ALFWorld family: ALFWorld-format household games (`alfworld:SPLIT`, `alfworld-synth:DIR:SPLIT`,
`data.py`), the environment (`env.py`, trained with `env.name: alfworld` in the step layout), the
`alfworld-synth` generator (`generator.py`, `scenes.py`, `resrl make-alfworld`), the prompts and
the evaluation in the paper's layout (`evaluate.py`).

    from resrl.tasks.alfworld import AlfWorldEnv, AlfWorldSpec
    env = AlfWorldSpec(max_steps=50).build(); env.reset(task_row); env.step_prompt(); env.step(text)

Importing this package needs nothing beyond resrl; playing or generating games needs the optional
extra `agents` (alfworld + textworld[pddl]), imported on first use (resrl.tasks.alfworld.engine).
"""

from resrl.tasks.alfworld.engine import EXTRA_HINT, engine_available, require_engine
from resrl.tasks.alfworld.env import (NOTHING_HAPPENS, AlfWorldEnv, AlfWorldSpec, alfworld_env_factory,
                                      alfworld_step_env, make_alfworld_env)
from resrl.tasks.alfworld.prompts import STYLES, parse_action, step_messages
from resrl.tasks.registry import Deferred, EnvSpec, Evaluator, TaskFamily

PREFIXES = ("alfworld:", "alfworld-synth:")


def _games(spec: str, limit: int | None = None) -> list[dict]:
    """Step-layout rows of a game set: prompt = the task row as JSON, answer = its id."""
    import json

    from resrl.tasks.alfworld.data import load_alfworld_tasks

    return [{"prompt": json.dumps(row, sort_keys=True), "answer": str(row["id"])}
            for row in load_alfworld_tasks(spec, limit=limit)]


FAMILY = TaskFamily(
    name="alfworld", prefixes=PREFIXES, games=_games,
    envs=(EnvSpec("alfworld", layouts=("step",), step_factory="resrl.tasks.alfworld.env:alfworld_step_env",
                  layout_reason="a 50-step episode as one concatenated sequence passes 30k tokens",
                  ends_at_max_steps=True),),
    evaluator=Evaluator(takes=lambda spec: True, run=Deferred("resrl.tasks.alfworld.evaluate:eval_report"),
                        arguments=Deferred("resrl.tasks.alfworld.evaluate:eval_arguments")),
    commands=("resrl.tasks.alfworld.command",))

__all__ = ["AlfWorldEnv", "AlfWorldSpec", "make_alfworld_env", "alfworld_env_factory", "alfworld_step_env",
           "NOTHING_HAPPENS", "STYLES", "parse_action", "step_messages", "EXTRA_HINT", "engine_available",
           "require_engine", "FAMILY"]
