"""Deprecated: moved to `resrl.tasks.tools.evaluate` in resrl 0.2 (this name goes away in 0.3).

Re-exports its names; `evaluate_multi_turn` here keeps the old signature (the engine pieces
default to `resrl.eval.episodes.EngineTools()`, which the new function takes as `tools=`)."""

from resrl._deprecation import moved

_new = moved(__name__, "resrl.tasks.tools.evaluate")

GROUPS, split_bfcl_specs, bfcl_rows, bfcl_table, eval_report = (
    _new.GROUPS, _new.split_bfcl_specs, _new.bfcl_rows, _new.bfcl_table, _new.eval_report)


def evaluate_multi_turn(model, tokenizer, categories, out_dir=None, *, tools=None, **kwargs) -> dict:
    """`resrl.tasks.tools.evaluate.evaluate_multi_turn` with `tools` defaulting to `EngineTools()`."""
    from resrl.eval.episodes import EngineTools

    return _new.evaluate_multi_turn(model, tokenizer, categories, out_dir, tools=tools or EngineTools(), **kwargs)


__all__ = ["split_bfcl_specs", "evaluate_multi_turn", "bfcl_rows", "bfcl_table", "GROUPS"]
