"""The learning curve of an experiment (`resrl demo --curve-steps`): the models of chosen checkpoint
steps kept past the checkpoints' rotation, evaluated like the final model, aggregated over seeds and
plotted; a run killed between a checkpoint and its keeping still keeps it."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace

import pytest

from resrl.errors import InputError
from resrl.experiments.method import CURVE_DIR, check_curve_steps, curve_models, keep_checkpoint_models


def _checkpoint(run, step, weights=b"w"):
    d = run / f"checkpoint-{step}"
    d.mkdir(parents=True)
    for name in ("config.json", "tokenizer.json"):
        (d / name).write_text("{}")
    (d / "model.safetensors").write_bytes(weights + str(step).encode())
    for name in ("optimizer.pt", "scheduler.pt", "rng_state.pth", "trainer_state.json", "training_args.bin",
                 "resrl_engine_state.json"):
        (d / name).write_text("state")
    return d


def test_kept_models_are_the_checkpoints_model_files_without_the_trainer_state(tmp_path):
    run = tmp_path / "run"
    _checkpoint(run, 4)
    _checkpoint(run, 8)
    assert keep_checkpoint_models(run, (4,)) == [4]
    kept = curve_models(run)
    assert list(kept) == [4] and kept[4] == run / CURVE_DIR / "step-4"
    assert sorted(p.name for p in kept[4].iterdir()) == ["config.json", "model.safetensors", "tokenizer.json"]
    assert (kept[4] / "model.safetensors").read_bytes() == b"w4"
    # a hard link: the kept model survives the checkpoint's rotation (rmtree of checkpoint-4)
    import shutil

    shutil.rmtree(run / "checkpoint-4")
    assert (kept[4] / "model.safetensors").read_bytes() == b"w4"
    # kept once: a later save (the checkpoint may be gone, or rewritten) does not replace it
    _checkpoint(run, 4, weights=b"other")
    assert keep_checkpoint_models(run, (4, 8)) == [8]
    assert (kept[4] / "model.safetensors").read_bytes() == b"w4"


def test_a_run_killed_between_a_checkpoint_and_its_keeping_keeps_it_at_the_next_save(tmp_path):
    """Killed after checkpoint-4 was published and before the keeping finished (a half-written staging
    directory is left): the resumed run's next save keeps step 4 from the checkpoint, which is still
    there (the newest one when the run was killed), and the half copy is replaced."""
    run = tmp_path / "run"
    _checkpoint(run, 4)
    (run / CURVE_DIR / ".step-4.tmp").mkdir(parents=True)
    (run / CURVE_DIR / ".step-4.tmp" / "config.json").write_text("half")
    assert curve_models(run) == {}  # a staging directory is not a kept model
    _checkpoint(run, 6)  # the resumed run's next checkpoint
    assert keep_checkpoint_models(run, (4,)) == [4]
    assert (curve_models(run)[4] / "config.json").read_text() == "{}"
    assert not (run / CURVE_DIR / ".step-4.tmp").exists()


def test_a_curve_step_must_be_a_checkpoint_step_inside_the_run():
    from resrl.demo.config import with_overrides
    from resrl.demo.tasks import get_demo_task
    from resrl.experiments.kinds import kind_of

    task = get_demo_task("math")
    cfg = with_overrides(task.config(quick=True), ["train.max_steps=6", "checkpoint.save_steps=2"])
    inputs = {"data_path": "rows.jsonl"}
    config = kind_of(task).train_config(cfg, "grpo", inputs, "/tmp/x")
    check_curve_steps(config, (2, 4))
    for bad in ((3,), (6,), (8,), (0,)):
        with pytest.raises(InputError, match=r"checkpoint step \(a multiple of checkpoint.save_steps = 2\)"):
            check_curve_steps(config, bad)
    with pytest.raises(InputError, match="curve steps"):  # checked before any run starts
        kind_of(task).train_config(replace(cfg, curve_steps=(3,)), "grpo", inputs, "/tmp/x")


def test_the_command_line_sets_curve_steps_for_every_kind():
    from resrl.experiments.command import config_from_args, register, seed_configs

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["demo", "--quick", "--rl-steps", "60", "--curve-steps", "40,20,40"])
    assert config_from_args(args).curve_steps == (20, 40)
    agents = config_from_args(parser.parse_args(["demo", "--task", "agents", "--quick", "--curve-steps", "2",
                                                 "checkpoint.save_steps=2"]))
    assert agents.curve_steps == (2,)  # every kind keeps and evaluates its curve models the same way
    with pytest.raises(InputError, match="curve steps"):  # not a checkpoint step: refused before any work
        config_from_args(parser.parse_args(["demo", "--task", "agents", "--quick", "--curve-steps", "3"]))
    for bad in ("0", "a", ","):
        with pytest.raises(SystemExit):
            parser.parse_args(["demo", "--curve-steps", bad])
    # handed on to every seed and the dev phase with the rest of the config
    for seed_cfg in seed_configs(config_from_args(args), [0, 1], out="/tmp/x").values():
        assert seed_cfg.curve_steps == (20, 40) and seed_cfg.train["train"]["max_steps"] == 60


def _summary(seed_shift, steps=6):
    def res(avg, curve=None):
        r = {"greedy": avg, "avg": avg, "pass_at": {"1": avg}}
        if curve:
            r["curve"] = {str(k): {"greedy": v, "avg": v, "pass_at": {"1": v}} for k, v in curve.items()}
        return r

    s = seed_shift
    return {"config": {"train": {"train": {"max_steps": steps}}},
            "results": {"warm start": res(0.1 + s), "grpo": res(0.5 + s, {2: 0.2 + s, 4: 0.4 + s}),
                        "resrl": res(0.45 + s, {2: 0.3 + s, 4: 0.35 + s})}}


def test_the_curve_is_aggregated_over_seeds_paired_and_plotted(tmp_path):
    from resrl.experiments.layout import run_dir, seed_dir, write_result
    from resrl.experiments.seeds import curve_steps, write_multiseed

    summaries = {0: _summary(0.0), 1: _summary(0.02), 2: _summary(0.04)}
    for seed in summaries:  # the runs' training logs: GRPO's reward collapses and recovers on seed 1
        for policy in ("grpo", "resrl"):
            rewards = [0.2, 0.4, 0.05 if seed == 1 and policy == "grpo" else 0.5, 0.6, 0.6, 0.7]
            write_result(seed_dir(tmp_path, seed), policy,
                         {"metrics": [{"step": i + 1, "reward": r} for i, r in enumerate(rewards)]})
    assert curve_steps(summaries) == [2, 4, 6]
    before = {s: {**v, "config": {"rl": {"steps": 6}}} for s, v in summaries.items()}  # a kept seed's older summary
    assert curve_steps(before) == [2, 4, 6]
    files = write_multiseed(tmp_path, summaries, baseline="grpo")
    names = [f.name for f in files]
    assert "curve_seeds.png" in names and "training_reward_seeds.png" in names
    assert all(f.stat().st_size > 0 for f in files)
    md = (tmp_path / "multiseed.md").read_text()
    assert "| policy | step 2 | step 4 | step 6 |" in md
    assert "| grpo | 0.220 [" in md.split("along training")[1]  # step 2: mean of 0.20, 0.22, 0.24
    data = json.loads((tmp_path / "multiseed.json").read_text())
    # resrl − grpo: +0.10 at step 2, −0.05 at step 4, −0.05 at the final step 6, on every seed
    paired = data["paired_vs_grpo"]["resrl"]
    assert paired["avg@step2"]["mean"] == pytest.approx(0.10) and paired["avg@step2"]["wins"] == 3
    assert paired["avg@step4"]["mean"] == pytest.approx(-0.05) and paired["avg@step4"]["wins"] == 0
    assert paired["avg"]["mean"] == pytest.approx(-0.05)
    assert "| resrl | +0.100" in md or "| resrl | 0.100" in md
    from resrl.experiments.seeds import training_rewards

    rewards = training_rewards(tmp_path, summaries)
    assert rewards["grpo"][1][2] == (3, 0.05) and set(rewards) == {"grpo", "resrl"}
    assert run_dir(seed_dir(tmp_path, 0), "grpo").is_dir()
    # seeds that kept no curve: no curve section, no curve plot
    plain = {s: {**v, "results": {p: {k: x for k, x in r.items() if k != "curve"} for p, r in v["results"].items()}}
             for s, v in summaries.items()}
    assert curve_steps(plain) == []
    (tmp_path / "plain").mkdir()
    assert "curve_seeds.png" not in [f.name for f in write_multiseed(tmp_path / "plain", plain)]


@pytest.mark.slow
def test_a_run_keeps_and_evaluates_its_curve_models_and_resumes_them(tmp_path):
    """The quick math demo, GRPO for 6 steps with checkpoints every 2 and the curve at 2 and 4: the
    models the trainer's saves kept are the run's own (neither the start nor the final model, and
    different from each other), evaluated by the same evaluator into their own records; the
    checkpoints are gone, the kept models stay; a run killed while evaluating the curve resumes it to
    the same numbers without training again."""
    from safetensors.torch import load_file

    from resrl.demo.config import with_overrides
    from resrl.demo.tasks import get_demo_task
    from resrl.experiments.method import curve_policy, eval_dir
    from resrl.experiments.pipeline import run_experiment

    base = with_overrides(get_demo_task("math").config(quick=True), ["train.max_steps=6", "checkpoint.save_steps=2"])
    cfg = replace(base, out=str(tmp_path / "demo"), algorithms=("grpo",), curve_steps=(2, 4))
    summary = run_experiment(cfg, workers=1)
    out = tmp_path / "demo"
    grpo = summary["results"]["grpo"]
    assert set(grpo["curve"]) == {"2", "4"}
    for entry in grpo["curve"].values():
        assert {"greedy", "avg", "pass_at"} <= set(entry)
    assert not list((out / "grpo").glob("checkpoint-*"))
    kept = curve_models(out / "grpo")
    assert list(kept) == [2, 4]

    def weights(d):
        return load_file(str(next(d.glob("*.safetensors"))))

    w = {"start": weights(out / "warm_start"), 2: weights(kept[2]), 4: weights(kept[4]),
         "final": weights(out / "grpo" / "model")}
    name = "lm_head.weight" if "lm_head.weight" in w["final"] else next(iter(w["final"]))
    changed = [k for k in w["final"] if not w["start"][k].equal(w["final"][k])]
    assert changed, "GRPO changed no weight"
    k = changed[0]
    assert not w["start"][k].equal(w[2][k]) and not w[2][k].equal(w[4][k]) and not w[4][k].equal(w["final"][k]), name
    for step in (2, 4):
        records = eval_dir(out, curve_policy("grpo", step))
        assert (records / "sampled" / "samples.jsonl").is_file() and (records / "greedy" / "summary.json").is_file()
    # killed while evaluating the step-4 model: no result.json, its sampled summary gone
    (out / "grpo" / "result.json").unlink()
    (eval_dir(out, curve_policy("grpo", 4)) / "sampled" / "summary.json").unlink()
    stamp = (out / "grpo" / "model" / "model.safetensors").stat().st_mtime_ns
    again = run_experiment(cfg, workers=1)
    assert (out / "grpo" / "model" / "model.safetensors").stat().st_mtime_ns == stamp  # not trained again
    assert again["results"]["grpo"]["curve"] == grpo["curve"]
