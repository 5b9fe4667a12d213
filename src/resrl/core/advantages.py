"""Sequence-level advantages of the baselines (spec §1, §3, §4) and DAPO's reward-side pieces.

Every function is pure and works on whole batches: `(B,)` rewards plus `(B,)` group ids in any
order (groups may be interleaved). Correctness of a response, where a baseline needs it, is
`reward > correct_threshold` (0 by default: right for 0/1 and ±1 rewards).
"""

from __future__ import annotations

import torch
from torch import Tensor

SCALE_MODES = ("group", "batch", "none")


def _dense_groups(group_index: Tensor) -> tuple[Tensor, int]:
    _, gid = torch.unique(group_index, return_inverse=True)
    return gid, (int(gid.max()) + 1 if gid.numel() else 0)


def group_mean_std(values: Tensor, group_index: Tensor) -> tuple[Tensor, Tensor]:
    """Per-row mean and (unbiased, as torch.std / TRL / veRL) std of its group. (B,), (B,) -> (B,), (B,).

    A group of size 1 has std 0.
    """
    if values.shape != group_index.shape or values.dim() != 1:
        raise ValueError(f"values and group_index must both be (B,), got {tuple(values.shape)} and "
                         f"{tuple(group_index.shape)}")
    v = values.to(torch.float64)
    gid, G = _dense_groups(group_index)
    count = torch.bincount(gid, minlength=G).to(torch.float64)
    mean = torch.zeros(G, dtype=torch.float64, device=v.device).index_add_(0, gid, v) / count
    dev2 = torch.zeros(G, dtype=torch.float64, device=v.device).index_add_(0, gid, (v - mean[gid]) ** 2)
    std = torch.sqrt(dev2 / (count - 1).clamp(min=1))
    std = torch.where(count > 1, std, torch.zeros_like(std))
    return mean[gid].to(values.dtype), std[gid].to(values.dtype)


def grpo_advantages(rewards: Tensor, group_index: Tensor, eps: float = 1e-6, scale: str = "group") -> Tensor:
    """GRPO: Â_i = (r_i − mean_group(r)) / (std + eps). (B,) -> (B,) float32.

    scale: "group" (std of the group, the paper's), "batch" (std of the whole batch, as TRL's
    scale_rewards="batch"), "none" (no division, Dr.GRPO)."""
    if scale not in SCALE_MODES:
        raise ValueError(f"scale_rewards must be one of {SCALE_MODES}, got {scale!r}")
    r = rewards.float()
    mean, std = group_mean_std(r, group_index)
    centred = r - mean
    if scale == "group":
        denom = std + eps
    elif scale == "batch":
        denom = (r.std() if r.numel() > 1 else torch.zeros((), device=r.device)) + eps
    else:
        return centred
    # a zero spread means every centred reward is 0: keep 0 rather than 0/0 when eps = 0
    return torch.where(denom > 0, centred / denom.clamp(min=torch.finfo(torch.float32).tiny), torch.zeros_like(centred))


def drgrpo_advantages(rewards: Tensor, group_index: Tensor) -> Tensor:
    """Dr.GRPO: r_i − mean_group(r), no std normalisation. (B,) -> (B,)."""
    return grpo_advantages(rewards, group_index, scale="none")


def psr_advantages(rewards: Tensor, correct_threshold: float = 0.0) -> Tensor:
    """PSR (positive samples only): A = +1 if correct, else 0. (B,) -> (B,)."""
    return (rewards > correct_threshold).float()


def nsr_advantages(rewards: Tensor, correct_threshold: float = 0.0) -> Tensor:
    """NSR (negative samples only): A = −1 if incorrect, else 0. (B,) -> (B,)."""
    return -(rewards <= correct_threshold).float()


def wreinforce_advantages(rewards: Tensor, lam: float = 0.1, correct_threshold: float = 0.0) -> Tensor:
    """W-REINFORCE: A = +λ if correct, −1 otherwise, no baseline. (B,) -> (B,)."""
    correct = rewards > correct_threshold
    return torch.where(correct, torch.full_like(rewards, lam, dtype=torch.float32),
                       torch.full_like(rewards, -1.0, dtype=torch.float32))


def _binomial_ratio(a: Tensor, b: Tensor, k: int) -> Tensor:
    """C(a, k) / C(b, k) = Π_{j=0}^{k−1} (a − j) / (b − j) elementwise, float64 (0 when a < k; b ≥ k)."""
    j = torch.arange(k, dtype=torch.float64, device=a.device)
    num = (a.to(torch.float64)[:, None] - j).clamp(min=0.0)
    return (num / (b.to(torch.float64)[:, None] - j)).prod(dim=1)


def passk_advantages(rewards: Tensor, group_index: Tensor, k: int, correct_threshold: float = 0.0) -> Tensor:
    """Analytic Pass@k advantage (Chen et al. 2025, "Pass@k Training for Adaptively Balancing
    Exploration and Exploitation of Large Reasoning Models", arXiv 2508.10751, §3 "analytical
    derivation"). (B,) rewards, (B,) group ids -> (B,) float32.

    The group of N responses (N_neg incorrect, correct = reward > correct_threshold) is scored as
    if every k-subset were one Pass@k sample; in closed form:

        R̄      = 1 − C(N_neg, k) / C(N, k)                        mean Pass@k reward of the group
        σ       = sqrt(R̄ (1 − R̄))                                its std (binary rewards)
        Â_pos   = (1 − R̄) / σ                                     every subset holding it passes
        Â_neg   = (1 − R̄ − C(N_neg − 1, k − 1) / C(N − 1, k − 1)) / σ

    σ = 0 (every response correct, every one wrong, or N_neg < k so every subset passes) gives 0.
    k = 1 is GRPO with the population std. Needs k ≤ N for every group (ValueError otherwise).
    veRL's `grpo_passk` is a different estimator (arXiv 2503.19595): only the best response of a
    group gets r_max − r_second_max (÷ std), the others 0.
    """
    if not (isinstance(k, int) and not isinstance(k, bool) and k >= 1):
        raise ValueError(f"algorithm.passk_k must be an int >= 1, got {k!r}")
    gid, G = _dense_groups(group_index)
    correct = rewards > correct_threshold
    n = torch.bincount(gid, minlength=G).to(torch.float64)
    n_neg = torch.bincount(gid[~correct], minlength=G).to(torch.float64)
    if G and int(n.min()) < k:
        raise ValueError(f"algorithm.passk_k = {k} exceeds the size of a group ({int(n.min())} responses): "
                         "every group needs at least k responses")
    mean = 1.0 - _binomial_ratio(n_neg, n, k)                                   # R̄ (G,)
    std = torch.sqrt((mean * (1.0 - mean)).clamp(min=0.0))
    miss = _binomial_ratio(n_neg - 1.0, n - 1.0, k - 1) if k > 1 else torch.ones_like(n)  # P(rest of subset all wrong)
    adv_pos = (1.0 - mean) / std.clamp(min=1e-300)
    adv_neg = (1.0 - mean - miss) / std.clamp(min=1e-300)
    adv = torch.where(correct, adv_pos[gid], adv_neg[gid])
    return torch.where(std[gid] > 0, adv, torch.zeros_like(adv)).float()


def dynamic_sampling_mask(rewards: Tensor, group_index: Tensor) -> Tensor:
    """DAPO dynamic sampling: keep the rows of groups whose rewards are not all equal. (B,) -> (B,) bool.
    NaN rewards (unscorable rows) take no part in the comparison: a group is kept when its scored rows differ."""
    gid, G = _dense_groups(group_index)
    r = rewards.float()
    big = torch.finfo(torch.float32).max
    scored = ~torch.isnan(r)
    rmax = torch.full((G,), -big, device=r.device).scatter_reduce(0, gid, torch.where(scored, r, -big), "amax")
    rmin = torch.full((G,), big, device=r.device).scatter_reduce(0, gid, torch.where(scored, r, big), "amin")
    return (rmax > rmin)[gid]


def overlong_penalty(lengths: Tensor, max_length: int, buffer_length: int, penalty_factor: float = 1.0) -> Tensor:
    """DAPO overlong reward shaping (soft punishment), added to the reward. (B,) -> (B,) <= 0.

    0 for L <= L_max − L_buffer, then falls linearly to −penalty_factor at L_max (and stays there)."""
    if buffer_length <= 0 or buffer_length > max_length:
        raise ValueError(f"overlong buffer_length must be in [1, max_length={max_length}], got {buffer_length}")
    over = (lengths.float() - (max_length - buffer_length)).clamp(min=0.0)
    return -(over / buffer_length).clamp(max=1.0) * penalty_factor


def length_scaled_rewards(rewards: Tensor, lengths: Tensor, start: int, max_length: int, min_scale: float) -> Tensor:
    """Spec §3: positive rewards × s(L), s = 1 for L <= start, linear down to min_scale at max_length
    (and min_scale beyond). Non-positive rewards unchanged. (B,), (B,) -> (B,)."""
    if not 0 <= start < max_length:
        raise ValueError(f"length scaling needs 0 <= start ({start}) < max_length ({max_length})")
    frac = ((lengths.float() - start) / (max_length - start)).clamp(0.0, 1.0)
    s = 1.0 - (1.0 - min_scale) * frac
    r = rewards.float()
    return torch.where(r > 0, r * s, r)
