"""ALFWorld-format evaluation: the one step-episode evaluator (`resrl.eval.steps`, reached through
`resrl eval`'s tools) on ALFWorld games, with this family's environment (`env.name: alfworld`,
`AlfWorldEnv`: its prompt style, max steps, history window) and its scorer: success per task type, the
paper's columns (Pick, Look, Clean, Heat, Cool, Pick2).

    resrl eval --model DIR --data alfworld:valid_seen alfworld:valid_unseen [--n 1] [--temperature 0]
               [--prompt-style verl-agent|react] [--max-steps 50] [--history-window 2] [--label NAME]

Each game is played `n` times (episodes) in the step layout, as training plays it: at every step the
model gets the environment's fresh prompt (`AlfWorldEnv.step_prompt`, chat template applied) and
generates at most --max-step-tokens (default --max-new-tokens); --batch-size episodes advance together,
the environments in EnvPool worker processes (--env-workers). A step prompt longer than
--max-prompt-tokens ends its episode.

Output directory (next to a math / BFCL evaluation's files when --data mixes them):
    alfworld_config.json     settings (checked on resume)
    alfworld_episodes.jsonl  one record per episode (the evaluator's: data set, game id, sample index,
                             won, steps, invalid actions / formats, task type, actions, the model's texts)
    alfworld_summary.json    per data set: success overall and per task type, Pass@k, mean steps,
                             invalid-action and invalid-format rates (per step)
    alfworld_results.md      the step evaluator's table, one row per method and split, success (%) per
                             task type first

Resume: finished episodes are kept (a torn last line dropped), only the missing ones run; changed
settings are refused.
"""

from __future__ import annotations

from resrl.tasks.alfworld.data import SHORT_TYPES, dataset_label

COLUMNS = {"pick": "Pick", "look": "Look", "clean": "Clean", "heat": "Heat", "cool": "Cool", "pick2": "Pick2"}
SPLIT_NAMES = {"valid_seen": "seen", "valid_unseen": "unseen", "train": "train"}


def task_type_success(records) -> dict:
    """The scorer's breakdown: success per task type ({"per_task_type": {type: {episodes, success}}},
    success None for a type without episodes)."""
    per_type = {}
    for kind in SHORT_TYPES:
        mine = [r for r in records if r["task_type"] == kind]
        per_type[kind] = {"episodes": len(mine), "success": sum(r["won"] for r in mine) / len(mine) if mine else None}
    return {"per_task_type": per_type}


def task_type_columns(metrics: dict) -> dict:
    """The scorer's columns of the table: success per task type, in the paper's order."""
    return {name: metrics["per_task_type"][kind]["success"] for kind, name in COLUMNS.items()}


def split_name(label: str) -> str:
    """A data set's name in the table: `alfworld-synth_valid_unseen` -> `unseen (alfworld-synth)`."""
    source, _, split = label.partition("_")
    return SPLIT_NAMES.get(split, split) + (" (alfworld-synth)" if source == "alfworld-synth" else "")


# the family's scorer for the step-episode evaluator (resrl.eval.steps.StepScorer's fields)
SCORER = dict(name="alfworld", breakdown=task_type_success, columns=task_type_columns, data_name=split_name)


def eval_arguments(parser) -> None:
    """The ALFWorld options of `resrl eval` (the family's Evaluator.arguments)."""
    a = parser.add_argument_group("ALFWorld (alfworld:* / alfworld-synth:* data; docs/tasks/agents.md)")
    a.add_argument("--prompt-style", choices=["verl-agent", "react"], default="verl-agent",
                   help="verl-agent: fresh prompt per step with a history window (trained models); react: the "
                        "untrained think-then-act prompting baseline")
    a.add_argument("--max-steps", type=int, default=50, help="steps per episode (default 50)")
    a.add_argument("--history-window", type=int, default=2, help="observation/action pairs in each prompt (default 2)")
    a.add_argument("--max-prompt-tokens", type=int, default=None,
                   help="a longer step prompt ends its episode (default: no limit)")
    a.add_argument("--label", default=None, help="row name in alfworld_results.md (default: the model directory)")


def eval_report(run) -> None:
    """`resrl eval` with ALFWorld data (the family's Evaluator.run): play run.specs with the step-episode
    evaluator and print the table."""
    from pathlib import Path

    args = run.args
    name = Path(str(args.model)).name
    label = args.label or (f"{name} (ReAct prompt)" if args.prompt_style == "react" else name)
    run.tools.run_step_eval(args, run.out, run.specs, "alfworld", {"prompt_style": args.prompt_style},
                            batch_size=args.batch_size, max_prompt_tokens=args.max_prompt_tokens, label=label,
                            data_key=dataset_label, **SCORER)


def __getattr__(name: str):
    """A name that left this module (evaluate_alfworld, play_episodes, dataset_metrics, results_table,
    table_from_runs): an ImportError naming its new path (resrl._moved)."""
    from resrl._moved import moved_name

    raise moved_name(__name__, name)


__all__ = ["task_type_success", "task_type_columns", "split_name", "SCORER", "eval_arguments", "eval_report", "COLUMNS"]
