"""`resrl demo --task code-stdin`: stdin/stdout programs from two examples, judged in the code
sandbox on hidden stdin tests as LiveCodeBench judges them; the cheap outputs an optimiser would
find earn nothing; the quick demo end to end."""

from __future__ import annotations

import json

import pytest

from resrl.demo.code_stdin_task import (ALPHABET, INPUTS, CodeStdinConfig, CodeStdinTask, code_reward,
                                        make_stdin_problem, stdin_target)
from resrl.demo.tasks import get_demo_task


def test_registered_with_its_own_pieces():
    task = get_demo_task("code-stdin")
    assert task.reward is code_reward and task.target is stdin_target and task.alphabet == ALPHABET
    assert type(task.config(quick=False).task) is CodeStdinConfig and task.experiment == "supervised"
    assert task.config(quick=False).task_name == "code-stdin" and task.config(quick=True).task_name == "code-stdin"


def test_generator_split_determinism_and_alphabet():
    cfg = CodeStdinConfig(num_test=128, seed=3)
    a, b = CodeStdinTask(cfg), CodeStdinTask(cfg)
    assert [p.id for p in a.test] == [p.id for p in b.test] and len({p.id for p in a.test}) == 128
    train = a.train_problems(2000, stream="rl")
    assert not {p.id for p in a.test} & {p.id for p in train}
    chars = set("".join(p.prompt + stdin_target(p) for p in a.test + train))
    assert chars <= set(ALPHABET), chars - set(ALPHABET)
    for p in a.test[:20]:
        ka, kb = p.extra["a"], p.extra["b"]
        assert p.prompt == f"0>{kb};1>{ka + kb};" and stdin_target(p) == f"print({ka}*int(input())+{kb})"
        tests = json.loads(p.answer)
        assert tests["inputs"] == [f"{x}\n" for x in INPUTS] and tests["outputs"] == [str(ka * x + kb) for x in INPUTS]


def test_targets_and_other_correct_programs_earn_one():
    probs = CodeStdinTask(CodeStdinConfig(num_test=48, seed=0)).test
    assert code_reward([stdin_target(p) for p in probs], [p.answer for p in probs]) == [1.0] * len(probs)
    p = make_stdin_problem(5, 37)
    others = ["print(int(input())*5+37)", "n=int(input())\nprint(37+5*n)", "import sys\nprint(5*int(sys.stdin.read())+37)",
              "```python\nx = int(input())\nprint(x * 5 + 37)\n```", "print(5*int(input())+37.0)"]  # 42.0 == 42 as decimals
    assert code_reward(others, [p.answer] * len(others)) == [1.0] * len(others)


def test_cheap_outputs_earn_nothing():
    """The shown outputs printed, a constant, a wrong slope, printing all plausible values, an early
    exit, reading no input, reading the tests from disk, an endless loop."""
    p = make_stdin_problem(5, 37)
    hacks = [
        "", "print(37)", "print(42)", "print(37)\nprint(42)",
        "n=int(input())\nprint(37 if n==0 else 42)",  # the two shown examples only
        "print(4*int(input())+37)", "print(5*int(input())+38)",
        "print(*range(-100, 200), sep='\\n')",
        "import sys\nsys.exit(0)\nprint(5*int(input())+37)", "import os\nos._exit(0)",
        "print(5*int(input()))", "print(int(input())+37)",
        "import glob\nfor f in glob.glob('/**/*.json*', recursive=True)[:50]:\n    print(open(f).read()[:100])",
        "while True: pass",
    ]
    rewards = code_reward(hacks, [p.answer] * len(hacks))
    assert rewards == [0.0] * len(hacks), [h for h, r in zip(hacks, rewards) if r]


@pytest.mark.slow
def test_code_stdin_quick_demo_end_to_end(tmp_path):
    """`resrl demo --task code-stdin --quick`: warm start, RL in a worker process (which rebuilds the
    task from OUT/experiment.json), evaluation in the sandbox, report and summary."""
    import contextlib
    import io

    from resrl.cli import main

    out = tmp_path / "demo"
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["demo", "--task", "code-stdin", "--quick", "--algorithms", "grpo", "--workers", "1",
                     "--rl-steps", "2", "--eval-samples", "4", "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["config"]["task_name"] == "code-stdin" and list(summary["results"]) == ["warm start", "grpo"]
    cfg = get_demo_task("code-stdin").config(quick=True)
    records = [json.loads(line) for line in (out / "eval" / "warm-start" / "sampled" / "samples.jsonl").open()]
    assert len(records) == 4 * cfg.task.num_test
    passing = [r for r in records if r["correct"]]
    assert passing and len(passing) < len(records)  # the sandbox really judged: some pass, some fail
    for r in passing[:20]:  # every passing program really is correct on more inputs than the tests
        a, b = int(r["problem_id"].split("-")[1].split("x")[0]), int(r["problem_id"].split("+")[1])
        import subprocess
        import sys

        for n in (7, -5, 123):
            got = subprocess.run([sys.executable, "-c", r["extracted"]], input=f"{n}\n", capture_output=True, text=True,
                                 timeout=30).stdout
            assert float(got) == a * n + b
    assert "stdin/stdout program from examples" in (out / "report.md").read_text()
