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
