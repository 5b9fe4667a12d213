"""`resrl demo --task code`: the function-from-examples generator, its reward (the code family's
sandboxed `CodeReward`) attacked with the cheap outputs an optimiser would find, and the quick demo
end to end."""

from __future__ import annotations

import json

import pytest

from resrl.demo.code_task import (ALPHABET, HIDDEN_INPUTS, CodeFunctionsConfig, CodeFunctionsTask, code_reward,
                                  code_target, make_code_problem)
from resrl.demo.tasks import get_demo_task


def test_registered_with_its_own_pieces():
    task = get_demo_task("code")
    assert task.reward is code_reward and task.target is code_target and task.alphabet == ALPHABET
    assert task.config(quick=False).task_name == "code" and task.config(quick=True).task_name == "code"
    assert type(task.config(quick=False).task) is CodeFunctionsConfig


def test_generator_split_determinism_and_alphabet():
    cfg = CodeFunctionsConfig(max_b=99, num_test=128, seed=3)
    a, b = CodeFunctionsTask(cfg), CodeFunctionsTask(cfg)
    assert [p.id for p in a.test] == [p.id for p in b.test] and len({p.id for p in a.test}) == 128
    test_ids = {p.id for p in a.test}
    train = a.train_problems(2000, stream="rl")
    assert [p.id for p in train] == [p.id for p in b.train_problems(2000, stream="rl")]
    assert not test_ids & {p.id for p in train} and not any(a.is_test(p) for p in train)
    assert [p.id for p in a.train_problems(50, stream="sft")] != [p.id for p in train[:50]]
    assert {p.id for p in CodeFunctionsTask(CodeFunctionsConfig(num_test=128, seed=4)).test} != test_ids
    chars = set("".join(p.prompt + code_target(p) for p in a.test + train))
    assert chars <= set(ALPHABET), chars - set(ALPHABET)
    for p in a.test[:20]:  # the prompt shows f(0) and f(1) of the target's function
        ka, kb = p.extra["a"], p.extra["b"]
        assert p.prompt == f"f(0)={kb};f(1)={ka + kb};" and code_target(p) == f"def f(x):return {ka}*x+{kb}"
        tests = json.loads(p.answer)
        assert tests["outputs"] == [ka * x + kb for x in (0, 1, *HIDDEN_INPUTS)] and tests["base_count"] == 2
    with pytest.raises(ValueError, match="num_test"):
        CodeFunctionsConfig(max_a=1, max_b=3, num_test=3)
    with pytest.raises(ValueError, match="max_a"):
        CodeFunctionsConfig(max_a=10)


def test_targets_and_other_correct_spellings_earn_one():
    """The warm start's target passes the real sandbox on every held-out problem, and so does any other
    correct program (RL is not tied to the target's spelling)."""
    task = CodeFunctionsTask(CodeFunctionsConfig(num_test=64, seed=0))
    probs = task.test
    assert code_reward([code_target(p) for p in probs], [p.answer for p in probs]) == [1.0] * len(probs)
    p = make_code_problem(5, 37)
    others = ["def f(x):return x*5+37", "def f(x):return 37+5*x", "def f(x):\n    y = x * 5\n    return y + 37\n",
              "```python\ndef f(x):\n    return 5 * x + 37\n```"]
    assert code_reward(others, [p.answer] * len(others)) == [1.0] * len(others)


def test_cheap_outputs_earn_nothing():
    """What an optimiser tries first: the shown values hard-coded, a constant, a wrong slope, no function,
    an early exit, printing the expected values, an object equal to everything, reading the tests."""
    p = make_code_problem(5, 37)
    hacks = [
        "",
        "def f(x):return 37 if x==0 else 42",  # passes the two shown examples only
        "def f(x):return {0: 37, 1: 42}[x]",
        "def f(x):return 42",
        "def f(x):return 4*x+37",
        "def f(x):return 5*x+38",
        "return 5*x+37",  # a body without the function: nothing named f
        "def g(x):return 5*x+37",
        "import sys\nsys.exit(0)\ndef f(x):return 0",
        "import os\nos._exit(0)",
        "print(37)\nprint(42)\nprint(47)",
        "class E:\n    def __eq__(self, o): return True\n    def __ne__(self, o): return False\n"
        "def f(x):return E()",
        "def f(x):\n    import json, glob\n    return [open(g).read() for g in glob.glob('/**/*.json', recursive=True)]",
        "def f(x):\n    while True: pass",
    ]
    rewards = code_reward(hacks, [p.answer] * len(hacks))
    assert rewards == [0.0] * len(hacks), [h for h, r in zip(hacks, rewards) if r]


@pytest.mark.slow
def test_code_quick_demo_end_to_end(tmp_path):
    """`resrl demo --task code --quick`: warm start, RL in two worker processes (which rebuild the task
    from OUT/experiment.json), evaluation in the sandbox, report and summary."""
    import contextlib
    import io

    from resrl.cli import main

    out = tmp_path / "demo"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["demo", "--task", "code", "--quick", "--algorithms", "grpo,resrl", "--workers", "2",
                     "--eval-samples", "4", "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["config"]["task_name"] == "code" and list(summary["results"]) == ["warm start", "grpo", "resrl"]
    cfg = get_demo_task("code").config(quick=True)
    records = [json.loads(line) for line in (out / "eval" / "warm-start" / "sampled" / "samples.jsonl").open()]
    assert cfg.eval.n == 8 and len(records) == 4 * cfg.task.num_test  # --eval-samples 4: fewer sandbox runs
    # the evaluation scored programs in the sandbox: some pass, and every passing one really is correct
    passing = [r for r in records if r["correct"]]
    assert passing and len(passing) < len(records)
    for r in passing[:20]:
        a, b = int(r["problem_id"].split("-")[1].split("x")[0]), int(r["problem_id"].split("+")[1])
        scope: dict = {}
        exec(r["extracted"] if r.get("extracted") else r["completion"], scope)  # noqa: S102 - our own passing sample
        assert all(scope["f"](x) == a * x + b for x in (0, 1, 2, 3, -2, 10, 77))
    assert summary["results"]["warm start"]["avg"] > 0.05
    report = (out / "report.md").read_text()
    assert "function from examples" in report
