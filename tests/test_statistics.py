"""Spearman with ties, bootstrap intervals, Student-t intervals and paired differences on hand-made values."""

from __future__ import annotations

import math

import numpy as np
import pytest

from resrl.statistics import (average_ranks, mean_interval, paired_difference, spearman, spearman_with_interval,
                              t_quantile_975)


def test_average_ranks_with_ties():
    assert average_ranks(np.array([10.0, 20.0, 20.0, 5.0])).tolist() == [2.0, 3.5, 3.5, 1.0]


def test_spearman_hand_values():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 1, 0, -3]) == pytest.approx(-1.0)
    # ranks x = 1 2 3 4, y = 1 3 2 4: ρ = 1 − 6 Σd² / (n(n²−1)) = 1 − 6·2/60 = 0.8
    assert spearman([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)
    # with ties: y ranks 1.5 1.5 3 4 -> Pearson of ranks
    rx, ry = np.array([1, 2, 3, 4.0]), np.array([1.5, 1.5, 3, 4])
    expected = np.corrcoef(rx, ry)[0, 1]
    assert spearman([1, 2, 3, 4], [7, 7, 8, 9]) == pytest.approx(expected)
    assert math.isnan(spearman([1, 1, 1], [1, 2, 3]))


def test_spearman_interval_contains_rho_and_shrinks_with_data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=400)
    y = -x + rng.normal(size=400)
    clusters = np.repeat(np.arange(40), 10)
    small = spearman_with_interval(x[:40], y[:40], clusters[:40], num_boot=300)
    big = spearman_with_interval(x, y, clusters, num_boot=300)
    for r in (small, big):
        assert r["low"] <= r["rho"] <= r["high"] < 0
    assert big["high"] - big["low"] < small["high"] - small["low"]
    assert big["clusters"] == 40 and big["n"] == 400


def test_mean_interval_hand_made():
    r = mean_interval([1.0, 2.0, 3.0])
    half = 4.303 * 1.0 / math.sqrt(3)  # t_{0.975, 2} · s / √n with s = 1
    assert r["mean"] == 2.0 and r["std"] == pytest.approx(1.0)
    assert r["low"] == pytest.approx(2.0 - half) and r["high"] == pytest.approx(2.0 + half)
    one = mean_interval([0.5])
    assert one["mean"] == 0.5 and math.isnan(one["low"])
    assert t_quantile_975(1) == 12.706 and t_quantile_975(100) == 1.96
    with pytest.raises(ValueError):
        mean_interval([])


def test_paired_difference_hand_made():
    # per-seed accuracies of an algorithm and of the baseline, same seeds
    algo, base = [0.60, 0.55, 0.70], [0.50, 0.52, 0.61]
    r = paired_difference(algo, base)
    diffs = np.array([0.10, 0.03, 0.09])
    assert r["mean"] == pytest.approx(diffs.mean())
    assert r["std"] == pytest.approx(diffs.std(ddof=1))
    assert r["low"] == pytest.approx(diffs.mean() - 4.303 * diffs.std(ddof=1) / math.sqrt(3))
    assert r["wins"] == 3
    with pytest.raises(ValueError):
        paired_difference([1.0, 2.0], [1.0])
