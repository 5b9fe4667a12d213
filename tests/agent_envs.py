"""Faulty environment factories for the EnvPool tests. Module-level and light (no torch): the
pool's spawned workers import this module by name."""

from __future__ import annotations

import os
import time

from resrl.envs.toy import CorridorEnv


class FaultyEnv(CorridorEnv):
    """The corridor, but the action text `crash` kills the worker process, `hang` sleeps forever
    and `raise` raises inside step()."""

    def step(self, model_text):
        if "crash" in model_text:
            os._exit(3)
        if "hang" in model_text:
            time.sleep(3600)
        if "raise" in model_text:
            raise RuntimeError("boom")
        return super().step(model_text)


def make_faulty_env(prompt, history_window: int = 2, **_):
    return FaultyEnv(prompt, history_window=history_window)


BULK = 64 * 1024  # characters: a few such messages fill a pipe's buffer (about 200 KB on Linux)


class BulkyEnv(CorridorEnv):
    """The corridor whose step prompt carries BULK characters of padding."""

    def step_prompt(self):
        messages = super().step_prompt()
        return [{"role": "user", "content": messages[0]["content"] + "\n" + "x" * BULK}]


def make_bulky_env(prompt, **_):
    """prompt: {"game": a corridor game, "pad": anything (the request's own bulk)}."""
    return BulkyEnv(prompt["game"])


def make_broken_env(prompt, **_):
    raise ValueError("cannot build this game")


# -- an ALFWorld-format game without ALFWorld's engine ------------------------------------------------

class FakeAlfworldEngine:
    """A stand-in for the textworld PddlEnv that `resrl.tasks.alfworld.env.AlfWorldEnv` drives: it plays
    a game file's `walkthrough` (the commands in order win; any admissible command answers), so an
    ALFWorld-format game (traj_data.json + game.tw-pddl) plays where the optional engine is not installed."""

    class State(dict):
        feedback = ""

    def load(self, path):
        import json

        self.game = json.loads(open(path).read())

    def _state(self, feedback, won=False):
        s = self.State(admissible_commands=list(self.game["admissible_commands"]), won=won,
                       _facts=[f"progress {self.progress}"])
        s.feedback = feedback
        return s

    def reset(self):
        self.progress = 0
        return self._state(f"-= Welcome to TextWorld, ALFRED! =-\n\n{self.game['intro']}")

    def step(self, command):
        walk = self.game["walkthrough"]
        if self.progress < len(walk) and command == walk[self.progress]:
            self.progress += 1
        won = self.progress == len(walk)
        return self._state(f"You {command}." + (" You won!" if won else ""), won), float(won), won


def write_fake_alfworld_games(root, split: str = "valid_unseen") -> str:
    """Two ALFWorld-format games under ROOT/json_2.1.1/SPLIT (ALFWorld's tree: <task dir>/<trial dir>/
    {traj_data.json, game.tw-pddl}); returns the data set name `alfworld-synth:ROOT:SPLIT`."""
    import json
    from pathlib import Path

    games = {"pick_and_place_simple-Mug-None-Cabinet-1": ("put a mug in cabinet",
                                                           ["go to countertop 1", "take mug 1 from countertop 1",
                                                            "go to cabinet 1"]),
             "look_at_obj_in_light-Book-None-DeskLamp-2": ("look at book under the desklamp",
                                                           ["go to desk 1", "take book 1 from desk 1",
                                                            "use desklamp 1"])}
    for folder, (task, walk) in games.items():
        trial = Path(root) / "json_2.1.1" / split / folder / "trial_T0"
        trial.mkdir(parents=True, exist_ok=True)
        (trial / "traj_data.json").write_text(json.dumps({"task_type": folder.split("-")[0]}))
        (trial / "game.tw-pddl").write_text(json.dumps({
            "solvable": True, "walkthrough": walk, "admissible_commands": sorted(walk + ["look", "inventory"]),
            "intro": f"You are in the middle of a room. Your task is to: {task}."}))
    return f"alfworld-synth:{root}:{split}"


def fake_alfworld_step_env(prompt, history_window: int = 2, max_steps: int = 50, **options):
    """`alfworld_step_env` (the family's registered step factory) on `FakeAlfworldEngine`s: each env this
    worker builds finds a fake engine on the module's free list, where AlfWorldEnv takes its engines."""
    from resrl.tasks.alfworld import env as alfworld_env

    if not alfworld_env._FREE_ENGINES:
        alfworld_env._FREE_ENGINES.append(FakeAlfworldEngine())
    return alfworld_env.alfworld_step_env(prompt, history_window=history_window, max_steps=max_steps, **options)
