"""Every named baseline's loss aggregation, β and clipping are pinned in docs/algorithms/baselines.md;
both entry points resolve to that table, and a TRL release that changed GRPOConfig's defaults would
not change one (it would fail here)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from resrl.core.registry import ALGORITHMS, get_algorithm, resolve_policy_loss
from resrl.engines.trl import fields as trl_fields

DOC = Path(__file__).resolve().parents[1] / "docs" / "algorithms" / "baselines.md"


def pinned_table() -> dict[str, dict[str, str]]:
    """{algorithm: {column: cell}} of the pinned table (the one after the `pinned` comment)."""
    text = DOC.read_text()
    lines = text[text.index("<!-- pinned"):].splitlines()[1:]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    rows = {}
    for line in lines[2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        rows[cells[0].strip("`")] = dict(zip(header, cells))
    return rows


def described(name: str, algorithm, loss) -> dict[str, str]:
    """The resolved settings, written as the table writes them."""
    spec = get_algorithm(name)

    def num(x) -> str:
        return f"{x:g}"

    scale = algorithm.scale_rewards if spec.reads_scale_rewards else \
        f"{spec.fixed_scale} (fixed)" if spec.fixed_scale else "not read"
    policy = resolve_policy_loss(name, loss)
    return {
        "policy loss": policy,
        "`loss.agg`": loss.agg if policy != "flowrl" else "(its own: mean over responses)",
        "β `loss.kl_coef`": num(loss.kl_coef),
        "clip ε_low / ε_high": f"{num(loss.clip_eps_low)} / {num(loss.clip_eps_high)}"
                               + (" (its weight's clamp)" if policy == "flowrl" else ""),
        "`loss.dual_clip_c`": "none" if loss.dual_clip_c is None else num(loss.dual_clip_c),
        "`loss.entropy_coef`": num(loss.entropy_coef),
        "`algorithm.scale_rewards`": scale,
        "dynamic sampling": "on" if spec.dynamic_sampling else "off",
    }


def _pinned_columns(row: dict) -> dict:
    return {k: v for k, v in row.items() if k not in ("algorithm", "advantage")}


def test_the_table_names_every_algorithm():
    assert sorted(pinned_table()) == sorted(ALGORITHMS)


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_resrl_train_gives_the_pinned_settings(name):
    from resrl.train import load_config

    cfg = load_config(None, [f"algorithm.name={name}", "train.max_completion_length=64"])
    assert described(name, cfg.algorithm, cfg.loss) == _pinned_columns(pinned_table()[name])


def _future_grpo_config():
    """GRPOConfig with every mapped default moved (what a TRL release could do)."""
    from trl import GRPOConfig

    @dataclasses.dataclass
    class FutureGRPOConfig(GRPOConfig):
        loss_type: str = "bnpo"
        beta: float = 0.04
        epsilon: float = 0.3
        epsilon_high: float | None = 0.4
        scale_rewards: str = "batch"
        delta: float | None = 2.0
        importance_sampling_level: str = "sequence"
        top_entropy_quantile: float = 0.2
        off_policy_mask_threshold: float | None = 0.5
        entropy_coef: float = 0.01
        use_bias_correction_kl: bool = False

    return FutureGRPOConfig


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_trl_defaults_today_and_moved_do_not_change_a_baseline(name, tmp_path):
    from trl import GRPOConfig

    pinned = _pinned_columns(pinned_table()[name])
    for cls in (GRPOConfig, _future_grpo_config()):
        args = cls(output_dir=str(tmp_path), use_cpu=True, report_to="none", max_completion_length=64)
        algorithm, loss, _ = trl_fields.resolve_trainer_settings(args, name)
        assert described(name, algorithm, loss) == pinned, (name, cls.__name__)
        assert (loss.delta, loss.off_policy_mask_threshold, loss.importance_sampling_level,
                loss.top_entropy_quantile, loss.entropy_agg) == (None, None, "token", 1.0, None)
    # the moved defaults really are different values: set explicitly, they are applied (where they apply)
    if name == "grpo":
        future = {f.name: f.default for f in dataclasses.fields(_future_grpo_config())}
        explicit = GRPOConfig(output_dir=str(tmp_path), use_cpu=True, report_to="none", beta=future["beta"],
                              epsilon=future["epsilon"], loss_type="grpo", use_bias_correction_kl=False)
        _, loss, _ = trl_fields.resolve_trainer_settings(explicit, name)
        assert (loss.kl_coef, loss.clip_eps_low) == (0.04, 0.3)


def test_the_mapped_fields_are_the_moved_ones():
    """The simulated release moves every field ResRLTrainer maps onto the loss (so none is missed)."""
    from trl import GRPOConfig

    today = {f.name: f.default for f in dataclasses.fields(GRPOConfig)}
    moved = {f.name for f in dataclasses.fields(_future_grpo_config()) if f.default != today[f.name]}
    mapped = {m.trl for m in trl_fields.LOSS_MAPPINGS}
    assert sorted(mapped - moved) == sorted(n for n in mapped if re.match(r"(sapo|vespo)_", n))
