"""Checkpoints: a crash while writing one leaves the previous one usable, and a resumed run
reaches the same metrics as an uninterrupted one (CPU, fixed seed)."""

from __future__ import annotations

import math

import pytest
import transformers
from train_helpers import build_small_model, length_reward, overrides, toy_dataset

from resrl.train import load_config, run_training
from resrl.checkpoint import STAGING, latest_checkpoint, list_checkpoints

COMPARED = ("loss", "grad_norm", "reward", "entropy", "completions/mean_length", "resrl/omega_mean")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return build_small_model(tmp_path_factory.mktemp("tiny") / "model")


def _config(model_dir, out):
    return load_config(None, overrides(model_dir, out, "algorithm.name=resrl", "train.max_steps=4",
                                       "checkpoint.save_steps=2", "checkpoint.save_total_limit=null"))


def test_crash_mid_checkpoint_then_resume_matches_uninterrupted(model_dir, tmp_path, monkeypatch):
    full = run_training(_config(model_dir, tmp_path / "full"), train_dataset=toy_dataset(),
                        reward_fn=length_reward)
    assert [m["step"] for m in full.metrics] == [1, 2, 3, 4]

    # crash while checkpoint-4 is being written (after its model weights, before the RNG states)
    real_save_rng = transformers.Trainer._save_rng_state

    def crashing_save_rng(self, output_dir):
        if self.state.global_step == 4:
            raise RuntimeError("simulated crash while writing a checkpoint")
        return real_save_rng(self, output_dir)

    crashed_dir = tmp_path / "crashed"
    monkeypatch.setattr(transformers.Trainer, "_save_rng_state", crashing_save_rng)
    with pytest.raises(RuntimeError, match="simulated crash"):
        run_training(_config(model_dir, crashed_dir), train_dataset=toy_dataset(), reward_fn=length_reward)
    monkeypatch.setattr(transformers.Trainer, "_save_rng_state", real_save_rng)
    assert [p.name for p in list_checkpoints(crashed_dir)] == ["checkpoint-2"]  # no half-written checkpoint-4
    assert (crashed_dir / STAGING).exists()  # the partial write stayed in staging
    assert latest_checkpoint(crashed_dir).name == "checkpoint-2"

    resumed = run_training(_config(model_dir, crashed_dir), train_dataset=toy_dataset(),
                           reward_fn=length_reward, resume=True)
    assert [m["step"] for m in resumed.metrics] == [3, 4]
    by_step = {m["step"]: m for m in full.metrics}
    for entry in resumed.metrics:
        for key in COMPARED:
            a, b = entry.get(key), by_step[entry["step"]].get(key)
            assert (a is None) == (b is None), key
            if a is not None and not (math.isnan(a) and math.isnan(b)):  # NaN: ω undefined on both
                assert math.isclose(a, b, rel_tol=1e-4, abs_tol=1e-6), (entry["step"], key, a, b)
    # the JSONL log holds each step once: the killed run's lines after checkpoint-2 were dropped
    steps = [__import__("json").loads(line)["step"] for line in (crashed_dir / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3, 4]
    assert not (crashed_dir / STAGING).exists()
    assert (crashed_dir / "model" / "config.json").is_file()


# ---- rotation: a checkpoint leaves the run whole ---------------------------------------------------

class Killed(BaseException):
    """A kill: nothing after it runs (not caught by `except Exception` nor by ignore_errors)."""


def _kill_deleting(monkeypatch, victim: str, victims: list):
    """shutil.rmtree on a directory named like `victim` removes optimizer.pt, then the process dies."""
    import shutil
    from pathlib import Path

    real = shutil.rmtree

    def rmtree(path, *args, **kwargs):
        path = Path(path)
        if not victims and path.name.endswith(victim) and (path / "optimizer.pt").exists():
            victims.append(path.name)
            (path / "optimizer.pt").unlink()  # the deletion got one file far
            raise Killed
        return real(path, *args, **kwargs)

    monkeypatch.setattr(shutil, "rmtree", rmtree)
    return real


def _complete(path) -> bool:
    return all((path / name).is_file() for name in ("trainer_state.json", "optimizer.pt", "model.safetensors"))


def test_kill_during_rotation_leaves_no_half_deleted_checkpoint(model_dir, tmp_path, monkeypatch):
    import shutil

    run = tmp_path / "run"

    def cfg(steps):
        return load_config(None, overrides(model_dir, run, "algorithm.name=grpo", f"train.max_steps={steps}",
                                           "checkpoint.save_steps=1", "checkpoint.save_total_limit=2"))

    victims: list = []
    real_rmtree = _kill_deleting(monkeypatch, "checkpoint-1", victims)
    with pytest.raises(Killed):  # the third save publishes checkpoint-3, then rotation deletes checkpoint-1
        run_training(cfg(3), train_dataset=toy_dataset(), reward_fn=length_reward)
    monkeypatch.setattr(shutil, "rmtree", real_rmtree)
    assert len(victims) == 1 and victims[0].endswith("checkpoint-1")  # the kill really hit the deletion
    names = [p.name for p in list_checkpoints(run)]
    assert names == ["checkpoint-2", "checkpoint-3"]  # the half-deleted checkpoint-1 is out of sight
    assert all(_complete(p) for p in list_checkpoints(run))
    assert latest_checkpoint(run).name == "checkpoint-3"
    assert victims == [".deleting-checkpoint-1"]  # renamed first, then deleted
    assert (run / ".deleting-checkpoint-1").is_dir()

    # the next save clears the leftover; the resumed run continued from checkpoint-3
    resumed = run_training(cfg(4), train_dataset=toy_dataset(), reward_fn=length_reward, resume=True)
    assert [m["step"] for m in resumed.metrics] == [4]
    assert sorted(p.name for p in run.iterdir() if p.name.startswith(".deleting")) == []
    assert [p.name for p in list_checkpoints(run)] == ["checkpoint-3", "checkpoint-4"]


def _fake_checkpoint(path, step):
    path.mkdir(parents=True)
    for name in ("optimizer.pt", "model.safetensors"):
        (path / name).write_text(name)
    (path / "trainer_state.json").write_text(__import__("json").dumps({"global_step": step}))


def test_interrupted_rotation_and_replacement_are_never_seen(tmp_path, monkeypatch):
    import resrl.checkpoint as ckpt

    for step in (1, 2, 3):
        _fake_checkpoint(tmp_path / f"checkpoint-{step}", step)
    victims: list = []
    _kill_deleting(monkeypatch, "checkpoint-2", victims)
    with pytest.raises(Killed):
        ckpt.rotate(tmp_path, keep=1)  # deletes checkpoint-1, then dies deleting checkpoint-2
    assert len(victims) == 1 and victims[0].endswith("checkpoint-2")
    assert [p.name for p in list_checkpoints(tmp_path)] == ["checkpoint-3"]
    assert latest_checkpoint(tmp_path).name == "checkpoint-3"
    assert victims == [".deleting-checkpoint-2"]

    # the same step published again: the old copy goes out of sight before the new one comes in
    victims.clear()
    _kill_deleting(monkeypatch, "checkpoint-3", victims)
    _fake_checkpoint(tmp_path / "staged", 3)
    (tmp_path / "staged" / "new").write_text("")
    with pytest.raises(Killed):
        ckpt.publish(tmp_path / "staged", tmp_path / "checkpoint-3")
    assert latest_checkpoint(tmp_path).name == "checkpoint-3" and (tmp_path / "checkpoint-3" / "new").is_file()
    assert [p.name for p in list_checkpoints(tmp_path)] == ["checkpoint-3"]
    assert victims == [".deleting-checkpoint-3"]
    monkeypatch.undo()
    ckpt.clear_leftovers(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint-3"]
