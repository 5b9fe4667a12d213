"""HumanEval+ (EvalPlus v0.1.10) shipped in the package, scored the way EvalPlus scores it.

- the packaged file is the one of the provenance note (sha256), read through importlib.resources;
- every canonical solution passes all 164 problems' base inputs, and the plus inputs of a
  deterministic subset of problems (every 8th; the full plus set, 122,683 calls, runs in
  benchmarks/bench_code_reward.py); a stub passes none;
- a solution that passes HumanEval's own tests (base) fails plus;
- `resrl eval` reports EvalPlus's two numbers (base, base + plus).
"""

from __future__ import annotations

import gzip
import hashlib
import json
from importlib import resources

import pytest

from resrl.tasks.code.data import code_benchmark_problems
from resrl.tasks.code.humanevalplus import DATA_FILE, DATA_SHA256, load_rows
from resrl.tasks.data import load_benchmarks, load_problems
from resrl.eval import EvalConfig, Sample, evaluate
from resrl.tasks.code.reward import CodeExecutor, parse_tests, run_tests
from resrl.tasks.code.sandbox.runner import SandboxLimits

LIMITS = SandboxLimits(memory_mb=1024, processes=16, tmpfs_mb=8)
PLUS_SUBSET = [f"HumanEval/{i}" for i in range(0, 164, 8)]


@pytest.fixture(scope="module")
def humaneval():
    return load_problems("humaneval")


def test_packaged_data_matches_its_provenance():
    here = resources.files("resrl.data") / "packaged" / "code"
    data = (here / DATA_FILE).read_bytes()
    assert hashlib.sha256(data).hexdigest() == DATA_SHA256
    assert "Apache License" in (here / "LICENSE-HumanEvalPlus").read_text()
    assert DATA_SHA256 in (here / "PROVENANCE.md").read_text()
    assert str(here).endswith("resrl/data/packaged/code") and "shared" not in str(here)
    rows = load_rows()
    assert len(rows) == 164 and rows[0]["task_id"] == "HumanEval/0"
    assert sum(len(r["base_input"]) for r in rows) == 1570 and sum(len(r["plus_input"]) for r in rows) == 122683
    assert rows == [json.loads(x) for x in gzip.decompress(data).decode().splitlines()]


def test_humaneval_is_function_level_with_humanevals_own_inputs(humaneval):
    assert len(humaneval) == 164
    tests = parse_tests(humaneval[0].answer)
    assert tests["format"] == "fn" and tests["entry_point"] == "has_close_elements" and "base_count" not in tests
    assert tests["inputs"] == load_rows()[0]["base_input"] and tests["encoding"] == "exact"
    assert parse_tests(humaneval[32].answer)["oracle"] == "find_zero"
    assert list(load_benchmarks(["humaneval"], limit=2)) == ["HumanEval"]


def test_every_canonical_solution_passes_base_and_a_stub_passes_none(humaneval):
    canonical = [(p.extra["canonical_solution"], p.answer) for p in humaneval]
    stubs = [(f"def {p.extra['entry_point']}(*args, **kwargs):\n    return None\n", p.answer) for p in humaneval]
    with CodeExecutor(num_workers=2, timeout_s=10.0, limits=LIMITS) as ex:
        results = ex.run_many(canonical + stubs)
    good, bad = results[:164], results[164:]
    assert [(p.id, r.error) for p, r in zip(humaneval, good) if not r.passed] == []
    assert sum(r.num_tests for r in good) == 1570
    assert [p.id for p, r in zip(humaneval, bad) if r.passed] == []


@pytest.fixture(scope="module")
def plus_subset():
    return code_benchmark_problems("humanevalplus", task_ids=PLUS_SUBSET)  # plus outputs of these alone


@pytest.mark.slow
def test_canonical_solutions_pass_base_and_plus_on_a_subset(plus_subset):
    assert len(plus_subset) == len(PLUS_SUBSET) == 21
    with CodeExecutor(num_workers=2, timeout_s=10.0, limits=LIMITS) as ex:
        results = ex.run_many([(p.extra["canonical_solution"], p.answer) for p in plus_subset])
    assert [(p.id, r.error) for p, r in zip(plus_subset, results) if not r.passed] == []
    assert all(r.base_passed for r in results)
    assert sum(r.num_tests for r in results) == sum(len(parse_tests(p.answer)["inputs"]) for p in plus_subset)


# HumanEval/31 is_prime, trial division bounded at 100: every composite in HumanEval's own test has
# a factor below 100 (13441 * 19, 5 * 17, 11 * 7, ...); EvalPlus's added inputs do not.
BOUNDED_IS_PRIME = "def is_prime(n):\n    return n > 1 and all(n % k for k in range(2, min(n, 100)))\n"


def test_a_solution_that_passes_humanevals_tests_fails_plus():
    (p,) = code_benchmark_problems("humanevalplus", task_ids=["HumanEval/31"])
    (base,) = code_benchmark_problems("humaneval", task_ids=["HumanEval/31"])
    check = {"entry_point": "is_prime", "test": p.extra["test"], "prompt": p.extra["function_prompt"]}
    assert run_tests(BOUNDED_IS_PRIME, check, timeout_s=5.0).passed          # HumanEval's asserts
    assert run_tests(BOUNDED_IS_PRIME, base.answer, timeout_s=5.0).passed  # base
    res = run_tests(BOUNDED_IS_PRIME, p.answer, timeout_s=5.0)
    assert not res.passed and res.base_passed is True and "wrong answer" in res.error
    assert run_tests(p.extra["canonical_solution"], p.answer, timeout_s=5.0).passed


class _Scripted:
    """Sample k of problem i: the canonical solution, the bounded is_prime, or nothing."""

    def __init__(self, problems, plan):
        self.by_id, self.plan = {p.id: p for p in problems}, plan

    def __call__(self, jobs):
        out = []
        for job in jobs:
            p = self.by_id[job.problem_id]
            kind = self.plan[job.problem_id][job.sample_index]
            text = {"good": f"```python\n{p.extra['function_prompt']}{p.extra['canonical_solution']}```",
                    "base-only": f"```python\n{BOUNDED_IS_PRIME}```", "none": "no code"}[kind]
            out.append(Sample(text=text, num_tokens=10, truncated=False))
        return out


def test_eval_reports_base_and_base_plus(tmp_path):
    problems = code_benchmark_problems("humanevalplus", task_ids=["HumanEval/30", "HumanEval/31"])
    plan = {"HumanEval/30": ["good", "none"], "HumanEval/31": ["base-only", "good"]}
    config = EvalConfig(n=2, ks=(1, 2), reward="code", batch_size=4, progress=False, plot=False)
    summary = evaluate(None, {"HumanEvalPlus": problems}, config, tmp_path / "run", generator=_Scripted(problems, plan))
    m = summary["benchmarks"]["HumanEvalPlus"]
    assert m["avg@2"] == pytest.approx(2 / 4) and m["base"]["avg@2"] == pytest.approx(3 / 4)
    assert m["pass@k"]["1"] == pytest.approx((1 / 2 + 1 / 2) / 2) and m["base"]["pass@k"]["2"] == 1.0
    table = (tmp_path / "run" / "results.md").read_text()
    assert "HumanEvalPlus (base) | 2 | 75.0" in table and "HumanEvalPlus (base + plus) | 2 | 50.0" in table
    records = [json.loads(x) for x in (tmp_path / "run" / "samples.jsonl").read_text().splitlines()]
    assert sorted(r["correct_base"] for r in records) == [False, True, True, True]
    # megabytes of tests are not copied into every sample's record: a long answer is its length and sha256
    assert all(len(r["answer"]) <= 20000 for r in records)
    assert any(r["answer"].startswith("<") and "sha256" in r["answer"] for r in records)


DECODE_CYCLIC = ("def decode_cyclic(s: str):\n"
                 "    groups = [s[(3 * i):min((3 * i + 3), len(s))] for i in range((len(s) + 2) // 3)]\n"
                 "    groups = [(group[-1] + group[:-1]) if len(group) == 3 else group for group in groups]\n"
                 "    return ''.join(groups)\n")


def test_a_whole_function_answer_passes_a_check_that_uses_a_prompt_helper(humaneval):
    """HumanEval/38's check calls the prompt's encode_cyclic: the judge defines it from the prompt
    (before the fix a correct whole-function answer failed with a NameError)."""
    p = humaneval[38]
    check = {"entry_point": "decode_cyclic", "test": p.extra["test"], "prompt": p.extra["function_prompt"]}
    assert run_tests(DECODE_CYCLIC, check, timeout_s=5.0).passed
    assert not run_tests(DECODE_CYCLIC.replace("group[-1] + group[:-1]", "group"), check, timeout_s=5.0).passed
    assert run_tests(DECODE_CYCLIC, p.answer, timeout_s=5.0).passed  # and the function-level tests
