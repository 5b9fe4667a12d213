"""CodeForces-style ratings (resrl.tasks.code.rating) on hand-computed cases: the maximum-likelihood
rating from rated problems (eq. 2-3) and CodeElo's contest-standings rating (eq. 4)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from resrl.tasks.code.rating import (codeelo_rating, contest_performance_rating, expected_place, percentile,
                                     rating_from_problems, solve_probability)


def test_solve_probability_is_codeforces_elo():
    assert solve_probability(1500, 1500) == 0.5
    assert solve_probability(1900, 1500) == pytest.approx(1 / 1.1)  # 400 points: 10 to 1
    assert solve_probability(1700, 1500) == pytest.approx(1 / (1 + 10 ** -0.5))  # ~0.76, "about 0.75" in the blog


def test_half_solved_problem_gives_its_rating_and_the_fisher_stderr():
    est = rating_from_problems([1500], solved=[2], attempts=[4])
    assert est.rating == pytest.approx(1500, abs=1e-4) and est.at_bound is None
    # se = 1 / sqrt(n a^2 p (1 - p)) with n = 4, p = 1/2: 1 / a = 400 / ln 10
    assert est.stderr == pytest.approx(400 / math.log(10))
    assert (est.problems, est.attempts, est.solved) == (1, 4, 2)


def test_three_of_four_solved():
    # p(r) = 3/4 at d = 1000  =>  10^((1000 - r)/400) = 1/3  =>  r = 1000 + 400 log10(3) = 1190.85
    est = rating_from_problems([1000], solved=[3], attempts=[4])
    assert est.rating == pytest.approx(1000 + 400 * math.log10(3), abs=1e-4)
    p = 0.75
    assert est.stderr == pytest.approx(1 / math.sqrt(4 * (math.log(10) / 400) ** 2 * p * (1 - p)), rel=1e-6)


def test_one_easy_solved_one_hard_failed_meets_in_the_middle():
    # symmetric: p(1400 vs 1200) + p(1400 vs 1600) = 1 exactly, one solve of two
    est = rating_from_problems([1200, 1600], solved=[1, 0])
    assert est.rating == pytest.approx(1400, abs=1e-4)
    assert solve_probability(1400, 1200) + solve_probability(1400, 1600) == pytest.approx(1.0)


def test_all_or_nothing_has_no_finite_estimate():
    top = rating_from_problems([800, 1200], solved=[1, 1])
    assert top.rating == 4000 and top.at_bound == "high" and top.stderr is None
    bottom = rating_from_problems([800, 1200], solved=[0, 0], bounds=(-500, 3500))
    assert bottom.rating == -500 and bottom.at_bound == "low"


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError, match="equal, non-empty"):
        rating_from_problems([], [])
    with pytest.raises(ValueError, match="solved <= attempts"):
        rating_from_problems([1000], solved=[3], attempts=[2])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(800, 3500), st.integers(1, 8), st.integers(0, 8)), min_size=1, max_size=12))
def test_estimate_solves_the_score_equation_and_maximises_the_likelihood(rows):
    d = [r[0] for r in rows]
    n = [r[1] for r in rows]
    c = [min(r[2], r[1]) for r in rows]
    est = rating_from_problems(d, c, n)
    if est.at_bound:
        assert sum(c) in (0, sum(n)) or est.rating in (0.0, 4000.0)
        return

    def loglik(r):  # float64 restatement: sum_j c_j log p_j + (n_j - c_j) log(1 - p_j)
        return sum(cj * math.log(solve_probability(r, dj)) + (nj - cj) * math.log(1 - solve_probability(r, dj))
                   for dj, nj, cj in zip(d, n, c))

    assert sum(nj * solve_probability(est.rating, dj) for dj, nj in zip(d, n)) == pytest.approx(sum(c), abs=1e-6)
    assert loglik(est.rating) >= max(loglik(est.rating - 1), loglik(est.rating + 1))


def test_codeelo_contest_rating_hand_cases():
    # two participants rated 1500, the model placed 2nd: seed(1500) = 1 + 2 * 1/2 = 2
    assert expected_place(1500, [1500, 1500]) == 2.0
    assert contest_performance_rating(2, [1500, 1500]) == 1500
    # three rated 1200, placed 3rd: 1 + 3 p = 3 => 10^((r - 1200)/400) = 1/2 => r = 1200 - 400 log10 2 = 1079.6;
    # the largest integer with seed(r) >= 3 is 1079
    assert expected_place(1079, [1200] * 3) >= 3 > expected_place(1080, [1200] * 3)
    assert contest_performance_rating(3, [1200] * 3) == 1079
    # first place: every rating has seed >= 1, so the search returns its cap max(r_i) + 100 - 1
    assert contest_performance_rating(1, [1000, 2000]) == 2099
    # the mean over contests
    assert codeelo_rating([(2, [1500, 1500]), (3, [1200] * 3)]) == (1500 + 1079) / 2


def test_percentile_counts_humans_strictly_below():
    assert percentile(1400, [1000, 1200, 1400, 1600]) == 50.0
    assert percentile(1401, [1000, 1200, 1400, 1600]) == 75.0
    assert percentile(0, [1000]) == 0.0
