"""Code data and evaluation: HumanEval shipped in the package (function-level, HumanEval+'s base
inputs; the canonical-solution tests are in test_humanevalplus.py), {"problem","tests"} jsonl,
function-level rows, veRL parquet, and `resrl eval` with the code reward (exact Avg@n / Pass@k on
scripted samples; the CLI on a tiny model)."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import pytest

from resrl.tasks.code.data import default_reward, is_code_problem
from resrl.data.loaders import Problem
from resrl.tasks.data import load_benchmarks, load_problems
from resrl.data.prompts import build_prompt_messages
from resrl.eval import EvalConfig, Sample, evaluate
from resrl.tasks.code.reward import CodeExecutor, parse_tests
from resrl.tasks.code.sandbox.runner import SandboxLimits

LIMITS = SandboxLimits(memory_mb=512, processes=16, output_kb=64, tmpfs_mb=8)


@pytest.fixture(scope="module")
def humaneval():
    return load_problems("humaneval")


def test_humaneval_loads_offline(humaneval):
    assert len(humaneval) == 164 and humaneval[0].id == "HumanEval/0"
    assert all(is_code_problem(p) for p in humaneval)
    tests = parse_tests(humaneval[0].answer)
    assert tests["format"] == "fn" and tests["entry_point"] == "has_close_elements"  # function-level (HumanEval+ base)
    messages = build_prompt_messages(humaneval[0])  # the code instruction, never the \boxed{} one
    assert "```python" in messages[0]["content"] and "boxed" not in messages[0]["content"]
    assert list(load_benchmarks(["humaneval"], limit=3)) == ["HumanEval"]


def test_function_level_rows_a_user_brings(tmp_path):
    rows = [{"task_id": "t/0", "prompt": "def add(a, b):\n    \"\"\"Add.\"\"\"\n", "entry_point": "add",
             "inputs": [[1, 2], [0.5, 0.25]], "outputs": [3, 0.75]},
            {"id": "t1", "problem": "Return the pair (a, b) as a list.", "entry_point": "pair", "inputs": [[1, 2]],
             "outputs": [[1, 2]]}]
    path = tmp_path / "fn.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    p0, p1 = load_problems(path)
    assert (p0.id, p1.id) == ("t/0", "t1") and is_code_problem(p0) and parse_tests(p0.answer)["format"] == "fn"
    assert "def add(a, b)" in p0.prompt[0]["content"] and "pair" in p1.prompt[0]["content"]
    with CodeExecutor(num_workers=1, timeout_s=5.0, limits=LIMITS) as ex:
        res = ex.run_many([("    return a + b\n", p0.answer), ("def add(a, b):\n    return a - b\n", p0.answer),
                           ("def pair(a, b):\n    return (a, b)\n", p1.answer)])
    assert [r.passed for r in res] == [True, False, True]  # plain-JSON outputs: a tuple reads as a list
    bad = tmp_path / "bad_fn.jsonl"
    bad.write_text(json.dumps({**rows[0], "outputs": [3]}) + "\n")
    with pytest.raises(ValueError, match=r"bad_fn.jsonl: row 1: 2 inputs but 1 outputs"):
        load_problems(bad)


def test_code_jsonl_and_verl_parquet_rows(tmp_path):
    stdio = {"inputs": ["2\n"], "outputs": ["4\n"]}
    rows = [{"problem": "Double n.", "tests": stdio, "id": "d1"},
            {"problem": "Add.", "tests": json.dumps({"fn_name": "add", "inputs": [[1, 2]], "outputs": [3]})}]
    path = tmp_path / "code.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    problems = load_problems(path)
    assert [p.id for p in problems] == ["d1", "code-1"] and all(is_code_problem(p) for p in problems)
    assert parse_tests(problems[0].answer)["outputs"] == ["4\n"]
    assert "```python" in problems[0].prompt[0]["content"]

    import pyarrow as pa
    import pyarrow.parquet as pq

    verl = [{"data_source": "deepcoder", "prompt": [{"role": "user", "content": "Double n. Use ```python."}],
             "ability": "code", "reward_model": {"style": "rule", "ground_truth": json.dumps(stdio)},
             "extra_info": {"index": 7}}]
    pq.write_table(pa.Table.from_pylist(verl), tmp_path / "dc.parquet")
    (p,) = load_problems(tmp_path / "dc.parquet")
    assert p.id == "7" and p.data_source == "deepcoder" and is_code_problem(p)
    assert p.prompt == verl[0]["prompt"] and parse_tests(p.answer)["format"] == "stdio"


def test_bad_code_rows_name_file_and_row(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"problem": "x", "tests": {"inputs": ["1"], "outputs": ["1"]}}) + "\n"
                    + json.dumps({"problem": "y", "tests": {"inputs": ["1"], "outputs": []}}) + "\n")
    with pytest.raises(ValueError, match=r"bad.jsonl: row 2: 'tests': 1 inputs but 0 outputs"):
        load_problems(path)


def test_default_reward_by_data_kind(humaneval):
    math_problems = [Problem(id="m", prompt="1+1?", answer="2", data_source="m")]
    assert default_reward({"HumanEval": humaneval[:2]}) == "code"
    assert default_reward({"m": math_problems}) == "math"
    with pytest.raises(ValueError, match="mixes code and non-code"):
        default_reward({"HumanEval": humaneval[:2], "m": math_problems})


# ---- evaluation -------------------------------------------------------------------------------
PATTERN = {0: [1, 1, 1, 1], 1: [1, 0, 0, 1], 2: [0, 0, 0, 0]}  # per problem, per sample: canonical or stub


class CanonicalOrStub:
    def __init__(self, problems):
        self.by_id = {p.id: p for p in problems}

    def __call__(self, jobs):
        out = []
        for job in jobs:
            p = self.by_id[job.problem_id]
            index = int(p.id.split("/")[1])
            if PATTERN[index][job.sample_index]:
                text = f"Here it is:\n```python\n{p.extra['function_prompt']}{p.extra['canonical_solution']}```"
            else:
                text = "```python\ndef nothing():\n    return None\n```"
            out.append(Sample(text=text, num_tokens=20, truncated=False))
        return out


def test_eval_with_the_code_reward_gives_exact_metrics(humaneval, tmp_path):
    problems = humaneval[:3]
    config = EvalConfig(n=4, ks=(1, 2, 4), reward="code", batch_size=6, progress=False, reward_workers=2)
    summary = evaluate(None, {"HumanEval": problems}, config, tmp_path / "run", generator=CanonicalOrStub(problems))
    m = summary["benchmarks"]["HumanEval"]
    assert m["avg@4"] == pytest.approx((4 + 2 + 0) / 12)
    for k in (1, 2, 4):
        want = [1 - Fraction(math.comb(4 - sum(f), k), math.comb(4, k)) for f in PATTERN.values()]
        assert m["pass@k"][str(k)] == pytest.approx(float(sum(want) / 3))
    records = [json.loads(line) for line in (tmp_path / "run" / "samples.jsonl").read_text().splitlines()]
    assert all(r["extracted"] and "def " in r["extracted"] for r in records)
    assert sum(r["correct"] for r in records) == 6


def test_cli_eval_humaneval_and_humanevalplus_default_to_the_code_reward(tmp_path):
    import torch

    from resrl.cli import main
    from resrl.models.tiny import TinyModelConfig, build_tiny_model

    torch.set_num_threads(1)
    model = tmp_path / "tiny"
    build_tiny_model(model, TinyModelConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                            num_key_value_heads=1, head_dim=16, intermediate_size=64,
                                            max_position_embeddings=1024))
    out = tmp_path / "eval"
    argv = ["eval", "--model", str(model), "--data", "humaneval", "humanevalplus", "--limit", "2", "--n", "2", "--k", "1,2",
            "--max-new-tokens", "8", "--out", str(out), "--no-progress", "--backend", "hf", "--reward-timeout", "2"]
    assert main(argv) == 0
    assert json.loads((out / "config.json").read_text())["reward"] == "code"
    benchmarks = json.loads((out / "summary.json").read_text())["benchmarks"]
    m = benchmarks["HumanEval"]
    assert m["num_problems"] == 2 and m["avg@2"] == 0.0  # a random model writes no working code
    assert benchmarks["HumanEvalPlus"]["base"]["num_problems"] == 2  # EvalPlus's base next to base + plus
    table = (out / "results.md").read_text()
    assert "| HumanEvalPlus (base) | 2 |" in table and "| HumanEvalPlus (base + plus) | 2 |" in table
