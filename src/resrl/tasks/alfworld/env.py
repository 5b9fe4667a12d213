"""`AlfWorldEnv`: one ALFWorld-format game (real ALFWorld files or `alfworld-synth`) as an `Environment`.

    env = AlfWorldEnv(AlfWorldSpec(max_steps=50, history_window=2))   # picklable spec -> env in a worker
    first = env.reset(task)              # task: a row of resrl.tasks.alfworld.data (dict with "game_file"), or a path
    messages = env.step_prompt()         # step-level layout: the fresh prompt of this step
    result = env.step(model_text)        # StepResult(observation, reward, done, info)
    env.anchor()                         # GiGPO anchor of the current state

The game is played by textworld's PddlEnv with ALFWorld's AlfredDemangler / AlfredInfos wrappers,
the way AlfredTWEnv plays it (no domain randomisation).

Step semantics (verl-agent's ALFWorld settings):
- the command is parsed from the model's message (resrl.tasks.alfworld.prompts.parse_action);
  a command that is not admissible gets the engine's own answer to an unknown command, "Nothing
  happens." (the state is unchanged; the engine is not called, which is what PddlEnv.step does for
  a command outside its valid commands, minus the 0.1-0.2 s recomputation of the same state);
- `info` of every step: `invalid_action` (the command was not admissible), `invalid_format`
  (verl-agent's `valid == 0`: no <action> block, no <think> block, or CJK characters), `action`,
  `format_reason`, `step` (1-based); on the last step also `won`, `task_type`, `steps`,
  `invalid_actions`, `invalid_formats`, `game` (and `engine_error` when the engine itself failed
  on an admissible command: that episode ends unwon, the engine is discarded);
- reward 1.0 on the step that wins, else 0.0 (verl-agent rewards `won`, 10 × won in its reward
  manager; we keep 0/1). The 0.1 invalid-format penalty is NOT in the reward: the step-level
  rollout applies it from `info["invalid_format"]` (verl-agent's `invalid_action_penalty_coef`);
- the episode ends when won or after `max_steps` (50) steps.

Layouts: `step_prompt()` is the step-level layout (verl-agent's: one fresh prompt per step);
`reset()` returns the same first prompt and `step()` returns, while not done, a user message with
the new observation and admissible actions — the concatenated multi-turn layout of
resrl.engines.multiturn.

Anchor (GiGPO's state identity): by default the current observation text, as verl-agent does
(`anchor_mode="observation"`: equal texts = same state; after "Nothing happens." every state looks
alike, which is verl-agent's behaviour too). `anchor_mode="state"` uses the engine's exact PDDL
state instead (sha1 of the sorted facts): only truly identical states share an anchor.

Each active episode holds one engine (a PddlEnv with its own 34 MB copy of libdownward); an
engine goes back to a per-process free list when its episode ends or the env is closed, and the
next reset takes it, so a worker that plays many episodes keeps as many engines as it has
episodes running at once.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from resrl.tasks.alfworld.engine import WELCOME, make_pddl_env
from resrl.tasks.alfworld.prompts import STYLES, observation_message, parse_action, step_messages
from resrl.tasks.alfworld.scenes import SHORT_NAME
from resrl.envs.base import Environment, StepResult
from resrl.errors import DataError, InputError

NOTHING_HAPPENS = "Nothing happens."
_FREE_ENGINES: list = []


@dataclass(frozen=True)
class AlfWorldSpec:
    """Everything needed to build an `AlfWorldEnv` (picklable: send it to a worker process)."""

    max_steps: int = 50
    history_window: int = 2
    prompt_style: str = "verl-agent"      # or "react"
    anchor_mode: str = "observation"      # or "state"
    max_text_chars: int = 20000           # model text read per step
    max_action_chars: int = 200           # command length sent to the engine

    def __post_init__(self) -> None:
        if self.prompt_style not in STYLES:
            raise InputError(f"alfworld: prompt_style must be one of {STYLES}, got {self.prompt_style!r}")
        if self.anchor_mode not in ("observation", "state"):
            raise InputError(f"alfworld: anchor_mode must be 'observation' or 'state', got {self.anchor_mode!r}")
        for key in ("max_steps", "max_text_chars", "max_action_chars"):
            if not isinstance(getattr(self, key), int) or getattr(self, key) < 1:
                raise InputError(f"alfworld: {key} must be an int >= 1, got {getattr(self, key)!r}")
        if not isinstance(self.history_window, int) or self.history_window < 0:
            raise InputError(f"alfworld: history_window must be an int >= 0, got {self.history_window!r}")

    def build(self) -> "AlfWorldEnv":
        return AlfWorldEnv(self)


def _acquire_engine():
    return _FREE_ENGINES.pop() if _FREE_ENGINES else make_pddl_env()


def _strip_banner(text: str) -> str:
    text = text.replace(WELCOME, "")
    return text.strip()


def game_task_type(game_file: Path) -> str:
    """Short task type (pick, look, clean, heat, cool, pick2) from the traj_data.json beside a game."""
    traj = game_file.parent / "traj_data.json"
    try:
        full = json.loads(traj.read_text())["task_type"]
    except (OSError, ValueError, KeyError) as exc:
        raise DataError(f"{traj}: cannot read the task type ({exc})") from None
    return SHORT_NAME.get(full, full)


class AlfWorldEnv(Environment):
    """One game at a time (see the module docstring)."""

    def __init__(self, spec: AlfWorldSpec | None = None, task: Any = None, **overrides) -> None:
        self.spec = spec if spec is not None else AlfWorldSpec(**overrides)
        if spec is not None and overrides:
            self.spec = AlfWorldSpec(**{**asdict(spec), **overrides})
        self.task = task
        self._engine = None
        self.done = True
        self._started = False

    # ---- pickling: the spec and the task travel, the engine does not ------------------------------
    def __getstate__(self):
        return {"spec": self.spec, "task": self.task}

    def __setstate__(self, state):
        self.__init__(state["spec"], state["task"])

    def close(self) -> None:
        """Give the engine back to this process's free list (also done when the episode ends)."""
        engine, self._engine = getattr(self, "_engine", None), None
        if engine is not None:
            _FREE_ENGINES.append(engine)

    def __del__(self):  # an env dropped mid-episode (turn / token limit) still returns its engine
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    # ---- episode --------------------------------------------------------------------------------
    @staticmethod
    def _game_file(task: Any) -> tuple[Path, dict]:
        if isinstance(task, dict):
            if "game_file" not in task:
                raise DataError(f"alfworld task row has no 'game_file' (keys: {sorted(task)[:10]})")
            row = task
            path = Path(task["game_file"])
        elif isinstance(task, (str, Path)):
            path, row = Path(task), {}
        elif hasattr(task, "extra") and isinstance(getattr(task, "extra"), dict) and "game_file" in task.extra:
            row, path = task.extra, Path(task.extra["game_file"])
        else:
            raise InputError(f"AlfWorldEnv.reset: expected a task row (dict with 'game_file') or a path, got "
                             f"{type(task).__name__}")
        if path.is_dir():
            path = path / "game.tw-pddl"
        if not path.is_file():
            raise DataError(f"alfworld game file {path} does not exist")
        return path, row

    def reset(self, prompt: Any = None) -> list[dict]:
        task = prompt if prompt is not None else self.task
        if task is None:
            raise InputError("AlfWorldEnv.reset: no task given (pass a task row or a game file path)")
        path, row = self._game_file(task)
        self.task = task
        self.task_type = row.get("task_type") or game_task_type(path)
        self.game = str(row.get("id") or path.parent)
        if self._engine is None:
            self._engine = _acquire_engine()
        try:
            if getattr(self._engine, "_resrl_game", None) != str(path):  # a new game: parse it (1-3 s);
                self._engine._resrl_game = None                          # the same game again: reset only
                self._engine.load(str(path))
                self._engine._resrl_game = str(path)
            state = self._engine.reset()
        except Exception as exc:  # a broken game file: one error naming it
            self.close()
            raise DataError(f"alfworld game {path} cannot be loaded: {type(exc).__name__}: {exc}") from None
        self._state = state
        self.observation = _strip_banner(state.feedback)
        marker = "Your task is to: "
        at = self.observation.find(marker)
        self.task_text = self.observation[at + len(marker):].strip().rstrip(".") if at != -1 else ""
        self.admissible = list(state["admissible_commands"])
        self.history: list[tuple[str, str]] = []
        self.steps = self.invalid_actions = self.invalid_formats = 0
        self.won, self.done, self._started = False, False, True
        return self.step_prompt()

    def step_prompt(self) -> list[dict]:
        self._need_started()
        return step_messages(self.spec.prompt_style, self.task_text, self.observation, self.admissible, self.history,
                             self.spec.history_window)

    def anchor(self) -> str:
        self._need_started()
        if self.spec.anchor_mode == "observation":
            return self.observation
        facts = sorted(str(f) for f in self._state["_facts"])
        return "state:" + hashlib.sha1("\n".join(facts).encode()).hexdigest()

    def _need_started(self) -> None:
        if not self._started:
            raise RuntimeError("AlfWorldEnv: call reset() first")

    def step(self, model_text: str) -> StepResult:
        self._need_started()
        if self.done:
            raise RuntimeError("AlfWorldEnv.step called after the episode ended (reset() starts the next)")
        parsed = parse_action(model_text, self.spec.prompt_style, self.spec.max_text_chars, self.spec.max_action_chars)
        before = self.observation
        invalid_action = parsed.action not in self.admissible
        engine_error = None
        if invalid_action:
            self.observation = NOTHING_HAPPENS
        else:
            try:
                state, _, _ = self._engine.step(parsed.action)
                self._state = state
                self.observation = _strip_banner(state.feedback)
                self.admissible = list(state["admissible_commands"])
                self.won = bool(state["won"])
            except Exception as exc:  # an engine failure on an admissible command: end this episode, not the run
                engine_error = f"{type(exc).__name__}: {exc}"[:500]
        self.history.append((before, parsed.action))
        self.steps += 1
        self.invalid_actions += invalid_action
        self.invalid_formats += not parsed.format_ok
        self.done = self.won or self.steps >= self.spec.max_steps or engine_error is not None
        info = {"invalid_action": invalid_action, "invalid_format": not parsed.format_ok, "action": parsed.action,
                "format_reason": parsed.reason, "step": self.steps}
        if engine_error is not None:
            info["engine_error"] = engine_error
            self._engine = None  # its state is unknown: not reused
        if self.done:
            info.update(won=self.won, task_type=self.task_type, steps=self.steps, invalid_actions=self.invalid_actions,
                        invalid_formats=self.invalid_formats, game=self.game)
            self.close()
            observation = []
        else:
            observation = observation_message(self.spec.prompt_style, self.observation, self.admissible, self.steps)
        return StepResult(observation, 1.0 if self.won else 0.0, self.done, info)

    def final_reward(self) -> float:
        return 0.0  # stopped before `done` (token or turn limit): not won


def make_alfworld_env(spec: AlfWorldSpec | dict | None = None) -> AlfWorldEnv:
    """An env from a spec (or a dict of its fields): the picklable factory for worker processes."""
    if isinstance(spec, dict):
        spec = AlfWorldSpec(**spec)
    return AlfWorldEnv(spec)


def alfworld_env_factory(prompt: Any = None, **options) -> AlfWorldEnv:
    """`factory(prompt, **options) -> Environment` for a process pool (resrl.envs.pool.EnvPool):
    options are AlfWorldSpec fields; `prompt` (a task row) is the task reset() plays."""
    return AlfWorldEnv(AlfWorldSpec(**options), task=prompt)


def alfworld_step_env(prompt: Any, history_window: int = 2, max_steps: int = 50, **options) -> AlfWorldEnv:
    """The step-layout factory of `env.name: alfworld` (the environment workers import it by name): an
    `AlfWorldEnv` for one task row (a dict, or its JSON string) with verl-agent's settings."""
    task = json.loads(prompt) if isinstance(prompt, str) and prompt.lstrip().startswith("{") else prompt
    return AlfWorldEnv(AlfWorldSpec(max_steps=max_steps, history_window=history_window, **options), task)


__all__ = ["AlfWorldEnv", "AlfWorldSpec", "make_alfworld_env", "alfworld_env_factory", "alfworld_step_env",
           "game_task_type", "NOTHING_HAPPENS"]
