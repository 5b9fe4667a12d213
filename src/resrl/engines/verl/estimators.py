"""veRL advantage estimators `resrl`, `w_reinforce`, `psr`, `nsr`, registered with veRL's own
`register_adv_est` when this module is imported (the `verl.plugins` entry point does it at
`import verl`). Each one calls `resrl.core`; none holds a second copy of the math.

veRL calls an estimator as `fn(token_level_rewards, response_mask, index=uids, config=algorithm)`
(`verl.trainer.ppo.ray_trainer.compute_advantage`) and expects `(advantages, returns)`, both
(B, T). The sequence reward is the sum of `token_level_rewards` over the response (veRL's
outcome-reward convention: the score sits on the last token). Options come from the
`algorithm` config with `+algorithm.resrl.<name>=...` Hydra overrides:

    correct_threshold  (0.0)  a response is correct when reward > this      (psr, nsr, w_reinforce)
    wreinforce_lambda  (0.1)  λ of W-REINFORCE
    std_eps            (1e-6) GRPO's eps                                    (resrl)
    (`algorithm.norm_adv_by_std_in_grpo=False` gives resrl Dr.GRPO's unscaled Â, as for veRL's grpo)

`resrl` multiplies GRPO's Â by the per-token multiplier the old-log-prob pass computed on the
rank (`weights.py`, `worker.py`), passed as `resrl_multiplier` (B, T) with `resrl_positive` (B,)
or, in a veRL job, made pending by the `resrl` trainer (`trainer.py`, `pending_multiplier`).
Without it the estimator raises: it never silently falls back to plain GRPO.
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar

import numpy as np
import torch
from torch import Tensor
from verl.trainer.ppo.core_algos import register_adv_est

from ...core import advantages as A
from .weights import apply_multiplier

ESTIMATORS = ("resrl", "w_reinforce", "psr", "nsr")

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


def sequence_rewards(token_level_rewards: Tensor, response_mask: Tensor) -> Tensor:
    """(B, T) token rewards -> (B,) float32 sequence rewards (masked sum, as veRL's grpo)."""
    return (token_level_rewards * response_mask).sum(dim=-1).float()


def group_ids(index, device=None) -> Tensor:
    """veRL's `uid` array (any hashable ids, numpy object array or list) -> (B,) int64 dense ids."""
    if index is None:
        raise ValueError("this estimator needs the group ids (veRL's non_tensor_batch['uid'])")
    if isinstance(index, Tensor):
        return index.to(device=device, dtype=torch.long)
    _, inv = np.unique(np.asarray([str(u) for u in index], dtype=object).astype(str), return_inverse=True)
    return torch.as_tensor(inv.reshape(-1), dtype=torch.long, device=device)


def _broadcast(seq_adv: Tensor, response_mask: Tensor) -> tuple[Tensor, Tensor]:
    adv = seq_adv.float()[:, None] * response_mask.float()
    return adv, adv


@register_adv_est("psr")
def compute_psr_advantage(token_level_rewards: Tensor, response_mask: Tensor, index=None, config=None, **kwargs):
    """PSR: A = +1 on correct responses, 0 otherwise (resrl.core.advantages.psr_advantages)."""
    r = sequence_rewards(token_level_rewards, response_mask)
    return _broadcast(A.psr_advantages(r, float(_option(config, "correct_threshold", 0.0))), response_mask)


@register_adv_est("nsr")
def compute_nsr_advantage(token_level_rewards: Tensor, response_mask: Tensor, index=None, config=None, **kwargs):
    """NSR: A = −1 on incorrect responses, 0 otherwise (resrl.core.advantages.nsr_advantages)."""
    r = sequence_rewards(token_level_rewards, response_mask)
    return _broadcast(A.nsr_advantages(r, float(_option(config, "correct_threshold", 0.0))), response_mask)


@register_adv_est("w_reinforce")
def compute_w_reinforce_advantage(token_level_rewards: Tensor, response_mask: Tensor, index=None, config=None,
                                  **kwargs):
    """W-REINFORCE: +λ on correct, −1 on incorrect, no baseline (resrl.core.advantages)."""
    r = sequence_rewards(token_level_rewards, response_mask)
    lam = float(_option(config, "wreinforce_lambda", 0.1))
    thr = float(_option(config, "correct_threshold", 0.0))
    return _broadcast(A.wreinforce_advantages(r, lam, thr), response_mask)


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
