"""`resrl demo --task agents` (resrl.demo.agents_task, the steps kind of resrl.experiments.kinds): the quick
demo end to end through the CLI."""

from __future__ import annotations

import json

import pytest

from resrl.demo.agents_task import CorridorGames, agents_config, games_for, split_tasks, task_of


def test_held_out_tasks_are_disjoint_from_training_tasks():
    for seed in (0, 1, 2):
        train, test = split_tasks(7, 0.4, seed)
        assert train and test and not set(train) & set(test)
        assert len(train) + len(test) == 21  # every (length, goal) of corridors of 2..7 rooms, once
        tr, te = games_for(CorridorGames(), seed)
        assert {task_of(g) for g in tr} <= set(train) and {task_of(g) for g in te} == set(test)


@pytest.mark.slow
def test_quick_agents_demo_end_to_end(tmp_path, capsys):
    from resrl.cli import main

    out = tmp_path / "agents"
    assert main(["demo", "--task", "agents", "--quick", "--out", str(out), "--algorithms", "grpo,gigpo",
                 "--workers", "2"]) == 0
    printed = capsys.readouterr().out
    assert "RL runs: 2, 2 worker processes" in printed
    for algo in ("grpo", "gigpo"):  # the runs really were processes of the job runner, one worker each
        assert f"RL + evaluate {algo}: done in" in printed  # the experiment's phase line for a worker's run
        assert f"-m resrl.experiments.workers {out} {algo}" in (out / algo / "worker.log").read_text()
    # the numbers do not depend on the workers: the same experiment with its RL runs in this process
    assert main(["demo", "--task", "agents", "--quick", "--out", str(tmp_path / "one"), "--algorithms", "grpo,gigpo",
                 "--workers", "1"]) == 0
    one = json.loads((tmp_path / "one" / "summary.json").read_text())
    assert not (tmp_path / "one" / "grpo" / "worker.log").exists()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["task"] == "agents"
    assert list(summary["results"]) == ["warm start", "grpo", "gigpo"]
    untimed = lambda results: {p: {k: v for k, v in r.items() if k != "rl_seconds"} for p, r in results.items()}
    assert untimed(json.loads(json.dumps(one["results"]))) == untimed(summary["results"])
    for algo in ("grpo", "gigpo"):  # per round: success, invalid-format and invalid-action rates, steps
        assert json.loads(json.dumps(one["training"][algo]["rounds"])) == summary["training"][algo]["rounds"]
    cfg = agents_config(quick=True)
    for policy, r in summary["results"].items():
        for key in ("greedy", "avg", "avg_se", "invalid_format_rate"):
            assert 0.0 <= r[key] <= 1.0, (policy, key, r[key])
        assert set(r["pass_at"]) == {"1", str(cfg.eval.n)}
        assert r["episodes"] == summary["test_games"] * cfg.eval.n
    rounds = cfg.train["train"]["max_steps"] * cfg.train["train"]["update_prompts"] // cfg.train["train"]["rollout_prompts"]
    for algo in ("grpo", "gigpo"):  # one training-success value per generation round (2 updates each), each a rate
        s = summary["training"][algo]["train_success"]
        assert len(s) == rounds == 2 and all(0.0 <= v <= 1.0 for v in s)
    train = {task_of(json.loads(line)["problem"]) for line in (out / "train_games.jsonl").read_text().splitlines()}
    test = {task_of(json.loads(line)["problem"]) for line in (out / "test_games.jsonl").read_text().splitlines()}
    assert train and test and not train & test
    assert {tuple(t) for t in summary["test_tasks"]} == test
    assert (out / "report.md").is_file() and (out / "training_success.png").stat().st_size > 0


def test_a_failed_agents_worker_raises_one_error_naming_its_job_and_log(tmp_path):
    """A worker process that fails (here: an algorithm the config refuses) ends the demo with one error that
    names the job and its log, and the log holds the worker's own error."""
    from dataclasses import replace

    from resrl.experiments.method import run_one
    from resrl.experiments.workers import run_methods

    cfg = replace(agents_config(quick=True), out=str(tmp_path), algorithms=("no-such-algorithm",))
    lines = []
    with pytest.raises(RuntimeError, match=r"RL no-such-algorithm.*exit [1-9].*worker\.log"):
        run_methods(tmp_path, cfg.task_name, cfg, cfg.algorithms, run_one, workers=2, say=lines.append,
                    inputs={"data_path": str(tmp_path / "games.jsonl"), "test_games": []})
    assert any(line.startswith("RL no-such-algorithm: FAILED") for line in lines)
    assert "no-such-algorithm" in (tmp_path / "no-such-algorithm" / "worker.log").read_text().split("\n", 1)[1]


# -- coloured doors (resrl.envs.toy): what the demo's games ask, and what a shortcut earns --------------

def _play(game: str, policy, max_steps: int = 10) -> bool:
    """Run `policy(env) -> action` on one game; True when it wins within `max_steps`."""
    from resrl.envs.toy import make_toy_env

    env = make_toy_env(game, history_window=0)
    for _ in range(max_steps):
        result = env.step(f"<action>{policy(env)}</action>")
        if result.done:
            return env.won
    return False


def _demo_games(seed: int) -> list[str]:
    train, test = games_for(CorridorGames(), seed)
    return train + test


def test_coloured_doors_observation_says_where_each_door_is_and_a_decoy_loses():
    from resrl.envs.toy import make_toy_env

    game = json.dumps({"game": "g", "length": 5, "goal": 3, "colour": "red", "decoys": {"blue": 1}})
    env = make_toy_env(game, history_window=0)
    text = env.step_prompt()[0]["content"]
    assert "Your task is to: open the red door." in text
    assert "The blue door is to the right. The red door is to the right." in text
    assert not env.step("<action>open door</action>").done  # no coloured door in room 0: recoverable
    env.step("<action>go right</action>")
    assert "The blue door is here. The red door is to the right." in env.step_prompt()[0]["content"]
    # the observation names neither the room nor the corridor's length (they would name the task, which RL
    # then memorises); the anchor, GiGPO's state, still tells rooms apart
    assert "room" not in text and "room" not in env.step_prompt()[0]["content"]
    # nor the number of steps taken, which on the way to the goal is the room number again
    assert "step" not in text and "step" not in env.step_prompt()[0]["content"]
    assert env.anchor() == "room 1: You are in a corridor. The blue door is here. The red door is to the right."
    env.step("<action>go right</action>")  # room 2 (no door): still a different state from its neighbours
    assert env.anchor() == "room 2: You are in a corridor. The blue door is to the left. The red door is to the right."
    env.step("<action>go left</action>")
    lost = env.step("<action>open door</action>")
    assert lost.done and lost.reward == 0.0 and not env.won and lost.info["won"] is False
    env.reset()
    for action in ("go right", "go right", "go right", "go left", "go right"):  # past the goal and back
        assert not env.step(f"<action>{action}</action>").done
    assert "The red door is here." in env.step_prompt()[0]["content"]
    won = env.step("<action>open door</action>")
    assert won.done and won.reward == 1.0 and env.won


def test_the_compass_lists_doors_left_to_right_so_only_the_colour_tells_goal_and_decoy_apart():
    """Listed in colour order, whether "here" came first or second followed the colours, and the warm start
    learned to open when the first sentence said "here". Left to right, a decoy before the goal and the
    goal before a decoy read the same but for the colour words."""
    from resrl.envs.toy import make_toy_env

    def observation_at(game: dict, room: int) -> str:
        env = make_toy_env(json.dumps({"game": "g", "length": 5, **game}), history_window=0)
        for _ in range(room):
            env.step("<action>go right</action>")
        return env.step_prompt()[0]["content"].split("Now: ")[1].split("\n")[0]

    decoy_first = {"goal": 3, "colour": "blue", "decoys": {"red": 1}}  # red sorts after blue
    goal_first = {"goal": 1, "colour": "blue", "decoys": {"red": 3}}
    at_decoy, at_goal = observation_at(decoy_first, 1), observation_at(goal_first, 1)
    assert at_decoy == "You are in a corridor. The red door is here. The blue door is to the right."
    assert at_goal == "You are in a corridor. The blue door is here. The red door is to the right."
    # the same words in the same places but for the two colours
    assert at_decoy.replace("red", "C1").replace("blue", "C2") == at_goal.replace("blue", "C1").replace("red", "C2")
    # and past the first door, the goal behind a decoy reads like a decoy behind the goal
    assert observation_at(decoy_first, 3) == "You are in a corridor. The red door is to the left. The blue door is here."


def test_games_without_colours_read_as_before():
    from resrl.envs.toy import make_toy_env

    env = make_toy_env(json.dumps({"game": "g", "length": 4, "goal": 2}), history_window=1)
    assert env.step_prompt()[0]["content"] == (
        "Your task is to: open the door of room 2.\nYou have taken 0 step(s).\n"
        "Now: You are in room 0 of a corridor of 4 rooms.\nAdmissible actions: go right, open door.\n"
        "Answer with <action>your action</action>.")
    assert env.step("<action>open door</action>").info.get("won") is None  # locked, not lost
    # the demo's game lists without colours are the earlier generator's, to the byte
    import random

    train, _ = split_tasks(7, 0.4, 0)
    order = list(train)
    random.Random(5).shuffle(order)
    from resrl.demo.agents_task import make_games

    assert make_games(train, 20, "p", 5) == [json.dumps({"game": f"p-{i}", "length": order[i % len(order)][0],
                                                          "goal": order[i % len(order)][1]}, sort_keys=True)
                                              for i in range(20)]


@pytest.mark.parametrize("spec, message", [
    ({"colour": "red", "decoys": {"red": 1}}, "distinct words"),
    ({"colour": "red", "decoys": {"blue": 3}}, "not the goal's"),
    ({"colour": "red", "decoys": {"blue": 9}}, "not the goal's"),
    ({"colour": "r3d", "decoys": {"blue": 1}}, "distinct words"),
])
def test_bad_coloured_door_specs_name_the_problem(spec, message):
    from resrl.envs.toy import make_toy_env

    with pytest.raises(ValueError, match=message):
        make_toy_env(json.dumps({"game": "g", "length": 5, "goal": 3, **spec}))


def test_demo_games_each_have_a_decoy_of_another_colour_and_the_expert_wins_them_all():
    from resrl.envs.toy import expert_action

    for seed in (0, 1, 2):
        games = _demo_games(seed)
        for g in games:
            spec = json.loads(g)
            (decoy, room), = spec["decoys"].items()
            assert decoy != spec["colour"] and room != spec["goal"] and 0 <= room < spec["length"]
        assert all(_play(g, expert_action) for g in games)


def test_shortcuts_that_ignore_the_colour_lose_where_the_colour_matters():
    """The cheapest policies a colour-blind agent could learn: each wins only games the colour does not
    decide, so none reaches what matching the colour gets (the expert: every game)."""
    games = [g for seed in (0, 1, 2) for g in _demo_games(seed)]

    def door_here(env):
        return any(room == env.pos for room in env.spec["doors"].values())

    shortcuts = {
        "always open": lambda env: "open door",
        "walk to the end, open": lambda env: "go right" if env.pos < env.spec["length"] - 1 else "open door",
        "open every coloured door met": lambda env: "open door" if door_here(env) else "go right",
        "alternate open / right": lambda env: "open door" if env.steps % 2 else "go right",
    }
    goal_first = sum(json.loads(g)["goal"] < next(iter(json.loads(g)["decoys"].values())) for g in games) / len(games)
    rates = {name: sum(_play(g, p) for g in games) / len(games) for name, p in shortcuts.items()}
    assert rates["always open"] == 0.0
    assert rates["open every coloured door met"] == pytest.approx(goal_first)  # wins exactly when the goal is first
    assert max(rates.values()) <= 0.75, rates


def test_behaviour_cloning_stops_at_the_first_check_that_says_so(tmp_path):
    from resrl.demo.agents_task import expert_samples
    from resrl.experiments.warmstart import behaviour_cloning
    from resrl.models.tiny import TinyModelConfig, build_tiny_model

    cfg = agents_config()
    base = tmp_path / "init"
    build_tiny_model(base, TinyModelConfig(**cfg.start.model, seed=0))
    games, _ = games_for(cfg.task, 0)
    seen = []

    def stop(model, tok):
        assert not model.training  # checked in eval mode, trained on afterwards
        seen.append(len(seen))
        return len(seen) == 2, 0.1 * len(seen)

    out = behaviour_cloning(str(base), str(tmp_path / "a"), expert_samples(games[:2], 0), 40, 0, stop=stop, check_every=5,
                            min_steps=10, log=lambda *_: None)
    assert out["steps"] == 15 and out["checks"] == [(10, 0.1), (15, 0.2)]  # first check at step 10, stop at the 2nd
    out = behaviour_cloning(str(base), str(tmp_path / "b"), expert_samples(games[:2], 0), 12, 0, log=lambda *_: None)
    assert out["steps"] == 12 and out["checks"] == [] and out["samples"] > 0
    assert (tmp_path / "a" / "config.json").is_file() and (tmp_path / "b" / "config.json").is_file()
    assert out["kept"] == 12


def test_behaviour_cloning_that_misses_its_target_keeps_the_best_checked_weights(tmp_path):
    """Seed 3 of the demo never reached its target and the last of 400 steps was a loss spike that left a
    model walking right in every game: without a target met, the best check's weights are what is saved."""
    import torch
    from transformers import AutoModelForCausalLM

    from resrl.demo.agents_task import expert_samples
    from resrl.experiments.warmstart import behaviour_cloning
    from resrl.models.tiny import TinyModelConfig, build_tiny_model

    cfg = agents_config()
    base = tmp_path / "init"
    build_tiny_model(base, TinyModelConfig(**cfg.start.model, seed=0))
    games, _ = games_for(cfg.task, 0)
    values, weights = [0.2, 0.9, 0.3, 0.1], []

    def stop(model, tok):
        weights.append({k: v.detach().clone() for k, v in model.state_dict().items()})
        return False, values[len(weights) - 1]

    logs = []
    out = behaviour_cloning(str(base), str(tmp_path / "a"), expert_samples(games[:2], 0), 20, 0, stop=stop, check_every=5,
                            log=logs.append)
    assert out["steps"] == 20 and [v for _, v in out["checks"]] == values and out["kept"] == 10
    saved = AutoModelForCausalLM.from_pretrained(tmp_path / "a").state_dict()
    assert not torch.equal(weights[1]["model.embed_tokens.weight"], weights[3]["model.embed_tokens.weight"])
    for k, v in weights[1].items():  # the second check's weights (value 0.9), not the last step's
        assert torch.equal(saved[k], v), k
    assert any("keeping the weights of step 10" in line for line in logs)


def test_the_steps_kind_trains_with_the_config_the_agents_demo_always_had(tmp_path):
    """The agents demo's training part is a `resrl train` config: each method's is the one the agents demo
    built from dotted strings before (0.2.0, --quick, seed 2), key for key (`train.output_dir` and the
    checkpoints, new, aside)."""
    from dataclasses import replace

    from resrl.demo.tasks import get_demo_task
    from resrl.experiments.kinds import kind_of
    from resrl.train import load_config

    before = load_config(None, [  # the agents demo's train_config as it was (resrl.experiments.steps, 0.2.0)
        f"model.path={tmp_path / 'warm'}", f"data.train={tmp_path / 'train_games.jsonl'}", "reward.function=env",
        "env.name=resrl.envs.toy:make_toy_env", "env.layout=step", "env.history_window=0",
        "env.max_steps=8", "env.max_step_tokens=32", "env.num_workers=1",
        f"train.output_dir={tmp_path / 'grpo'}", "train.max_steps=4",  # 2 rounds x 2 updates
        "train.rollout_prompts=8", "train.update_prompts=4", "train.warmup_steps=2",  # 1 round
        "train.group_size=4", "train.learning_rate=0.0005",
        "train.temperature=1.0", "train.max_prompt_length=700", "train.seed=2",
        "loss.agg=token-mean", "algorithm.name=grpo", "log.progress=false", "log.report_to=[none]"]).to_dict()
    task = get_demo_task("agents")
    cfg = replace(task.config(quick=True), seed=2, out=str(tmp_path))
    now = kind_of(task).train_config(cfg, "grpo", {"data_path": "train_games.jsonl"}, tmp_path / "grpo").to_dict()
    assert now["checkpoint"]["save_steps"] == cfg.train["checkpoint"]["save_steps"] == 10
    now["checkpoint"] = before["checkpoint"]
    before["model"]["path"] = None  # the start is handed to run_training, not named in the config
    assert now == before
