"""ALFWorld-format games: the generator (alfworld-synth), the environment, the prompts, the loaders.

Engine tests need the optional extra 'agents' (skipped without it unless RESRL_AGENT_TESTS=1);
the parser and loader-error tests run everywhere.
"""

from __future__ import annotations

import json
import pickle
import random
from collections import Counter
from pathlib import Path

import pytest

from resrl.tasks.alfworld.prompts import parse_action, step_messages
from resrl.errors import DataError, InputError


def _games(root: Path, split: str = "*") -> list[Path]:
    return sorted(root.glob(f"json_2.1.1/{split}/*/*/game.tw-pddl"))


def _answer(action: str) -> str:
    return f"<think>the plan says so</think><action>{action}</action>"


# ---- parsing (no engine) ------------------------------------------------------------------------
def test_parse_action_verl_agent_rules():
    p = parse_action("<think>go</think>\n<action> Go  To\nDrawer 1 </action> trailing")
    assert (p.action, p.format_ok, p.reason) == ("go to drawer 1", True, "")
    p = parse_action("<action>open fridge 1</action>")  # no think block: invalid format, action kept
    assert p.action == "open fridge 1" and not p.format_ok and "think" in p.reason
    p = parse_action("I will go to the fridge now, go to fridge 1")  # no tags: last 30 chars, invalid
    assert p.action == "the fridge now, go to fridge 1" and not p.format_ok
    p = parse_action("<think>去冰箱</think><action>go to fridge 1</action>")
    assert p.action == "go to fridge 1" and not p.format_ok and "CJK" in p.reason
    p = parse_action("<think>a</think><action>take apple 1 from table 1</action><action>go to x</action>")
    assert p.action == "take apple 1 from table 1"  # the first block only


def test_parse_action_is_bounded_and_total():
    huge = "<think>" + "x" * 5_000_000 + "</think><action>look</action>"
    p = parse_action(huge, max_text_chars=20000)
    assert not p.format_ok and len(p.action) <= 200  # the tags past the read window are not seen
    p = parse_action("<think>t</think><action>" + "go " * 5_000 + "</action>")
    assert len(p.action) == 200
    for text in ("", None, 12, "\x00\x01<action>", "</action><action>", "<ACTION>LOOK</ACTION><THINK></THINK>"):
        p = parse_action(text)
        assert isinstance(p.action, str) and len(p.action) <= 200
    assert parse_action("<ACTION>LOOK</ACTION><THINK></THINK>").action == "look"


def test_react_style_reads_action_lines():
    p = parse_action("Think: the apple is in the fridge.\nAction: Go to fridge 1\n", style="react")
    assert (p.action, p.format_ok) == ("go to fridge 1", True)
    assert not parse_action("just text", style="react").format_ok


def test_step_prompt_window_and_fields():
    history = [(f"obs {i}", f"act {i}") for i in range(1, 6)]
    text = step_messages("verl-agent", "put a mug in desk", "obs 6", ["look", "help", "go to desk 1"], history, 2)
    content = text[0]["content"]
    assert "Your task is to: put a mug in desk" in content and "already taken 5 step(s)" in content
    assert "[Observation 4: 'obs 4', Action 4: 'act 4']" in content and "obs 3" not in content
    assert "step 6" in content and "'go to desk 1'" in content and "'help'" not in content
    assert "<think>" in content and "<action>" in content
    first = step_messages("verl-agent", "t", "You are in the middle of a room.", ["look"], [], 2)[0]["content"]
    assert "already taken" not in first and "You are in the middle of a room." in first
    react = step_messages("react", "t", "obs 6", ["look"], history, 2)[0]["content"]
    assert all(f"> act {i}" in react for i in range(1, 6)) and "obs 6" in react  # the whole transcript


# ---- loaders (no engine) ------------------------------------------------------------------------
def test_alfworld_names_need_the_data(monkeypatch, tmp_path):
    from resrl.tasks.alfworld.data import load_alfworld_tasks, parse_spec

    monkeypatch.delenv("ALFWORLD_DATA", raising=False)
    with pytest.raises(DataError, match="ALFWORLD_DATA"):
        load_alfworld_tasks("alfworld:valid_unseen")
    with pytest.raises(InputError, match="split"):
        parse_spec("alfworld:test")
    with pytest.raises(DataError, match="not a directory"):
        load_alfworld_tasks(f"alfworld-synth:{tmp_path / 'none'}:train")
    monkeypatch.setenv("ALFWORLD_DATA", str(tmp_path))
    with pytest.raises(DataError, match="does not exist"):
        load_alfworld_tasks("alfworld:train")
    assert parse_spec(f"alfworld-synth:{tmp_path}:unseen")[2] == "valid_unseen"


def test_apportion_follows_alfworld_train_counts():
    from resrl.tasks.alfworld.generator import apportion, task_schedule
    from resrl.tasks.alfworld.scenes import TRAIN_COUNTS

    assert sum(TRAIN_COUNTS.values()) == 3553  # ALFWorld's train split
    assert apportion(3553) == TRAIN_COUNTS
    for n in (1, 6, 7, 100, 134, 140):
        got = apportion(n)
        assert sum(got.values()) == n
        for k, c in TRAIN_COUNTS.items():
            assert abs(got[k] - n * c / 3553) < 1  # largest remainder: within one of the exact share
    assert set(apportion(6).values()) == {1}
    assert task_schedule(50, 0, "train") == task_schedule(50, 0, "train")
    assert task_schedule(50, 0, "train") != task_schedule(50, 1, "train")


# ---- generator + engine -------------------------------------------------------------------------
def test_scene_splits_are_alfreds(alfworld_engine, alfworld_synth):
    import alfworld.gen.constants as c

    from resrl.tasks.alfworld.scenes import split_scenes

    train, seen, unseen = (set(split_scenes(s)) for s in ("train", "valid_seen", "valid_unseen"))
    assert unseen == set(c.TEST_SCENE_NUMBERS) and train == seen == set(c.TRAIN_SCENE_NUMBERS)
    assert not (train & unseen)
    used = {split: {json.loads((g.parent / "traj_data.json").read_text())["scene"]["scene_num"]
                    for g in _games(alfworld_synth, split)} for split in ("train", "valid_seen", "valid_unseen")}
    assert used["train"] <= train and used["valid_seen"] <= train and used["valid_unseen"] <= unseen
    assert used["valid_unseen"] and not (used["valid_unseen"] & (used["train"] | used["valid_seen"]))


def test_generated_set_layout_and_types(alfworld_engine, alfworld_synth):
    from resrl.tasks.alfworld.data import load_alfworld_tasks

    rows = load_alfworld_tasks(f"alfworld-synth:{alfworld_synth}:train")
    assert Counter(r["task_type"] for r in rows) == Counter(["pick", "look", "clean", "heat", "cool", "pick2"])
    for g in _games(alfworld_synth):
        task_dir = g.parent.parent.name.split("-")
        traj = json.loads((g.parent / "traj_data.json").read_text())
        assert task_dir[0] == traj["task_type"] and task_dir[2] == "None" and task_dir[4] == str(traj["scene"]["scene_num"])
        game = json.loads(g.read_text())
        assert game["solvable"] is True and game["walkthrough"] == traj["resrl_synth"]["walkthrough"]
        assert "alfworld-synth" in traj["resrl_synth"]["note"] and "Not ALFWorld's game files" in traj["resrl_synth"]["note"]
    manifest = json.loads((alfworld_synth / "manifest.json").read_text())
    assert manifest["generator"] == "alfworld-synth" and manifest["sizes"]["train"] == 6


def test_unmodified_alfredtwenv_loads_the_set(alfworld_engine, alfworld_synth):
    from alfworld.agents.environment.alfred_tw_env import AlfredTWEnv

    root = alfworld_synth / "json_2.1.1"
    config = {"env": {"goal_desc_human_anns_prob": 0, "task_types": [1, 2, 3, 4, 5, 6], "domain_randomization": False,
                      "expert_type": "planner"},
              "dataset": {"data_path": str(root / "train"), "eval_id_data_path": str(root / "valid_seen"),
                          "eval_ood_data_path": str(root / "valid_unseen"), "num_train_games": -1, "num_eval_games": -1},
              "general": {"training_method": "dagger"}, "dagger": {"training": {"max_nb_steps_per_episode": 50}}}
    assert AlfredTWEnv(config, "train").num_games == 6
    assert AlfredTWEnv(config, "eval_out_of_distribution").num_games == 1


@pytest.mark.slow
def test_expert_walkthrough_wins_every_game(alfworld_engine, alfworld_synth):
    from resrl.tasks.alfworld.data import load_alfworld_tasks
    from resrl.tasks.alfworld import AlfWorldSpec

    env = pickle.loads(pickle.dumps(AlfWorldSpec().build()))  # built from a pickled copy, as a worker would
    played = Counter()
    for split in ("train", "valid_seen", "valid_unseen"):
        for row in load_alfworld_tasks(f"alfworld-synth:{alfworld_synth}:{split}"):
            env.reset(row)
            walkthrough = json.loads(Path(row["game_file"]).read_text())["walkthrough"]
            for i, action in enumerate(walkthrough):
                result = env.step(_answer(action))
                assert not result.info["invalid_action"] and not result.info["invalid_format"]
                assert result.done == (i == len(walkthrough) - 1)
            assert result.reward == 1.0 and result.info["won"] and result.info["task_type"] == row["task_type"]
            assert result.info["steps"] == len(walkthrough) and result.observation == []
            played[row["task_type"]] += 1
    assert sum(played.values()) == 8


@pytest.mark.slow
def test_random_policy_rarely_wins(alfworld_engine, alfworld_synth):
    """Uniformly random admissible actions for 50 steps (measured on this set: see docs/tasks/agents.md)."""
    from resrl.tasks.alfworld.data import load_alfworld_tasks
    from resrl.tasks.alfworld import AlfWorldSpec

    env = AlfWorldSpec(max_steps=50).build()
    rows = [r for r in load_alfworld_tasks(f"alfworld-synth:{alfworld_synth}:train") if r["task_type"] in ("pick2", "heat")]
    wins = episodes = 0
    for seed, row in enumerate(rows):
        rng = random.Random(seed)
        env.reset(row)
        while not env.done:
            result = env.step(_answer(rng.choice([a for a in env.admissible if a != "help"])))
        assert result.info["steps"] <= 50 and result.info["invalid_actions"] == 0
        wins += result.info["won"]
        episodes += 1
    assert episodes == 2 and wins == 0


def test_same_seed_same_bytes(alfworld_engine, alfworld_synth):
    from resrl.tasks.alfworld.generator import make_game, task_schedule

    kinds = task_schedule(6, 0, "train")
    again = make_game(0, "train", 1, kinds[1])
    folder = alfworld_synth / "json_2.1.1" / "train" / again.relpath
    assert (folder / "game.tw-pddl").read_bytes() == again.game
    assert (folder / "traj_data.json").read_bytes() == again.traj
    other = make_game(1, "train", 1, kinds[1])  # another seed: another game, not only other names

    def body(files):
        problem = json.loads(files.game)["pddl_problem"]
        return problem[problem.index("(:init"):]

    assert body(other) != body(again)


def test_hostile_model_outputs_are_bounded_and_counted(alfworld_engine, alfworld_synth):
    from resrl.tasks.alfworld.data import load_alfworld_tasks
    from resrl.tasks.alfworld import NOTHING_HAPPENS, AlfWorldSpec

    row = load_alfworld_tasks(f"alfworld-synth:{alfworld_synth}:valid_unseen")[0]
    walkthrough = json.loads(Path(row["game_file"]).read_text())["walkthrough"]
    outputs = [
        "", "   ", "<think></think><action></action>", "x" * 2_000_000, "<action>" + "é" * 100_000 + "</action>",
        "<think>想</think><action>" + walkthrough[0] + "</action>",  # admissible but CJK: acted, format invalid
        "<think>ok</think><action>go to fridge 1</action>\nYour task is to: nothing. You won!",
        "<think>x</think><action>(:goal (and)) ; won = True</action>", "<think>\x00</think><action>\x00\x01</action>",
        "</action><action>", "<think>x</think><action>" + walkthrough[0].upper() + "\nand then win</action>",
        walkthrough[0],  # a bare admissible command: acted (the fallback finds it), format invalid
    ]
    env = AlfWorldSpec(max_steps=len(outputs)).build()
    env.reset(row)
    infos = []
    for text in outputs:
        before = env.admissible
        result = env.step(text)
        infos.append(result.info)
        assert result.reward == 0.0 and len(result.info["action"]) <= 200
        if result.info["invalid_action"]:
            assert env.observation == NOTHING_HAPPENS and env.admissible == before
    assert result.done and not result.info["won"] and result.info["steps"] == len(outputs)
    assert [i["invalid_action"] for i in infos] == [True] * 5 + [False] + [True] * 5 + [True]
    assert [i["invalid_format"] for i in infos] == [True, True, False, True, True, True, False, False, False, True,
                                                     False, True]
    assert result.info["invalid_actions"] == 11 and result.info["invalid_formats"] == 7
    with pytest.raises(RuntimeError):
        env.step("<think>x</think><action>look</action>")


def test_multi_turn_layout_and_anchor(alfworld_engine, alfworld_synth):
    from resrl.tasks.alfworld.data import load_alfworld_tasks
    from resrl.tasks.alfworld import AlfWorldSpec

    row = load_alfworld_tasks(f"alfworld-synth:{alfworld_synth}:valid_seen")[0]
    walkthrough = json.loads(Path(row["game_file"]).read_text())["walkthrough"]
    env = AlfWorldSpec().build()
    first = env.reset(row)
    assert first == env.step_prompt() and first[0]["role"] == "user"
    start = env.anchor()
    assert start == env.observation and "Your task is to:" in start
    result = env.step(_answer("no such command"))
    assert result.observation[0]["role"] == "user" and "Nothing happens." in result.observation[0]["content"]
    assert env.anchor() == "Nothing happens."
    exact = AlfWorldSpec(anchor_mode="state").build()
    exact.reset(row)
    s0 = exact.anchor()
    exact.step(_answer("no such command"))
    assert exact.anchor() == s0  # nothing changed: the same state
    exact.step(_answer(walkthrough[0]))
    assert exact.anchor() != s0
    with pytest.raises(InputError):
        AlfWorldSpec(prompt_style="bogus")


def test_make_alfworld_cli_same_bytes_in_another_process(alfworld_engine, alfworld_synth, tmp_path):
    """`resrl make-alfworld` in a fresh interpreter (other hash seed) writes the fixture's unseen game
    byte for byte; progress lines are printed; a non-empty output directory is refused."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONHASHSEED": "12345", "PYTHONPATH": str(Path(__file__).parents[1] / "src")}
    cmd = [sys.executable, "-m", "resrl.cli", "make-alfworld", str(tmp_path / "g"), "--unseen", "1", "--seed", "0"]
    run = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert run.returncode == 0, run.stderr
    assert "1/1 games (valid_unseen)" in run.stdout and "games/s" in run.stdout
    mine = _games(tmp_path / "g", "valid_unseen")
    fixture = _games(alfworld_synth, "valid_unseen")
    assert len(mine) == 1 and mine[0].relative_to(tmp_path / "g") == fixture[0].relative_to(alfworld_synth)
    for name in ("game.tw-pddl", "traj_data.json"):
        assert (mine[0].parent / name).read_bytes() == (fixture[0].parent / name).read_bytes()
    again = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert again.returncode == 2 and "already holds games" in again.stderr


def test_alfworld_data_names_read_alfworld_data(alfworld_engine, alfworld_synth, monkeypatch):
    from resrl.tasks.alfworld.data import load_alfworld_tasks

    monkeypatch.setenv("ALFWORLD_DATA", str(alfworld_synth))  # the generated tree is ALFWorld's layout
    rows = load_alfworld_tasks("alfworld:valid_unseen")
    assert len(rows) == 1 and rows[0]["source"] == "alfworld" and rows[0]["split"] == "valid_unseen"
    assert len(load_alfworld_tasks("alfworld:train", limit=4)) == 4


def test_engine_failure_ends_only_that_episode(alfworld_engine, alfworld_synth):
    from resrl.tasks.alfworld.data import load_alfworld_tasks
    from resrl.tasks.alfworld import AlfWorldSpec

    row = load_alfworld_tasks(f"alfworld-synth:{alfworld_synth}:valid_seen")[0]
    walkthrough = json.loads(Path(row["game_file"]).read_text())["walkthrough"]
    env = AlfWorldSpec().build()
    env.reset(row)

    class Broken:
        def step(self, command):
            raise RuntimeError("planner state corrupted")

    env._engine = Broken()
    result = env.step(_answer(walkthrough[0]))
    assert result.done and result.reward == 0.0 and not result.info["won"]
    assert "planner state corrupted" in result.info["engine_error"] and env._engine is None
