"""The experiment kinds a demo task can be run by (`DemoTask.experiment`), one module each:

    supervised  resrl.experiments.demo   tiny model, supervised warm start on the task's targets, RL
                                         per method (single turn), held-out evaluation, ω analysis
    steps       resrl.experiments.steps  tiny model, behaviour cloning from an expert policy, RL per
                                         method with step-level rollouts (env.layout: step), the
                                         step-layout evaluator (resrl.eval.steps)
    pretrained  resrl.experiments.pretrained  a pretrained LM (SmolLM2-135M-Instruct) with no warm start:
                                         RL per method from the base model, accuracy apart from format

Each module has the same surface, which `resrl demo` and the worker protocol use:

    config(task, quick) -> cfg             the task's settings (its budgets), full or --quick
    config_from_args(task, args) -> cfg    with the command line's shared options applied
    config_from_dict(d) -> cfg             the handoff's dict back to the config (workers)
    run(cfg, workers) -> summary           one seed, end to end; OUT/summary.json
    run_one(cfg, label, inputs) -> dict    one method's run (RL + evaluation): a worker's job
"""

from __future__ import annotations

import importlib

KINDS = {"supervised": "resrl.experiments.demo", "steps": "resrl.experiments.steps",
         "pretrained": "resrl.experiments.pretrained"}


def experiment_kind(task):
    """The module that runs demo task `task` (its `experiment` field)."""
    try:
        return importlib.import_module(KINDS[task.experiment])
    except KeyError:
        raise ValueError(f"demo task {task.name!r}: unknown experiment kind {task.experiment!r} "
                         f"(choose from {sorted(KINDS)})") from None


__all__ = ["KINDS", "experiment_kind"]
