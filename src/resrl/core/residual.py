"""ResRL token-wise advantages (spec §2, the paper's Algorithm 1), for all groups of a batch at once.

For each prompt group with at least one positive response (Â_i > 0):

    X+   = LN(h) − μ+ over (at most M_max, boundary-aware) sampled positive tokens     (step 3-4)
    V_k  = top-k right singular vectors of X+,  k = min(rank, M − 1, d)                  (step 5)
    R    = (‖x‖² − ‖V_kᵀ x‖²) / d      for every valid negative token x = LN(h) − μ+     (step 6)
    ω    = ξ + (1 − ξ) · clamp((R − Q(D, α)) / (Q(D, β) − Q(D, α) + ε), 0, 1)            (step 7)
    Ã    = λ_pos · Â  on positives,   ω · Â  on negatives,   0 on padding                (step 8)

How it is made fast: groups are sorted by size and laid out as padded
`(Gc, M_pad, d)` (positives) and `(Gc, N_pad, d)` (negatives) blocks, processed together in chunks
bounded by `chunk_mb`; the residual is ‖x‖² − ‖V_kᵀx‖², computed for negatives from per-token
statistics and one product with [V_k | μ+] (neither a layer-normed copy nor a `(B, T, d)` residual
tensor exists); layer-norm statistics are taken only over gathered valid tokens; quantiles come
from one batched sort; the randomized range finder uses one power iteration and a float64
eigen-decomposition of a (q, q) Gram in place of a (q, d) SVD. Host synchronisations: a handful
per batch (sizes of the gathered sets), never one per sample.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from .linalg import compute_dtype, gather_centred, pad_by_group, quantiles_per_row, top_right_singular_vectors
from .resrl_config import ResRLConfig
from .sampling import sample_positive_tokens, token_layout

# --------------------------------------------------------------------------------------------
# input checks
# --------------------------------------------------------------------------------------------

def _check_inputs(hidden, response_mask, advantages, group_index, truncated):
    if not isinstance(hidden, Tensor) or hidden.dim() != 3 or not hidden.is_floating_point():
        raise ValueError(f"hidden must be a float tensor of shape (B, T, d), got "
                         f"{getattr(hidden, 'shape', type(hidden))} {getattr(hidden, 'dtype', '')}")
    B, T, d = hidden.shape
    if d < 1:
        raise ValueError("hidden must have d >= 1 features")
    if not isinstance(response_mask, Tensor) or tuple(response_mask.shape) != (B, T):
        raise ValueError(f"response_mask must have shape (B, T) = {(B, T)} like hidden, got "
                         f"{tuple(getattr(response_mask, 'shape', ()))}")
    if response_mask.dtype != torch.bool:
        if response_mask.is_floating_point() or response_mask.is_complex():
            ok = ((response_mask == 0) | (response_mask == 1)).all()
        else:
            ok = ((response_mask == 0) | (response_mask == 1)).all()
        if not bool(ok):
            raise ValueError("response_mask must be bool or contain only 0/1")
        response_mask = response_mask != 0
    if not isinstance(advantages, Tensor) or tuple(advantages.shape) != (B,):
        raise ValueError(f"advantages must have shape (B,) = ({B},), got {tuple(getattr(advantages, 'shape', ()))}")
    if not bool(torch.isfinite(advantages).all()):
        raise ValueError("advantages contain NaN or inf")
    if not isinstance(group_index, Tensor) or tuple(group_index.shape) != (B,):
        raise ValueError(f"group_index must have shape (B,) = ({B},), got {tuple(getattr(group_index, 'shape', ()))}")
    if group_index.is_floating_point() or group_index.dtype == torch.bool:
        raise ValueError(f"group_index must be an integer tensor, got {group_index.dtype}")
    if truncated is not None:
        if not isinstance(truncated, Tensor) or tuple(truncated.shape) != (B,):
            raise ValueError(f"truncated must have shape (B,) = ({B},), got {tuple(getattr(truncated, 'shape', ()))}")
        truncated = truncated.to(device=hidden.device).bool()
    for name, t in (("response_mask", response_mask), ("advantages", advantages), ("group_index", group_index)):
        if t.device != hidden.device:
            raise ValueError(f"{name} is on {t.device} but hidden is on {hidden.device}")
    return response_mask, truncated


def _check_finite_valid(hidden: Tensor, mask: Tensor) -> None:
    """ValueError if a valid token has a NaN/inf hidden state (one fused pass, no float32 copy)."""
    row_sums = torch.sum(hidden, dim=-1, dtype=torch.float32)  # (B, T); NaN/inf propagate
    bad = mask & ~torch.isfinite(row_sums)
    if bool(bad.any()):
        b, t = (int(v) for v in bad.nonzero()[0])
        raise ValueError(
            f"hidden contains NaN or inf at a valid response token (row {b}, position {t}); "
            f"{int(bad.sum())} valid token(s) affected"
        )


# --------------------------------------------------------------------------------------------
# the algorithm
# --------------------------------------------------------------------------------------------

def _reweighted_groups(tok_group: Tensor, tok_pos: Tensor, num_groups: int, min_pos_tokens: int = 1) -> Tensor:
    """(G,) bool: a group is reweighted when it has at least `min_pos_tokens` valid positive tokens
    and a valid negative one.

    tok_group: (N,) dense group id of each valid token; tok_pos: (N,) bool, the token's response
    is positive. The one definition the weights and `resrl_residual_details` share."""
    pos = torch.bincount(tok_group[tok_pos], minlength=num_groups)
    neg = torch.bincount(tok_group[~tok_pos], minlength=num_groups)
    return (pos >= min_pos_tokens) & (neg > 0)


def _batch_groups(hidden, response_mask, advantages, group_index, config, truncated, positive=None):
    """What both `resrl_token_advantages` and `resrl_residual_details` start from: the checked
    config and inputs, the split P = {Â > 0} (or `positive` (B,) bool when given), the valid-token
    layout and the reweighted groups.
    Returns (cfg, mask (B, T) bool, truncated (B,) bool | None, adv (B,) float32, is_pos (B,),
    layout (TokenLayout), tok_pos (N,) bool per valid token, active (G,) bool)."""
    cfg = config if config is not None else ResRLConfig()
    cfg.validate()
    mask, truncated = _check_inputs(hidden, response_mask, advantages, group_index, truncated)
    adv = advantages.to(device=hidden.device, dtype=torch.float32)
    _check_finite_valid(hidden, mask)
    if positive is None:
        if cfg.positive == "reward":
            raise ValueError("ResRLConfig.positive = 'reward' needs the rewards: pass positive=(rewards > 0), as "
                             "compute_token_advantages does")
        is_pos = adv > 0                                               # (B,)  P = {Â > 0}
    else:
        if not isinstance(positive, Tensor) or tuple(positive.shape) != (hidden.shape[0],):
            raise ValueError(f"positive must be a (B,) bool tensor, got {tuple(getattr(positive, 'shape', ()))}")
        is_pos = positive.to(device=hidden.device).bool()
    layout = token_layout(mask, group_index)                           # valid tokens, dense group ids
    tok_pos = is_pos[layout.b]
    active = _reweighted_groups(layout.group, tok_pos, layout.num_groups, cfg.min_pos_tokens)
    return cfg, mask, truncated, adv, is_pos, layout, tok_pos, active


def resrl_token_advantages(
    hidden: Tensor,
    response_mask: Tensor,
    advantages: Tensor,
    group_index: Tensor,
    config: ResRLConfig | None = None,
    truncated: Tensor | None = None,
    positive: Tensor | None = None,
) -> tuple[Tensor, dict[str, float]]:
    """ResRL token advantages Ã (spec §2).

    hidden:        (B, T, d) any float dtype, penultimate-layer states aligned to response tokens
    response_mask: (B, T) bool or 0/1, valid response tokens (any padding side, inner padding ok)
    advantages:    (B,) float, group-normalised sequence advantages Â_i
    group_index:   (B,) int, group ids in any order (groups may be interleaved)
    truncated:     optional (B,) bool, response hit the length limit without EOS
    positive:      optional (B,) bool, the positive responses (default Â > 0; config.positive =
                   "reward" needs it: compute_token_advantages passes rewards > 0)
    Returns token_adv (B, T) float32 (0 on padding) and a dict of python-float statistics.
    """
    cfg, mask, truncated, adv, is_pos, layout, tok_pos, active = _batch_groups(
        hidden, response_mask, advantages, group_index, config, truncated, positive)
    B, T, d = hidden.shape
    device = hidden.device
    G, tok_group = layout.num_groups, layout.group
    omega = torch.ones(B, T, dtype=torch.float32, device=device)       # ω = 1 unless reweighted
    has_pos = torch.bincount(layout.gid[is_pos], minlength=G) > 0

    stats_acc = _StatsAccumulator(device)
    if bool(active.any()):
        _reweight_active_groups(hidden, layout, tok_pos, is_pos, active, cfg, omega, stats_acc)

    if cfg.truncation_guard and truncated is not None:
        # spec §2 step 7: a truncated negative keeps full weight on its last `truncation_tail` tokens
        guard = truncated[layout.b] & ~tok_pos & (layout.from_end < cfg.truncation_tail)
        omega[layout.b[guard], layout.t[guard]] = 1.0

    # step 8
    seq_adv = adv[:, None].expand(B, T)
    token_adv = torch.where(is_pos[:, None], cfg.pos_scale * seq_adv, omega * seq_adv)
    token_adv = torch.where(mask, token_adv, torch.zeros_like(token_adv))

    # ω statistics over the valid negative tokens of reweighted groups (where the method acts)
    neg_in_active = (~tok_pos) & active[tok_group]
    w = omega[layout.b[neg_in_active], layout.t[neg_in_active]]
    stats = stats_acc.finish(w, cfg.min_weight, int(has_pos.sum()), G)
    return token_adv, stats


@dataclass
class ResidualDetails:
    """What ResRL's weights are made of, for inspection (`resrl diagnose`): the same μ+, V_k and R
    that `resrl_token_advantages` computes, for one batch.

    group_of_row  (B,) int64 dense group id of each response (ids of `group_index` in sorted order)
    active        (G,) bool, the group was reweighted (a positive and a valid negative token)
    mean          (G, d) μ+ of the sampled positives' layer-normed states (0 for inactive groups)
    basis         (G, d, k_max) V_k, orthonormal columns; columns beyond the group's effective k are 0
    effective_rank (G,) int64 effective k
    residual      (B, T) R = (‖x‖² − ‖V_kᵀx‖²) / d, x = LN(h) − μ+, of every valid token (positive
                  or negative) of an active group; NaN elsewhere. On negatives it is what the gate sees.
    """

    group_of_row: Tensor
    active: Tensor
    mean: Tensor
    basis: Tensor
    effective_rank: Tensor
    residual: Tensor


def resrl_residual_details(hidden: Tensor, response_mask: Tensor, advantages: Tensor, group_index: Tensor,
                           config: ResRLConfig | None = None, positive: Tensor | None = None) -> ResidualDetails:
    """μ+, V_k per group and the residual energy R of every valid token of the reweighted groups.

    Inputs as `resrl_token_advantages` (hidden (B, T, d), response_mask (B, T), advantages (B,),
    group_index (B,)); the subspaces are exactly those its weights use (same sampling, same SVD).
    Float64 states give float64 results."""
    cfg, _, _, _, is_pos, layout, tok_pos, active = _batch_groups(
        hidden, response_mask, advantages, group_index, config, None, positive)
    B, T, d = hidden.shape
    device = hidden.device
    G, tok_group = layout.num_groups, layout.group
    dtype = compute_dtype(hidden)
    residual = torch.full((B * T,), float("nan"), dtype=dtype, device=device)
    if not bool(active.any()):
        return ResidualDetails(layout.gid, active, torch.zeros(G, d, dtype=dtype, device=device),
                               torch.zeros(G, d, 1, dtype=dtype, device=device),
                               torch.zeros(G, dtype=torch.long, device=device), residual.view(B, T))
    mu, V, eff_k = _fit_positive_subspaces(hidden, layout, tok_pos, is_pos, active, cfg, _StatsAccumulator(device))
    sel = active[tok_group].nonzero(as_tuple=True)[0]
    order = _sorted_by_group_size(layout.flat[sel], tok_group[sel], active)
    for _, _, flat, index, groups in _group_chunks(*order, d, cfg.chunk_mb << 20):
        R, _ = _residual_energy(hidden, flat, index, mu[groups], V[groups], cfg.ln_eps)
        valid = index >= 0
        residual[flat[index[valid]]] = R[valid].to(dtype)
    return ResidualDetails(layout.gid, active, mu, V, eff_k, residual.view(B, T))


class _StatsAccumulator:
    """Collects per-group diagnostics as tensors; one host sync in `finish`."""

    def __init__(self, device):
        self.device = device
        self.eff_rank: list[Tensor] = []
        self.energy: list[Tensor] = []
        self.num_pos: list[Tensor] = []
        self.no_contrast: list[Tensor] = []

    def finish(self, w: Tensor, min_weight: float, groups_with_pos: int, num_groups: int) -> dict[str, float]:
        def cat(xs):
            return torch.cat(xs).float() if xs else torch.zeros(0, device=self.device)

        eff_rank, energy, num_pos, no_contrast = map(cat, (self.eff_rank, self.energy, self.num_pos, self.no_contrast))
        nan = torch.tensor(float("nan"), device=self.device)
        empty = w.numel() == 0
        vals = torch.stack([
            w.mean() if not empty else nan,
            w.min() if not empty else nan,
            w.max() if not empty else nan,
            (w < 1).float().mean() if not empty else nan,
            (w <= min_weight + 1e-6).float().mean() if not empty else nan,
            eff_rank.mean() if eff_rank.numel() else nan,
            energy.mean() if energy.numel() else nan,
            num_pos.mean() if num_pos.numel() else nan,
            no_contrast.sum() if no_contrast.numel() else torch.zeros((), device=self.device),
            torch.tensor(float(w.numel()), device=self.device),
        ]).tolist()
        keys = ["omega_mean", "omega_min", "omega_max", "frac_downweighted", "frac_at_min_weight",
                "effective_rank", "captured_energy", "num_pos_tokens", "groups_no_contrast",
                "num_neg_tokens"]
        stats = dict(zip(keys, vals))
        stats["groups_reweighted"] = float(eff_rank.numel())
        stats["groups_with_pos"] = float(groups_with_pos)
        stats["groups_without_pos"] = float(num_groups - groups_with_pos)
        return stats


def _size_sorted_chunks(counts: list[int], row_bytes: int, budget: int, max_waste: float = 0.3):
    """Split groups, sorted by decreasing count, into consecutive chunks [g0, g1): a chunk pads every
    group to its first (largest) count, so it ends when its padded size would pass `budget` bytes or
    when a group is so much smaller that more than `max_waste` of its padded rows would be empty."""
    chunks, g0 = [], 0
    while g0 < len(counts):
        width = max(counts[g0], 1)
        g1 = g0 + 1
        while (g1 < len(counts) and (g1 + 1 - g0) * width * row_bytes <= budget
               and counts[g1] >= (1.0 - max_waste) * width):
            g1 += 1
        chunks.append((g0, g1))
        g0 = g1
    return chunks


def _sorted_by_group_size(items_flat: Tensor, items_group: Tensor, active: Tensor):
    """Order the reweighted groups by decreasing item count (ties by group id, so the order does not
    depend on batch positions) and the items by that order (stable: batch order kept within a group).
    Returns (items_flat, items_rank (N,), groups in order (Ga,), counts in order as a python list)."""
    G = active.numel()
    counts = torch.bincount(items_group, minlength=G)
    order = torch.argsort(-torch.where(active, counts, torch.full_like(counts, -1)), stable=True)
    Ga = int(active.sum())
    rank_of_group = torch.empty_like(order)
    rank_of_group[order] = torch.arange(G, device=order.device)
    rank = rank_of_group[items_group]
    o = torch.argsort(rank, stable=True)
    return items_flat[o], rank[o], order[:Ga], counts[order[:Ga]].tolist()


def _group_chunks(items_flat, items_rank, groups_in_order, counts: list[int], d: int, budget: int):
    """The items of `_sorted_by_group_size`, chunk by chunk of groups of similar size
    (`_size_sorted_chunks`): yields (g0, g1, flat (n,), index (Gc, N_pad) into flat with −1 on
    padding, groups (Gc,)) for groups [g0, g1) of the order."""
    n0 = 0
    for g0, g1 in _size_sorted_chunks(counts, 2 * d * 4, budget):
        n1 = n0 + sum(counts[g0:g1])
        yield g0, g1, items_flat[n0:n1], pad_by_group(items_rank[n0:n1] - g0, g1 - g0, counts[g0]), \
            groups_in_order[g0:g1]
        n0 = n1


def _reweight_active_groups(hidden, layout, tok_pos, is_pos, active, cfg, omega, stats_acc):
    """Fill ω (B, T) for the negative tokens of every reweighted group (spec §2 steps 3-7).

    Two phases, each over chunks of groups of similar size (little padding): the positives give
    each group its μ+ and V_k (steps 3-5), then the negatives are scored against them (steps 6-7).
    """
    device = hidden.device
    d = hidden.shape[2]
    tok_group = layout.group
    sel = active[tok_group]
    budget = cfg.chunk_mb << 20
    mu, V, eff_k = _fit_positive_subspaces(hidden, layout, tok_pos, is_pos, active, cfg, stats_acc)

    # ---- phase 2: negatives -> residuals -> ω   (steps 6-7)
    neg_sel = (sel & ~tok_pos).nonzero(as_tuple=True)[0]
    neg_flat, neg_rank, neg_groups, neg_counts_h = _sorted_by_group_size(
        layout.flat[neg_sel], tok_group[neg_sel], active)
    for g0, g1, flat, index, groups in _group_chunks(neg_flat, neg_rank, neg_groups, neg_counts_h, d, budget):
        w = _negative_weights(hidden, flat, index, torch.tensor(neg_counts_h[g0:g1], device=device),
                              mu[groups], V[groups], eff_k[groups], cfg, stats_acc)
        valid = index >= 0
        omega.view(-1)[flat[index[valid]]] = w[valid].float()


def _fit_positive_subspaces(hidden, layout, tok_pos, is_pos, active, cfg, stats_acc):
    """Phase 1 (steps 3-5): μ+ (G, d), V_k (G, d, k_max) and effective k (G,) of every reweighted
    group (zeros elsewhere), over chunks of groups of similar size."""
    device = hidden.device
    d = hidden.shape[2]
    G, tok_group = layout.num_groups, layout.group
    sel = active[tok_group]
    budget = cfg.chunk_mb << 20
    kept = sample_positive_tokens(layout, is_pos, sel & tok_pos, cfg)
    pos_flat, pos_rank, pos_groups, pos_counts_h = _sorted_by_group_size(
        layout.flat[kept], tok_group[kept], active)
    eff_k_h = [max(0, min(m - 1, cfg.rank, d)) for m in pos_counts_h]
    k_max = max(max(eff_k_h), 1)
    test_matrix = None
    if cfg.svd == "randomized":  # one Gaussian test matrix for all groups, deterministic in the seed
        gen = torch.Generator(device="cpu").manual_seed(cfg.seed)
        test_matrix = torch.randn(d, k_max + cfg.oversample, generator=gen).to(device)
    dtype = compute_dtype(hidden)
    mu = torch.zeros(G, d, device=device, dtype=dtype)
    V = torch.zeros(G, d, k_max, device=device, dtype=dtype)
    eff_k = torch.zeros(G, dtype=torch.long, device=device)
    for g0, g1, flat, index, groups in _group_chunks(pos_flat, pos_rank, pos_groups, pos_counts_h, d, budget):
        k_chunk = max(max(eff_k_h[g0:g1]), 1)
        eff_k_c = torch.tensor(eff_k_h[g0:g1], device=device)
        mu_c, V_c = _positive_subspace(hidden, flat, index, eff_k_c, k_chunk, cfg, test_matrix, stats_acc)
        mu[groups], V[groups, :, :k_chunk], eff_k[groups] = mu_c, V_c, eff_k_c
    stats_acc.num_pos.append(torch.tensor(pos_counts_h, dtype=torch.float32, device=device))
    return mu, V, eff_k


def _positive_subspace(hidden, pos_flat, pos_index, eff_k, k_max, cfg, test_matrix, stats_acc):
    """μ+ (Gc, d) and V_k (Gc, d, k_max) of a chunk of groups (steps 4-5); columns beyond a group's
    effective k are zero. pos_index (Gc, M_pad) indexes `pos_flat`, −1 on padding."""
    pos_valid = pos_index >= 0                                         # (Gc, M_pad)
    counts = pos_valid.sum(dim=1)
    # step 4: LN on the gathered valid tokens only, centred on the sampled positives' mean
    Xp, var = gather_centred(hidden, pos_flat[pos_index.clamp(min=0)])   # (Gc, M_pad, d)
    Xp.mul_((torch.rsqrt(var + cfg.ln_eps) * pos_valid)[..., None])      # LN(h), zero rows on padding
    mu = Xp.sum(dim=1) / counts.clamp(min=1)[:, None].to(Xp.dtype)    # (Gc, d)  μ+
    Xp.sub_(mu[:, None, :]).mul_(pos_valid[..., None])                 # X+ (zero rows on padding)
    # step 5: V_k with effective k per group
    if cfg.svd == "pca_lowrank":
        V, S = _pca_lowrank_per_group(Xp, counts, eff_k, k_max, cfg)
    else:
        V, S = top_right_singular_vectors(Xp, k_max, cfg.svd, cfg.oversample, cfg.power_iters, test_matrix,
                                          return_values=True)
    col_ok = torch.arange(k_max, device=V.device)[None, :] < eff_k[:, None]   # (Gc, k_max)
    V = V * col_ok[:, None, :]
    # fraction of the positives' energy in the subspace, from the singular values (no extra pass)
    captured = (S.square() * col_ok).sum(dim=1) / torch.linalg.vector_norm(Xp, dim=(1, 2)).square().clamp(min=1e-30)
    stats_acc.eff_rank.append(eff_k)
    stats_acc.energy.append(torch.where(eff_k >= 1, captured, torch.zeros_like(captured)))
    return mu, V


def _pca_lowrank_per_group(Xp: Tensor, counts: Tensor, eff_k: Tensor, k_max: int, cfg: ResRLConfig):
    """svd = "pca_lowrank" (the authors' code, dp_actor.py:403-411): torch.pca_lowrank on each
    group's M valid centred rows with q = k (no oversampling) and niter = power_iters. The global
    RNG is forked and seeded with `seed` before every group, so that a group's subspace depends on
    its own tokens only (not on the batch around it) and the caller's RNG is untouched (the
    authors' call is unseeded). Returns V (Gc, d, k_max), zero beyond a group's k, and the
    singular values S (Gc, k_max)."""
    Gc, _, d = Xp.shape
    V = torch.zeros(Gc, d, k_max, dtype=Xp.dtype, device=Xp.device)
    S = torch.zeros(Gc, k_max, dtype=Xp.dtype, device=Xp.device)
    devices = [Xp.device] if Xp.device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        for g, (m, k) in enumerate(zip(counts.tolist(), eff_k.tolist())):
            if k >= 1:
                torch.manual_seed(cfg.seed)
                _, s, v = torch.pca_lowrank(Xp[g, :m], q=k, center=True, niter=cfg.power_iters)
                V[g, :, :k], S[g, :k] = v[:, :k], s[:k]
    return V, S


def _residual_energy(hidden, flat, index, mu, V, ln_eps):
    """Step 6 for a chunk of groups: R = (‖x‖² − ‖V_kᵀx‖²) / d and ‖x‖² of the tokens `flat[index]`.

    index (Gc, N_pad) indexes `flat` (−1 on padding: values there are meaningless); mu (Gc, d),
    V (Gc, d, k). x = LN(h) − μ+ = s·c − μ+ (c = h − mean(h), s = 1/sqrt(var(h) + eps)) is never
    materialised: R comes from per-token statistics and one product of c with [V | μ+], so
    neither the layer-normed tokens nor a residual tensor exists. Returns R, ‖x‖² (Gc, N_pad)."""
    d = hidden.shape[2]
    c, var = gather_centred(hidden, flat[index.clamp(min=0)])          # (Gc, N_pad, d), (Gc, N_pad)
    s_inv = torch.rsqrt(var + ln_eps)
    P = c @ torch.cat([V, mu[:, :, None]], dim=2)                      # (Gc, N_pad, k+1): cᵀV, cᵀμ
    del c
    mu_V = (mu[:, :, None] * V).sum(dim=1)                             # (Gc, k) μᵀV
    Vx = s_inv[..., None] * P[..., :-1] - mu_V[:, None, :]             # V_kᵀx
    sq = d * var * s_inv.square() - 2.0 * s_inv * P[..., -1] + mu.square().sum(dim=1, keepdim=True)  # ‖x‖²
    R = (sq - Vx.square().sum(dim=-1)).clamp(min=0.0) / d
    return R, sq


def _negative_weights(hidden, neg_flat, neg_index, neg_counts, mu, V, eff_k, cfg, stats_acc):
    """ω of a chunk of groups' negatives (steps 6-7). neg_index (Gc, N_pad) indexes `neg_flat`, −1 on
    padding; mu (Gc, d), V (Gc, d, k), eff_k (Gc,). Returns (Gc, N_pad) float32 (meaningless on padding)."""
    d = hidden.shape[2]
    neg_valid = neg_index >= 0                                         # (Gc, N_pad)
    R, sq = _residual_energy(hidden, neg_flat, neg_index, mu, V, cfg.ln_eps)

    # step 7: gate on the group's pooled negative residuals
    R_for_q = torch.where(neg_valid, R, torch.full_like(R, float("inf")))
    q_low, q_high = quantiles_per_row(R_for_q, neg_counts, (cfg.quantile_low, cfg.quantile_high))
    spread = q_high - q_low
    mean_sq = (sq * neg_valid).sum(dim=1) / neg_counts.clamp(min=1).to(sq.dtype) / d
    no_contrast = spread <= cfg.no_contrast_tol * mean_sq              # (Gc,)
    z = ((R - q_low[:, None]) / (spread[:, None] + cfg.eps)).clamp(0.0, 1.0)
    w = cfg.min_weight + (1.0 - cfg.min_weight) * z
    flat_w = cfg.min_weight if cfg.no_contrast_weight == "min" else (cfg.min_weight + 1.0) / 2.0
    w = torch.where(no_contrast[:, None], torch.full_like(w, flat_w), w)
    w = torch.where((eff_k < 1)[:, None], torch.ones_like(w), w)      # no subspace: plain GRPO weight
    stats_acc.no_contrast.append((no_contrast & (eff_k >= 1)).long())
    return w
