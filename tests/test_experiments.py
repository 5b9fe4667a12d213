"""The one experiment engine (resrl.experiments): `resrl demo --seeds` and `resrl compare` plan their
jobs on the same job runner, with the same run-directory names, resume and error.

Each test plants a finished job (its done-marker on disk) beside one that fails, runs the real
command, and checks: the finished job is kept (not rerun), the failed one is named with its log,
the log holds the failing process's own error, and the directories follow `resrl.experiments.layout`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from resrl.experiments.layout import (RESULT_FILE, SUMMARY_FILE, TRAINED_FILE, config_from_dict, config_to_dict, run_dir,
                                      run_dir_name, seed_dir, write_result)


def _failed_jobs(exc: RuntimeError) -> dict[str, str]:
    """{job name: 'exit N, see LOG'} from run_jobs' error."""
    match = re.search(r"jobs failed: (\{.*\}); rerun", str(exc))
    assert match, str(exc)
    return eval(match.group(1))  # a dict literal the runner wrote


def test_one_run_directory_name_for_every_experiment(tmp_path):
    label = "resrl/resrl.rank=4/train.learning_rate=3e-5"
    assert run_dir_name(label) == "resrl+resrl.rank=4+train.learning_rate=3e-5"
    assert run_dir(tmp_path, label) == tmp_path / run_dir_name(label)
    assert seed_dir(tmp_path, 3) == tmp_path / "seed-3"
    write_result(tmp_path, label, {"x": float("nan"), "t": (1, 2)})  # whole, then renamed; JSON-safe
    assert json.loads((run_dir(tmp_path, label) / RESULT_FILE).read_text()) == {"x": None, "t": [1, 2]}
    assert not list(run_dir(tmp_path, label).glob("*.tmp"))


def test_the_handoff_rebuilds_every_demo_tasks_config():
    """What a worker reads back is the config the experiment wrote, for each kind of task config."""
    from resrl.demo.tasks import DEMO_TASKS
    from resrl.experiments.kinds import handoff_config

    for name, task in DEMO_TASKS.items():
        for quick in (False, True):
            cfg = task.config(quick=quick)
            back = handoff_config(task, json.loads(json.dumps(config_to_dict(cfg))))
            assert back == cfg, name
            assert type(back.start) is type(cfg.start) and type(back.task) is type(cfg.task), name
    from resrl.demo.agents_task import CorridorGames

    assert config_from_dict(CorridorGames, {"colours": ["a", "b"]}).colours == ("a", "b")


def test_demo_seeds_keep_a_finished_seed_and_name_a_failed_one(tmp_path, capsys):
    """`resrl demo --seeds 0,1`: seed 0 is planted finished (its summary.json), seed 1 fails inside its
    own process (a directory stands where its demo.log goes). An algorithm the demo refuses is one
    error before any process starts."""
    from resrl.cli import main

    out = tmp_path / "ms"
    seed_dir(out, 0).mkdir(parents=True)
    (seed_dir(out, 0) / SUMMARY_FILE).write_text(json.dumps({"results": {}}))
    (seed_dir(out, 1) / "demo.log").mkdir(parents=True)
    assert main(["demo", "--quick", "--seeds", "0,1", "--algorithms", "no-such-method", "--out", str(out)]) == 2
    assert "resrl demo: error: --algorithms: unknown ['no-such-method']" in capsys.readouterr().err
    assert not (seed_dir(out, 1) / "console.log").exists()
    with pytest.raises(RuntimeError) as err:
        main(["demo", "--quick", "--seeds", "0,1", "--algorithms", "grpo", "--out", str(out), "--workers", "2"])
    printed = capsys.readouterr().out
    assert "already done (kept): seed 0" in printed and "seed 0: started" not in printed
    failed = _failed_jobs(err.value)
    assert list(failed) == ["seed 1"]
    log = seed_dir(out, 1) / "console.log"
    assert failed["seed 1"] == f"exit 1, see {log}"
    assert "IsADirectoryError" in log.read_text() and "demo.log" in log.read_text()
    assert json.loads((seed_dir(out, 0) / SUMMARY_FILE).read_text()) == {"results": {}}  # untouched


def test_compare_keeps_a_finished_run_and_names_a_failed_one(tmp_path, capsys):
    """`resrl compare` with two methods on seed 0: grpo is planted finished (model and evaluation),
    the other fails in its training process (a learning rate the config refuses). Its run directory
    is the same `run_dir` the demo's runs use, with the seed below it."""
    from resrl.cli import main

    (tmp_path / "test.jsonl").write_text(json.dumps({"problem": "1+1=", "answer": "2"}) + "\n")
    (tmp_path / "config.yaml").write_text(f"model: {{path: {tmp_path}}}\ndata: {{train: {tmp_path / 'test.jsonl'}}}\n"
                                          "train: {max_steps: 1}\n")
    out = tmp_path / "cmp"
    done = seed_dir(run_dir(out, "grpo"), 0)
    (done / "model").mkdir(parents=True)
    (done / "model" / "config.json").write_text("{}")
    (done / "eval").mkdir()
    (done / "eval" / SUMMARY_FILE).write_text("{}")
    bad = "grpo/train.learning_rate=-1"
    with pytest.raises(RuntimeError) as err:
        main(["compare", "--config", str(tmp_path / "config.yaml"), "--algorithms", f"grpo,{bad}", "--seeds", "0",
              "--data", str(tmp_path / "test.jsonl"), "--out", str(out), "--workers", "2"])
    printed = capsys.readouterr().out
    assert "already done (kept): grpo seed 0" in printed and "grpo seed 0: started" not in printed
    failed = _failed_jobs(err.value)
    assert list(failed) == [f"{bad} seed 0"]
    log = seed_dir(run_dir(out, bad), 0) / "console.log"
    assert failed[f"{bad} seed 0"] == f"exit 2, see {log}"
    assert "resrl train: error: config key 'train.learning_rate' must be > 0" in log.read_text()


def test_run_methods_resumes_only_the_runs_finished_under_the_same_settings(tmp_path):
    """With resume, a finished run (result.json, same task / config / inputs) is kept; a missing one
    runs; any change of settings reruns everything, each discarded run reported to on_discard."""
    from dataclasses import dataclass, replace

    from resrl.experiments.workers import run_methods

    @dataclass
    class Cfg:
        lr: float = 1e-4
        algorithms: tuple = ("a", "b/x=1")

    calls, discarded, said = [], [], []

    def one(cfg, label, inputs):
        calls.append(label)
        return {"label": label, "lr": cfg.lr, "inputs": inputs}

    def go(cfg, inputs=None):
        return run_methods(tmp_path, "t", cfg, cfg.algorithms, one, 1, inputs=inputs or {"d": 1}, resume=True,
                           on_discard=discarded.append, say=said.append)

    assert go(Cfg())["b/x=1"] == {"label": "b/x=1", "lr": 1e-4, "inputs": {"d": 1}}
    assert calls == ["a", "b/x=1"]
    (run_dir(tmp_path, "b/x=1") / RESULT_FILE).unlink()  # killed while b trained, after its checkpoint 2
    (run_dir(tmp_path, "b/x=1") / "checkpoint-2").mkdir()
    (run_dir(tmp_path, "b/x=1") / "metrics.jsonl").write_text('{"step": 1}\n{"step": 2}\n')
    calls.clear(), discarded.clear()
    go(Cfg())
    assert calls == ["b/x=1"] and discarded == ["b/x=1"] and said[-1] == "already done (kept): a"
    # its checkpoint and its log stay for its run_one to resume from (the trainer trims the log to it)
    assert (run_dir(tmp_path, "b/x=1") / "checkpoint-2").is_dir() and (run_dir(tmp_path, "b/x=1") / "metrics.jsonl").is_file()
    go(replace(Cfg(), lr=2e-4))  # another experiment: another's checkpoint is not resumed
    assert not (run_dir(tmp_path, "b/x=1") / "checkpoint-2").exists()
    assert not (run_dir(tmp_path, "b/x=1") / "metrics.jsonl").exists()
    go(Cfg())
    calls.clear(), discarded.clear()
    # killed while evaluating b: its trained.json (and everything beside it) is kept for its run_one
    (run_dir(tmp_path, "b/x=1") / RESULT_FILE).unlink()
    (run_dir(tmp_path, "b/x=1") / TRAINED_FILE).write_text("{}")
    (run_dir(tmp_path, "b/x=1") / "metrics.jsonl").write_text("{}\n")
    calls.clear(), discarded.clear()
    go(Cfg())
    assert calls == ["b/x=1"] and discarded == [] and said[-1] == "trained, evaluation resumes (kept): b/x=1"
    assert (run_dir(tmp_path, "b/x=1") / TRAINED_FILE).is_file() and (run_dir(tmp_path, "b/x=1") / "metrics.jsonl").is_file()
    calls.clear(), discarded.clear()
    go(replace(Cfg(), lr=3e-4))  # other settings: nothing kept, a trained model neither
    assert calls == ["a", "b/x=1"] and discarded == ["a", "b/x=1"]
    assert not (run_dir(tmp_path, "b/x=1") / TRAINED_FILE).exists()
    (run_dir(tmp_path, "a") / TRAINED_FILE).write_text("{}")
    run_methods(tmp_path, "t", replace(Cfg(), lr=3e-4), ("a", "b/x=1"), one, 1, inputs={"d": 1})  # resume off
    assert not (run_dir(tmp_path, "a") / TRAINED_FILE).exists()
    calls.clear()
    go(replace(Cfg(), lr=3e-4), inputs={"d": 2})  # other inputs: nothing kept
    assert calls == ["a", "b/x=1"]
    calls.clear()
    run_methods(tmp_path, "t", Cfg(lr=3e-4), ("a", "b/x=1"), one, 1, inputs={"d": 2})  # resume off: reruns
    assert calls == ["a", "b/x=1"]


# -- an experiment killed in the middle of an RL run ------------------------------------------------------

_KILL_AFTER_CHECKPOINT = """
import json, os, signal, sys
from transformers import TrainerCallback
import resrl.train.runner as runner
from resrl.demo.tasks import get_demo_task
from resrl.experiments.kinds import handoff_config
from resrl.experiments.pipeline import run_experiment

class KillAfter(TrainerCallback):  # SIGKILL right after checkpoint STEP is published: nothing else runs
    def on_save(self, args, state, control, **kwargs):
        if state.global_step == int(sys.argv[1]):
            os.kill(os.getpid(), signal.SIGKILL)

real = runner.run_training
def run_training(config, **kwargs):
    kwargs["callbacks"] = [*(kwargs.get("callbacks") or []), KillAfter()]
    return real(config, **kwargs)
runner.run_training = run_training
run_experiment(handoff_config(get_demo_task("math"), json.loads(sys.argv[2])), workers=1)
"""


def _kill_test_config(out):
    from dataclasses import replace

    from resrl.demo.config import with_overrides
    from resrl.demo.tasks import get_demo_task

    quick = with_overrides(get_demo_task("math").config(quick=True),
                           ["start.max_steps=25", "start.omega_problems=4", "checkpoint.save_steps=2", "eval.n=2"])
    return replace(quick, out=str(out), seed=1, algorithms=("resrl",))


def _untimed(obj):
    """result.json / summary.json without what a clock or the output directory decides."""
    if isinstance(obj, dict):
        return {k: _untimed(v) for k, v in obj.items()
                if k not in ("out", "timings", "workers") and "time" not in k and "seconds" not in k
                and "per_second" not in k}
    if isinstance(obj, list):
        return [_untimed(v) for v in obj]
    return obj


@pytest.mark.slow
def test_an_experiment_killed_mid_training_resumes_from_its_checkpoint_to_the_same_result(tmp_path, monkeypatch):
    """`resrl demo` killed (SIGKILL) right after checkpoint 4 of a 6-step RL run: the same experiment
    run again keeps its start, resumes the run from that checkpoint through the trainer's exact resume,
    and ends with the result.json (every logged step, the evaluation) and summary.json of a run never
    killed."""
    import subprocess
    import sys

    from resrl.engines.trl import ResRLTrainer
    from resrl.experiments.layout import config_to_dict, jsonable
    from resrl.experiments.pipeline import run_experiment

    loaded, real_loaded = [], ResRLTrainer.checkpoint_loaded

    def checkpoint_loaded(self, path):  # the trainer's own resume hook: which checkpoint it continued from
        loaded.append(Path(path).name)
        return real_loaded(self, path)

    monkeypatch.setattr(ResRLTrainer, "checkpoint_loaded", checkpoint_loaded)

    whole = _kill_test_config(tmp_path / "whole")
    run_experiment(whole, workers=1)
    killed = _kill_test_config(tmp_path / "killed")
    proc = subprocess.run([sys.executable, "-c", _KILL_AFTER_CHECKPOINT, "4", json.dumps(config_to_dict(killed))],
                          capture_output=True, text=True, timeout=600)
    run = tmp_path / "killed" / "resrl"
    # the kill really happened right after checkpoint 4: killed by the signal, checkpoint 4 complete, no
    # later one, the training not finished (no trained.json, no model), 4 steps logged
    assert proc.returncode == -9, proc.stderr[-3000:]
    assert sorted(p.name for p in run.glob("checkpoint-*")) == ["checkpoint-2", "checkpoint-4"]
    assert (run / "checkpoint-4" / "trainer_state.json").is_file()
    assert not (run / "trained.json").exists() and not (run / "result.json").exists() and not (run / "model").exists()
    assert len((run / "metrics.jsonl").read_text().splitlines()) == 4
    assert loaded == []  # the uninterrupted run resumed nothing
    summary = run_experiment(killed, workers=1)
    trained = json.loads((run / "trained.json").read_text())
    assert loaded == ["checkpoint-4"] and trained["resumed_from"] == 4  # resumed, not trained again from step 0
    assert not list(run.glob("checkpoint-*"))  # the finished run's checkpoints are gone
    assert [m["step"] for m in trained["metrics"] if "loss" in m] == [1, 2, 3, 4, 5, 6]
    assert _untimed(json.loads((run / "result.json").read_text())) == _untimed(
        json.loads((tmp_path / "whole" / "resrl" / "result.json").read_text()))
    assert _untimed(jsonable(summary)) == _untimed(json.loads((tmp_path / "whole" / "summary.json").read_text()))


def test_a_resumed_run_whose_checkpoint_was_rotated_away_still_finishes(tmp_path, monkeypatch):
    """A run resumed from checkpoint-4 that saves enough later checkpoints for checkpoint rotation
    (save_total_limit) to delete checkpoint-4 before training ends: trained.json still says it resumed
    from step 4 (the step is read before training; reading it after, from the deleted checkpoint,
    failed the finished run with FileNotFoundError)."""
    import shutil
    from types import SimpleNamespace

    import resrl.train.runner as runner
    from resrl.experiments.method import train

    here = tmp_path / "resrl"
    (here / "checkpoint-4").mkdir(parents=True)
    (here / "checkpoint-4" / "trainer_state.json").write_text(json.dumps({"global_step": 4}))
    (here / "metrics.jsonl").write_text("".join(json.dumps({"step": s}) + "\n" for s in range(1, 7)))

    class Saves:
        def save_pretrained(self, path):
            Path(path).mkdir(parents=True, exist_ok=True)

    def run_training(config, resume=False, **kw):
        assert resume
        (here / "checkpoint-6").mkdir()
        (here / "checkpoint-6" / "trainer_state.json").write_text(json.dumps({"global_step": 6}))
        shutil.rmtree(here / "checkpoint-4")  # rotated away by the trainer while it went on
        return SimpleNamespace(model=Saves(), tokenizer=Saves(), resrl_mode="aligned")

    monkeypatch.setattr(runner, "run_training", run_training)
    done = train(SimpleNamespace(), tmp_path / "start", here)
    assert not (here / "checkpoint-4").exists()  # the situation really occurred
    assert done["resumed_from"] == 4 and json.loads((here / "trained.json").read_text())["resumed_from"] == 4
    assert not list(here.glob("checkpoint-*"))
