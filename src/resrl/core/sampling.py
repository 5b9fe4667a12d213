"""Boundary-aware sampling of positive tokens (spec §2 step 3), all groups of a batch at once."""

from __future__ import annotations

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


def sample_positive_tokens(tok_idx, tok_group, t_valid, from_end, rank_in_group, pos_resp_per_group,
                            cfg: ResRLConfig):
    """Boundary-aware sampling of positive tokens (spec §2 step 3), all groups at once.

    Every positive response keeps its first and last b tokens, b = min(boundary_tokens,
    M_max // (2 · #positive responses of its group)) so that they always fit the budget; the other
    ("middle") tokens get a pseudo-random key from (seed, response rank in group, position) and the
    M_max − (#boundary) smallest keys are kept: a uniform subsample without replacement that
    depends neither on padding nor on where the groups sit in the batch.
    Inputs are (N+,) over valid positive tokens of reweighted groups; returns the kept subset's
    positions into those inputs, sorted by group.
    """
    b_eff = torch.clamp(cfg.max_pos_tokens // (2 * pos_resp_per_group[tok_group]), max=cfg.boundary_tokens)
    boundary = (t_valid < b_eff) | (from_end < b_eff)
    key = torch.where(boundary, torch.zeros_like(t_valid), mix_hash(cfg.seed, rank_in_group, t_valid))
    order = torch.argsort(tok_group * (1 << 32) + key, stable=True)   # by group, then key
    g_sorted = tok_group[order]
    counts = torch.bincount(g_sorted, minlength=int(pos_resp_per_group.numel()))
    starts = torch.cumsum(counts, 0) - counts
    rank = torch.arange(order.numel(), device=order.device) - starts[g_sorted]
    keep = order[rank < cfg.max_pos_tokens]
    # re-sort the kept tokens by (group, original order) so that their layout is canonical
    keep = keep[torch.argsort(tok_group[keep] * (tok_idx.numel() + 1) + keep, stable=True)]
    return keep


def positive_token_sample_mask(response_mask: Tensor, advantages: Tensor, group_index: Tensor,
                               config: ResRLConfig | None = None) -> Tensor:
    """The positive tokens that step 3 keeps for the subspace, as a (B, T) bool mask.

    Same selection as `resrl_token_advantages` (for inspection and tests): response_mask (B, T),
    advantages (B,), group_index (B,) -> (B, T) bool, True on the sampled positive tokens.
    """
    cfg = config if config is not None else ResRLConfig()
    mask = response_mask.bool()
    B, T = mask.shape
    is_pos = advantages > 0
    _, gid = torch.unique(group_index, return_inverse=True)
    G = int(gid.max()) + 1 if B else 0
    lengths = mask.sum(dim=1)
    valid_b, valid_t = mask.nonzero(as_tuple=True)
    t_valid = (torch.cumsum(mask, dim=1) - 1)[valid_b, valid_t]
    from_end = lengths[valid_b] - 1 - t_valid
    pos_sel = is_pos[valid_b].nonzero(as_tuple=True)[0]
    keep = sample_positive_tokens(
        (valid_b * T + valid_t)[pos_sel], gid[valid_b][pos_sel], t_valid[pos_sel], from_end[pos_sel],
        rank_in_group(gid, G)[valid_b][pos_sel], torch.bincount(gid[is_pos], minlength=G).clamp(min=1), cfg,
    )
    out = torch.zeros(B * T, dtype=torch.bool, device=mask.device)
    out[(valid_b * T + valid_t)[pos_sel][keep]] = True
    return out.view(B, T)


def rank_in_group(gid: Tensor, G: int) -> Tensor:
    """Rank of each response inside its group, in batch order. (B,) -> (B,)."""
    order_b = torch.argsort(gid, stable=True)
    counts = torch.bincount(gid, minlength=G)
    rank = torch.empty_like(gid)
    rank[order_b] = torch.arange(gid.numel(), device=gid.device) - (torch.cumsum(counts, 0) - counts)[gid[order_b]]
    return rank
