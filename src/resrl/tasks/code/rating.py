"""CodeForces-style Elo ratings of a model (docs/tasks/code.md, "A CodeForces rating").

CodeForces' rating model (Mirzayanov, "Open Codeforces Rating System", codeforces.com/blog/entry/20762):
a participant rated r beats one rated r' with probability

    P(r beats r') = 1 / (1 + 10^((r' - r) / 400))                                          (1)

and a problem's difficulty rating d is the rating at which a participant solves it with
probability 1/2, i.e. solving it is a game against an opponent rated d.

Two estimators, for the two kinds of data a user can have:

**From solved problems with known ratings** (`rating_from_problems`; what `resrl code-report`
reports): each of the n_j attempts at problem j (rating d_j) is a game against d_j; with c_j of
them solved, the maximum-likelihood rating r̂ solves the score equation

    sum_j n_j p_j(r̂) = sum_j c_j,     p_j(r) = 1 / (1 + 10^((d_j - r) / 400))               (2)

("expected solves = actual solves"; the left side increases strictly in r, so the root is unique
and bisection finds it). Its standard error is the inverse square root of the Fisher information

    se(r̂) = 1 / sqrt( sum_j n_j a^2 p_j (1 - p_j) ),  a = ln(10) / 400                      (3)

When every attempt (or none) succeeds, (2) has no finite root: the estimate is the bound of the
search range ([0, 4000] by default, CodeForces' scale) and `at_bound` says so.

**From contest standings** (`contest_performance_rating`, `codeelo_rating`): CodeElo (Quan et al.
2025, arXiv 2501.01257, its calc_rating.py) places the model in a contest's official standings
(rank m among the rated participants, from its score and penalty) and finds, by bisection over
integer ratings, the rating whose expected place equals m:

    seed(r) = 1 + sum_i 1 / (1 + 10^((r - r_i) / 400)) = m                                  (4)

over the participants' pre-contest ratings r_i (eq. 1 summed: the expected number of
participants who beat a player rated r, plus one); the model's rating is the mean over contests.
That needs each contest's standings and its participants' ratings, which resrl does not have
offline; (2) needs only the problems' ratings, which CodeForces-format data sets carry, and is
the same "expected = observed" equation with the problems as the opponents.

`percentile(rating, human_ratings)` places a rating among human ratings the way CodeElo does (the
share of humans rated strictly below it).
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from typing import Sequence

ELO_SCALE = 400.0
A = math.log(10.0) / ELO_SCALE  # p = sigmoid(A (r - d))
DEFAULT_RANGE = (0.0, 4000.0)


def solve_probability(rating: float, difficulty: float) -> float:
    """Eq. (1): P(a participant rated `rating` solves a problem rated `difficulty`)."""
    return 1.0 / (1.0 + 10.0 ** ((difficulty - rating) / ELO_SCALE))


@dataclass(frozen=True)
class RatingEstimate:
    """rating       the estimate (eq. 2)
    stderr       its standard error (eq. 3); None at a bound
    at_bound     "low" / "high" when every attempt failed / succeeded (no finite estimate), else None
    problems     problems used; attempts / solved: totals"""

    rating: float
    stderr: float | None
    at_bound: str | None
    problems: int
    attempts: int
    solved: int


def rating_from_problems(difficulties: Sequence[float], solved: Sequence[int], attempts: Sequence[int] | None = None,
                         bounds: tuple[float, float] = DEFAULT_RANGE, tol: float = 1e-6) -> RatingEstimate:
    """The maximum-likelihood Elo rating of a solver from its results on rated problems (eq. 2, 3).

    difficulties  (P,) problem ratings d_j
    solved        (P,) solved attempts c_j (0/1 for one attempt each, or counts of n_j samples)
    attempts      (P,) attempts n_j (default 1 each)
    bounds        the search range; the estimate is clamped to it
    """
    d = [float(x) for x in difficulties]
    n = [1] * len(d) if attempts is None else [int(x) for x in attempts]
    c = [int(x) for x in solved]
    if not d or len(c) != len(d) or len(n) != len(d):
        raise ValueError(f"rating_from_problems: need equal, non-empty lists (got {len(d)} difficulties, "
                         f"{len(c)} solved, {len(n)} attempts)")
    if any(not math.isfinite(x) for x in d) or any(k < 1 for k in n) or any(not 0 <= cj <= nj for cj, nj in zip(c, n)):
        raise ValueError("rating_from_problems: need finite ratings, attempts >= 1 and 0 <= solved <= attempts")
    lo, hi = float(bounds[0]), float(bounds[1])
    total_n, total_c = sum(n), sum(c)

    def expected(r: float) -> float:  # left side of eq. (2): increasing in r
        return sum(nj * solve_probability(r, dj) for dj, nj in zip(d, n))

    at_bound = None
    if total_c == 0 or expected(lo) >= total_c:
        r, at_bound = lo, "low"
    elif total_c == total_n or expected(hi) <= total_c:
        r, at_bound = hi, "high"
    else:
        a, b = lo, hi
        while b - a > tol:
            mid = 0.5 * (a + b)
            if expected(mid) < total_c:
                a = mid
            else:
                b = mid
        r = 0.5 * (a + b)
    info = sum(nj * A * A * solve_probability(r, dj) * (1 - solve_probability(r, dj)) for dj, nj in zip(d, n))
    se = None if at_bound or info <= 0 else 1.0 / math.sqrt(info)
    return RatingEstimate(rating=r, stderr=se, at_bound=at_bound, problems=len(d), attempts=total_n, solved=total_c)


def expected_place(rating: float, others: Sequence[float]) -> float:
    """Eq. (4)'s left side: 1 + the expected number of participants (rated `others`) who beat `rating`."""
    return 1.0 + sum(1.0 / (1.0 + 10.0 ** ((rating - ri) / ELO_SCALE)) for ri in others)


def contest_performance_rating(rank: float, others: Sequence[float], low: int = 0, high: int | None = None) -> int:
    """CodeElo's per-contest rating (eq. 4): the largest integer r in [low, high) with
    seed(r) >= rank, by bisection (high defaults to max(others) + 100, as in CodeElo)."""
    if not others:
        raise ValueError("contest_performance_rating: no participants")
    if rank < 1:
        raise ValueError(f"contest_performance_rating: rank must be >= 1, got {rank}")
    lo, hi = int(low), int(max(others) + 100 if high is None else high)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if expected_place(mid, others) < rank:
            hi = mid
        else:
            lo = mid
    return lo


def codeelo_rating(contests: Sequence[tuple[float, Sequence[float]]]) -> float:
    """CodeElo's rating: the mean over contests of `contest_performance_rating(rank, others)`."""
    if not contests:
        raise ValueError("codeelo_rating: no contests")
    return sum(contest_performance_rating(rank, others) for rank, others in contests) / len(contests)


def percentile(rating: float, human_ratings: Sequence[float]) -> float:
    """Percent of `human_ratings` strictly below `rating` (CodeElo's get_percentile), 1 decimal."""
    ordered = sorted(float(x) for x in human_ratings)
    if not ordered:
        raise ValueError("percentile: no human ratings")
    return round(bisect.bisect_left(ordered, float(rating)) / len(ordered) * 100, 1)


__all__ = ["ELO_SCALE", "RatingEstimate", "solve_probability", "rating_from_problems", "expected_place",
           "contest_performance_rating", "codeelo_rating", "percentile"]
