"""Which `resrl.core` policy loss the veRL plugin offers, and how: derived from the loss registry
(`resrl.core.loss.POLICY_LOSSES`), as `algorithms.py` is from the algorithm registry.

    verl      veRL registers the loss itself (its core_algos.py): choose it with
              actor_rollout_ref.actor.policy_loss.loss_mode=<name>; its options are veRL's keys
    plugin    veRL lacks it: the plugin registers resrl.core's term with veRL's `register_policy_loss`
              (estimators.py), aggregated by veRL's own `agg_loss` over its global batch
    refused   the plugin cannot run it (the reason); nothing is registered under its name

LossConfig's options that are not a loss of their own (`VERL_OPTIONS`): veRL's key that gives the
same, or the reason the plugin does not offer it. This module imports no veRL (the main venv tests it).
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor

from ...core.loss import POLICY_LOSSES, SURROGATES, LossConfig, token_policy_loss

LOSS_KINDS = ("verl", "plugin", "refused")
_KEY = "actor_rollout_ref.actor"

# resrl loss -> (veRL's loss_mode, the Hydra keys of its options): veRL 0.9.1's core_algos.py
VERL_OWN_LOSSES = {
    "clipped-surrogate": ("vanilla", f"{_KEY}.clip_ratio_low / clip_ratio_high; veRL's vanilla always applies "
                                     f"dual-clip ({_KEY}.clip_ratio_c, 3.0: resrl's loss.dual_clip_c)"),
    "cispo": ("cispo", f"{_KEY}.clip_ratio_low / clip_ratio_high bound the weight (as resrl's clip_eps_*)"),
    "sapo": ("sapo", f"{_KEY}.tau_pos / tau_neg (resrl's sapo_temperature_pos / _neg)"),
    "clip-cov": ("clip_cov", f"{_KEY}.policy_loss.clip_cov_ratio / clip_cov_lb / clip_cov_ub"),
    "kl-cov": ("kl_cov", f"{_KEY}.policy_loss.kl_cov_ratio / ppo_kl_coef (veRL's ActorConfig default 0.1; "
                         "resrl's kl_cov_coef 1.0, the value veRL's core_algos uses when it is unset)"),
}
REASONS = {
    "flowrl": "FlowRL's loss trains a log Z(c) head with the policy; veRL's actor has no such head. Use the TRL "
              "engine: resrl train algorithm.name=flowrl",
}
# LossConfig options and where veRL has them (or why the plugin does not offer them)
VERL_OPTIONS = {
    "importance_sampling_level": f"sequence: veRL's own GSPO loss ({_KEY}.policy_loss.loss_mode=gspo)",
    "entropy_coef": f"veRL's {_KEY}.entropy_coeff (aggregated like the loss, as resrl's entropy_agg=None)",
    "kl_coef": f"veRL's {_KEY}.use_kl_loss / kl_loss_coef / kl_loss_type",
    "dual_clip_c": f"veRL's {_KEY}.clip_ratio_c (its vanilla loss)",
    "delta": f"not offered: veRL's vanilla has dual-clip ({_KEY}.clip_ratio_c), which equals TRL's delta = c "
             "whenever delta >= 1 + clip_ratio_high",
    "off_policy_mask_threshold": "not offered: veRL corrects off-policy rollouts with its own rollout correction "
                                 f"({_KEY}.policy_loss.rollout_correction / algorithm.rollout_correction)",
    "top_entropy_quantile": "not offered: veRL's actor has no top-entropy token mask",
}


@dataclass(frozen=True)
class VerlLoss:
    name: str       # the resrl.core registry name
    kind: str       # one of LOSS_KINDS
    verl_name: str  # veRL's loss_mode
    how: str        # the Hydra override and options (verl, plugin) or the reason (refused)


def _classify(name: str) -> VerlLoss:
    if name in VERL_OWN_LOSSES:
        mode, keys = VERL_OWN_LOSSES[name]
        return VerlLoss(name, "verl", mode, f"{_KEY}.policy_loss.loss_mode={mode} (veRL's own; {keys})")
    verl_name = name.replace("-", "_")
    if name in SURROGATES:
        return VerlLoss(name, "plugin", verl_name,
                        f"{_KEY}.policy_loss.loss_mode={verl_name} (resrl.core's term, registered by the plugin, "
                        "aggregated by veRL's agg_loss; its own options at LossConfig's defaults, which veRL's "
                        "actor config has no keys for)")
    return VerlLoss(name, "refused", verl_name,
                    REASONS.get(name, f"{name} is not a per-token term of resrl.core.loss (SURROGATES)"))


def verl_losses() -> dict[str, VerlLoss]:
    """Every loss of the core registry -> its entry (module docstring), in registry order."""
    return {name: _classify(name) for name in POLICY_LOSSES}


def plugin_token_losses(name: str, old_log_prob: Tensor, log_prob: Tensor, advantages: Tensor,
                        response_mask: Tensor, clip_ratio_low: float, clip_ratio_high: float,
                        rollout_is_weights: Tensor | None = None) -> tuple[Tensor, dict[str, float]]:
    """A plugin loss's per-token loss matrix for veRL's `agg_loss`: resrl.core's `token_policy_loss`
    with LossConfig(policy_loss=name, clip range = veRL's clip_ratio_low / _high), veRL's rollout
    correction weights as the rollout weights. All (B, T); returns (pg_losses (B, T), metrics)."""
    entry = verl_losses().get(name)
    if entry is None or entry.kind != "plugin":
        raise ValueError(f"{name!r} is not a loss the plugin registers ({entry.how if entry else 'unknown'})")
    cfg = LossConfig(policy_loss=name, clip_eps_low=float(clip_ratio_low), clip_eps_high=float(clip_ratio_high))
    pg_losses, _, metrics = token_policy_loss(log_prob, old_log_prob, advantages, response_mask, cfg,
                                              importance_weights=rollout_is_weights)
    return pg_losses, {f"actor/{k}": float(v) for k, v in metrics.items()}


__all__ = ["LOSS_KINDS", "VERL_OWN_LOSSES", "VERL_OPTIONS", "VerlLoss", "verl_losses", "plugin_token_losses"]
