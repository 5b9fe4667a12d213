"""Policy losses behind one registry (spec §1 and the field's variants), for every algorithm.

A policy loss is one function of one signature in `POLICY_LOSSES`:

    @register_policy_loss("my-loss")
    def my_loss(inputs: PolicyLossInputs, config: LossConfig) -> tuple[Tensor, dict[str, float]]: ...

Most are a per-token policy-gradient term inside the loss every one of them shares (`policy_loss`:
ratio, masks, rollout weights, KL, entropy, aggregation). Such a term is one function and one line:

    @register_surrogate("my-term")
    def my_term(s: SurrogateInputs, config: LossConfig) -> tuple[Tensor (B, T), dict[str, Tensor]]: ...

which also registers "my-term" as a policy loss. An algorithm names its default loss
(`register_algorithm(..., policy_loss=...)`, "clipped-surrogate" unless it has its own, like
"flowrl" in `resrl.core.flowrl`); `LossConfig.policy_loss` picks another for any algorithm whose
default is "clipped-surrogate" — every advantage estimator, ResRL's token weights included
(`resrl.core.registry.resolve_policy_loss`).

The shared loss (ρ at the configured importance-sampling level, Ã the (B, T) token advantages):

    log ρ = clamp(logπ_θ − logπ_old, ±LOG_RATIO_CLAMP)         token level
          = (1/|y_i|) Σ_t (logπ_θ − logπ_old), per response     sequence level (GSPO, Zheng et al. 2025, Eq. 7)
    ℓ_t   = the term's per-token loss (below)
    ℓ_t ← 0 where the off-policy sequence mask drops it         (off_policy_mask_threshold, DeepSeek-V3.2 Eq. 9)
    ℓ_t ← 0 where the token is outside the top-q entropy set    (top_entropy_quantile, Wang et al. 2025)
    ℓ_t ← w_t · ℓ_t with w the detached rollout-mismatch weights of a vLLM rollout, when given
    L = agg(ℓ) + β_KL · agg(KL) − β_H · agg_H(H)

The per-token terms (`SURROGATES`):

    clipped-surrogate  PPO / GRPO (Schulman et al. 2017; Shao et al. 2024):
                       ℓ = −min(min(ρ, δ) Ã, clip(ρ, 1 − ε_low, 1 + ε_high) Ã)
                       δ = `delta` (two-sided clipping, INTELLECT-2, arXiv 2505.07291 §3.3; None = ∞);
                       dual-clip (Ye et al. 2020): for Ã < 0, ℓ = min(ℓ, −c Ã)
    cispo              CISPO (MiniMax-M1, arXiv 2506.13585, Eq. 4-5): ℓ = −sg(clip(ρ, 1 − ε_low, 1 + ε_high)) Ã logπ_θ
                       (clip_eps_low = 1: no lower bound, TRL's cap at ε_max = 1 + clip_eps_high)
    sapo               SAPO (arXiv 2511.20347): ℓ = −f(ρ) Ã, f(ρ) = σ(τ (ρ − 1)) · 4/τ, τ = τ_pos if Ã > 0 else τ_neg
    clip-cov           Clip-Cov (Cui et al. 2025, arXiv 2505.22617, §4.2): the clipped surrogate, and
                       ⌊r·N⌋ (≥ 1) tokens drawn at random among the unclipped ones whose centred
                       covariance Cov_t = (Ã_t − mean Ã)(logπ_t − mean logπ) lies in (ω_low, ω_high)
                       get no gradient
    kl-cov             KL-Cov (same paper): ℓ = −ρ Ã, and the ⌊r·N⌋ (≥ 1) tokens of largest Cov_t get
                       + β_cov |logπ_θ − logπ_old|
    vespo              VESPO (TRL 1.16 `get_gamma_weights`, arXiv 2602.10693): ℓ = −sg(φ(w)) Ã logπ_θ,
                       φ(w) = exp(λ + k log w − λ w), w = exp(Σ_t log ρ_t) the sequence ratio (times the
                       rollout weights' product, which it reads instead of weighting ℓ), (k, λ) by the
                       sign of Ã (Ã ≥ 0: pos)

N is the number of valid tokens of the batch the loss sees (as veRL's core_algos: one micro-batch).
`top_entropy_quantile` keeps the surrogate on the tokens whose entropy is ≥ the (1 − q)-quantile
of the batch's; the others contribute 0 but still count in the denominators (as TRL does); the KL
term is not masked, the entropy bonus is taken over the kept tokens (as TRL does).

Numerics: the log-ratio is clamped before `exp` (a log-ratio above ~88 overflows float32 to inf,
and inf · 0 = NaN reaches the gradient even through a masked or clipped token), and padding is
removed with `torch.where` (a select), never by multiplying with the mask.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch
from torch import Tensor

FLOWRL_WEIGHT_CLIPS = ("none", "ppo", "cap")
AGG_MODES = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm")
KL_ESTIMATORS = ("k1", "k2", "k3")
IS_LEVELS = ("token", "sequence")
# |log π_θ − log π_old| and |log π_θ − log π_ref| beyond this are clamped before exp (as veRL does):
# e^20 ≈ 4.9e8 stays finite in float32 with room for the product with an advantage. A clamped
# token gets no gradient through the ratio, which is what clipping would give it anyway.
LOG_RATIO_CLAMP = 20.0
K3_CLAMP = 10.0  # veRL's low_var_kl clamps the k3 estimate to ±10
VESPO_LOG_W_MIN = math.log(1e-8)  # TRL's lower clamp of VESPO's log w


@dataclass
class LossConfig:
    policy_loss: str | None = None          # a POLICY_LOSSES name; None: the algorithm's (clipped-surrogate)
    agg: str = "seq-mean-token-mean"        # the paper's Eq. 1
    clip_eps_low: float = 0.2               # ε_low: ratio clipped below at 1 − ε_low (1: no lower bound)
    clip_eps_high: float = 0.2              # ε_high: ratio clipped above at 1 + ε_high (DAPO: 0.28)
    dual_clip_c: float | None = None        # e.g. 3.0; None = off
    delta: float | None = None              # two-sided clip: the unclipped ratio capped at δ (> 1; None = off)
    kl_coef: float = 0.0                    # β_KL of the KL penalty to the reference policy (paper: 0)
    kl_estimator: str = "k3"                # k1 | k2 | k3 (Schulman's estimators)
    entropy_coef: float = 0.0               # β_H of the entropy bonus (paper: 0)
    # aggregation of the entropy bonus: None = the loss's (veRL's), "token-mean" = TRL's (the mean
    # per-token entropy whatever loss_type aggregates the policy term with)
    entropy_agg: str | None = None
    max_response_length: int | None = None  # divisor of seq-mean-token-sum-norm (Dr.GRPO)
    # FlowRL (resrl.core.flowrl): β of δ = log Z + mean log π_θ − β r̂ − mean log π_ref (authors: 15)
    flowrl_beta: float = 15.0
    # clip of FlowRL's sequence importance weight w = π_θ(y)/π_old(y): "ppo" clamps it to
    # [1 − clip_eps_low, 1 + clip_eps_high] (the authors' later recipe). Default because w is the
    # exp of a sum over hundreds of tokens and explodes off-policy; a tight clamp bounds the spread
    # of the δ² weights. On-policy (one update per round) w = 1 and the choice changes nothing.
    # "none": unclipped (the first code's effective behaviour); "cap": w ≤ flowrl_weight_cap
    # (the current recipe, cap 10).
    flowrl_weight_clip: str = "ppo"
    flowrl_weight_cap: float = 10.0         # the cap of flowrl_weight_clip = "cap"
    importance_sampling_level: str = "token"  # token | sequence (GSPO: one length-normalised ratio per response)
    top_entropy_quantile: float = 1.0         # q < 1: the surrogate only on the top-q fraction of tokens by entropy
    # DeepSeek-V3.2's off-policy sequence mask (Eq. 9): a response with Ã < 0 whose mean
    # log π_old − log π_θ exceeds this is left out of the policy term; None = off
    off_policy_mask_threshold: float | None = None
    sapo_temperature_pos: float = 1.0       # SAPO's τ_pos (paper, TRL, veRL: 1.0)
    sapo_temperature_neg: float = 1.05      # SAPO's τ_neg (paper, TRL, veRL: 1.05)
    clip_cov_ratio: float = 0.0002          # Clip-Cov's r: fraction of the batch's tokens detached (veRL: 2e-4)
    clip_cov_lb: float = 1.0                # Clip-Cov's ω_low (veRL: 1.0)
    clip_cov_ub: float = 5.0                # Clip-Cov's ω_high (veRL: 5.0)
    kl_cov_ratio: float = 0.0002            # KL-Cov's r: fraction of the batch's tokens penalised (veRL: 2e-4)
    kl_cov_coef: float = 1.0                # KL-Cov's β_cov (veRL core_algos' value when unset: 1.0)
    vespo_k_pos: float = 2.0                # VESPO's k for Ã ≥ 0 (TRL: 2.0)
    vespo_lambda_pos: float = 3.0           # VESPO's λ for Ã ≥ 0 (TRL: 3.0)
    vespo_k_neg: float = 3.0                # VESPO's k for Ã < 0 (TRL: 3.0)
    vespo_lambda_neg: float = 2.0           # VESPO's λ for Ã < 0 (TRL: 2.0)

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        def num(v) -> bool:
            return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)

        if self.policy_loss is not None:
            if self.policy_loss not in POLICY_LOSSES:
                raise ValueError(f"LossConfig.policy_loss = {self.policy_loss!r} is invalid: allowed None or one of "
                                 f"{sorted(POLICY_LOSSES)}")
            check_loss_options(self.policy_loss, self)
        if self.agg not in AGG_MODES:
            raise ValueError(f"LossConfig.agg = {self.agg!r} is invalid: allowed {AGG_MODES}")
        if self.entropy_agg is not None and self.entropy_agg not in AGG_MODES:
            raise ValueError(f"LossConfig.entropy_agg = {self.entropy_agg!r} is invalid: allowed None or {AGG_MODES}")
        for name in ("clip_eps_low", "clip_eps_high"):
            v = getattr(self, name)
            if not (num(v) and 0 <= v < 10):
                raise ValueError(f"LossConfig.{name} = {v!r} is invalid: allowed a float in [0, 10)")
        if self.clip_eps_low > 1:
            raise ValueError(f"LossConfig.clip_eps_low = {self.clip_eps_low!r} is invalid: allowed [0, 1] "
                             "(1: no lower bound)")
        if self.dual_clip_c is not None and not (num(self.dual_clip_c) and self.dual_clip_c > 1):
            raise ValueError(f"LossConfig.dual_clip_c = {self.dual_clip_c!r} is invalid: allowed None or a float > 1")
        if self.delta is not None and not (num(self.delta) and self.delta > 1):
            raise ValueError(f"LossConfig.delta = {self.delta!r} is invalid: allowed None or a float > 1 "
                             "(INTELLECT-2 recommends > 1 + clip_eps_high)")
        if self.importance_sampling_level not in IS_LEVELS:
            raise ValueError(f"LossConfig.importance_sampling_level = {self.importance_sampling_level!r} is invalid: "
                             f"allowed {IS_LEVELS}")
        q = self.top_entropy_quantile
        if not (num(q) and 0.0 < q <= 1.0):
            raise ValueError(f"LossConfig.top_entropy_quantile = {q!r} is invalid: allowed a float in (0, 1]")
        if self.kl_estimator not in KL_ESTIMATORS:
            raise ValueError(f"LossConfig.kl_estimator = {self.kl_estimator!r} is invalid: allowed {KL_ESTIMATORS}")
        for name in ("kl_coef", "entropy_coef", "kl_cov_coef", "vespo_k_pos", "vespo_k_neg"):
            v = getattr(self, name)
            if not (num(v) and v >= 0):
                raise ValueError(f"LossConfig.{name} = {v!r} is invalid: allowed a float >= 0")
        for name in ("sapo_temperature_pos", "sapo_temperature_neg", "vespo_lambda_pos", "vespo_lambda_neg"):
            v = getattr(self, name)
            if not (num(v) and v > 0):
                raise ValueError(f"LossConfig.{name} = {v!r} is invalid: allowed a float > 0")
        for name in ("clip_cov_ratio", "kl_cov_ratio"):
            v = getattr(self, name)
            if not (num(v) and 0 < v <= 1):
                raise ValueError(f"LossConfig.{name} = {v!r} is invalid: allowed a float in (0, 1]")
        if not (num(self.clip_cov_lb) and num(self.clip_cov_ub) and self.clip_cov_lb < self.clip_cov_ub):
            raise ValueError(f"LossConfig.clip_cov_ub = {self.clip_cov_ub!r} is invalid: allowed a float > "
                             f"clip_cov_lb ({self.clip_cov_lb!r})")
        t = self.off_policy_mask_threshold
        if t is not None and not (num(t) and t >= 0):
            raise ValueError(f"LossConfig.off_policy_mask_threshold = {t!r} is invalid: allowed None or a float >= 0")
        if self.agg == "seq-mean-token-sum-norm" and self.max_response_length is not None and self.max_response_length < 1:
            raise ValueError("LossConfig.max_response_length must be >= 1")
        if self.flowrl_weight_clip not in FLOWRL_WEIGHT_CLIPS:
            raise ValueError(f"LossConfig.flowrl_weight_clip = {self.flowrl_weight_clip!r} is invalid: "
                             f"allowed {FLOWRL_WEIGHT_CLIPS}")
        if not (isinstance(self.flowrl_weight_cap, (int, float)) and self.flowrl_weight_cap > 0):
            raise ValueError(f"LossConfig.flowrl_weight_cap = {self.flowrl_weight_cap!r} is invalid: allowed a float > 0")
        if not (isinstance(self.flowrl_beta, (int, float)) and self.flowrl_beta >= 0):
            raise ValueError(f"LossConfig.flowrl_beta = {self.flowrl_beta!r} is invalid: allowed a float >= 0")


def aggregate_loss(loss_mat: Tensor, mask: Tensor, mode: str, max_response_length: int | None = None) -> Tensor:
    """Reduce a (B, T) per-token loss to a scalar (spec §1).

    token-mean:              Σ_{i,t} ℓ m / Σ_{i,t} m                  (DAPO)
    seq-mean-token-mean:     mean_i [ Σ_t ℓ m / Σ_t m ]               (GRPO, paper's Eq. 1)
    seq-mean-token-sum:      mean_i [ Σ_t ℓ m ]
    seq-mean-token-sum-norm: mean_i [ Σ_t ℓ m ] / L_max               (Dr.GRPO; L_max defaults to T)
    Sequences with no valid token are left out of the sequence means.
    """
    m = mask.to(loss_mat.dtype)
    loss_mat = torch.where(mask.bool(), loss_mat, torch.zeros_like(loss_mat))  # select: padding NaN/inf never leaks
    if mode == "token-mean":
        return loss_mat.sum() / m.sum().clamp(min=1.0)
    seq_sum = loss_mat.sum(dim=1)
    seq_len = m.sum(dim=1)
    has_tokens = (seq_len > 0).to(loss_mat.dtype)
    n_seq = has_tokens.sum().clamp(min=1.0)
    if mode == "seq-mean-token-mean":
        return (seq_sum / seq_len.clamp(min=1.0) * has_tokens).sum() / n_seq
    if mode == "seq-mean-token-sum":
        return (seq_sum * has_tokens).sum() / n_seq
    if mode == "seq-mean-token-sum-norm":
        norm = float(max_response_length if max_response_length is not None else loss_mat.shape[1])
        return (seq_sum * has_tokens).sum() / n_seq / norm
    raise ValueError(f"unknown loss aggregation mode {mode!r}: allowed {AGG_MODES}")


def kl_estimate(logprobs: Tensor, ref_logprobs: Tensor, estimator: str = "k3") -> Tensor:
    """Per-token estimate of KL(π_θ ‖ π_ref) from samples of π_θ (Schulman's k1/k2/k3). (B,T) -> (B,T).

    k1 = log r', k2 = ½ (log r')², k3 = exp(−log r') − 1 + log r', with log r' = logπ_θ − logπ_ref.
    Clamped only where `exp` is taken, as veRL's `kl_penalty` does: k1 and k2 are polynomials of
    log r' and stay exact (log r' = 74 gives 74 and 2738); k3 clamps log r' to ±LOG_RATIO_CLAMP
    before exp (veRL's low_var_kl: kl = clamp(ref − logp, ±20), then clamps the estimate to
    ±K3_CLAMP)."""
    log_ratio = logprobs - ref_logprobs
    if estimator == "k1":
        return log_ratio
    if estimator == "k2":
        return 0.5 * log_ratio.square()
    if estimator == "k3":
        lr = log_ratio.clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
        return (torch.exp(-lr) - 1.0 + lr).clamp(-K3_CLAMP, K3_CLAMP)
    raise ValueError(f"unknown KL estimator {estimator!r}: allowed {KL_ESTIMATORS}")


def high_entropy_mask(entropy: Tensor, response_mask: Tensor, quantile: float) -> Tensor:
    """(B, T) bool: valid tokens whose entropy is ≥ the (1 − quantile)-quantile (linear interpolation,
    torch.quantile) of the valid tokens' entropies — TRL's `get_high_entropy_mask` on one process.
    quantile = 1 keeps every valid token. entropy, response_mask (B, T)."""
    valid = response_mask.bool()
    if quantile >= 1.0:
        return valid
    vals = entropy.detach()[valid].float()
    if vals.numel() == 0:
        return torch.zeros_like(valid)
    threshold = torch.quantile(vals, 1.0 - quantile)
    return (entropy.detach().float() >= threshold) & valid


def off_policy_sequence_mask(advantages: Tensor, logprobs: Tensor, behaviour_logprobs: Tensor, response_mask: Tensor,
                             threshold: float) -> Tensor:
    """DeepSeek-V3.2's off-policy sequence mask (arXiv 2512.02556, Eq. 9), as TRL's get_off_policy_mask:

        keep_{i,t} = Ã_{i,t} ≥ 0  or  (1/|y_i|) Σ_t (log π_behaviour − log π_θ) ≤ threshold

    advantages, logprobs, behaviour_logprobs (log π_old, or vLLM's sampling log-probs), response_mask:
    (B, T) -> (B, T) bool. Tokens without a behaviour log-prob (NaN) count as no divergence."""
    valid = response_mask.bool()
    div = torch.nan_to_num(behaviour_logprobs.detach().to(logprobs.dtype) - logprobs.detach(), nan=0.0)
    div = torch.where(valid, div, torch.zeros_like(div))
    mean_div = div.sum(dim=1, keepdim=True) / valid.sum(dim=1, keepdim=True).clamp(min=1)
    return (advantages >= 0) | (mean_div <= threshold)


# ---- the policy-loss registry ----------------------------------------------------------------------

@dataclass
class PolicyLossInputs:
    """What a policy loss may read. B responses × T response positions."""

    logprobs: Tensor                          # (B, T) log π_θ of the sampled tokens (with grad)
    old_logprobs: Tensor                      # (B, T) log π_old (detached)
    advantages: Tensor                        # (B, T) token advantages Ã (0 on padding)
    response_mask: Tensor                     # (B, T) bool or 0/1
    ref_logprobs: Tensor | None = None        # (B, T) log π_ref
    entropy: Tensor | None = None             # (B, T) per-token entropy
    importance_weights: Tensor | None = None  # (B, T) or (B, 1) rollout-mismatch weights (vLLM)
    log_z: Tensor | None = None               # (B,) FlowRL's learned log-partition log Z(c) (with grad)
    entropy_mask: Tensor | None = None        # (B, T) bool tokens kept by top_entropy_quantile (engine-made)
    sampling_logprobs: Tensor | None = None   # (B, T) the rollout engine's log-probs (vLLM), for the off-policy mask


PolicyLossFn = Callable[[PolicyLossInputs, LossConfig], "tuple[Tensor, dict[str, float]]"]
POLICY_LOSSES: dict[str, PolicyLossFn] = {}
# the LossConfig options each loss reads, of those that only some losses read (`OPTIONAL_OPTIONS`)
POLICY_LOSS_READS: dict[str, frozenset[str]] = {}

# options read by the shared `policy_loss` (so by every SURROGATES term), and options read by the terms
# that declare them; a loss that does not read one must see it at its default (`check_loss_options`)
SHARED_OPTIONS = ("kl_coef", "entropy_coef", "entropy_agg", "importance_sampling_level", "top_entropy_quantile",
                  "off_policy_mask_threshold")
TERM_OPTIONS = ("delta", "dual_clip_c", "sapo_temperature_pos", "sapo_temperature_neg", "clip_cov_ratio",
                "clip_cov_lb", "clip_cov_ub", "kl_cov_ratio", "kl_cov_coef", "vespo_k_pos", "vespo_lambda_pos",
                "vespo_k_neg", "vespo_lambda_neg")
OPTIONAL_OPTIONS = SHARED_OPTIONS + TERM_OPTIONS


def register_policy_loss(name: str, *, reads: tuple[str, ...] = ()):
    """Register a policy loss; `reads`: the OPTIONAL_OPTIONS it reads (others must stay at their default)."""
    unknown = sorted(set(reads) - set(OPTIONAL_OPTIONS))
    if unknown:
        raise ValueError(f"policy loss {name!r}: reads={unknown} are not LossConfig options of OPTIONAL_OPTIONS")

    def deco(fn: PolicyLossFn) -> PolicyLossFn:
        if name in POLICY_LOSSES:
            raise ValueError(f"policy loss {name!r} is already registered")
        POLICY_LOSSES[name] = fn
        POLICY_LOSS_READS[name] = frozenset(reads)
        return fn
    return deco


def check_loss_options(name: str, config: LossConfig) -> None:
    """ValueError naming an option `config` sets (to a value other than LossConfig's default) that the
    policy loss `name` does not read: a setting that would silently do nothing."""
    get_policy_loss(name)
    defaults = LossConfig.__dataclass_fields__
    for option in OPTIONAL_OPTIONS:
        value, default = getattr(config, option), defaults[option].default
        if option not in POLICY_LOSS_READS[name] and value != default:
            raise ValueError(f"LossConfig.{option} = {value!r} is not read by the {name!r} policy loss: leave it at "
                             f"{default!r} (or choose a loss that reads it)")


def get_policy_loss(name: str) -> PolicyLossFn:
    try:
        return POLICY_LOSSES[name]
    except KeyError:
        raise ValueError(f"unknown policy loss {name!r}: choose one of {sorted(POLICY_LOSSES)}") from None


# ---- the per-token policy-gradient terms -----------------------------------------------------------

@dataclass
class SurrogateInputs:
    """What a per-token term reads (built by `policy_loss`). B responses × T response positions; every
    tensor is 0 on padding."""

    logprobs: Tensor         # (B, T) log π_θ (with grad)
    log_ratio: Tensor        # (B, T) log ρ at the configured level (token, or the response's mean), clamped
    ratio: Tensor            # (B, T) ρ = exp(log_ratio)
    token_log_ratio: Tensor  # (B, T) log π_θ − log π_old per token (with grad), unclamped
    advantages: Tensor       # (B, T) Ã
    mask: Tensor             # (B, T) bool, the valid tokens
    importance_weights: Tensor | None = None  # (B, T) or (B, 1), for the terms that read them (vespo)


SurrogateFn = Callable[[SurrogateInputs, LossConfig], "tuple[Tensor, dict[str, Tensor]]"]


@dataclass(frozen=True)
class Surrogate:
    fn: SurrogateFn
    reads_importance_weights: bool = False  # the term folds the rollout weights in itself (not ℓ · w)


SURROGATES: dict[str, Surrogate] = {}


def register_surrogate(name: str, *, reads: tuple[str, ...] = (), reads_importance_weights: bool = False):
    """Register a per-token term: `SURROGATES[name]`, and the policy loss `name` = `policy_loss` with it.
    reads: the TERM_OPTIONS the term reads (the SHARED_OPTIONS are read by `policy_loss`)."""
    def deco(fn: SurrogateFn) -> SurrogateFn:
        if name in SURROGATES:
            raise ValueError(f"surrogate {name!r} is already registered")
        SURROGATES[name] = Surrogate(fn, reads_importance_weights)

        def loss(inputs: PolicyLossInputs, config: LossConfig):
            return policy_loss(inputs.logprobs, inputs.old_logprobs, inputs.advantages, inputs.response_mask, config,
                               ref_logprobs=inputs.ref_logprobs, entropy=inputs.entropy,
                               importance_weights=inputs.importance_weights, entropy_mask=inputs.entropy_mask,
                               sampling_logprobs=inputs.sampling_logprobs, surrogate=name)

        loss.__name__ = loss.__qualname__ = f"{fn.__name__}_policy_loss"
        loss.__doc__ = f"`policy_loss` with the {name!r} per-token term ({fn.__name__})."
        register_policy_loss(name, reads=(*SHARED_OPTIONS, *reads))(loss)
        return fn
    return deco


def _frac(hit: Tensor, mask: Tensor) -> Tensor:
    """Fraction of the valid tokens where `hit` (broadcast to (B, T)) holds."""
    m = mask.to(torch.float32)
    return (hit.expand_as(m).to(m.dtype) * m).sum() / m.sum().clamp(min=1.0)


def _ppo_clip_stats(s: SurrogateInputs, cfg: LossConfig, clipped: Tensor) -> dict[str, Tensor]:
    """The clip statistics TRL logs for its clipped losses (clip_ratio/*), over this batch."""
    low = (s.ratio < 1.0 - cfg.clip_eps_low) & (s.advantages < 0)
    high = (s.ratio > 1.0 + cfg.clip_eps_high) & (s.advantages > 0)
    out = {"clip_frac": _frac(clipped, s.mask), "clip_frac_low": _frac(low, s.mask),
           "clip_frac_high": _frac(high, s.mask)}
    # per-response fractions: the smallest low-clip and largest high-clip one (TRL's
    # clip_ratio/low_min and clip_ratio/high_max, here over the micro-batch)
    m = s.mask.to(torch.float32)
    seq_n = m.sum(dim=1)
    has = seq_n > 0
    nan = torch.full((), float("nan"), device=m.device)
    for key, hit, reduce in (("clip_frac_low_seq_min", low, torch.min), ("clip_frac_high_seq_max", high, torch.max)):
        per_seq = (hit.to(m.dtype) * m).sum(dim=1) / seq_n.clamp(min=1.0)
        out[key] = reduce(per_seq[has]) if bool(has.any()) else nan
    return out


@register_surrogate("clipped-surrogate", reads=("delta", "dual_clip_c"))
def clipped_surrogate(s: SurrogateInputs, cfg: LossConfig):
    """PPO / GRPO: ℓ = −min(min(ρ, δ) Ã, clip(ρ, 1 − ε_low, 1 + ε_high) Ã), dual-clip for Ã < 0."""
    adv = s.advantages
    unclipped = s.ratio if cfg.delta is None else torch.clamp(s.ratio, max=cfg.delta)  # INTELLECT-2's δ
    surr1 = unclipped * adv
    surr2 = torch.clamp(s.ratio, 1.0 - cfg.clip_eps_low, 1.0 + cfg.clip_eps_high) * adv
    token_loss = -torch.minimum(surr1, surr2)
    clipped = surr2 < s.ratio * adv                              # the clip is the active branch
    if cfg.dual_clip_c is not None:
        cap = -cfg.dual_clip_c * adv                             # = c·|Ã| for Ã < 0
        dual = (adv < 0) & (token_loss > cap)
        token_loss = torch.where(dual, cap, token_loss)
    else:
        dual = torch.zeros_like(clipped)
    stats = _ppo_clip_stats(s, cfg, clipped)
    stats["dual_clip_frac"] = _frac(dual, s.mask)
    if cfg.delta is not None:
        stats["delta_clip_frac"] = _frac(s.ratio > cfg.delta, s.mask)
    return token_loss, stats


@register_surrogate("cispo")
def cispo(s: SurrogateInputs, cfg: LossConfig):
    """CISPO: ℓ = −sg(clip(ρ, 1 − ε_low, 1 + ε_high)) · Ã · log π_θ (every token keeps its gradient)."""
    weight = torch.clamp(s.ratio, 1.0 - cfg.clip_eps_low, 1.0 + cfg.clip_eps_high).detach()
    token_loss = -weight * s.advantages * s.logprobs
    return token_loss, {"clip_frac": _frac(weight != s.ratio.detach(), s.mask),
                        # TRL's cispo_clip_ratio: weights capped from above on positive tokens
                        "cispo_clip_frac": _frac((s.ratio > 1.0 + cfg.clip_eps_high) & (s.advantages > 0), s.mask)}


@register_surrogate("sapo", reads=("sapo_temperature_pos", "sapo_temperature_neg"))
def sapo(s: SurrogateInputs, cfg: LossConfig):
    """SAPO: ℓ = −σ(τ (ρ − 1)) · (4/τ) · Ã, τ = τ_pos where Ã > 0, else τ_neg (a soft trust region)."""
    tau = torch.where(s.advantages > 0, cfg.sapo_temperature_pos, cfg.sapo_temperature_neg).to(s.ratio.dtype)
    gate = torch.sigmoid(tau * (s.ratio - 1.0)) * 4.0 / tau
    return -gate * s.advantages, {"sapo_gate_mean": (gate.detach() * s.mask).sum() / s.mask.sum().clamp(min=1)}


def _centred_covariance(s: SurrogateInputs) -> Tensor:
    """(B, T) Cov_t = (Ã_t − mean Ã)(log π_t − mean log π) over the batch's valid tokens (detached)."""
    m = s.mask.to(s.advantages.dtype)
    n = m.sum().clamp(min=1.0)
    adv = s.advantages.detach()
    logp = s.logprobs.detach()
    return (adv - (adv * m).sum() / n) * (logp - (logp * m).sum() / n)


@register_surrogate("clip-cov", reads=("delta", "dual_clip_c", "clip_cov_ratio", "clip_cov_lb", "clip_cov_ub"))
def clip_cov(s: SurrogateInputs, cfg: LossConfig):
    """Clip-Cov: the clipped surrogate; ⌊r·N⌋ (≥ 1) tokens drawn among the unclipped ones with
    Cov_t in (ω_low, ω_high) get no gradient (their ℓ is 0, as veRL's `corr`)."""
    token_loss, stats = clipped_surrogate(s, cfg)
    cov = _centred_covariance(s)
    unclipped = ~(torch.clamp(s.ratio, 1.0 - cfg.clip_eps_low, 1.0 + cfg.clip_eps_high) * s.advantages
                  < s.ratio * s.advantages)
    candidates = torch.nonzero(s.mask & unclipped & (cov > cfg.clip_cov_lb) & (cov < cfg.clip_cov_ub))
    n_pick = max(int(cfg.clip_cov_ratio * int(s.mask.sum())), 1)
    picked = torch.zeros_like(s.mask)
    if len(candidates):
        chosen = candidates[torch.randperm(len(candidates))[:n_pick].to(candidates.device)]
        picked[chosen[:, 0], chosen[:, 1]] = True
    stats["cov_frac"] = _frac(picked, s.mask)
    return torch.where(picked, torch.zeros_like(token_loss), token_loss), stats


@register_surrogate("kl-cov", reads=("kl_cov_ratio", "kl_cov_coef"))
def kl_cov(s: SurrogateInputs, cfg: LossConfig):
    """KL-Cov: ℓ = −ρ Ã (unclipped); the ⌊r·N⌋ (≥ 1) tokens of largest Cov_t get + β_cov |log π_θ − log π_old|."""
    token_loss = -s.ratio * s.advantages
    valid = s.mask.reshape(-1)
    picked = torch.zeros_like(valid)
    n_valid = int(valid.sum())
    if n_valid:
        cov = _centred_covariance(s).reshape(-1)[valid]
        k = max(1, int(n_valid * cfg.kl_cov_ratio))
        picked[torch.nonzero(valid)[:, 0][torch.topk(cov, k).indices]] = True
    picked = picked.view_as(s.mask)
    penalty = cfg.kl_cov_coef * s.token_log_ratio.abs()
    return torch.where(picked, token_loss + penalty, token_loss), {"cov_frac": _frac(picked, s.mask)}


@register_surrogate("vespo", reads=("vespo_k_pos", "vespo_lambda_pos", "vespo_k_neg", "vespo_lambda_neg"),
                    reads_importance_weights=True)
def vespo(s: SurrogateInputs, cfg: LossConfig):
    """VESPO: ℓ = −sg(φ(w)) · Ã · log π_θ, φ(w) = exp(λ + k log w − λ w), w the sequence ratio."""
    with torch.no_grad():
        log_w = s.token_log_ratio.detach().clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
        log_w = torch.where(s.mask, log_w, torch.zeros_like(log_w)).sum(dim=1, keepdim=True)   # (B, 1)
        if s.importance_weights is not None:  # w · Π_t (π_old / π_rollout): the rollout mismatch, in log space
            log_is = torch.log(s.importance_weights.to(log_w.dtype)).clamp(VESPO_LOG_W_MIN, LOG_RATIO_CLAMP)
            log_w = log_w + log_is.sum(dim=-1, keepdim=True)
        log_w = log_w.clamp(VESPO_LOG_W_MIN, LOG_RATIO_CLAMP)
        pos = s.advantages >= 0
        k = torch.where(pos, cfg.vespo_k_pos, cfg.vespo_k_neg).to(log_w.dtype)
        lam = torch.where(pos, cfg.vespo_lambda_pos, cfg.vespo_lambda_neg).to(log_w.dtype).clamp(min=1e-4)
        phi = torch.exp(lam + k * log_w - lam * torch.exp(log_w)).nan_to_num(nan=0.0, posinf=0.0, neginf=0.0)
    token_loss = -phi * s.advantages * s.logprobs
    return token_loss, {"vespo_phi_mean": (phi.expand_as(s.mask) * s.mask).sum() / s.mask.sum().clamp(min=1)}


# ---- the loss they share -----------------------------------------------------------------------------

def token_policy_loss(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    response_mask: Tensor,
    config: LossConfig | None = None,
    *,
    entropy: Tensor | None = None,
    importance_weights: Tensor | None = None,
    entropy_mask: Tensor | None = None,
    sampling_logprobs: Tensor | None = None,
    surrogate: str | None = None,
) -> tuple[Tensor, Tensor, dict[str, Tensor]]:
    """The policy-gradient term per token, before aggregation: the term `surrogate` (None:
    config.policy_loss, else "clipped-surrogate"), then the off-policy mask, the top-entropy mask and
    the rollout weights (module docstring). Arguments as `policy_loss`. Returns (ℓ (B, T) in float32
    at least, 0 on padding; the tokens kept by top_entropy_quantile (B, T) bool; metrics as 0-d
    tensors). An engine that aggregates itself (veRL's agg_loss over the global batch) calls this."""
    cfg = config if config is not None else LossConfig()
    name = surrogate or cfg.policy_loss or "clipped-surrogate"
    if name not in SURROGATES:
        raise ValueError(f"policy loss {name!r} has no per-token term: policy_loss takes one of {sorted(SURROGATES)}")
    term = SURROGATES[name]
    if advantages.dim() == 1:
        advantages = advantages[:, None].expand_as(logprobs)
    for arg, t in (("old_logprobs", old_logprobs), ("advantages", advantages), ("response_mask", response_mask)):
        if t.shape != logprobs.shape:
            raise ValueError(f"{arg} must have the shape of logprobs {tuple(logprobs.shape)}, got {tuple(t.shape)}")
    # float32 at least: bf16 log-probs would round the ratio to ~1e-2
    dtype = torch.promote_types(logprobs.dtype, torch.float32)
    logprobs = logprobs.to(dtype)
    valid = response_mask.bool()
    mask = response_mask.to(dtype)
    zero = torch.zeros((), dtype=dtype, device=logprobs.device)
    adv = torch.where(valid, advantages.to(dtype), zero)
    logprobs_v = torch.where(valid, logprobs, zero)

    token_log_ratio = torch.where(valid, logprobs - old_logprobs.detach().to(dtype), zero)
    log_ratio = token_log_ratio
    if cfg.importance_sampling_level == "sequence":   # GSPO: log s_i = mean_t log ρ_{i,t}, (B, 1) -> (B, T)
        seq = log_ratio.sum(dim=1, keepdim=True) / mask.sum(dim=1, keepdim=True).clamp(min=1.0)
        log_ratio = torch.where(valid, seq.expand_as(log_ratio), zero)
    log_ratio = log_ratio.clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    ratio = torch.exp(log_ratio)
    weights = None if importance_weights is None else importance_weights.detach().to(dtype)
    s = SurrogateInputs(logprobs_v, log_ratio, ratio, token_log_ratio, adv, valid,
                        weights if term.reads_importance_weights else None)
    token_loss, term_stats = term.fn(s, cfg)
    metrics: dict[str, Tensor] = {}
    if cfg.off_policy_mask_threshold is not None:
        behaviour = old_logprobs if sampling_logprobs is None else sampling_logprobs
        keep = off_policy_sequence_mask(adv, logprobs, behaviour.to(dtype), valid, cfg.off_policy_mask_threshold)
        token_loss = torch.where(keep, token_loss, torch.zeros_like(token_loss))
        metrics["off_policy_masked_frac"] = _frac(~keep, valid)
    kept = valid
    if cfg.top_entropy_quantile < 1.0:
        if entropy_mask is None:
            if entropy is None:
                raise ValueError("LossConfig.top_entropy_quantile < 1 needs entropy (or entropy_mask)")
            entropy_mask = high_entropy_mask(entropy, valid, cfg.top_entropy_quantile)
        kept = entropy_mask.bool() & valid
        # a select: dropped tokens contribute 0 and no gradient, but stay in the denominators (TRL)
        token_loss = torch.where(kept, token_loss, torch.zeros_like(token_loss))
    if weights is not None and not term.reads_importance_weights:
        token_loss = token_loss * weights.expand_as(token_loss)
    token_loss = torch.where(valid, token_loss, torch.zeros_like(token_loss))

    with torch.no_grad():
        metrics.update({k: v.detach() for k, v in term_stats.items()})
        n_tok = mask.sum().clamp(min=1.0)
        # approximate KL(π_old ‖ π_θ) on tokens sampled from π_old: k3 with r = π_θ / π_old,
        # (r − 1) − log r ≥ 0 (Schulman's estimator, samples from the first argument)
        metrics["approx_kl"] = ((torch.expm1(log_ratio) - log_ratio) * mask).sum() / n_tok
        metrics["ratio_mean"] = (ratio * mask).sum() / n_tok
        if cfg.top_entropy_quantile < 1.0:
            metrics["entropy_kept_frac"] = (kept.to(mask.dtype) * mask).sum() / n_tok
    return token_loss, kept, metrics


def policy_loss(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    response_mask: Tensor,
    config: LossConfig | None = None,
    ref_logprobs: Tensor | None = None,
    entropy: Tensor | None = None,
    importance_weights: Tensor | None = None,
    entropy_mask: Tensor | None = None,
    sampling_logprobs: Tensor | None = None,
    surrogate: str | None = None,
) -> tuple[Tensor, dict[str, float]]:
    """The policy loss to minimise, with the per-token term `surrogate` (None: config.policy_loss,
    else "clipped-surrogate"): `token_policy_loss` aggregated, plus the KL and entropy terms.

    logprobs, old_logprobs: (B, T) log-probs of the sampled tokens under π_θ and π_old;
    advantages: (B, T) token advantages Ã (or (B,), broadcast); response_mask: (B, T);
    ref_logprobs: (B, T) under π_ref (needed when kl_coef > 0); entropy: (B, T) (needed when
    entropy_coef > 0, also logged when given); importance_weights: (B, T) or (B, 1) detached
    per-token factors on the surrogate — the truncated/masked π_old / π_rollout ratio that
    corrects a vLLM rollout's sampling mismatch (TRL's `importance_sampling_ratio`);
    entropy_mask: (B, T) bool, the tokens kept by `top_entropy_quantile` when the caller computed
    it (TRL's mask over all processes); None = `high_entropy_mask` of this batch;
    sampling_logprobs: (B, T) the rollout engine's log-probs, which the off-policy mask compares
    with when given (TRL prefers vLLM's), else old_logprobs.
    Returns (scalar loss, metrics of python floats).
    """
    cfg = config if config is not None else LossConfig()
    if cfg.kl_coef > 0 and ref_logprobs is None:
        raise ValueError("LossConfig.kl_coef > 0 needs ref_logprobs")
    if cfg.entropy_coef > 0 and entropy is None:
        raise ValueError("LossConfig.entropy_coef > 0 needs entropy")
    token_loss, kept, term_metrics = token_policy_loss(
        logprobs, old_logprobs, advantages, response_mask, cfg, entropy=entropy,
        importance_weights=importance_weights, entropy_mask=entropy_mask, sampling_logprobs=sampling_logprobs,
        surrogate=surrogate)
    dtype = token_loss.dtype
    mask = response_mask.to(dtype)
    loss = aggregate_loss(token_loss, mask, cfg.agg, cfg.max_response_length)
    metrics: dict[str, Tensor] = {"pg_loss": loss.detach()}
    if cfg.kl_coef > 0 or ref_logprobs is not None:
        kl = kl_estimate(logprobs.to(dtype), ref_logprobs.to(dtype), cfg.kl_estimator)
        kl_agg = aggregate_loss(kl, mask, cfg.agg, cfg.max_response_length)
        if cfg.kl_coef > 0:
            loss = loss + cfg.kl_coef * kl_agg
        metrics["kl"] = kl_agg.detach()
    if entropy is not None:
        ent = aggregate_loss(entropy, kept.to(dtype), cfg.entropy_agg or cfg.agg, cfg.max_response_length)
        if cfg.entropy_coef > 0:
            loss = loss - cfg.entropy_coef * ent
        metrics["entropy"] = ent.detach()
    metrics.update(term_metrics)
    values = torch.stack([v.float() for v in metrics.values()]).tolist()
    return loss, dict(zip(metrics.keys(), values))


__all__ = ["LossConfig", "PolicyLossInputs", "POLICY_LOSSES", "SURROGATES", "SurrogateInputs", "Surrogate",
           "register_policy_loss", "register_surrogate", "get_policy_loss", "token_policy_loss", "check_loss_options", "POLICY_LOSS_READS",
           "OPTIONAL_OPTIONS", "SHARED_OPTIONS", "TERM_OPTIONS", "policy_loss", "aggregate_loss",
           "kl_estimate", "high_entropy_mask", "off_policy_sequence_mask", "AGG_MODES", "KL_ESTIMATORS", "IS_LEVELS",
           "LOG_RATIO_CLAMP"]
