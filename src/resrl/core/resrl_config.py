"""`ResRLConfig`: hyper-parameters of ResRL's token weights (spec §2), validated on creation."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

SVD_MODES = ("randomized", "exact", "pca_lowrank")
HIDDEN_ALIGNMENTS = ("predicting", "token")
WEIGHTINGS = ("residual", "interference")
NO_CONTRAST_WEIGHTS = ("min", "midpoint")
POSITIVE_SPLITS = ("advantage", "reward")
GROUPINGS = ("whole", "micro-batch")


@dataclass
class ResRLConfig:
    """Hyper-parameters of ResRL's token weights (spec §2). Defaults are the spec's.

    rank             k, rank of the positive subspace (effective k = min(rank, M − 1, d))
    max_pos_tokens   M_max, cap on sampled positive tokens per group
    boundary_tokens  first/last tokens of every positive response always kept (budget allowing)
    quantile_low     α, lower gating quantile of the group's negative residuals
    quantile_high    β, upper gating quantile
    min_weight       ξ, the smallest weight a negative token can get
    pos_scale        λ_pos, scale of positive advantages
    eps              ε in the gate's denominator
    ln_eps           epsilon of the affine-free layer norm
    no_contrast_tol  relative spread under which the gate is off (ω = ξ): q_high − q_low ≤
                     no_contrast_tol · mean(‖x‖²/d)
    truncation_guard ω = 1 on the last `truncation_tail` tokens of truncated negatives
    truncation_tail  number of final tokens the truncation guard keeps at full weight
    svd              "randomized" (default, fast), "exact" (full SVD) or "pca_lowrank" (torch.pca_lowrank
                     per group with q = k and niter = power_iters, seeded: the authors' code)
    oversample       extra columns of the randomized range finder (q = k + oversample)
    power_iters      power iterations of the randomized range finder (and niter of pca_lowrank)
    seed             seed of the positive-token subsampling and of the random test matrix
    hidden_alignment "predicting" (state at t−1, the paper's) or "token" (state at t); used by the
                     engines that extract the states, the core receives them already aligned
    weighting        "residual" (the paper's: ω from the residual energy R, steps 5-7) or "interference"
                     (ω from the estimated signed head-gradient interference with the group's
                     positives, Lemma 1: resrl.core.negative_weighting; needs the head sketch)
    interference_topk K of the top-K softmax sketch behind the interference estimate
    chunk_mb         memory budget (MiB) of one chunk of float32 gathered states (small chunks are
                     faster on CPU: their buffers are recycled by the allocator instead of
                     page-faulted in fresh)
    preset           "paper" (the defaults above, the paper's text) or "authors-code" (what the authors'
                     released code and script run: RESRL_PRESETS). A preset sets defaults: keys given
                     explicitly win (the config loader and ResRLConfig.from_preset resolve it; a
                     ResRLConfig built directly holds exactly the values it is given)
    no_contrast_weight ω of a group's negatives when its residuals have no spread: "min" (ξ, spec §2
                     step 7) or "midpoint" ((ξ + 1) / 2, the authors' code)
    min_pos_tokens   a group is reweighted only with at least this many valid positive tokens (fewer:
                     its negatives keep ω = 1; the authors' code needs 4)
    positive         which responses span the subspace and get λ_pos: "advantage" (Â > 0, spec §2
                     step 1) or "reward" (raw reward > 0, the authors' code; read by
                     compute_token_advantages, which has the rewards)
    grouping         where the weights' groups come from: "whole" (every response of a prompt, spec §2)
                     or "micro-batch" (the authors' veRL run: the rows one call receives are reordered
                     by veRL's sequence-length balance over grouping_ranks ranks, cut into micro-batches
                     of grouping_micro_batch rows, and grouped by prompt inside each micro-batch;
                     applied by compute_token_advantages, resrl.core.grouping)
    grouping_micro_batch rows per micro-batch of grouping = "micro-batch" (authors: rollout_n = 4)
    grouping_ranks   data-parallel ranks of veRL's length balance for grouping = "micro-batch" (authors: 8)
    """

    rank: int = 64
    max_pos_tokens: int = 4096
    boundary_tokens: int = 32
    quantile_low: float = 0.1
    quantile_high: float = 0.9
    min_weight: float = 0.1
    pos_scale: float = 0.1
    eps: float = 1e-6
    ln_eps: float = 1e-5
    no_contrast_tol: float = 1e-5
    truncation_guard: bool = False
    truncation_tail: int = 256
    svd: str = "randomized"
    oversample: int = 10
    power_iters: int = 1
    seed: int = 0
    hidden_alignment: str = "predicting"
    chunk_mb: int = 16
    weighting: str = "residual"
    interference_topk: int = 32
    preset: str = "paper"
    no_contrast_weight: str = "min"
    min_pos_tokens: int = 1
    positive: str = "advantage"
    grouping: str = "whole"
    grouping_micro_batch: int = 4
    grouping_ranks: int = 8

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        def need(ok: bool, name: str, allowed: str) -> None:
            if not ok:
                raise ValueError(
                    f"ResRLConfig.{name} = {getattr(self, name)!r} is invalid: allowed {allowed}"
                )

        def is_int(v) -> bool:
            return isinstance(v, int) and not isinstance(v, bool)

        def is_num(v) -> bool:
            return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)

        need(is_int(self.rank) and self.rank >= 1, "rank", "an int >= 1")
        need(is_int(self.max_pos_tokens) and self.max_pos_tokens >= 2, "max_pos_tokens", "an int >= 2")
        need(is_int(self.boundary_tokens) and self.boundary_tokens >= 0, "boundary_tokens", "an int >= 0")
        need(is_num(self.quantile_low) and 0.0 <= self.quantile_low < 1.0, "quantile_low", "a float in [0, 1)")
        need(is_num(self.quantile_high) and 0.0 < self.quantile_high <= 1.0, "quantile_high", "a float in (0, 1]")
        need(self.quantile_low < self.quantile_high, "quantile_high", f"a float > quantile_low ({self.quantile_low})")
        need(is_num(self.min_weight) and 0.0 <= self.min_weight <= 1.0, "min_weight", "a float in [0, 1]")
        need(is_num(self.pos_scale) and self.pos_scale >= 0.0, "pos_scale", "a float >= 0")
        need(is_num(self.eps) and self.eps > 0.0, "eps", "a float > 0")
        need(is_num(self.ln_eps) and self.ln_eps > 0.0, "ln_eps", "a float > 0")
        need(is_num(self.no_contrast_tol) and self.no_contrast_tol >= 0.0, "no_contrast_tol", "a float >= 0")
        need(isinstance(self.truncation_guard, bool), "truncation_guard", "True or False")
        need(is_int(self.truncation_tail) and self.truncation_tail >= 1, "truncation_tail", "an int >= 1")
        need(self.svd in SVD_MODES, "svd", f"one of {SVD_MODES}")
        need(is_int(self.oversample) and self.oversample >= 0, "oversample", "an int >= 0")
        need(is_int(self.power_iters) and self.power_iters >= 0, "power_iters", "an int >= 0")
        need(is_int(self.seed) and self.seed >= 0, "seed", "an int >= 0")
        need(self.hidden_alignment in HIDDEN_ALIGNMENTS, "hidden_alignment", f"one of {HIDDEN_ALIGNMENTS}")
        need(self.weighting in WEIGHTINGS, "weighting", f"one of {WEIGHTINGS}")
        need(is_int(self.interference_topk) and self.interference_topk >= 1, "interference_topk", "an int >= 1")
        need(is_int(self.chunk_mb) and self.chunk_mb >= 1, "chunk_mb", "an int >= 1")
        need(self.preset in RESRL_PRESETS, "preset", f"one of {tuple(RESRL_PRESETS)}")
        need(self.no_contrast_weight in NO_CONTRAST_WEIGHTS, "no_contrast_weight", f"one of {NO_CONTRAST_WEIGHTS}")
        need(is_int(self.min_pos_tokens) and self.min_pos_tokens >= 1, "min_pos_tokens", "an int >= 1")
        need(self.positive in POSITIVE_SPLITS, "positive", f"one of {POSITIVE_SPLITS}")
        need(self.grouping in GROUPINGS, "grouping", f"one of {GROUPINGS}")
        need(is_int(self.grouping_micro_batch) and self.grouping_micro_batch >= 1, "grouping_micro_batch", "an int >= 1")
        need(is_int(self.grouping_ranks) and self.grouping_ranks >= 1, "grouping_ranks", "an int >= 1")
        if self.preset != "paper":
            owned = RESRL_PRESETS[self.preset]["resrl"]
            paper = ResRLConfig.__dataclass_fields__
            if owned and all(getattr(self, k) == paper[k].default for k in owned):
                raise ValueError(f"ResRLConfig.preset = {self.preset!r} is invalid here: none of its values "
                                 f"{sorted(owned)} is set; build it with ResRLConfig.from_preset({self.preset!r}, ...) "
                                 "(or algorithm.resrl.preset in a config file)")

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in fields(cls)]

    @classmethod
    def from_preset(cls, preset: str = "paper", **explicit) -> "ResRLConfig":
        """The preset's values for ResRL's weights, with the keys given here winning. The preset's
        settings of other sections (loss aggregation, reward shaping) are in RESRL_PRESETS[preset];
        the config loader applies them (resolve_resrl_preset)."""
        if preset not in RESRL_PRESETS:
            raise ValueError(f"ResRLConfig.preset = {preset!r} is invalid: allowed {tuple(RESRL_PRESETS)}")
        return cls(**{**RESRL_PRESETS[preset]["resrl"], **explicit, "preset": preset})


# Named sets of defaults for `algorithm.resrl.preset`, per config section: "resrl" (ResRLConfig),
# "algorithm" (AlgorithmConfig: reward shaping) and "loss" (LossConfig). "paper" is the defaults as
# they are (the paper's text, spec §2). "authors-code" is what the authors' released code runs
# (github 1229095296/ResRL, a veRL 0.5 fork; file:line of verl/workers/actor/dp_actor.py and
# train_command.sh, read at commit 58d7d5d; docs/method.md has the table):
RESRL_PRESETS: dict[str, dict[str, dict]] = {
    "paper": {"resrl": {}, "algorithm": {}, "loss": {}},
    "authors-code": {
        "resrl": {
            "quantile_low": 0.2, "quantile_high": 0.8,          # train_command.sh:73-74
            "no_contrast_weight": "midpoint",                   # dp_actor.py:442-443, ω = (ξ + 1) / 2
            "svd": "pca_lowrank", "power_iters": 4,             # dp_actor.py:410 (niter: dp_actor.py:53)
            "boundary_tokens": 0,                               # dp_actor.py:393-395, uniform random subsample
            "min_pos_tokens": 4,                                # dp_actor.py:387
            "positive": "reward",                               # dp_actor.py:577-578, raw score > 0
            "grouping": "micro-batch", "grouping_micro_batch": 4, "grouping_ranks": 8,
            # dp_actor.py:566 + 610 (micro-batch of ppo_micro_batch_size_per_gpu = rollout_n = 4 rows,
            # train_command.sh:61; groups by uid inside it), after veRL's balance_batch over 8 GPUs
            # (ray_trainer.py:1325-1326, train_command.sh:16)
        },
        "algorithm": {"length_scale": True, "length_scale_start": 3500, "length_scale_min": 0.7},
        # train_command.sh:38-41 + verl/workers/reward_manager/naive.py:55-93 (positive rewards only)
        "loss": {"agg": "token-mean", "dual_clip_c": 3.0, "clip_eps_low": 0.2, "clip_eps_high": 0.2},
        # veRL 0.5 defaults the script keeps: verl/trainer/config/actor/actor.yaml:30-63
    },
}


def resolve_resrl_preset(algorithm: dict, loss: dict, max_response_length: int | None = None) -> tuple[dict, dict]:
    """Apply `algorithm["resrl"]["preset"]` to nested config dicts (as parsed from YAML, before the
    dataclasses are built). Precedence, lowest to highest: dataclass defaults < the algorithm's own
    defaults (registry loss_defaults / reward_defaults) < the preset < keys the user gave.
    max_response_length: the response budget L_max; the authors' length scaling changes nothing
    when L_max <= its start (their reward manager, naive.py:84-85), so the preset leaves it off then.
    Returns new (algorithm, loss) dicts; a non-"paper" preset is only for algorithm.name = resrl."""
    algorithm = dict(algorithm or {})
    loss = dict(loss or {})
    resrl = dict(algorithm.get("resrl") or {})
    preset = resrl.get("preset", "paper")
    if preset not in RESRL_PRESETS:
        raise ValueError(f"ResRLConfig.preset = {preset!r} is invalid: allowed {tuple(RESRL_PRESETS)}")
    if preset == "paper":
        return algorithm, loss
    if algorithm.get("name", "grpo") != "resrl":
        raise ValueError(f"ResRLConfig.preset = {preset!r} applies to algorithm.name=resrl only "
                         f"(got {algorithm.get('name', 'grpo')!r})")
    table = RESRL_PRESETS[preset]
    preset_algorithm = dict(table["algorithm"])
    start = algorithm.get("length_scale_start", preset_algorithm.get("length_scale_start"))
    if preset_algorithm.get("length_scale") and max_response_length is not None and start is not None \
            and max_response_length <= start:
        preset_algorithm = {k: v for k, v in preset_algorithm.items() if not k.startswith("length_scale")}
    algorithm = {**preset_algorithm, **algorithm, "resrl": {**table["resrl"], **resrl}}
    loss = {**table["loss"], **loss}
    return algorithm, loss
