"""resrl.metrics: unbiased pass@k (spec §5), avg@k, maj@k."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from resrl.metrics import avg_at_k, maj_at_k, pass_at_k


def exact_pass_at_k(n: int, c: int, k: int) -> float:
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def test_pass_at_1_is_fraction_correct():
    n = np.array([16, 16, 8, 5])
    c = np.array([0, 3, 8, 2])
    np.testing.assert_allclose(pass_at_k(n, c, 1), c / n, rtol=0, atol=1e-12)


def test_no_correct_gives_zero_and_few_wrong_gives_one():
    assert pass_at_k([16], [0], 8)[0] == 0.0
    # n - c < k: every k-subset holds a correct sample
    assert pass_at_k([16], [9], 8)[0] == 1.0
    assert pass_at_k([4], [4], 1)[0] == 1.0


def test_hand_value():
    # n=4, c=1, k=2: 1 - C(3,2)/C(4,2) = 1 - 3/6
    assert pass_at_k([4], [1], 2)[0] == pytest.approx(0.5, abs=1e-15)


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 200).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n), st.integers(1, n))))
def test_matches_exact_binomial_formula(nck):
    n, c, k = nck
    assert pass_at_k([n], [c], k)[0] == pytest.approx(exact_pass_at_k(n, c, k), rel=1e-9, abs=1e-12)


@settings(max_examples=100, deadline=None)
@given(st.integers(2, 64).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n))))
def test_monotone_in_k(nc):
    n, c = nc
    values = [pass_at_k([n], [c], k)[0] for k in range(1, n + 1)]
    assert all(b >= a - 1e-12 for a, b in zip(values, values[1:]))


def test_invalid_inputs():
    with pytest.raises(ValueError):
        pass_at_k([4], [5], 1)
    with pytest.raises(ValueError):
        pass_at_k([4], [1], 5)
    with pytest.raises(ValueError):
        pass_at_k([4], [1], 0)


def test_avg_at_k_hand_cases():
    correct = np.array([[1, 0, 1, 1], [0, 0, 0, 1]], dtype=bool)
    np.testing.assert_allclose(avg_at_k(correct), [0.75, 0.25])
    np.testing.assert_allclose(avg_at_k(correct, k=2), [0.5, 0.0])
    with pytest.raises(ValueError):
        avg_at_k(correct, k=5)


def test_maj_at_k_hand_cases():
    answers = [["3", "4", "4", "3", "4"],    # k=5: "4" wins (3 votes); k=4: tie 2-2 -> earliest ("3")
               [None, None, "7", "8", "8"],  # Nones never vote
               [None, None, None, None, None]]
    correct = np.array([[1, 0, 0, 1, 0], [0, 0, 1, 0, 0], [0, 0, 0, 0, 0]], dtype=bool)
    np.testing.assert_allclose(maj_at_k(answers, correct, 5), [0.0, 0.0, 0.0])
    np.testing.assert_allclose(maj_at_k(answers, correct, 4), [1.0, 1.0, 0.0])
    np.testing.assert_allclose(maj_at_k(answers, correct, 1), [1.0, 0.0, 0.0])
