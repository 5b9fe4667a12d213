"""Two processes (accelerate launch --cpu, gloo) give the same token weights as one process."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).with_name("dist_weights_script.py")


@pytest.mark.timeout(300)
def test_two_process_weights_equal_single_process():
    accelerate = shutil.which("accelerate", path=os.path.dirname(sys.executable)) or shutil.which("accelerate")
    if accelerate is None:
        pytest.fail("the accelerate launcher is not installed next to this python")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    # accelerate 1.15: `launch --cpu --num_processes 2` starts ONE process (its simple launcher);
    # `--multi_gpu` starts two through torch.distributed, and the script's Accelerator(cpu=True)
    # makes them CPU processes on the gloo backend
    proc = subprocess.run(
        [accelerate, "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
         "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", "0", str(SCRIPT)],
        capture_output=True, text=True, timeout=280, env=env)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    for name in ("resrl", "grpo", "w-reinforce"):
        assert f"{name}: max |two-process - single-process|" in out
    # two processes really ran: without the gather, the split group's advantages would differ
    assert "resrl: without gathering the split group the error would be 0.000e+00" not in out
