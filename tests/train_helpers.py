"""Shared pieces of the training tests: a very small tiny model, a toy data set and rewards."""

from __future__ import annotations

import torch

from resrl.models.tiny import TinyModelConfig, build_tiny_model

# 2 decoder layers (the hook needs a penultimate one), d = 32: a training step takes ~0.1 s
SMALL = TinyModelConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                        head_dim=16, intermediate_size=64, max_position_embeddings=128)


def build_small_model(path):
    torch.set_num_threads(1)  # 2 shared cores: OpenMP spinning across busy cores costs 10-30x
    build_tiny_model(path, SMALL)
    return str(path)


def toy_dataset(n: int = 16):
    from datasets import Dataset

    return Dataset.from_list([{"prompt": [{"role": "user", "content": f"{i}+1="}], "answer": str(i + 1)}
                              for i in range(n)])


def length_reward(completions: list[str], answers: list[str]) -> list[float]:
    """A verifiable toy reward with varied outcomes under a random policy (parity of the text)."""
    return [float(sum(map(ord, c)) % 2 == 0) for c in completions]


def overrides(model_dir, out_dir, *extra):
    return [f"model.path={model_dir}", f"train.output_dir={out_dir}", "train.max_steps=2",
            "train.rollout_prompts=4", "train.group_size=4", "train.max_completion_length=8",
            "train.learning_rate=1e-2", "train.seed=0", "log.progress=false", "log.report_to=[none]",
            *extra]


def make_two_step_env(prompt):
    """Environment factory for multi-turn training tests (`env.name=train_helpers:make_two_step_env`):
    the first model message gets a tool answer "ok", the second ends the trajectory with reward
    len(text) % 2 (varied outcomes under a random policy)."""
    from resrl.envs.base import Environment, StepResult

    class TwoStep(Environment):
        def reset(self, prompt=None):
            self.steps = 0
            return list(prompt) if isinstance(prompt, list) else [{"role": "user", "content": str(prompt)}]

        def step(self, model_text):
            self.steps += 1
            if self.steps == 1:
                return StepResult([{"role": "tool", "content": "ok"}], 0.0, False)
            return StepResult([], float(len(model_text) % 2), True)

    return TwoStep()


def trl_solution_reward(completions, solution, **kwargs):
    """A reward with TRL's signature (for the isolated-worker tests: importable by name): 1 when the
    completion is the row's `solution` column; "boom" raises."""
    out = []
    for c, s in zip(completions, solution):
        if c == "boom":
            raise RuntimeError("boom")
        out.append(float(c == s))
    return out
