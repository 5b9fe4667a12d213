"""The one experiment engine (resrl.experiments): `resrl demo --seeds` and `resrl compare` plan their
jobs on the same job runner, with the same run-directory names, resume and error.

Each test plants a finished job (its done-marker on disk) beside one that fails, runs the real
command, and checks: the finished job is kept (not rerun), the failed one is named with its log,
the log holds the failing process's own error, and the directories follow `resrl.experiments.layout`.
"""

from __future__ import annotations

import json
import re

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
    from resrl.experiments.kinds import experiment_kind

    for name, task in DEMO_TASKS.items():
        kind = experiment_kind(task)
        for quick in (False, True):
            cfg = kind.config(task, quick=quick)
            back = kind.config_from_dict(json.loads(json.dumps(config_to_dict(cfg))))
            assert back == cfg, name
    from resrl.demo.agents_task import AgentsDemoConfig

    assert config_from_dict(AgentsDemoConfig, {"colours": ["a", "b"]}).colours == ("a", "b")


def test_demo_seeds_keep_a_finished_seed_and_name_a_failed_one(tmp_path, capsys):
    """`resrl demo --seeds 0,1`: seed 0 is planted finished (its summary.json), seed 1 fails (an
    algorithm the demo refuses, inside the seed's own process)."""
    from resrl.cli import main

    out = tmp_path / "ms"
    seed_dir(out, 0).mkdir(parents=True)
    (seed_dir(out, 0) / SUMMARY_FILE).write_text(json.dumps({"results": {}}))
    with pytest.raises(RuntimeError) as err:
        main(["demo", "--quick", "--seeds", "0,1", "--algorithms", "no-such-method", "--out", str(out),
              "--workers", "2"])
    printed = capsys.readouterr().out
    assert "already done (kept): seed 0" in printed and "seed 0: started" not in printed
    failed = _failed_jobs(err.value)
    assert list(failed) == ["seed 1"]
    log = seed_dir(out, 1) / "console.log"
    assert failed["seed 1"] == f"exit 2, see {log}"
    assert "resrl demo: error: --algorithms: unknown ['no-such-method']" in log.read_text()
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
    (run_dir(tmp_path, "b/x=1") / RESULT_FILE).unlink()  # killed before b finished
    calls.clear(), discarded.clear()
    go(Cfg())
    assert calls == ["b/x=1"] and discarded == ["b/x=1"] and said[-1] == "already done (kept): a"
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
