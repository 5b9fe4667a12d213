"""A small scripted agent environment for the step-level layout: the corridor game.

It exists to test and document the step-level pipeline (resrl.engines.steps, GiGPO / EMPG)
without ALFWorld: it implements the same interface and info keys as an agent environment
(`step_prompt`, `anchor`, `invalid_action`, `invalid_format`, `won`, `task_type`).

A game (one JSON string, the row's "prompt"): {"game": id, "length": L, "goal": g}. The agent
starts in room 0 of a corridor of L rooms and must reach room g and `open door` there. With coloured
doors, {..., "colour": "red", "decoys": {"blue": 1}}, the task is "open the red door" (the door of
room g), room 1 holds a blue door, and every observation says where each coloured door is from here
("The blue door is here. The red door is to the right."): the agent has to match the task's colour
against the observation's, which is what `resrl demo --task agents` trains. Opening a decoy ends the
episode lost (so a colour-blind policy that opens every door it meets wins only when the goal comes
first); walking past a door, or opening where there is no coloured door, is recoverable:

    actions    go left | go right | open door       (one per step, as <action>...</action>)
    reward     1 on the winning step, 0 otherwise
    anchor     the room (the environment state; the step count is not part of it)

A reply without an <action>...</action> block is a format error (`invalid_format`), any action
that is not admissible is `invalid_action`; both answer "Nothing happens." and cost a step.
Model text never raises: the action is searched in at most `MAX_TEXT` characters.

    make_toy_env(prompt, history_window=2)   # the factory the config names: resrl.envs.toy:make_toy_env
    toy_games(n, seed)                       # n game specs (JSON strings), deterministic
"""

from __future__ import annotations

import json
import random
import re

from resrl.envs.base import Environment, StepResult

ACTIONS = ("go left", "go right", "open door")
MAX_TEXT = 4096
_ACTION_RE = re.compile(r"<action>(.*?)</action>", re.DOTALL | re.IGNORECASE)


def parse_action(text: str) -> str | None:
    """The last <action>...</action> of a reply (lower-cased, spaces collapsed); None if none."""
    found = _ACTION_RE.findall(str(text)[:MAX_TEXT])
    if not found:
        return None
    return " ".join(found[-1].lower().split())[:200]


def toy_games(n: int, seed: int = 0, min_length: int = 2, max_length: int = 4) -> list[str]:
    """`n` distinct-id corridor games as JSON specs, a pure function of (n, seed)."""
    rng = random.Random(seed)
    games = []
    for i in range(n):
        length = rng.randint(min_length, max_length)
        games.append(json.dumps({"game": f"{seed}-{i}", "length": length, "goal": rng.randint(1, length - 1)},
                                sort_keys=True))
    return games


def _spec(prompt) -> dict:
    """The game spec from a row prompt: a JSON string, or a chat list whose last message holds it."""
    if isinstance(prompt, list):
        prompt = prompt[-1]["content"] if prompt else ""
    spec = json.loads(prompt) if isinstance(prompt, str) else dict(prompt)
    length, goal = int(spec["length"]), int(spec["goal"])
    if not 0 < goal < length:
        raise ValueError(f"toy game {spec!r}: goal must be in [1, length)")
    out = {"game": str(spec.get("game", "")), "length": length, "goal": goal, "doors": {}}
    if spec.get("colour") is not None:
        colour, decoys = spec["colour"], dict(spec.get("decoys") or {})
        doors = {colour: goal, **decoys}
        if not all(isinstance(c, str) and c.isalpha() for c in doors) or colour in decoys:
            raise ValueError(f"toy game {spec!r}: colours must be distinct words")
        if not all(isinstance(r, int) and 0 <= r < length and (r != goal or c == colour) for c, r in doors.items()):
            raise ValueError(f"toy game {spec!r}: a decoy's room must be in [0, length) and not the goal's")
        out.update(colour=colour, doors=dict(sorted(doors.items())))
    return out


class CorridorEnv(Environment):
    """The corridor game (module docstring); `history_window` past (observation, action) pairs
    appear in each step prompt, as verl-agent's ALFWorld prompt does."""

    task_type = "corridor"

    def __init__(self, prompt, history_window: int = 2) -> None:
        self.spec = _spec(prompt)
        self.history_window = int(history_window)
        self.reset()

    def _observation(self) -> str:
        if not self.spec["doors"]:
            return f"You are in room {self.pos} of a corridor of {self.spec['length']} rooms."
        # coloured doors: the compass is all the agent sees. The room number and the corridor's length
        # would name the (length, goal) task, and RL on a few training tasks then memorises each task's
        # goal room instead of reading the colour (training success rose while held-out tasks fell)
        text = "You are in a corridor."
        # a compass per coloured door, left to right. Not in colour order: then whether "here" comes in the
        # first or the second sentence follows the colours' alphabetical order, and the warm start learned
        # "open when the first sentence says here" (it mostly passed red decoys, opened blue and green
        # ones). Left to right, standing at a decoy before the goal reads like standing at the goal before
        # a decoy in every word but the colours, so only the task's colour tells them apart
        for colour, room in sorted(self.spec["doors"].items(), key=lambda door: door[1]):
            text += f" The {colour} door is " + ("here." if room == self.pos else
                                                  "to the right." if room > self.pos else "to the left.")
        return text

    def reset(self, prompt=None) -> list[dict]:
        if prompt is not None:
            self.spec = _spec(prompt)
        self.pos, self.steps, self.won = 0, 0, False
        self.history: list[tuple[str, str]] = []  # (observation, action) of past steps
        self.task = (f"open the {self.spec['colour']} door" if self.spec["doors"]
                     else f"open the door of room {self.spec['goal']}")
        return self.step_prompt()

    def admissible(self) -> list[str]:
        acts = []
        if self.pos > 0:
            acts.append("go left")
        if self.pos < self.spec["length"] - 1:
            acts.append("go right")
        acts.append("open door")
        return acts

    def step_prompt(self) -> list[dict]:
        lines = [f"Your task is to: {self.task}."]
        if not self.spec["doors"]:
            lines.append(f"You have taken {self.steps} step(s).")
        # coloured doors: no step count. On the expert's way to the goal it equals the room number, which
        # names the (length, goal) task as the room did (see _observation), so the compass is the only
        # thing a policy that generalises to unseen tasks may read
        recent = self.history[-self.history_window:] if self.history_window > 0 else []
        if recent:
            lines.append("Your last actions:")
            start = self.steps - len(recent) + 1
            lines += [f"[Observation {start + i}: {o} Action {start + i}: {a}]" for i, (o, a) in enumerate(recent)]
        lines.append(f"Now: {self._observation()}")
        lines.append("Admissible actions: " + ", ".join(self.admissible()) + ".")
        lines.append("Answer with <action>your action</action>.")
        return [{"role": "user", "content": "\n".join(lines)}]

    def anchor(self) -> str:
        # the environment state (GiGPO's step groups): with coloured doors the observation omits the
        # room, and two rooms that read alike are still different states
        return self._observation() if not self.spec["doors"] else f"room {self.pos}: {self._observation()}"

    def step(self, model_text: str) -> StepResult:
        obs_before = self._observation()
        action = parse_action(model_text)
        invalid_format = action is None
        invalid_action = invalid_format or action not in self.admissible()
        reward, done = 0.0, False
        if invalid_action:
            answer = "Nothing happens."
        elif action == "go left":
            self.pos -= 1
            answer = self._observation()
        elif action == "go right":
            self.pos += 1
            answer = self._observation()
        elif self.pos == self.spec["goal"]:
            self.won, done, reward = True, True, 1.0
            answer = "The door opens. You win."
        elif self.pos in self.spec["doors"].values():  # a decoy: the wrong colour ends the game
            done = True
            answer = "This is the wrong door. You lose."
        else:
            answer = "The door here is locked."
        self.steps += 1
        self.history.append((obs_before, action if action is not None else "(no action)"))
        info = {"invalid_action": invalid_action, "invalid_format": invalid_format, "action": action}
        if done:
            info.update(won=self.won, task_type=self.task_type, steps=self.steps)
        return StepResult([] if done else [{"role": "user", "content": answer}], reward, done, info)

    def final_reward(self) -> float:
        return 0.0


def make_toy_env(prompt, history_window: int = 2, **_ignored) -> CorridorEnv:
    """The factory a config names (`env.name: resrl.envs.toy:make_toy_env`)."""
    return CorridorEnv(prompt, history_window=history_window)


def expert_action(env: CorridorEnv) -> str:
    """The shortest winning action from the current state (a scripted expert for tests and BC)."""
    if env.pos < env.spec["goal"]:
        return "go right"
    if env.pos > env.spec["goal"]:
        return "go left"
    return "open door"


__all__ = ["CorridorEnv", "make_toy_env", "toy_games", "parse_action", "expert_action", "ACTIONS"]
