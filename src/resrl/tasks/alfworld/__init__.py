"""The ALFWorld family: ALFWorld-format household games (`alfworld:SPLIT`, `alfworld-synth:DIR:SPLIT`),
the environment trained with `env.name: alfworld` (step layout), the `alfworld-synth` generator
(`resrl make-alfworld`) and the evaluation in the paper's layout. Playing or generating games
needs the optional extra `agents`, imported on first use.
"""

from resrl.tasks.registry import EnvSpec, Evaluator, TaskFamily


def _games(spec: str, limit: int | None = None) -> list[dict]:
    """Step-layout rows of a game set: prompt = the task row as JSON, answer = its id."""
    import json

    from resrl.data.alfworld import load_alfworld_tasks

    return [{"prompt": json.dumps(row, sort_keys=True), "answer": str(row["id"])}
            for row in load_alfworld_tasks(spec, limit=limit)]


def _eval_arguments(parser) -> None:
    from resrl.eval.alfworld import eval_arguments

    eval_arguments(parser)


def _eval_report(run) -> None:
    from resrl.eval.alfworld import eval_report

    eval_report(run)


FAMILY = TaskFamily(
    name="alfworld", prefixes=("alfworld:", "alfworld-synth:"), games=_games,
    envs=(EnvSpec("alfworld", layouts=("step",), step_factory="resrl.envs.alfworld.env:alfworld_step_env",
                  layout_reason="a 50-step episode as one concatenated sequence passes 30k tokens",
                  ends_at_max_steps=True),),
    evaluator=Evaluator(takes=lambda spec: True, run=_eval_report, arguments=_eval_arguments),
    commands=("resrl.envs.alfworld.command",))
