"""Policy losses behind one registry, and the clipped surrogate (spec §1): clip-higher and
dual-clip, four aggregation modes, KL penalty (k1/k2/k3) and entropy bonus. Token advantages are
`(B, T)` for every algorithm.

Registry (like the algorithm registry): a loss is one function of one signature,

    @register_policy_loss("my-loss")
    def my_loss(inputs: PolicyLossInputs, config: LossConfig) -> tuple[Tensor, dict[str, float]]: ...

and an algorithm names the loss it needs (`register_algorithm(..., policy_loss="my-loss")`).
Entries: "clipped-surrogate" (below), "flowrl" (`resrl.core.flowrl`).

    ρ = exp(clamp(logπ_θ − logπ_old, ±LOG_RATIO_CLAMP))
    ℓ_t = −min(ρ Ã, clip(ρ, 1 − ε_low, 1 + ε_high) Ã)                       (PPO / GRPO surrogate)
    dual-clip (Ã < 0): ℓ_t = min(ℓ_t, −c Ã)  i.e. the loss of a negative token is capped at c|Ã|
    ℓ_t ← w_t · ℓ_t  with w the (detached) importance weights of a vLLM rollout, when given
    L = agg(ℓ) + β_KL · agg(KL) − β_H · agg(H)

Two options TRL users know (`GRPOConfig.importance_sampling_level`, `top_entropy_quantile`),
for every algorithm that uses this loss:

    importance_sampling_level = "sequence" (GSPO, Zheng et al. 2025, Eq. 7):
        log s_i = (1/|y_i|) Σ_t (logπ_θ − logπ_old)   one ratio per response, broadcast over its
        tokens; the surrogate and its clip use s_i in place of ρ_{i,t} (TRL's "sequence" level)
    top_entropy_quantile = q < 1 (Wang et al. 2025, "80/20"): only tokens whose entropy is ≥ the
        (1 − q)-quantile of the batch's valid-token entropies keep their surrogate term; the others
        contribute 0 but still count in the aggregation's denominators (as TRL does); the KL term is
        not masked, the entropy bonus is taken over the kept tokens (as TRL does)

Numerics: the log-ratio is clamped before `exp` (a log-ratio above ~88 overflows float32 to inf,
and inf · 0 = NaN reaches the gradient even through a masked or clipped token), and padding is
removed with `torch.where` (a select), never by multiplying with the mask.
"""

from __future__ import annotations

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


@dataclass
class LossConfig:
    agg: str = "seq-mean-token-mean"        # the paper's Eq. 1
    clip_eps_low: float = 0.2               # ε_low: ratio clipped below at 1 − ε_low
    clip_eps_high: float = 0.2              # ε_high: ratio clipped above at 1 + ε_high (DAPO: 0.28)
    dual_clip_c: float | None = None        # e.g. 3.0; None = off
    kl_coef: float = 0.0                    # β_KL of the KL penalty to the reference policy (paper: 0)
    kl_estimator: str = "k3"                # k1 | k2 | k3 (Schulman's estimators)
    entropy_coef: float = 0.0               # β_H of the entropy bonus (paper: 0)
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

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        if self.agg not in AGG_MODES:
            raise ValueError(f"LossConfig.agg = {self.agg!r} is invalid: allowed {AGG_MODES}")
        for name in ("clip_eps_low", "clip_eps_high"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and 0 <= v < 10):
                raise ValueError(f"LossConfig.{name} = {v!r} is invalid: allowed a float in [0, 10)")
        if self.clip_eps_low >= 1:
            raise ValueError(f"LossConfig.clip_eps_low = {self.clip_eps_low!r} is invalid: allowed [0, 1)")
        if self.dual_clip_c is not None and not (isinstance(self.dual_clip_c, (int, float)) and self.dual_clip_c > 1):
            raise ValueError(f"LossConfig.dual_clip_c = {self.dual_clip_c!r} is invalid: allowed None or a float > 1")
        if self.importance_sampling_level not in IS_LEVELS:
            raise ValueError(f"LossConfig.importance_sampling_level = {self.importance_sampling_level!r} is invalid: "
                             f"allowed {IS_LEVELS}")
        q = self.top_entropy_quantile
        if not (isinstance(q, (int, float)) and not isinstance(q, bool) and 0.0 < q <= 1.0):
            raise ValueError(f"LossConfig.top_entropy_quantile = {q!r} is invalid: allowed a float in (0, 1]")
        if self.kl_estimator not in KL_ESTIMATORS:
            raise ValueError(f"LossConfig.kl_estimator = {self.kl_estimator!r} is invalid: allowed {KL_ESTIMATORS}")
        for name in ("kl_coef", "entropy_coef"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and v >= 0):
                raise ValueError(f"LossConfig.{name} = {v!r} is invalid: allowed a float >= 0")
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
) -> tuple[Tensor, dict[str, float]]:
    """Clipped-surrogate loss to minimise.

    logprobs, old_logprobs: (B, T) log-probs of the sampled tokens under π_θ and π_old;
    advantages: (B, T) token advantages Ã (or (B,), broadcast); response_mask: (B, T);
    ref_logprobs: (B, T) under π_ref (needed when kl_coef > 0); entropy: (B, T) (needed when
    entropy_coef > 0, also logged when given); importance_weights: (B, T) or (B, 1) detached
    per-token factors on the surrogate — the truncated/masked π_old / π_rollout ratio that
    corrects a vLLM rollout's sampling mismatch (TRL's `importance_sampling_ratio`);
    entropy_mask: (B, T) bool, the tokens kept by `top_entropy_quantile` when the caller computed
    it (TRL's mask over all processes); None = `high_entropy_mask` of this batch.
    Returns (scalar loss, metrics of python floats).
    """
    cfg = config if config is not None else LossConfig()
    if advantages.dim() == 1:
        advantages = advantages[:, None].expand_as(logprobs)
    for name, t in (("old_logprobs", old_logprobs), ("advantages", advantages), ("response_mask", response_mask)):
        if t.shape != logprobs.shape:
            raise ValueError(f"{name} must have the shape of logprobs {tuple(logprobs.shape)}, got {tuple(t.shape)}")
    if cfg.kl_coef > 0 and ref_logprobs is None:
        raise ValueError("LossConfig.kl_coef > 0 needs ref_logprobs")
    if cfg.entropy_coef > 0 and entropy is None:
        raise ValueError("LossConfig.entropy_coef > 0 needs entropy")
    # float32 at least: bf16 log-probs would round the ratio to ~1e-2
    dtype = torch.promote_types(logprobs.dtype, torch.float32)
    logprobs = logprobs.to(dtype)
    valid = response_mask.bool()
    mask = response_mask.to(dtype)
    adv = torch.where(valid, advantages.to(dtype), torch.zeros((), dtype=dtype, device=logprobs.device))

    log_ratio = logprobs - old_logprobs.detach().to(dtype)
    log_ratio = torch.where(valid, log_ratio, torch.zeros_like(log_ratio))
    if cfg.importance_sampling_level == "sequence":   # GSPO: log s_i = mean_t log ρ_{i,t}, (B, 1) -> (B, T)
        seq = log_ratio.sum(dim=1, keepdim=True) / mask.sum(dim=1, keepdim=True).clamp(min=1.0)
        log_ratio = torch.where(valid, seq.expand_as(log_ratio), torch.zeros_like(log_ratio))
    log_ratio = log_ratio.clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    ratio = torch.exp(log_ratio)
    surr1 = ratio * adv
    surr2 = torch.clamp(ratio, 1.0 - cfg.clip_eps_low, 1.0 + cfg.clip_eps_high) * adv
    token_loss = -torch.minimum(surr1, surr2)
    clipped = (surr2 < surr1)                                    # the clip is the active branch
    if cfg.dual_clip_c is not None:
        cap = -cfg.dual_clip_c * adv                             # = c·|Ã| for Ã < 0
        dual = (adv < 0) & (token_loss > cap)
        token_loss = torch.where(dual, cap, token_loss)
    else:
        dual = torch.zeros_like(clipped)
    if importance_weights is not None:
        token_loss = token_loss * importance_weights.detach().to(dtype).expand_as(token_loss)
    kept = valid
    if cfg.top_entropy_quantile < 1.0:
        if entropy_mask is None:
            if entropy is None:
                raise ValueError("LossConfig.top_entropy_quantile < 1 needs entropy (or entropy_mask)")
            entropy_mask = high_entropy_mask(entropy, valid, cfg.top_entropy_quantile)
        kept = entropy_mask.bool() & valid
        # a select: dropped tokens contribute 0 and no gradient, but stay in the denominators (TRL)
        token_loss = torch.where(kept, token_loss, torch.zeros_like(token_loss))

    loss = aggregate_loss(token_loss, mask, cfg.agg, cfg.max_response_length)
    metrics: dict[str, Tensor] = {"pg_loss": loss.detach()}
    if cfg.kl_coef > 0 or ref_logprobs is not None:
        kl = kl_estimate(logprobs, ref_logprobs.to(dtype), cfg.kl_estimator)
        kl_agg = aggregate_loss(kl, mask, cfg.agg, cfg.max_response_length)
        if cfg.kl_coef > 0:
            loss = loss + cfg.kl_coef * kl_agg
        metrics["kl"] = kl_agg.detach()
    if entropy is not None:
        ent = aggregate_loss(entropy, kept.to(dtype), cfg.agg, cfg.max_response_length)
        if cfg.entropy_coef > 0:
            loss = loss - cfg.entropy_coef * ent
        metrics["entropy"] = ent.detach()

    n_tok = mask.sum().clamp(min=1.0)
    with torch.no_grad():
        metrics["clip_frac"] = (clipped.to(mask.dtype) * mask).sum() / n_tok
        metrics["clip_frac_low"] = (((ratio < 1.0 - cfg.clip_eps_low) & (adv < 0)).to(mask.dtype) * mask).sum() / n_tok
        metrics["clip_frac_high"] = (((ratio > 1.0 + cfg.clip_eps_high) & (adv > 0)).to(mask.dtype) * mask).sum() / n_tok
        metrics["dual_clip_frac"] = (dual.to(mask.dtype) * mask).sum() / n_tok
        # per-response clip fractions: the smallest low-clip and largest high-clip one (TRL's
        # clip_ratio/low_min and clip_ratio/high_max, here over the micro-batch)
        seq_n = mask.sum(dim=1)
        has = seq_n > 0
        nan = torch.full((), float("nan"), dtype=dtype, device=mask.device)
        for key, hit, reduce in (("clip_frac_low_seq_min", (ratio < 1.0 - cfg.clip_eps_low) & (adv < 0), torch.min),
                                 ("clip_frac_high_seq_max", (ratio > 1.0 + cfg.clip_eps_high) & (adv > 0), torch.max)):
            per_seq = (hit.to(mask.dtype) * mask).sum(dim=1) / seq_n.clamp(min=1.0)
            metrics[key] = reduce(per_seq[has]) if bool(has.any()) else nan
        # approximate KL(π_old ‖ π_θ) on tokens sampled from π_old: k3 with r = π_θ / π_old,
        # (r − 1) − log r ≥ 0 (Schulman's estimator, samples from the first argument)
        metrics["approx_kl"] = ((torch.expm1(log_ratio) - log_ratio) * mask).sum() / n_tok
        metrics["ratio_mean"] = (ratio * mask).sum() / n_tok
        if cfg.top_entropy_quantile < 1.0:
            metrics["entropy_kept_frac"] = (kept.to(mask.dtype) * mask).sum() / n_tok
    values = torch.stack([v.float() for v in metrics.values()]).tolist()
    return loss, dict(zip(metrics.keys(), values))


# ---- the policy-loss registry --------------------------------------------------------------------

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


PolicyLossFn = Callable[[PolicyLossInputs, LossConfig], "tuple[Tensor, dict[str, float]]"]
POLICY_LOSSES: dict[str, PolicyLossFn] = {}


def register_policy_loss(name: str):
    def deco(fn: PolicyLossFn) -> PolicyLossFn:
        if name in POLICY_LOSSES:
            raise ValueError(f"policy loss {name!r} is already registered")
        POLICY_LOSSES[name] = fn
        return fn
    return deco


def get_policy_loss(name: str) -> PolicyLossFn:
    try:
        return POLICY_LOSSES[name]
    except KeyError:
        raise ValueError(f"unknown policy loss {name!r}: choose one of {sorted(POLICY_LOSSES)}") from None


@register_policy_loss("clipped-surrogate")
def clipped_surrogate(inputs: PolicyLossInputs, config: LossConfig):
    """PPO/GRPO clipped surrogate (+ KL, entropy): `policy_loss`."""
    return policy_loss(inputs.logprobs, inputs.old_logprobs, inputs.advantages, inputs.response_mask, config,
                       ref_logprobs=inputs.ref_logprobs, entropy=inputs.entropy,
                       importance_weights=inputs.importance_weights, entropy_mask=inputs.entropy_mask)
