"""A float64 reference of ResRL's token advantages, written from spec §2 one group at a time.

Deliberately naive and independent of `resrl.core.residual`: numpy, explicit loops over groups
and tokens, the residual as the norm of an explicit projection (not ‖x‖² − ‖Vᵀx‖²), full SVD,
np.quantile. It takes *all* positive tokens (no subsampling), so compare with inputs whose
positive-token count per group is <= max_pos_tokens.
"""

from __future__ import annotations

import numpy as np


def layer_norm64(h: np.ndarray, eps: float) -> np.ndarray:
    mean = h.mean(axis=-1, keepdims=True)
    var = ((h - mean) ** 2).mean(axis=-1, keepdims=True)
    return (h - mean) / np.sqrt(var + eps)


def reference_token_advantages(hidden, mask, adv, groups, *, rank=64, q_low=0.1, q_high=0.9, xi=0.1,
                               pos_scale=0.1, eps=1e-6, ln_eps=1e-5, no_contrast_tol=1e-5,
                               truncated=None, truncation_guard=False, truncation_tail=256):
    hidden = np.asarray(hidden, dtype=np.float64)
    mask = np.asarray(mask, dtype=bool)
    adv = np.asarray(adv, dtype=np.float64)
    groups = np.asarray(groups)
    B, T, d = hidden.shape
    out = np.zeros((B, T))
    omega = np.ones((B, T))
    for g in np.unique(groups):
        rows = np.nonzero(groups == g)[0]
        pos_rows = [i for i in rows if adv[i] > 0]
        neg_rows = [i for i in rows if adv[i] <= 0]
        pos_tok = [hidden[i, t] for i in pos_rows for t in range(T) if mask[i, t]]
        neg_tok = [(i, t) for i in neg_rows for t in range(T) if mask[i, t]]
        if not pos_tok or not neg_tok:
            continue  # no positive: plain GRPO; no negative: nothing to weight
        Xp = layer_norm64(np.stack(pos_tok), ln_eps)
        mu = Xp.mean(axis=0)
        X = Xp - mu
        M = X.shape[0]
        k = min(rank, M - 1, d)
        if k < 1:
            continue  # ω = 1
        _, _, vt = np.linalg.svd(X, full_matrices=True)
        V = vt[:k].T                                           # (d, k)
        P = np.eye(d) - V @ V.T
        R, sq = [], []
        for i, t in neg_tok:
            x = layer_norm64(hidden[i, t], ln_eps) - mu
            r = P @ x
            R.append(float(r @ r) / d)
            sq.append(float(x @ x) / d)
        R = np.array(R)
        lo, hi = np.quantile(R, q_low), np.quantile(R, q_high)
        if hi - lo <= no_contrast_tol * np.mean(sq):
            w = np.full(len(R), xi)
        else:
            w = xi + (1 - xi) * np.clip((R - lo) / (hi - lo + eps), 0.0, 1.0)
        for (i, t), wi in zip(neg_tok, w):
            omega[i, t] = wi
    if truncation_guard and truncated is not None:
        for i in range(B):
            if truncated[i] and adv[i] <= 0:
                valid_t = [t for t in range(T) if mask[i, t]]
                for t in valid_t[-truncation_tail:]:
                    omega[i, t] = 1.0
    for i in range(B):
        for t in range(T):
            if mask[i, t]:
                out[i, t] = pos_scale * adv[i] if adv[i] > 0 else omega[i, t] * adv[i]
    return out, omega
