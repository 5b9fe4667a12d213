"""Small statistics used to report evidence honestly: rank correlation with a cluster bootstrap
interval (`resrl diagnose`), and means with 95 % intervals and paired differences over seeds
(multi-seed comparisons). Pure numpy functions.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

# two-sided 97.5 % quantiles of Student's t for 1..30 degrees of freedom (then the normal 1.96)
_T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
         2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
         2.045, 2.042]


def average_ranks(x: np.ndarray) -> np.ndarray:
    """Ranks 1..n with ties given their average rank (the convention of Spearman's ρ). (n,) -> (n,)."""
    x = np.asarray(x, dtype=np.float64)
    order = np.argsort(x, kind="mergesort")
    sorted_x = x[order]
    ranks = np.empty(len(x), dtype=np.float64)
    # boundaries of runs of equal values
    starts = np.r_[0, np.flatnonzero(np.diff(sorted_x) != 0) + 1]
    ends = np.r_[starts[1:], len(x)]
    for s, e in zip(starts, ends):
        ranks[order[s:e]] = 0.5 * (s + e - 1) + 1.0
    return ranks


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's rank correlation (Pearson correlation of average ranks); NaN when either side is
    constant or fewer than 3 pairs. x, y (n,)."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"spearman: x and y must be 1-D of the same length, got {x.shape} and {y.shape}")
    if len(x) < 3:
        return float("nan")
    rx, ry = average_ranks(x), average_ranks(y)
    rx, ry = rx - rx.mean(), ry - ry.mean()
    den = math.sqrt(float(rx @ rx) * float(ry @ ry))
    return float(rx @ ry) / den if den > 0 else float("nan")


def spearman_with_interval(x: Sequence[float], y: Sequence[float], clusters: Sequence[int] | None = None,
                           num_boot: int = 1000, level: float = 0.95, seed: int = 0) -> dict[str, float]:
    """Spearman's ρ and a percentile bootstrap interval.

    clusters (n,) optional ids (e.g. the prompt group of each token): resample whole clusters, because
    tokens of one group are not independent; without it, resample pairs. Returns {"rho", "low",
    "high", "n", "clusters"} (NaN interval when fewer than 2 clusters or all resamples degenerate)."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    rho = spearman(x, y)
    cl = np.arange(len(x)) if clusters is None else np.asarray(clusters)
    ids, inverse = np.unique(cl, return_inverse=True)
    members = [np.flatnonzero(inverse == i) for i in range(len(ids))]
    rng = np.random.default_rng(seed)
    boots = []
    if len(ids) >= 2 and not math.isnan(rho):
        for _ in range(num_boot):
            pick = rng.integers(0, len(ids), len(ids))
            idx = np.concatenate([members[i] for i in pick])
            r = spearman(x[idx], y[idx])
            if not math.isnan(r):
                boots.append(r)
    alpha = (1.0 - level) / 2
    low, high = (float(np.quantile(boots, alpha)), float(np.quantile(boots, 1 - alpha))) if boots else (
        float("nan"), float("nan"))
    return {"rho": rho, "low": low, "high": high, "n": int(len(x)), "clusters": int(len(ids))}


def t_quantile_975(dof: int) -> float:
    """The 97.5 % quantile of Student's t with `dof` degrees of freedom (1.96 beyond 30)."""
    if dof < 1:
        return float("nan")
    return _T975[dof - 1] if dof <= len(_T975) else 1.96


def mean_interval(values: Sequence[float]) -> dict[str, float]:
    """Mean and two-sided 95 % Student-t interval of independent values (e.g. one per seed).

    Returns {"mean", "low", "high", "std", "n"}; with one value the interval is NaN (no spread
    is known from a single run)."""
    v = np.asarray(values, dtype=np.float64)
    n = len(v)
    if n == 0:
        raise ValueError("mean_interval: no values")
    mean = float(v.mean())
    if n == 1:
        return {"mean": mean, "low": float("nan"), "high": float("nan"), "std": float("nan"), "n": 1}
    std = float(v.std(ddof=1))
    half = t_quantile_975(n - 1) * std / math.sqrt(n)
    return {"mean": mean, "low": mean - half, "high": mean + half, "std": std, "n": n}


def paired_difference(values: Sequence[float], baseline: Sequence[float]) -> dict[str, float]:
    """Mean and 95 % interval of `values − baseline` paired by index (same seed). Also the count of
    pairs where values > baseline ("wins"). Both (n,)."""
    a, b = np.asarray(values, dtype=np.float64), np.asarray(baseline, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"paired_difference: need the same seeds on both sides, got {a.shape} and {b.shape}")
    out = mean_interval(a - b)
    out["wins"] = int((a > b).sum())
    return out


__all__ = ["average_ranks", "spearman", "spearman_with_interval", "t_quantile_975", "mean_interval",
           "paired_difference"]
