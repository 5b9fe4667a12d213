"""Deprecated: moved to `resrl.tasks.alfworld.evaluate` in resrl 0.2 (this name goes away in 0.3).

Re-exports its names; `evaluate_alfworld` here keeps the old signature (the engine pieces default
to `resrl.eval.episodes.EngineTools()`, which the new function takes as `tools=`)."""

from resrl._deprecation import moved

_new = moved(__name__, "resrl.tasks.alfworld.evaluate")

COLUMNS, play_episodes, dataset_metrics, results_table, table_from_runs = (
    _new.COLUMNS, _new.play_episodes, _new.dataset_metrics, _new.results_table, _new.table_from_runs)


def evaluate_alfworld(model, tokenizer, specs, out_dir, *, tools=None, **kwargs) -> dict:
    """`resrl.tasks.alfworld.evaluate.evaluate_alfworld` with `tools` defaulting to `EngineTools()`."""
    from resrl.eval.episodes import EngineTools

    return _new.evaluate_alfworld(model, tokenizer, specs, out_dir, tools=tools or EngineTools(), **kwargs)


__all__ = ["evaluate_alfworld", "play_episodes", "dataset_metrics", "results_table", "table_from_runs", "COLUMNS"]
