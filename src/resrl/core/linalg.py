"""Linear-algebra building blocks of ResRL's weights: layer-norm statistics of gathered states,
the top-k right singular vectors (randomized or exact), per-row quantiles, padded group layouts.
Pure functions; shapes at every boundary."""

from __future__ import annotations

import torch
from torch import Tensor


def layer_norm_no_affine(h: Tensor, eps: float) -> Tensor:
    """LN(h) = (h − mean(h)) / sqrt(var(h) + eps) over the last dim, float32. (..., d) -> (..., d)."""
    return torch.nn.functional.layer_norm(h.float(), h.shape[-1:], eps=eps)


def compute_dtype(hidden: Tensor) -> torch.dtype:
    """float32 at least (spec §2 step 4); float64 states are kept in float64."""
    return torch.float64 if hidden.dtype == torch.float64 else torch.float32


def gather_centred(hidden: Tensor, rows: Tensor) -> tuple[Tensor, Tensor]:
    """Gather token states in the compute dtype (float64 for float64 states, float32 otherwise),
    centred in place on their own mean, and their variance.

    hidden (B, T, d) (any strides: never copied whole), rows (...) int64 flat indices b·T + t ->
    (h − mean(h)) (..., d), var(h) (...). Two-pass (mean, then the centred sum of squares), which is
    exact where E[h²] − E[h]² would cancel, and several times faster on CPU than torch.var_mean or a
    fused layer norm."""
    B, T, d = hidden.shape
    if hidden.is_contiguous():
        h = torch.index_select(hidden.view(B * T, d), 0, rows.reshape(-1)).view(*rows.shape, d)
    else:  # a strided view (e.g. a response slice of the full sequence): index it in place
        h = hidden[rows // T, rows % T]
    h = h.to(compute_dtype(hidden))
    h.sub_(h.mean(dim=-1, keepdim=True))
    var = torch.linalg.vector_norm(h, dim=-1).square_().div_(h.shape[-1])
    return h, var


def quantiles_per_row(values: Tensor, counts: Tensor, qs: tuple[float, ...]) -> list[Tensor]:
    """Linear-interpolation quantiles (numpy/torch default) of the first `counts[g]` valid
    entries of each row. values: (G, N) with invalid entries = +inf; counts: (G,) >= 1.
    Returns one (G,) tensor per q."""
    sorted_vals, _ = torch.sort(values, dim=1)
    last = (counts - 1).clamp(min=0).to(values.dtype)
    out = []
    for q in qs:
        pos = q * last
        lo = pos.floor().long()
        hi = pos.ceil().long()
        frac = pos - lo.to(values.dtype)
        v_lo = sorted_vals.gather(1, lo[:, None])[:, 0]
        v_hi = sorted_vals.gather(1, hi[:, None])[:, 0]
        out.append(v_lo + (v_hi - v_lo) * frac)
    return out


def orthonormal_columns(Y: Tensor) -> Tensor:
    """An orthonormal basis of the column space of each (M, q) block: (G, M, q) -> (G, M, q).

    Shifted Cholesky-QR in float64 (Q = Y L⁻ᵀ with L Lᵀ = YᵀY + δ·I): matrix products and a (q, q)
    factorisation instead of Householder QR of the tall matrix, several times cheaper on CPU;
    directions below the shift δ = 1e-12·trace(YᵀY) (rank deficiency, padded rows) come out
    short instead of unit, and carry no energy. Falls back to Householder QR if the factorisation
    fails."""
    Yd = Y.double()
    gram = Yd.mT @ Yd                                                  # (G, q, q)
    shift = 1e-12 * gram.diagonal(dim1=-2, dim2=-1).sum(-1).clamp(min=1e-300)
    gram.diagonal(dim1=-2, dim2=-1).add_(shift[:, None])
    L, info = torch.linalg.cholesky_ex(gram)
    if bool((info != 0).any()):
        return torch.linalg.qr(Y).Q
    return torch.linalg.solve_triangular(L, Yd.mT, upper=False).mT.to(Y.dtype)


def top_right_singular_vectors(X: Tensor, k: int, mode: str, oversample: int, power_iters: int,
                               omega: Tensor | None = None, return_values: bool = False):
    """Top-k right singular vectors of each (M, d) block. X: (G, M, d) float32 -> V: (G, d, k)
    (and the matching singular values S: (G, k) when `return_values`; in randomized mode those of
    QᵀX, so Σ S² is a lower bound of ‖X V‖²).

    "randomized": Halko-Martinsson-Tropp range finder with q = k + oversample columns and
    `power_iters` QR-stabilised power iterations, then the SVD of the small (q, d) matrix QᵀX.
    `omega` is the (d, q) Gaussian test matrix, shared by all groups (results do not depend on the
    order of the batch). Falls back to exact when q >= min(M, d).
    """
    G, M, d = X.shape
    q = k + oversample
    if mode == "exact" or omega is None or q >= min(M, d):
        # float64: with k close to the rank of X+ the last directions are ill-conditioned in float32
        _, S, Vh = torch.linalg.svd(X.double(), full_matrices=False)  # Vh: (G, min(M,d), d)
        V, S = Vh[:, :k].mT.to(X.dtype), S.to(X.dtype)
    else:
        Q = orthonormal_columns(X @ omega[:, :q].to(X.dtype))         # (G, M, q)
        for _ in range(power_iters):
            # Q <- orth(X Xᵀ Q): orthonormalising after each full step (not between Xᵀ and X) squares
            # the condition number once per step, harmless for a few steps and it saves the
            # orthonormalisation of a (d, q) matrix (same captured energy to 1e-5 on 1/j^0.7 .. e^-j/8)
            Q = orthonormal_columns(X @ (X.mT @ Q))                    # (G, M, q)
        small = (Q.mT @ X).double()                                    # (G, q, d)
        # SVD of the small matrix through the eigen-decomposition of its (q, q) Gram, in float64
        # (cheaper than a (q, d) SVD; float64 keeps the squared condition number harmless)
        evals, U = torch.linalg.eigh(small @ small.mT)                # ascending
        evals, U = evals.flip(-1)[:, :k], U.flip(-1)[:, :, :k]
        S = evals.clamp(min=0.0).sqrt()                                # (G, k)
        keep = S > S[:, :1] * 1e-6                                     # directions above noise
        V = ((small.mT @ U) / torch.where(keep, S, torch.ones_like(S))[:, None, :] * keep[:, None, :]).to(X.dtype)
        S = S.to(X.dtype)
    S = S[:, :k]
    if V.shape[-1] < k:  # fewer singular vectors than k exist (min(M, d) < k): pad with zeros
        V = torch.nn.functional.pad(V, (0, k - V.shape[-1]))
        S = torch.nn.functional.pad(S, (0, k - S.shape[-1]))
    return (V, S) if return_values else V


def pad_by_group(group_of_item: Tensor, num_groups: int, width: int) -> Tensor:
    """Lay items (sorted by group) out as a padded (G, width) index matrix into the item list.

    group_of_item: (N,) int64 non-decreasing in [0, G); width >= the largest group's count.
    Returns (G, width) int64 with −1 on padding."""
    n = group_of_item.numel()
    device = group_of_item.device
    counts = torch.bincount(group_of_item, minlength=num_groups)
    starts = torch.cumsum(counts, 0) - counts
    slot = torch.arange(n, device=device) - starts[group_of_item]
    index = torch.full((num_groups, max(width, 1)), -1, dtype=torch.long, device=device)
    index[group_of_item, slot] = torch.arange(n, device=device)
    return index
