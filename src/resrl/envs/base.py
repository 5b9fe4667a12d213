"""One interface for multi-turn environments (tool APIs now, agent tasks next).

    env = SomeEnv(...)
    messages = env.reset(prompt)             # first observation: the chat messages the model sees
    while True:
        text = policy(messages)              # the model's next message (one assistant turn)
        step = env.step(text)                # StepResult(observation, reward, done, info)
        if step.done: break
        messages += [assistant(text), *step.observation]

Observations are chat messages ({"role", "content"}; roles "user", "tool", "system") so that the
rollout renders them with the model's chat template; they are context for the model, never
trained on. `reward` is the reward of this step (most tasks give everything at the end);
`info` carries diagnostics (errors, the checker's verdict). An environment must never raise on
model text: bad calls become error observations or a zero reward with the reason in `info`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any


@dataclass
class StepResult:
    observation: list[dict]  # messages to append after the model's message ([] when done)
    reward: float = 0.0
    done: bool = False
    info: dict = field(default_factory=dict)


class Environment(ABC):
    """A multi-turn task. One instance serves one trajectory at a time (reset starts a new one)."""

    @abstractmethod
    def reset(self, prompt: Any = None) -> list[dict]:
        """Start a trajectory; return the first observation (chat messages)."""

    @abstractmethod
    def step(self, model_text: str) -> StepResult:
        """Take the model's message; return what the environment answers."""

    def final_reward(self) -> float:
        """Reward of a trajectory stopped before `done` (turn or token limit): 0 unless overridden."""
        return 0.0


__all__ = ["Environment", "StepResult"]
