"""Evaluation metrics the way papers report them (spec §5).

- Avg@k: mean over problems of the fraction of the k samples that are correct.
- Pass@k: the unbiased estimator 1 − C(n−c, k)/C(n, k) per problem (Chen et al. 2021),
  computed as the numerically stable product 1 − Π_{i=n−c+1}^{n} (1 − k/i); never a
  with-replacement bootstrap.
- maj@k: majority vote over the first k extracted answers, correct if the voted answer is.
"""

from __future__ import annotations

from collections import Counter
from typing import Hashable, Sequence

import numpy as np


def ks_up_to(n: int) -> list[int]:
    """The k values papers plot for n samples: 1, 2, 4, ... up to n, and n itself."""
    if n < 1:
        raise ValueError(f"ks_up_to: n must be >= 1, got {n}")
    ks = [2 ** i for i in range(n.bit_length()) if 2 ** i <= n]
    return ks if ks[-1] == n else ks + [n]


def pass_at_k(num_samples, num_correct, k: int) -> np.ndarray:
    """Unbiased pass@k per problem.

    num_samples: (P,) ints n ≥ k (or a scalar); num_correct: (P,) ints 0 ≤ c ≤ n; k ≥ 1.
    Returns a float64 array (P,). Raises ValueError on n < k, c > n or negative values.
    """
    n = np.atleast_1d(np.asarray(num_samples, dtype=np.int64))
    c = np.atleast_1d(np.asarray(num_correct, dtype=np.int64))
    n, c = np.broadcast_arrays(n, c)
    if not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"pass_at_k: k must be a positive int, got {k!r}")
    if (c < 0).any() or (c > n).any():
        raise ValueError("pass_at_k: need 0 <= num_correct <= num_samples for every problem")
    if (n < k).any():
        raise ValueError(f"pass_at_k: k={k} exceeds the number of samples ({int(n.min())}) of some problem")
    out = np.empty(n.shape, dtype=np.float64)
    for idx, (ni, ci) in enumerate(zip(n.tolist(), c.tolist())):
        if ni - ci < k:
            out[idx] = 1.0
        else:
            # 1 - prod_{i=n-c+1}^{n} (1 - k/i)
            i = np.arange(ni - ci + 1, ni + 1, dtype=np.float64)
            out[idx] = 1.0 - float(np.prod(1.0 - k / i))
    return out


def avg_at_k(correct: np.ndarray, k: int | None = None) -> np.ndarray:
    """Per-problem fraction correct among the first k samples. correct: (P, n) bool/0-1."""
    correct = np.asarray(correct, dtype=np.float64)
    if correct.ndim != 2:
        raise ValueError(f"avg_at_k: correct must be (problems, samples), got shape {correct.shape}")
    k = correct.shape[1] if k is None else k
    if not 1 <= k <= correct.shape[1]:
        raise ValueError(f"avg_at_k: k={k} not in [1, {correct.shape[1]}]")
    return correct[:, :k].mean(axis=1)


def maj_at_k(answers: Sequence[Sequence[Hashable | None]], correct: np.ndarray, k: int) -> np.ndarray:
    """Per-problem majority-vote accuracy over the first k samples.

    answers: (P, n) extracted (normalised) answers, None where nothing was extracted (never voted);
    correct: (P, n) whether each sample is correct. Ties are broken by the earliest sample.
    A problem with no extracted answer among its first k counts as wrong.
    """
    correct = np.asarray(correct, dtype=bool)
    out = np.zeros(len(answers), dtype=np.float64)
    for p, row in enumerate(answers):
        if len(row) < k:
            raise ValueError(f"maj_at_k: problem {p} has {len(row)} samples < k={k}")
        votes = Counter(a for a in row[:k] if a is not None)
        if not votes:
            continue
        best = max(votes.values())
        winner = next(a for a in row[:k] if a is not None and votes[a] == best)  # earliest among ties
        j = next(j for j, a in enumerate(row[:k]) if a == winner)
        out[p] = float(correct[p, j])
    return out
