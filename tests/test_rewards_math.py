"""Math-Verify scoring in the isolated pool, exact match, and the reward registry."""

from __future__ import annotations

import os
import sys
import time

import pytest

from resrl.rewards.exact import ExactMatchReward, extract_final_answer, normalize_answer
from resrl.rewards.isolation import IsolatedPool, worker_pids
from resrl.tasks.math.reward import MathReward, MathVerifier
from resrl.tasks.rewards import load_reward_function
from resrl.tasks.data import load_benchmarks

# (reference answer, completion, expected verdict)
AGREEMENT = [
    # fractions and decimals
    ("\\frac{1}{2}", "So the answer is \\boxed{0.5}.", True),
    ("0.5", "\\boxed{\\frac{1}{2}}", True),
    ("\\frac{3}{4}", "\\boxed{\\dfrac{6}{8}}", True),
    ("\\frac{1}{3}", "\\boxed{0.33}", False),
    ("1/2", "\\boxed{\\frac12}", True),
    ("2", "\\boxed{\\frac{1}{2}}", False),
    # integers, formatting
    ("204", "Thus $m+n = \\boxed{204}$.", True),
    ("204", "\\boxed{240}", False),
    ("1000", "\\boxed{1{,}000}", True),
    ("\\$32,\\!348", "\\boxed{32348}", True),  # escaped dollar signs in MATH-500 references
    ("\\$18.90", "The total is \\boxed{\\$18.9}", True),
    ("-3", "\\boxed{-3}", True),
    ("3", "\\boxed{-3}", False),
    # roots and expressions
    ("\\sqrt{2}/2", "\\boxed{\\frac{\\sqrt{2}}{2}}", True),
    ("2\\sqrt{10}", "\\boxed{\\sqrt{40}}", True),
    ("\\sqrt{3}", "\\boxed{3^{1/2}}", True),
    ("\\sqrt{3}", "\\boxed{\\sqrt{2}}", False),
    ("\\pi", "\\boxed{\\pi}", True),
    ("x^2+2x+1", "\\boxed{(x+1)^2}", True),
    ("x^2+1", "\\boxed{(x+1)^2}", False),
    # intervals and sets
    ("(1,2]", "\\boxed{(1, 2]}", True),
    ("(1,2]", "\\boxed{[1, 2]}", False),
    ("[0,\\infty)", "\\boxed{[0,\\infty)}", True),
    # units and text around the number
    ("10", "\\boxed{10\\text{ cm}}", True),
    ("45", "The angle is \\boxed{45^\\circ}", True),
    ("5", "\\boxed{5\\text{ dollars}}", True),
    ("5", "\\boxed{6\\text{ dollars}}", False),
    # Math-Verify reads every box of a completion as one answer set: multi-part answers match,
    # hedging with two different boxed answers does not
    ("69,84", "\\boxed{69} and \\boxed{84}", True),
    ("7", "First \\boxed{3}, then correcting: \\boxed{7}", False),
    # no answer at all
    ("7", "I am not sure.", False),
]

ADVERSARIAL = [
    "\\boxed{9^{9^{9^{9}}}}",
    "\\boxed{10^{10^{10^{10^{10}}}}!}",
    "\\boxed{2^{2^{2^{2^{2^{2^{2}}}}}}}",
    "\\boxed{" + "{" * 5000 + "1" + "}" * 5000 + "}",
    "\\boxed{" + "(" * 3000 + "1" + ")" * 3000 + "}",
    "\\boxed{" + "9" * 50000 + "}",
    "\\boxed{\\frac{1}{",
    "$\\sqrt{\\frac{{{}}}}$ \\left( \\boxed{ \\begin{matrix",
    "\\boxed{" + "x^" * 2000 + "2}",
    "\\boxed{\\sum_{n=1}^{10^{100}} n^{n^{n}}}",
]


@pytest.fixture(scope="module")
def verifier():
    with MathVerifier(timeout_s=2.0, num_workers=2) as mv:
        yield mv


@pytest.fixture(scope="module")
def patient_verifier():
    # the agreement table checks equivalence, not speed: a generous timeout so that a busy machine
    # (sympy's first calls in a fresh worker can take seconds) never turns "equal" into "timed out"
    with MathVerifier(timeout_s=30.0, num_workers=2) as mv:
        yield mv


def test_agreement_table(patient_verifier):
    answers = [a for a, _, _ in AGREEMENT]
    completions = [c for _, c, _ in AGREEMENT]
    results = patient_verifier.score(completions, answers)
    wrong = [(a, c, exp, r) for (a, c, exp), r in zip(AGREEMENT, results) if r.correct != exp]
    assert not wrong, "\n".join(f"ref={a!r} completion={c!r}: expected {e}, got {r}" for a, c, e, r in wrong)
    assert all(not r.timed_out and r.error is None for r in results)
    assert results[0].extracted is not None and results[-1].extracted is None


def test_adversarial_completions_finish_within_bound(verifier):
    start = time.perf_counter()
    results = verifier.score(ADVERSARIAL, ["1"] * len(ADVERSARIAL))
    elapsed = time.perf_counter() - start
    assert len(results) == len(ADVERSARIAL)
    assert all(not r.correct for r in results)
    # each item is bounded by the wall timeout (3 s) plus kill/respawn slack; 2 workers share them
    assert all(r.seconds < verifier.timeout_s + 2.0 for r in results), [round(r.seconds, 2) for r in results]
    assert elapsed < verifier.timeout_s * len(ADVERSARIAL) / 2 + 10.0, elapsed
    # and the verifier still works afterwards
    assert verifier.score(["\\boxed{42}"], ["42"])[0].correct


def test_pool_kills_hung_item_and_recovers():
    with IsolatedPool(time.sleep, timeout_s=1.0, num_workers=2) as pool:
        start = time.perf_counter()
        results = pool.map([(0.01,), (60,), (0.01,), (0.02,)])
        assert time.perf_counter() - start < 6.0
        assert [r.timed_out for r in results] == [False, True, False, False]
        assert results[1].value is None and "timed out" in results[1].error
        assert pool.stats["timeouts"] == 1 and pool.stats["respawns"] == 1
        assert len(worker_pids(pool)) == 2
        assert all(not r.timed_out for r in pool.map([(0.0,)] * 4))


def test_pool_survives_worker_crash_and_reports_it():
    with IsolatedPool(os._exit, timeout_s=5.0, num_workers=1) as pool:
        results = pool.map([(3,), (4,)])
        assert all("worker crashed" in r.error for r in results)
        assert "exit code 3" in results[0].error
        assert pool.stats["crashes"] == 2
    with IsolatedPool(divmod, timeout_s=5.0, num_workers=1) as pool:  # an exception is not a crash
        ok, bad = pool.map([(7, 2), (1, 0)])
        assert ok.value == (3, 1) and "ZeroDivisionError" in bad.error and pool.stats["crashes"] == 0


def test_pool_is_lazy_and_reused():
    pool = IsolatedPool(abs, timeout_s=5.0, num_workers=2)
    assert worker_pids(pool) == []  # nothing started before the first call
    assert [r.value for r in pool.map([(-1,), (2,), (-3,)])] == [1, 2, 3]
    pids = worker_pids(pool)
    assert [r.value for r in pool.map([(-4,)])] == [4]
    assert worker_pids(pool) == pids  # same processes across calls
    pool.close()
    assert worker_pids(pool) == []


def test_pool_kills_work_stuck_in_c_code():
    # a big-integer power runs inside C: no Python signal handler can interrupt it, only a kill
    with IsolatedPool(pow, timeout_s=1.0, num_workers=1) as pool:
        start = time.perf_counter()
        (r,) = pool.map([(7, 10**9)])
        assert r.timed_out and time.perf_counter() - start < 5.0


def test_math_reward_function_and_stats():
    reward = load_reward_function("math", timeout_s=3.0, num_workers=1)
    assert isinstance(reward, MathReward)
    try:
        scores = reward(["\\boxed{4}", "\\boxed{5}", "no answer", "\\boxed{9^{9^{9^{9}}}}"], ["4", "4", "4", "4"])
        assert scores == [1.0, 0.0, 0.0, 0.0]
        assert reward.last_stats["timeouts"] == 1.0
        assert reward.last_stats["extracted_frac"] == 0.5
        assert reward(["\\boxed{1}"], ["1"]) == [1.0] and reward.last_stats["timeouts"] == 0.0
    finally:
        reward.close()


@pytest.mark.parametrize("text, expected", [
    ("17+45+38=62+38=100", "100"),
    ("so \\boxed{1,000}.", "1000"),
    ("#### 72\nextra", "72"),
    ("The answer is 3.50.", "3.5"),
    ("$\\boxed{\\text{Yes}}$", "yes"),
    ("no digits here", None),
    ("\\boxed{\\frac{1}{2}", "2"),  # unbalanced box (cut off): falls back to the last number
])
def test_exact_extraction(text, expected):
    assert normalize_answer(extract_final_answer(text)) == expected


def test_exact_reward():
    reward = load_reward_function("exact")
    assert isinstance(reward, ExactMatchReward)
    assert reward(["62+38=100", "62+38=101", "=100.0", ""], ["100", "100", "100", "100"]) == [1.0, 0.0, 1.0, 0.0]
    assert reward.last_stats["extracted_frac"] == 0.75


def test_registry_user_function(tmp_path, monkeypatch):
    (tmp_path / "my_rewards.py").write_text(
        "def length_reward(completions, answers):\n    return [float(len(c)) for c in completions]\n"
        "NOT_CALLABLE = 3\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    fn = load_reward_function("my_rewards:length_reward")
    assert fn(["ab", "abc"], ["", ""]) == [2.0, 3.0]
    fn = load_reward_function(f"{tmp_path / 'my_rewards.py'}:length_reward")
    assert fn(["a"], [""]) == [1.0]
    with pytest.raises(ValueError, match="cannot import module 'no_such_module_xyz'"):
        load_reward_function("no_such_module_xyz:f")
    with pytest.raises(ValueError, match="has no attribute 'missing'"):
        load_reward_function("my_rewards:missing")
    with pytest.raises(ValueError, match="not callable"):
        load_reward_function("my_rewards:NOT_CALLABLE")
    with pytest.raises(ValueError, match="unknown reward function"):
        load_reward_function("maths")
    with pytest.raises(ValueError, match="does not exist"):
        load_reward_function("nowhere/rewards.py:f")
    sys.modules.pop("my_rewards", None)


def test_pool_recovers_after_interrupted_map():
    pool = IsolatedPool(time.sleep, timeout_s=30.0, num_workers=1)
    pool.start()
    (pid,) = worker_pids(pool)
    import signal

    old = signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.3)
        with pytest.raises(KeyboardInterrupt):
            pool.map([(20,)])
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert worker_pids(pool) != [pid]  # the busy worker was replaced
    assert [r.value for r in pool.map([(0.0,)])] == [None] and pool.map([(0.0,)])[0].error is None
    pool.close()


def test_benchmark_answers_verify_against_themselves():
    names = ["aime24", "aime25", "amc23", "math500", "minerva", "olympiadbench", "gsm8k"]
    # every 7th answer of each file: all answer styles (tuples, intervals, units, long formulas)
    answers = [p.answer for ps in load_benchmarks(names).values() for p in ps[::7][:25]]
    with MathVerifier(timeout_s=5.0, num_workers=2) as mv:
        results = mv.score([f"The final answer is \\boxed{{{a}}}." for a in answers], answers)
    failed = [(a, r) for a, r in zip(answers, results) if not r.correct]
    assert len(failed) <= 1, failed  # minerva has one reference with a stray "$ $" inside
