"""`resrl demo`: pieces on a tiny random model, and the real pipeline end to end with --quick."""

import argparse
import json
import math

import numpy as np
import pytest

from resrl.data.synthetic import ChainAdditionConfig, ChainAdditionTask


def test_ks_up_to():
    from resrl.metrics import ks_up_to

    assert ks_up_to(16) == [1, 2, 4, 8, 16]
    assert ks_up_to(12) == [1, 2, 4, 8, 12]
    assert ks_up_to(1) == [1]


def test_warm_start_stops_at_the_target_and_learns():
    import torch

    from resrl.demo.config import WarmStart
    from resrl.experiments.warmstart import warm_start
    from resrl.models.tiny import TinyModelConfig, build_tiny_model

    torch.set_num_threads(1)
    model, tok = build_tiny_model(None, TinyModelConfig(hidden_size=32, num_hidden_layers=2, head_dim=8,
                                                        intermediate_size=64, alphabet="0123456789+="))
    task = ChainAdditionTask(ChainAdditionConfig(num_terms=3, min_value=1, max_value=9, num_test=10))
    accs = iter([0.1, 0.2, 0.5, 0.9])
    seen = []
    res = warm_start(model, tok, task.train_problems(200), WarmStart(max_steps=40, batch_size=16, check_every=5,
                                                                      target_accuracy=0.4),
                     dev_accuracy=lambda: next(accs), on_step=lambda s, loss, acc: seen.append((s, acc)))
    assert res["steps"] == 15 and res["dev_accuracy"] == [(5, 0.1), (10, 0.2), (15, 0.5)]
    assert len(seen) == 15 and all(math.isfinite(loss) for loss in res["losses"])
    assert np.mean(res["losses"][-5:]) < np.mean(res["losses"][:5])  # it learns
    assert not model.training


@pytest.fixture(scope="module")
def memorised():
    """A tiny model that has memorised 8 chained-addition problems: greedy is right, samples are mixed
    (so evaluation counts both correct and wrong completions)."""
    import torch

    from resrl.demo.config import WarmStart
    from resrl.experiments.warmstart import warm_start
    from resrl.models.tiny import TinyModelConfig, build_tiny_model

    torch.set_num_threads(1)
    model, tok = build_tiny_model(None, TinyModelConfig(hidden_size=32, num_hidden_layers=2, head_dim=8,
                                                        intermediate_size=64, alphabet="0123456789+="))
    problems = ChainAdditionTask(ChainAdditionConfig(num_terms=3, min_value=1, max_value=9, num_test=8)).test
    warm_start(model, tok, problems, WarmStart(max_steps=30, batch_size=8, learning_rate=1e-2, warmup_steps=5))
    return model, tok, problems


def _records(run_dir):
    """samples.jsonl of an evaluation directory without the timing fields."""
    from resrl.eval.runner import read_records

    return {key: {k: v for k, v in r.items() if not k.endswith("_seconds")}
            for key, r in read_records(run_dir / "samples.jsonl").items()}


def test_demo_evaluation_is_the_runner(memorised, tmp_path):
    """The demo's numbers are `resrl.eval.runner.evaluate`'s (what `resrl eval` runs), called directly
    with the task's reward as scorer: greedy = a temperature-0 run with n = 1, the rest = n samples."""
    from resrl.data.synthetic import chain_reward, is_correct
    from resrl.demo.config import demo_eval_config
    from resrl.experiments.method import HELD_OUT, evaluate, greedy_accuracy
    from resrl.eval.runner import EvalConfig
    from resrl.eval.runner import evaluate as runner_evaluate

    model, tok, problems = memorised
    res = evaluate(model, tok, problems, demo_eval_config(n=4, batch_size=8, max_new_tokens=12), tmp_path / "demo")

    settings = dict(top_p=1.0, max_new_tokens=12, batch_size=8, seed=1234, instruction="", use_chat_template=False,
                    raw_prompts=True, progress=False, plot=False)
    greedy = runner_evaluate(model, {HELD_OUT: problems}, EvalConfig(n=1, temperature=0.0, **settings),
                             tmp_path / "greedy", tokenizer=tok, scorer=chain_reward)
    sampled = runner_evaluate(model, {HELD_OUT: problems}, EvalConfig(n=4, temperature=1.0, **settings),
                              tmp_path / "sampled", tokenizer=tok, scorer=chain_reward)
    g, m = greedy["benchmarks"][HELD_OUT], sampled["benchmarks"][HELD_OUT]
    assert g["avg@1"] > 0 and 0 < m["avg@4"] < 1  # right and wrong samples: the scoring is exercised
    assert res.greedy == g["avg@1"] == greedy_accuracy(model, tok, problems, demo_eval_config(max_new_tokens=12))
    assert (res.avg, res.avg_stderr, res.num_problems) == (m["avg@4"], m["avg_stderr"], len(problems))
    assert res.pass_at == {k: m["pass@k"][str(k)] for k in (1, 2, 4)}
    assert (res.mean_length, res.truncated) == (m["mean_response_tokens"], m["truncation_rate"])
    assert res.summary["benchmarks"] == sampled["benchmarks"]
    # sample by sample the same records; "correct" is the training reward's rule on the raw completion
    for run in ("greedy", "sampled"):
        assert _records(tmp_path / "demo" / run) == _records(tmp_path / run)
    records = _records(tmp_path / "sampled").values()
    assert all(r["correct"] == is_correct(r["completion"], r["answer"]) for r in records)
    assert any(r["correct"] for r in records) and not all(r["correct"] for r in records)


def test_interrupted_demo_evaluation_resumes_to_the_same_result(memorised, tmp_path):
    from resrl.demo.config import demo_eval_config
    from resrl.experiments.method import evaluate

    model, tok, problems = memorised
    cfg = demo_eval_config(n=4, batch_size=8, max_new_tokens=12)
    full = evaluate(model, tok, problems, cfg, tmp_path / "full")

    class Killed(Exception):
        pass

    def kill_midway(done):  # the greedy run's 8 samples come first, then the 32 sampled ones
        if done >= len(problems) + 16:
            raise Killed

    with pytest.raises(Killed):
        evaluate(model, tok, problems, cfg, tmp_path / "resumed", on_progress=kill_midway)
    partial = tmp_path / "resumed" / "sampled" / "samples.jsonl"
    assert len(partial.read_text().splitlines()) == 16
    with partial.open("a") as f:
        f.write('{"benchmark": "held-out split", "problem_id": ')  # a torn last line, as a kill leaves
    seen = []
    resumed = evaluate(model, tok, problems, cfg, tmp_path / "resumed", on_progress=seen.append)
    assert seen == [8, 8 + 16, 8 + 24, 8 + 32]  # greedy and half the samples resumed, the rest drawn
    assert resumed.to_dict() == full.to_dict() and resumed.avg_stderr == full.avg_stderr
    assert _records(tmp_path / "resumed" / "sampled") == _records(tmp_path / "full" / "sampled")


def _parser():
    from resrl.experiments.command import register

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    return parser


def test_cli_arguments_and_errors():
    """The short flags are aliases of the experiment's keys (`--rl-steps` is train.max_steps, `--lr`
    train.learning_rate, `--eval-samples` eval.n); a KEY=VALUE sets any key; a bad value is one error
    naming the key (and the flag that set it) before any work."""
    from resrl.experiments.command import config_from_args

    parser = _parser()
    cfg = config_from_args(parser.parse_args(["demo", "--algorithms", "grpo, resrl", "--rl-steps", "7", "--lr", "3e-4",
                                              "--eval-samples", "4", "--seed", "3", "--out", "x"]))
    assert cfg.algorithms == ("grpo", "resrl") and cfg.seed == 3 and cfg.out == "x"
    assert cfg.train["train"]["max_steps"] == 7 and cfg.train["train"]["learning_rate"] == 3e-4
    assert cfg.eval.n == 4 and cfg.eval.ks == (1, 2, 4)
    same = config_from_args(parser.parse_args(["demo", "--algorithms", "grpo,resrl", "--seed", "3", "--out", "x",
                                               "train.max_steps=7", "train.learning_rate=3e-4", "eval.n=4"]))
    assert same == cfg
    keys = config_from_args(parser.parse_args(["demo", "loss.agg=token-mean", "start.max_steps=20", "task.num_test=64"]))
    assert keys.train["loss"] == {"agg": "token-mean"} and keys.start.max_steps == 20 and keys.task.num_test == 64
    quick = config_from_args(parser.parse_args(["demo", "--quick"]))
    assert quick.is_quick and quick.train["train"]["max_steps"] < cfg.train["train"]["max_steps"]
    with pytest.raises(ValueError, match=r"--rl-steps: config key 'train.max_steps' must be >= 1"):
        config_from_args(parser.parse_args(["demo", "--rl-steps", "0"]))
    with pytest.raises(ValueError, match=r"--lr: config key 'train.learning_rate' must be > 0"):
        config_from_args(parser.parse_args(["demo", "--lr", "-1"]))
    with pytest.raises(ValueError, match=r"--eval-samples: config key 'eval.n'"):
        config_from_args(parser.parse_args(["demo", "--eval-samples", "0"]))
    with pytest.raises(ValueError, match=r"unknown config key 'train.nope'"):
        config_from_args(parser.parse_args(["demo", "train.nope=1"]))
    with pytest.raises(ValueError, match=r"unknown config key 'start.nope'"):
        config_from_args(parser.parse_args(["demo", "start.nope=1"]))
    with pytest.raises(ValueError, match=r"'train.seed'.*--seed"):
        config_from_args(parser.parse_args(["demo", "train.seed=1"]))


def test_help_shows_each_tasks_own_defaults(capsys):
    """`resrl demo --help` prints every task's effective defaults of the keys the short flags set."""
    from resrl.demo.tasks import DEMO_TASKS

    with pytest.raises(SystemExit):
        _parser().parse_args(["demo", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for name, task in DEMO_TASKS.items():
        full, quick = task.config(quick=False), task.config(quick=True)
        cells = [f"{cfg.train['train']['max_steps']}" for cfg in (full, quick)]
        assert (f"{name} {cells[0]} [{cells[1]}], {full.train['train']['learning_rate']} "
                f"[{quick.train['train']['learning_rate']}], {full.eval.n} [{quick.eval.n}]; {full.out}") in text, name
    assert "agents 40 [4], 0.0005 [0.0005], 8 [2]; runs/demo-agents" in text  # not the math task's 250, 1e-4, 16


def test_unknown_algorithm_fails_before_any_work(tmp_path):
    from dataclasses import replace

    from resrl.demo.tasks import get_demo_task
    from resrl.experiments.pipeline import run_experiment

    with pytest.raises(ValueError, match="--algorithms.*nope"):
        run_experiment(replace(get_demo_task("math").config(quick=True), out=str(tmp_path / "d"),
                               algorithms=("grpo", "nope")))
    assert not (tmp_path / "d").exists()


def test_demo_train_config_is_a_valid_training_config(tmp_path):
    """Each method's `resrl train` config is the experiment's training keys, its algorithm over them."""
    from resrl.demo.tasks import get_demo_task
    from resrl.experiments.kinds import kind_of

    task = get_demo_task("math")
    cfg, kind = task.config(quick=False), kind_of(task)
    for algo in cfg.algorithms:
        tc = kind.train_config(cfg, algo, {"data_path": "rows.jsonl"}, tmp_path)
        tc.validate(need_model=False)
        assert tc.algorithm.name == algo and tc.train.max_steps == cfg.train["train"]["max_steps"] == 250
        assert tc.train.learning_rate == cfg.train["train"]["learning_rate"] and tc.train.group_size == 8
        assert tc.train.seed == cfg.seed and tc.data.train == f"{cfg.out}/rows.jsonl"


def test_a_variant_with_several_updates_per_round_checkpoints_between_rounds(tmp_path):
    """The demo checkpoints every checkpoint.save_steps (10) updates, and a checkpoint falls between
    generation rounds: a variant with 4 updates per round (train.update_prompts=4 of 16 prompts, the
    loss grid's) checkpoints every 12 and is a valid training config (it was refused: 10 is no multiple
    of 4); a save_steps the variant gives is its own; one update per round keeps 10."""
    from resrl.demo.tasks import get_demo_task
    from resrl.experiments.kinds import kind_of

    task = get_demo_task("math")
    cfg, kind = task.config(quick=False), kind_of(task)
    assert cfg.train["checkpoint"]["save_steps"] == 10 and cfg.train["train"]["rollout_prompts"] == 16
    inputs = {"data_path": "rows.jsonl"}
    for label, every in (("grpo/train.update_prompts=4", 12), ("resrl/train.update_prompts=8", 10),
                         ("grpo", 10), ("grpo/train.update_prompts=4/checkpoint.save_steps=8", 8)):
        tc = kind.train_config(cfg, label, inputs, tmp_path)
        tc.validate(need_model=False, need_data=False)
        assert tc.checkpoint.save_steps == every, label
    tc = kind.train_config(cfg, "grpo/train.update_prompts=4/checkpoint.save_steps=6", inputs, tmp_path)
    with pytest.raises(Exception, match="checkpoint.save_steps"):  # given by the method: its own, refused
        tc.validate(need_model=False, need_data=False)


def _png(path):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000, path
    from PIL import Image

    with Image.open(path) as im:
        assert im.size[0] > 300 and im.size[1] > 200
        colours = len(im.convert("RGB").resize((64, 64)).getcolors(maxcolors=64 * 64))
    assert colours > 10, f"{path} looks blank"


def test_demo_config_survives_the_workers_json():
    """The worker processes read the demo's settings back from OUT/experiment.json: every field,
    nested sections and tuples included, comes back equal."""
    from dataclasses import replace

    from resrl.demo.tasks import get_demo_task
    from resrl.experiments.kinds import handoff_config
    from resrl.experiments.layout import config_to_dict

    task = get_demo_task("math")
    quick = task.config(quick=True)
    for cfg in (task.config(quick=False), replace(quick, seed=3, algorithms=("grpo", "resrl/resrl.rank=4")),
                replace(quick, eval=replace(quick.eval, ks=(1, 3)), threads=None, curve_steps=(2, 4))):
        back = handoff_config(task, json.loads(json.dumps(config_to_dict(cfg))))
        assert back == cfg and type(back.algorithms) is tuple and back.eval == cfg.eval


def test_phase_lines_when_stdout_is_not_a_terminal():
    """A log gets one line per phase start and end, with the time since the start; on a terminal
    the same calls drive progress bars and print no such lines."""
    import io

    from rich.console import Console

    from resrl.experiments.present.display import Display

    log = io.StringIO()
    with Display(Console(file=log)) as display:  # a StringIO is not a terminal
        assert not display.live
        bar = display.start("warm start (supervised)", total=10)
        for step in range(10):
            display.update(bar, completed=step + 1, info=f"loss {step}")
        seconds = display.done(bar, info="10 steps")
    lines = log.getvalue().splitlines()
    assert len(lines) == 2, lines
    assert lines[0].endswith("] warm start (supervised): start")
    assert f"] warm start (supervised): done in {seconds:.1f} s  10 steps" in lines[1]
    assert lines[1].startswith("[") and " s] " in lines[1]

    term = io.StringIO()
    with Display(Console(file=term, force_terminal=True, width=100)) as display:
        assert display.live
        display.done(display.start("RL grpo", total=3))
    assert "RL grpo" in term.getvalue() and "done in" not in term.getvalue()


def test_bad_workers_is_one_clear_error(tmp_path, capsys):
    from resrl.cli import main

    assert main(["demo", "--quick", "--workers", "0", "--out", str(tmp_path / "d")]) == 2
    assert "--workers must be >= 1" in capsys.readouterr().err
    assert not (tmp_path / "d").exists()


def test_a_failing_worker_is_one_error_naming_its_log(tmp_path):
    """A worker that cannot run (here: no saved warm start) stops the demo with an error that names
    the run and its log; the log holds the worker's own error."""
    from dataclasses import replace

    from resrl.demo.tasks import get_demo_task
    from resrl.experiments.method import run_one
    from resrl.experiments.workers import run_methods

    cfg = replace(get_demo_task("math").config(quick=True), out=str(tmp_path / "demo"), algorithms=("grpo",))
    (tmp_path / "demo").mkdir()
    (tmp_path / "demo" / "train_rows.jsonl").write_text('{"prompt": "1+2+3=", "answer": "6"}\n' * 48)
    lines = []
    with pytest.raises(RuntimeError, match=r"RL grpo.*worker\.log"):
        run_methods(cfg.out, cfg.task_name, cfg, cfg.algorithms, run_one, workers=2, say=lines.append, poll_s=0.05,
                    inputs={"data_path": "train_rows.jsonl"})
    assert any(line.startswith("RL grpo: started") for line in lines)  # it really ran as a worker process
    assert any(line.startswith("RL grpo: FAILED") for line in lines)
    assert "warm_start" in (tmp_path / "demo" / "grpo" / "worker.log").read_text()
    assert not (tmp_path / "demo" / "grpo" / "result.json").exists()


@pytest.fixture(scope="module")
def quick_sequential(tmp_path_factory):
    """`resrl demo --quick --workers 1 --seed 1`: every phase in this process (--quick's default);
    seed 1, not the default 0, so that a worker dropping the seed anywhere shows."""
    import contextlib
    import io

    from resrl.cli import main

    out = tmp_path_factory.mktemp("quick") / "demo"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["demo", "--quick", "--out", str(out), "--workers", "1", "--seed", "1"]) == 0
    return out, printed.getvalue()


def _comparable(summary: dict) -> dict:
    """A summary.json without what may differ between two runs of the same demo: timings, the
    output directory and the number of worker processes."""
    summary = json.loads(json.dumps(summary))
    for key in ("timings", "workers"):
        summary.pop(key)
    summary["config"].pop("out")
    for result in summary["results"].values():
        result.pop("rl_seconds", None)
    return summary


@pytest.mark.slow
def test_parallel_demo_equals_the_sequential_one(quick_sequential, tmp_path, capsys):
    """The RL runs as worker processes (3 at once) give the one-process demo's summary.json bit for
    bit (every policy's greedy, Avg@n, Pass@k, lengths, the ω analysis, the warm start), and the
    run is logged one line per phase. The parallel run starts from a copy of the sequential run's
    saved start (OUT/warm_start, start.json: kept, as a resumed experiment keeps it; that the warm
    start itself is deterministic is test_quick_demo_end_to_end's second run)."""
    import shutil

    from resrl.cli import main

    seq_out, _ = quick_sequential
    out = tmp_path / "par"
    out.mkdir()
    for name in ("warm_start", "start.json", "experiment.json", "train_rows.jsonl"):
        (shutil.copytree if (seq_out / name).is_dir() else shutil.copyfile)(seq_out / name, out / name)
    assert main(["demo", "--quick", "--out", str(out), "--workers", "3", "--seed", "1"]) == 0
    printed = capsys.readouterr().out
    parallel = json.loads((out / "summary.json").read_text())
    sequential = json.loads((seq_out / "summary.json").read_text())
    # the workers really ran: each wrote its log (a process of the job runner) and the demo says so; both
    # modes leave the same done-marker per run (resrl.experiments.layout)
    assert parallel["workers"] == 3 and sequential["workers"] == 1
    for algo in ("grpo", "w-reinforce", "resrl"):
        assert (out / algo / "result.json").is_file() and (seq_out / algo / "result.json").is_file()
        assert f"-m resrl.experiments.workers {out} {algo}" in (out / algo / "worker.log").read_text()
        assert not (seq_out / algo / "worker.log").exists()
        assert f"RL + evaluate {algo}: start" in printed and f"RL + evaluate {algo}: done in" in printed
    assert "warm start: kept from an earlier run of this experiment" in printed
    assert "ω analysis (warm-start policy): done in" in printed
    assert _comparable(parallel) == _comparable(sequential)
    assert parallel["results"]["grpo"]["avg"] != parallel["results"]["warm start"]["avg"]  # RL moved the policy
    # the same per-sample evaluation records
    for policy in ("warm-start", "grpo", "w-reinforce", "resrl"):
        assert _records(out / "eval" / policy / "sampled") == _records(seq_out / "eval" / policy / "sampled")
    # and the same training trajectories, step by step
    for algo in ("grpo", "resrl"):
        steps = [[{k: json.loads(line)[k] for k in ("loss", "grad_norm", "reward")}
                  for line in (o / algo / "metrics.jsonl").read_text().splitlines()] for o in (out, seq_out)]
        assert steps[0] == steps[1] and len(steps[0]) == parallel["config"]["train"]["train"]["max_steps"]


@pytest.mark.slow
def test_resrl_train_runs_the_printed_config(quick_sequential, tmp_path, capsys):
    """`resrl demo --print-config` is the `resrl train` config every method trained with: `resrl train`
    on it (the method's algorithm added) retrains the demo's GRPO run step for step."""
    from resrl.cli import main

    out, _ = quick_sequential
    assert main(["demo", "--quick", "--seed", "1", "--out", str(out), "--print-config"]) == 0
    config = tmp_path / "config.yaml"
    config.write_text(capsys.readouterr().out)
    assert main(["train", "--config", str(config), "algorithm.name=grpo", f"train.output_dir={tmp_path / 'grpo'}"]) == 0

    def steps(path):
        return [{k: json.loads(line)[k] for k in ("loss", "grad_norm", "reward", "entropy")}
                for line in path.read_text().splitlines()]

    assert steps(tmp_path / "grpo" / "metrics.jsonl") == steps(out / "grpo" / "metrics.jsonl")


@pytest.mark.slow
def test_quick_demo_end_to_end(quick_sequential, tmp_path):
    """The real pipeline (warm start, RL through resrl.train for three algorithms, evaluation, ω
    analysis, plots, report) at a tiny budget."""
    from resrl.cli import main

    out, printed = quick_sequential
    assert "report.md" in printed and str(out) in printed

    for name in ("training_curves.png", "pass_at_k.png", "omega_tokens.png"):
        _png(out / name)
    summary = json.loads((out / "summary.json").read_text())
    results = summary["results"]
    # every policy's numbers are the project evaluator's, whose records and summaries are in OUT/eval
    for policy, d in (("warm start", "warm-start"), ("grpo", "grpo"), ("w-reinforce", "w-reinforce"), ("resrl", "resrl")):
        runs = {run: json.loads((out / "eval" / d / run / "summary.json").read_text())["benchmarks"]["held-out split"]
                for run in ("greedy", "sampled")}
        assert results[policy]["greedy"] == runs["greedy"]["avg@1"]
        assert results[policy]["avg"] == runs["sampled"]["avg@8"]
        assert results[policy]["pass_at"] == {k: runs["sampled"]["pass@k"][k] for k in ("1", "2", "4", "8")}
        assert (out / "eval" / d / "sampled" / "samples.jsonl").read_text().count("\n") == 8 * runs["sampled"]["num_problems"]
    assert list(results) == ["warm start", "grpo", "w-reinforce", "resrl"]
    for name, r in results.items():
        assert 0 <= r["greedy"] <= 1 and 0 <= r["avg"] <= 1
        passk = [r["pass_at"][k] for k in sorted(r["pass_at"], key=int)]
        assert sorted(r["pass_at"], key=int) == ["1", "2", "4", "8"]
        assert all(0 <= p <= 1 for p in passk)
        assert all(a <= b + 1e-12 for a, b in zip(passk, passk[1:])), f"{name}: Pass@k must grow with k"
        assert abs(passk[0] - r["avg"]) < 1e-9  # Pass@1 = Avg@n (unbiased estimator)
        assert 1 <= r["mean_length"] <= summary["config"]["eval"]["max_new_tokens"]
    assert results["warm start"]["avg"] > 0.05  # the warm start must leave RL something to work with
    assert results["resrl"]["resrl_mode"] in ("aligned", "extra-pass")

    omega = summary["omega"]
    for alignment in ("predicting", "token"):
        for region, v in omega["mean_omega"][alignment].items():
            if omega["tokens_per_region"][region]:
                assert 0.1 - 1e-6 <= v <= 1 + 1e-6, (alignment, region, v)
    assert omega["tokens_per_region"]["first wrong token"] == omega["num_negatives"] > 0

    report = (out / "report.md").read_text()
    for needle in ("| grpo |", "| w-reinforce |", "| resrl |", "| warm start |", "Pass@8", "hidden_alignment",
                   "training_curves.png", "pass_at_k.png", "omega_tokens.png", "| total |"):
        assert needle in report, needle
    # the RL runs logged every step through the project's trainer
    for algo in ("grpo", "w-reinforce", "resrl"):
        lines = (out / algo / "metrics.jsonl").read_text().splitlines()
        assert len(lines) == summary["config"]["train"]["train"]["max_steps"]
        last = json.loads(lines[-1])
        assert math.isfinite(last["reward"]) and math.isfinite(last["entropy"])
    assert "resrl/omega_mean" in json.loads((out / "resrl" / "metrics.jsonl").read_text().splitlines()[-1])

    # deterministic given the seed, and each algorithm's run independent of which others ran:
    # the same seed with only GRPO reproduces the warm start and GRPO numbers exactly
    again = tmp_path / "again"
    assert main(["demo", "--quick", "--out", str(again), "--algorithms", "grpo", "--seed", "1"]) == 0
    second = json.loads((again / "summary.json").read_text())["results"]
    assert list(second) == ["warm start", "grpo"]
    for name in second:
        for key in ("greedy", "avg", "pass_at", "mean_length"):
            assert second[name][key] == results[name][key], (name, key)
