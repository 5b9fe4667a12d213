"""The TRL engine: `ResRLTrainer`, TRL 1.16's `GRPOTrainer` training every algorithm of the core.

    trainer.py           ResRLTrainer: collects what the core needs, calls it (its docstring: the data flow)
    config.py            ResRLGRPOConfig: GRPOConfig plus resrl's settings as flat fields
    fields.py            what becomes of every GRPOConfig field (honoured, mapped, refused, irrelevant)
    compat.py            TRL's private methods and state (GRPOHooks, the trainer's base), one touch-point each
    rules.py             which configurations are possible (shared with `resrl train`'s config validation)
    generation.py        the trainer's generation path (resrl.models.rollout) and the on-policy check
    capture.py           the policy's hidden states / head sketch (aligned or extra pass)
    batches.py           TRL's generation batch: whole-group shuffles, row selection, split-group gathers
    dynamic_sampling.py  DAPO's filter-and-refill
    step_round.py        the step layout's generation round (resrl.engines.steps)
    flowrl_head.py       FlowRL's log Z head
    critic.py            PPO's critic (value model, its optimiser, warm-up, checkpoint)
    reference.py         the reference model and log π_ref
    rewards.py           project reward functions as TRL reward functions
    checkpoints.py       atomic checkpoints
    metrics.py           metrics, averaged over processes
    phases.py            per-phase wall time and peak memory (log.phase_times)

Engine-neutral parts stay in resrl.engines (hidden-state hooks, multi-turn and step-level rollouts);
sampling is resrl.models'. `from resrl.engines.trl import ResRLTrainer, ResRLGRPOConfig` imports the
trainer on first use: importing this package (e.g. for `fields`, which `resrl train`'s config reads)
loads neither torch nor TRL.
"""

from resrl._moved import moved_name

_LAZY = {"ResRLTrainer": "resrl.engines.trl.trainer", "ResRLGRPOConfig": "resrl.engines.trl.config"}
__all__ = list(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise moved_name(__name__, name)
