"""examples/trl/train.py (a TRL GRPO script switched to ResRLTrainer) runs on the tiny model: plain
text and conversational prompts, LoRA, two weighted reward functions, grpo / resrl / nsr, and its
YAML through TrlParser. One optimiser step each (cheap)."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import pytest
from train_helpers import build_small_model

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "trl"


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("trl_example_train", EXAMPLES / "train.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # (dataclasses look their module up)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return build_small_model(tmp_path_factory.mktemp("tiny") / "model")


@pytest.mark.parametrize("algorithm,extra", [
    ("grpo", []),
    ("resrl", ["--conversational", "true"]),
    ("nsr", ["--lora_r", "4"]),
])
def test_example_trains(example, model_dir, tmp_path, algorithm, extra):
    out = tmp_path / "out"
    trainer = example.main([
        "--config", str(EXAMPLES / "resrl.yaml"), "--model_name_or_path", model_dir, "--output_dir", str(out),
        "--algorithm", algorithm, "--max_steps", "1", "--num_prompts", "8", "--max_completion_length", "6",
        "--resrl_rank", "4", "--use_cpu", "true", "--learning_rate", "1e-3", "--save_strategy", "no",
        "--disable_tqdm", "true", *extra])
    assert trainer.algorithm.name == algorithm and trainer.algorithm.resrl.rank == 4  # CLI over the YAML
    assert ("--lora_r" in extra) == hasattr(trainer.model, "peft_config")  # LoRA adapters when asked
    assert trainer.reward_weights.tolist() == pytest.approx([1.0, 0.1])
    logs = [h for h in trainer.state.log_history if "loss" in h]
    assert len(logs) == 1 and math.isfinite(logs[0]["loss"])
    assert "rewards/correctness/mean" in logs[0] and "rewards/brevity/mean" in logs[0]
    assert f"algorithm **{algorithm}**" in (out / "README.md").read_text()
