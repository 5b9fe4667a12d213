"""Two processes (accelerate, CPU, gloo) give the same token weights as one process, and a short
two-process training run with prompt groups split across the processes works end to end."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from train_helpers import build_small_model

HERE = Path(__file__).parent


def launch(script: Path, *argv: str) -> str:
    """`accelerate launch` two CPU processes. accelerate 1.15's `launch --cpu --num_processes 2`
    starts ONE process (its simple launcher); `--multi_gpu` starts two through torch.distributed,
    and Accelerator(cpu=True) / TrainingArguments(use_cpu=True) keep them on CPU with gloo."""
    accelerate = shutil.which("accelerate", path=os.path.dirname(sys.executable)) or shutil.which("accelerate")
    if accelerate is None:
        pytest.fail("the accelerate launcher is not installed next to this python")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "ACCELERATE_USE_CPU": "true"}
    proc = subprocess.run(
        [accelerate, "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
         "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", "0", str(script), *argv],
        capture_output=True, text=True, timeout=280, env=env)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    return out


@pytest.mark.timeout(300)
def test_two_process_weights_equal_single_process():
    out = launch(HERE / "dist_weights_script.py")
    for name in ("resrl", "grpo", "w-reinforce"):
        assert f"{name}: max |two-process - single-process|" in out
    # two processes really ran: without the gather, the split group's advantages would differ
    assert "resrl: without gathering the split group the error would be 0.000e+00" not in out


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_two_process_update_equals_single_process(tmp_path):
    """Groups straddle the processes and the micro-batches (6 rows per process, G = 4, micro-batches
    of 2): every completion is used once, `completions/update_rows` = 12, the weights and the parameters
    after one update equal a single-process recomputation (see dist_train_script.py)."""
    model_dir = build_small_model(tmp_path / "model")
    out = launch(HERE / "dist_train_script.py", model_dir, str(tmp_path / "run"))
    for name in ("world", "straddle", "once", "completions", "weights", "params"):
        assert f"CHECK {name} ok" in out, f"check {name} missing or failed:\n" + out[-4000:]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_two_process_ppo_keeps_the_critic_in_sync_and_whitens_over_both(tmp_path):
    """PPO's separate critic is outside DDP: its gradients are averaged over the processes, and the
    advantages are whitened over both processes' rows (see dist_ppo_script.py)."""
    model_dir = build_small_model(tmp_path / "model")
    out = launch(HERE / "dist_ppo_script.py", model_dir, str(tmp_path / "run"))
    for name in ("world", "critic-synced", "critic-trained", "whitened-over-both", "not-vacuous", "metrics"):
        assert f"CHECK {name} ok" in out, f"check {name} missing or failed:\n" + out[-4000:]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_two_process_flowrl_keeps_the_log_z_head_in_sync(tmp_path):
    model_dir = build_small_model(tmp_path / "model")
    out = launch(HERE / "dist_flowrl_script.py", model_dir, str(tmp_path / "run"))
    for name in ("world", "completions", "head-synced", "body-synced"):
        assert f"CHECK {name} ok" in out, f"check {name} missing or failed:\n" + out[-4000:]
