"""veRL advantage estimators, registered with veRL's own `register_adv_est` when this module is
imported (the `verl.plugins` entry point does it at `import verl`). Which ones: every algorithm of
the `resrl.core` registry, classified by `algorithms.verl_catalog()` — the reward-only ones
(`psr`, `nsr`, `w_reinforce`, `passk`, and any added to the registry later) as estimators computed
by `resrl.core.compute_token_advantages`; `resrl` with its trainer mode; the ones the plugin cannot
run (`nthr`, `flowrl`, the step-level ones) as estimators that raise the reason, unless veRL has an
estimator of that name. None holds a second copy of the math.

veRL calls an estimator as `fn(token_level_rewards, response_mask, index=uids, config=algorithm)`
(`verl.trainer.ppo.ray_trainer.compute_advantage`) and expects `(advantages, returns)`, both
(B, T). The sequence reward is the sum of `token_level_rewards` over the response (veRL's
outcome-reward convention: the score sits on the last token). Options come from the
`algorithm` config with `+algorithm.resrl.<name>=...` Hydra overrides, named as
`resrl.core.AlgorithmConfig`'s fields:

    correct_threshold  (0.0)  a response is correct when reward > this      (psr, nsr, w_reinforce, passk)
    wreinforce_lambda  (0.1)  λ of W-REINFORCE
    passk_k            (4)    k of Pass@k training, < actor_rollout_ref.rollout.n
    std_eps            (1e-6) GRPO's eps                                    (resrl)
    (`algorithm.norm_adv_by_std_in_grpo=False` gives resrl Dr.GRPO's unscaled Â, as for veRL's grpo)

`resrl` multiplies GRPO's Â by the per-token multiplier the old-log-prob pass computed on the
rank (`weights.py`, `worker.py`), passed as `resrl_multiplier` (B, T) with `resrl_positive` (B,)
or, in a veRL job, made pending by the `resrl` trainer (`trainer.py`, `pending_multiplier`).
Without it the estimator raises: it never silently falls back to plain GRPO.

Policy losses (losses.py): veRL has the clipped surrogate, CISPO, SAPO, Clip-Cov and KL-Cov itself
(`actor_rollout_ref.actor.policy_loss.loss_mode=vanilla|cispo|sapo|clip_cov|kl_cov`); the core's
terms veRL lacks (VESPO) are registered here with veRL's `register_policy_loss`, each resrl.core's
per-token term aggregated by veRL's own `agg_loss`.
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar

import torch
from torch import Tensor
from verl.trainer.ppo import core_algos
from verl.trainer.ppo.core_algos import register_adv_est, register_policy_loss

from ...core import advantages as A
from .algorithms import estimator_advantages, group_ids, plugin_estimators, sequence_rewards, verl_catalog
from .losses import plugin_token_losses, verl_losses
from .weights import apply_multiplier

ESTIMATORS = plugin_estimators()   # from the core registry (algorithms.verl_catalog), never a hand-written list

# veRL 0.9.1's compute_advantage passes a custom estimator a fixed set of batch fields, so the
# `resrl` trainer (trainer.py) hands the rank-computed multiplier over for the duration of its
# advantage step: (multiplier (B, T) float32, positive (B,) bool), rows in the batch's order.
_PENDING: ContextVar[tuple[Tensor, Tensor] | None] = ContextVar("resrl_pending_multiplier", default=None)


@contextmanager
def pending_multiplier(multiplier: Tensor, positive: Tensor):
    """Make (multiplier, positive) the `resrl` estimator's weights inside the block."""
    token = _PENDING.set((multiplier, positive))
    try:
        yield
    finally:
        _PENDING.reset(token)


def _option(config, name: str, default):
    """`algorithm.resrl.<name>` from veRL's algorithm config (DictConfig, AlgoConfig or dict)."""
    if config is None:
        return default
    sub = config.get("resrl", None) if hasattr(config, "get") else getattr(config, "resrl", None)
    if sub is None:
        return default
    value = sub.get(name, default) if hasattr(sub, "get") else getattr(sub, name, default)
    return default if value is None else value


def _make_estimator(name: str):
    """veRL's estimator of the reward-only registry algorithm `name` (algorithms.estimator_advantages)."""
    def compute_advantage(token_level_rewards: Tensor, response_mask: Tensor, index=None, config=None, **kwargs):
        return estimator_advantages(name, token_level_rewards, response_mask, index, config)

    compute_advantage.__name__ = compute_advantage.__qualname__ = f"compute_{name.replace('-', '_')}_advantage"
    compute_advantage.__doc__ = f"{name}: resrl.core.compute_token_advantages on the sequence rewards."
    return compute_advantage


def _make_refusal(entry):
    """An estimator that raises why the plugin cannot run `entry.name`."""
    def refuse(*args, **kwargs):
        raise ValueError(f"algorithm.adv_estimator={entry.verl_name}: the resrl veRL plugin does not run "
                         f"{entry.name!r}: {entry.how}")

    refuse.__name__ = refuse.__qualname__ = f"refuse_{entry.verl_name}"
    return refuse


def _register_catalog() -> None:
    taken = getattr(core_algos, "ADV_ESTIMATOR_REGISTRY", {})
    for entry in verl_catalog().values():
        if entry.kind == "estimator":
            register_adv_est(entry.verl_name)(_make_estimator(entry.name))
        elif entry.kind == "refused" and entry.verl_name not in taken:
            register_adv_est(entry.verl_name)(_make_refusal(entry))


def _make_policy_loss(entry):
    """veRL's policy loss `entry.verl_name`: resrl.core's per-token term (losses.plugin_token_losses),
    aggregated by veRL's agg_loss over its global batch (as veRL's own losses are)."""
    def compute_policy_loss(old_log_prob: Tensor, log_prob: Tensor, advantages: Tensor, response_mask: Tensor,
                            loss_agg_mode: str = "token-mean", config=None, rollout_is_weights: Tensor | None = None):
        if config is None:
            raise ValueError(f"policy loss {entry.verl_name!r} needs veRL's actor config")
        low = config.clip_ratio_low if config.clip_ratio_low is not None else config.clip_ratio
        high = config.clip_ratio_high if config.clip_ratio_high is not None else config.clip_ratio
        pg_losses, metrics = plugin_token_losses(entry.name, old_log_prob, log_prob, advantages, response_mask,
                                                 low, high, rollout_is_weights)
        pg_loss = core_algos.agg_loss(loss_mat=pg_losses, loss_mask=response_mask, loss_agg_mode=loss_agg_mode,
                                      **config.global_batch_info)
        return pg_loss, metrics

    compute_policy_loss.__name__ = compute_policy_loss.__qualname__ = f"compute_policy_loss_{entry.verl_name}"
    compute_policy_loss.__doc__ = f"{entry.name}: resrl.core.loss's term, veRL's aggregation."
    return compute_policy_loss


def _register_losses() -> None:
    """The losses of the core registry veRL lacks (losses.verl_losses, kind "plugin"), unless veRL has the name."""
    taken = getattr(core_algos, "POLICY_LOSS_REGISTRY", {})
    for entry in verl_losses().values():
        if entry.kind == "plugin" and entry.verl_name not in taken:
            register_policy_loss(entry.verl_name)(_make_policy_loss(entry))


@register_adv_est("resrl")
def compute_resrl_advantage(token_level_rewards: Tensor, response_mask: Tensor, index=None, config=None,
                            resrl_multiplier: Tensor | None = None, resrl_positive: Tensor | None = None,
                            **kwargs):
    """ResRL: Ã = m · Â, Â = resrl.core GRPO advantage, m the rank-computed per-token multiplier."""
    r = sequence_rewards(token_level_rewards, response_mask)
    gid = group_ids(index, r.device)
    scale = "group" if (config is None or bool(config.get("norm_adv_by_std_in_grpo", True))) else "none"
    adv = A.grpo_advantages(r, gid, float(_option(config, "std_eps", 1e-6)), scale)
    if resrl_multiplier is None and _PENDING.get() is not None:
        resrl_multiplier, resrl_positive = _PENDING.get()
    if resrl_multiplier is None:
        raise ValueError(
            "adv_estimator 'resrl' needs the per-token weights of the old-log-prob pass: run veRL with "
            "trainer.v1.trainer_mode=resrl (the trainer the resrl plugin registers), which computes them on "
            "each rank and hands them to this estimator")
    B, T = response_mask.shape
    if resrl_multiplier.dim() != 2 or resrl_multiplier.shape[0] != B or resrl_multiplier.shape[1] > T:
        raise ValueError(f"resrl_multiplier must be (B, <= T) with (B, T) = {(B, T)}, "
                         f"got {tuple(resrl_multiplier.shape)}")
    if resrl_multiplier.shape[1] < T:  # the rank's longest response was shorter than veRL's padding
        resrl_multiplier = torch.nn.functional.pad(resrl_multiplier, (0, T - resrl_multiplier.shape[1]))
    token_adv = apply_multiplier(adv, resrl_multiplier, resrl_positive) * response_mask.float()
    return token_adv, token_adv


_register_catalog()
_register_losses()
