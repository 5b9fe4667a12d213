"""Random batches for the core tests: interleaved groups, variable lengths, any padding side."""

from __future__ import annotations

import torch

from resrl.core import grpo_advantages


def random_batch(seed: int, *, num_groups=3, group_size=4, T=24, d=16, padding="mixed",
                 structured=True, dtype=torch.float32, min_len=2):
    """Returns hidden (B,T,d), mask (B,T) bool, adv (B,), groups (B,) int64 (shuffled, arbitrary ids),
    rewards (B,). Every group gets at least one correct and one wrong response."""
    gen = torch.Generator().manual_seed(seed)
    B = num_groups * group_size
    ids = torch.randperm(1000, generator=gen)[:num_groups] * 7 + 3            # arbitrary group ids
    groups = ids.repeat_interleave(group_size)
    rewards = (torch.rand(B, generator=gen) < 0.5).float()
    rewards[::group_size] = 1.0
    rewards[1::group_size] = 0.0
    lengths = torch.randint(min_len, T + 1, (B,), generator=gen)
    mask = torch.zeros(B, T, dtype=torch.bool)
    for i in range(B):
        L = int(lengths[i])
        side = padding if padding != "mixed" else ["left", "right", "inner"][int(torch.randint(3, (1,), generator=gen))]
        if side == "right":
            mask[i, :L] = True
        elif side == "left":
            mask[i, T - L:] = True
        else:  # inner: valid tokens scattered
            mask[i, torch.randperm(T, generator=gen)[:L]] = True
    if structured:
        # states near a low-dimensional subspace + noise: a meaningful positive subspace
        basis = torch.randn(8, d, generator=gen)
        coef = torch.randn(B, T, 8, generator=gen) * torch.linspace(3, 0.3, 8)
        hidden = coef @ basis + 0.3 * torch.randn(B, T, d, generator=gen)
    else:
        hidden = torch.randn(B, T, d, generator=gen)
    hidden = hidden * 2.0 + 0.5
    perm = torch.randperm(B, generator=gen)                                   # interleave groups
    hidden, mask, groups, rewards = hidden[perm], mask[perm], groups[perm], rewards[perm]
    adv = grpo_advantages(rewards, groups)
    return hidden.to(dtype), mask, adv, groups, rewards
