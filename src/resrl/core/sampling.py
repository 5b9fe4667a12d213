"""Boundary-aware sampling of positive tokens (spec §2 step 3), all groups of a batch at once."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from .resrl_config import ResRLConfig

_HASH_PRIME = 2147483647  # 2^31 − 1, keeps every intermediate product inside int64


def mix_hash(seed: int, a: Tensor, b: Tensor) -> Tensor:
    """Deterministic pseudo-random int64 keys in [1, 2^31) from (seed, a, b); a, b int64 >= 0."""
    p = _HASH_PRIME
    x = torch.full_like(a, (seed * 2654435761 + 12345) % p)
    for v in (a, b):
        x = (x * 48271 + v % p) % p
        x = x ^ (x >> 13)
        x = (x * 69621) % p
        x = x ^ (x >> 11)
    x = (x * 48271) % p
    return x + 1


@dataclass
class TokenLayout:
    """The valid response tokens of a batch, flattened in row-major order.

    gid (B,) dense group ids in [0, G); b, t, flat (= b·T + t), group, t_valid (position among the
    response's valid tokens) and from_end (0 = its last valid token) are (N,) over valid tokens."""

    gid: Tensor
    num_groups: int
    b: Tensor
    t: Tensor
    flat: Tensor
    group: Tensor
    t_valid: Tensor
    from_end: Tensor


def token_layout(mask: Tensor, group_index: Tensor) -> TokenLayout:
    """mask (B, T) bool, group_index (B,) any ids -> TokenLayout."""
    B, T = mask.shape
    _, gid = torch.unique(group_index, return_inverse=True)
    b, t = mask.nonzero(as_tuple=True)
    t_valid = (torch.cumsum(mask, dim=1) - 1)[b, t]
    from_end = mask.sum(dim=1)[b] - 1 - t_valid
    return TokenLayout(gid, int(gid.max()) + 1 if B else 0, b, t, b * T + t, gid[b], t_valid, from_end)


def sample_positive_tokens(layout: TokenLayout, is_pos: Tensor, candidates: Tensor, cfg: ResRLConfig) -> Tensor:
    """Boundary-aware sampling of positive tokens (spec §2 step 3), all groups at once.

    Every positive response keeps its first and last b tokens, b = min(boundary_tokens,
    M_max // (2 · #positive responses of its group)) so that they always fit the budget; the other
    ("middle") tokens get a pseudo-random key from (seed, response rank in group, position) and the
    M_max − (#boundary) smallest keys are kept: a uniform subsample without replacement that
    depends neither on padding nor on where the groups sit in the batch.
    is_pos (B,) bool; candidates (N,) bool over the layout's tokens (the positive tokens to sample
    from). Returns the kept tokens' indices into the layout, sorted by (group, batch order).
    """
    G = layout.num_groups
    cand = candidates.nonzero(as_tuple=True)[0]
    group, t_valid, from_end = layout.group[cand], layout.t_valid[cand], layout.from_end[cand]
    pos_resp_per_group = torch.bincount(layout.gid[is_pos], minlength=G).clamp(min=1)
    b_eff = torch.clamp(cfg.max_pos_tokens // (2 * pos_resp_per_group[group]), max=cfg.boundary_tokens)
    boundary = (t_valid < b_eff) | (from_end < b_eff)
    response_rank = rank_in_group(layout.gid, G)[layout.b[cand]]
    key = torch.where(boundary, torch.zeros_like(t_valid), mix_hash(cfg.seed, response_rank, t_valid))
    order = torch.argsort(group * (1 << 32) + key, stable=True)        # by group, then key
    g_sorted = group[order]
    counts = torch.bincount(g_sorted, minlength=G)
    starts = torch.cumsum(counts, 0) - counts
    rank = torch.arange(order.numel(), device=order.device) - starts[g_sorted]
    keep = order[rank < cfg.max_pos_tokens]
    # re-sort the kept tokens by (group, batch order) so that their layout is canonical
    keep = keep[torch.argsort(group[keep] * (cand.numel() + 1) + keep, stable=True)]
    return cand[keep]


def positive_token_sample_mask(response_mask: Tensor, advantages: Tensor, group_index: Tensor,
                               config: ResRLConfig | None = None) -> Tensor:
    """The positive tokens that step 3 keeps for the subspace, as a (B, T) bool mask.

    Same selection as `resrl_token_advantages` (for inspection and tests): response_mask (B, T),
    advantages (B,), group_index (B,) -> (B, T) bool, True on the sampled positive tokens.
    """
    cfg = config if config is not None else ResRLConfig()
    mask = response_mask.bool()
    layout = token_layout(mask, group_index)
    is_pos = advantages > 0
    kept = sample_positive_tokens(layout, is_pos, is_pos[layout.b], cfg)
    out = torch.zeros(mask.numel(), dtype=torch.bool, device=mask.device)
    out[layout.flat[kept]] = True
    return out.view(mask.shape)


def rank_in_group(gid: Tensor, G: int) -> Tensor:
    """Rank of each response inside its group, in batch order. (B,) -> (B,)."""
    order_b = torch.argsort(gid, stable=True)
    counts = torch.bincount(gid, minlength=G)
    rank = torch.empty_like(gid)
    rank[order_b] = torch.arange(gid.numel(), device=gid.device) - (torch.cumsum(counts, 0) - counts)[gid[order_b]]
    return rank
