"""The engine-side pieces a task family's evaluator uses (`resrl.tasks.registry.EvalTools`).

`resrl eval` hands an `EngineTools` to the evaluator of every family whose data it was given
(`Evaluator.run(EvalRun(..., tools=EngineTools()))`): the family plays its episodes or
conversations with the step policy, chat renderer and rollout driver of `resrl.engines.multiturn`
and resumes with `resrl.eval.runner.read_records`, without importing those layers itself.
"""

from __future__ import annotations

from pathlib import Path


class EngineTools:
    """`resrl.tasks.registry.EvalTools` from `resrl.engines.multiturn` and `resrl.eval.runner`."""

    def load_model(self, path: str):
        """(model, tokenizer) of a local model directory, as `resrl eval` loads them."""
        from resrl.eval.runner import _load_model

        return _load_model(path, None)

    def step_policy(self, model, tokenizer, **kwargs):
        """`HFStepPolicy(model, tokenizer, temperature=..., top_p=..., seed=...)`."""
        from resrl.engines.multiturn import HFStepPolicy

        return HFStepPolicy(model, tokenizer, **kwargs)

    def renderer(self, tokenizer, *args):
        """`ChatRenderer(tokenizer[, use_chat_template])`."""
        from resrl.engines.multiturn import ChatRenderer

        return ChatRenderer(tokenizer, *args)

    def rollout_multi_turn(self, *args, **kwargs) -> list:
        """`resrl.engines.multiturn.rollout_multi_turn`."""
        from resrl.engines.multiturn import rollout_multi_turn

        return rollout_multi_turn(*args, **kwargs)

    def rollout_stats(self, trajectories) -> dict:
        """`resrl.engines.multiturn.rollout_stats`."""
        from resrl.engines.multiturn import rollout_stats

        return rollout_stats(trajectories)

    def read_records(self, path: Path) -> dict:
        """`resrl.eval.runner.read_records`: finished records by key, a torn last line cut off."""
        from resrl.eval.runner import read_records

        return read_records(path)

    def run_step_eval(self, args, out: Path, specs: list[str], env: str, options: dict, *, name: str,
                      breakdown=None, columns=None, data_name=None, **budget) -> dict:
        """`resrl.eval.steps.run_step_eval` with the family's environment and scorer (`StepScorer`: `name`,
        `breakdown`, `columns`, `data_name`); `budget`: data_key, batch_size, max_steps, max_prompt_tokens,
        label."""
        from resrl.eval.steps import StepScorer, run_step_eval

        return run_step_eval(args, out, specs, env, options, StepScorer(name, breakdown, columns, data_name), **budget)


__all__ = ["EngineTools"]
