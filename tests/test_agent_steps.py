"""Step-level rollouts (resrl.engines.steps, resrl.envs.pool) on the scripted corridor game: exact
masks, tags, group ids, anchors and rewards; environment failures end one trajectory with score 0
and never the caller; 2-step training runs of grpo, gigpo, empg and resrl through `resrl train`."""

from __future__ import annotations

import json
import math

import pytest
import torch
from agent_envs import BULK, make_broken_env, make_bulky_env, make_faulty_env
from agent_helpers import ScriptedPolicy, build_agent_model, write_games

from resrl.engines.multiturn import ChatRenderer
from resrl.engines.steps import pad_rows, rollout_steps, steps_to_batch
from resrl.envs.pool import EnvPool
from resrl.envs.toy import make_toy_env, parse_action


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return build_agent_model(tmp_path_factory.mktemp("agent") / "model")


@pytest.fixture(scope="module")
def tokenizer(model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model_dir)


def game(length, goal, name):
    return json.dumps({"game": name, "length": length, "goal": goal})


# ---- the pool ---------------------------------------------------------------------------------------

def test_pool_failures_end_only_the_failing_trajectory():
    games = [game(3, 2, "a"), game(3, 2, "b"), game(3, 2, "c"), game(3, 2, "d")]
    with EnvPool(make_faulty_env, num_workers=2, step_timeout_s=3.0) as pool:
        first = pool.reset(games)
        assert all(r.ok for r in first) and first[0].value["anchor"] == "You are in room 0 of a corridor of 3 rooms."
        r = pool.step([0, 1, 2, 3], ["<action>go right</action>"] * 4)  # everyone in room 1
        assert all(x.ok and x.value["anchor"].startswith("You are in room 1") for x in r)
        # env 0 crashes its worker (worker 0 also hosts env 2), env 1 hangs (worker 1 hosts env 3)
        r = pool.step([0, 1, 2, 3], ["crash", "hang", "<action>go right</action>", "<action>go right</action>"])
        assert (r[0].ok, r[0].error) == (False, "env_worker_crashed")
        assert (r[1].ok, r[1].error) == (False, "env_step_timeout")
        # envs 2 and 3 were rebuilt on fresh workers by replay and took their step from room 1
        assert r[2].ok and r[2].value["anchor"].startswith("You are in room 2"), r[2]
        assert r[3].ok and r[3].value["anchor"].startswith("You are in room 2"), r[3]
        assert pool.restarts == 2
        r = pool.step([0, 2, 3], ["x", "<action>open door</action>", "raise"])
        assert r[0].error == "env_ended"
        assert r[1].ok and r[1].value["done"] and r[1].value["info"]["won"] is True
        assert not r[2].ok and r[2].error.startswith("env_error: RuntimeError: boom")


def test_pool_with_more_bulk_than_a_pipe_holds_does_not_deadlock():
    """64 resets of 64 KB each way per call (an evaluation of a few hundred goals sends as much): a
    parent that sent a worker its whole queue before reading blocked on a full pipe while the worker
    blocked writing its replies into the other full pipe, forever (seen in a WebShop evaluation)."""
    import threading

    prompts = [{"game": game(3, 2, "a"), "pad": "y" * BULK} for _ in range(64)]
    out = {}

    def calls():
        with EnvPool(make_bulky_env, num_workers=2, step_timeout_s=60.0) as pool:
            out["reset"] = pool.reset(prompts)
            out["step"] = pool.step(list(range(64)), ["<action>go right</action>"] * 64)

    t = threading.Thread(target=calls, daemon=True)
    t.start()
    t.join(240)
    assert not t.is_alive(), "EnvPool deadlocked on bulky requests and replies"
    # every request and reply really was bulky: 32 x 64 KB each way per worker, far over a pipe's buffer
    assert len(out["reset"]) == 64 and all(r.ok and len(r.value["messages"][0]["content"]) > BULK for r in out["reset"])
    assert all(r.ok and r.value["anchor"].startswith("You are in room 1") for r in out["step"])


def test_pool_factory_errors_are_replies():
    with EnvPool(make_broken_env, num_workers=1, step_timeout_s=5.0) as pool:
        r = pool.reset([game(2, 1, "x")])
        assert not r[0].ok and "cannot build this game" in r[0].error


def test_pool_whose_workers_cannot_start_raises_one_error(tmp_path, monkeypatch):
    """A factory whose module fails to import in the fresh (spawn) worker -- as every module of a
    script that starts a pool outside `if __name__ == "__main__":` and exits at import does -- is one
    error naming the factory and the exit code, not every episode scored 0 after a 300 s wait each."""
    import importlib
    import os
    import time

    from resrl.envs.pool import EnvPoolStartError

    (tmp_path / "env_in_parent_only.py").write_text(
        "import os\n"
        "if os.getpid() != int(os.environ['RESRL_TEST_PARENT_PID']):\n"
        "    raise SystemExit(3)  # imports in the parent, exits in the worker\n"
        "def make_env(game, **options):\n"
        "    raise AssertionError('never built')\n")
    monkeypatch.setenv("RESRL_TEST_PARENT_PID", str(os.getpid()))
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("env_in_parent_only")
    pool = EnvPool(module.make_env, num_workers=1, startup_timeout_s=60.0)
    t0 = time.perf_counter()
    with pytest.raises(EnvPoolStartError, match=r"exited with code 3 .*env_in_parent_only:'make_env'"):
        pool.reset([game(2, 1, "x")])
    assert time.perf_counter() - t0 < 30  # the dead worker was seen dead, not waited out
    assert pool.worker_pids() == [None]
    pool.close()


# ---- the rollout ------------------------------------------------------------------------------------

def test_step_rollout_masks_tags_groups_and_anchors_are_exact(tokenizer):
    # two games with identical observations (same corridor length) but different goals, G = 2 each
    games = [game(3, 1, "g0"), game(3, 1, "g0"), game(3, 2, "g1"), game(3, 2, "g1")]
    groups = [0, 0, 1, 1]
    policy = ScriptedPolicy(tokenizer)
    renderer = ChatRenderer(tokenizer)
    with EnvPool(make_toy_env, num_workers=2, step_timeout_s=10.0, options={"history_window": 1}) as pool:
        samples, episodes = rollout_steps(pool, games, groups, policy, renderer, eos_token_ids=policy.eos_token_ids,
                                          max_steps=4, max_step_tokens=64, invalid_format_penalty=0.1,
                                          reward_scale=10.0, trajectory_offset=100)
    # game g0: right (room 1), no tags (invalid format), open door -> won in 3 steps
    # game g1: right (room 1), no tags, right (room 2), open door -> won in 4 steps
    assert [e.steps for e in episodes] == [3, 3, 4, 4]
    assert [e.won for e in episodes] == [True] * 4 and [e.end for e in episodes] == ["done"] * 4
    assert [(s.trajectory, s.step, s.group) for s in samples] == (
        [(100, k, 0) for k in range(3)] + [(101, k, 0) for k in range(3)]
        + [(102, k, 1) for k in range(4)] + [(103, k, 1) for k in range(4)])
    rooms = {0: [0, 1, 1], 1: [0, 1, 1, 2]}
    for s in samples:
        assert s.anchor == f"You are in room {rooms[s.group][s.step]} of a corridor of 3 rooms."
        assert s.invalid_format == (s.step == 1) and s.invalid_action == (s.step == 1)
        last = s.step == (2 if s.group == 0 else 3)
        assert s.step_reward == pytest.approx((10.0 if last else 0.0) - (0.1 if s.step == 1 else 0.0))
        assert s.episode_reward == pytest.approx(10.0 - (0.1 if s.step == 1 else 0.0))
        # the sample's prompt is exactly the environment's step prompt, its response the policy's answer
        assert s.prompt_ids == renderer.prompt_ids(_replayed_prompt(s, history_window=1))
        assert tokenizer.decode(s.completion_ids, skip_special_tokens=True) == s.text
        assert s.completion_ids[-1] == tokenizer.eos_token_id and not s.cut
    assert parse_action(samples[0].text) == "go right" and parse_action(samples[1].text) is None
    batch = steps_to_batch(samples, tokenizer.pad_token_id)
    B = len(samples)
    assert batch["completion_mask"].sum(1).tolist() == [len(s.completion_ids) for s in samples]
    assert batch["tool_mask"].bool().all()  # every response token is the model's own
    assert batch["prompt_mask"].sum(1).tolist() == [len(s.prompt_ids) for s in samples]
    assert batch["group_index"].tolist() == [s.group for s in samples]
    assert batch["trajectory_index"].tolist() == [s.trajectory for s in samples]
    assert batch["step_index"].tolist() == [s.step for s in samples]
    # anchors: equal within a game for equal states, never equal across games
    a = batch["anchor_index"].tolist()
    for i in range(B):
        for j in range(B):
            same = samples[i].group == samples[j].group and samples[i].anchor == samples[j].anchor
            assert (a[i] == a[j]) == same
    assert batch["rewards"].tolist() == pytest.approx([s.episode_reward for s in samples])
    padded, extra = pad_rows({**batch, "advantages": torch.ones(B, batch["completion_ids"].shape[1])}, 4)
    assert extra == (-B) % 4 and padded["completion_ids"].shape[0] % 4 == 0
    assert padded["completion_mask"][B:].sum() == 0 and padded["advantages"][B:].abs().sum() == 0
    assert (padded["group_index"][B:] == -1).all()


def _replayed_prompt(sample, history_window):
    """The step prompt of `sample` rebuilt by replaying its trajectory's actions in a local env."""
    spec = {0: game(3, 1, "g0"), 1: game(3, 2, "g1")}[sample.group]
    env = make_toy_env(spec, history_window=history_window)
    env.reset()
    script = ["<action>go right</action>", "I will go right"]
    for k in range(sample.step):
        env.step(script[k] if k < 2 else "<action>go right</action>")
    return env.step_prompt()


def test_episode_bounds_and_failures_score_zero(tokenizer):
    policy = ScriptedPolicy(tokenizer, reply=lambda text: "<action>go left</action>")
    renderer = ChatRenderer(tokenizer)
    with EnvPool(make_faulty_env, num_workers=1, step_timeout_s=10.0) as pool:
        samples, episodes = rollout_steps(pool, [game(3, 2, "a")], [0], policy, renderer,
                                          eos_token_ids=policy.eos_token_ids, max_steps=5, max_step_tokens=64)
    assert episodes[0].end == "max_steps" and episodes[0].steps == 5 and len(samples) == 5
    assert all(s.invalid_action for s in samples)  # "go left" is not admissible in room 0
    # ... but well-formed: the format penalty (from info invalid_format, not invalid_action) is not applied
    assert all(not s.invalid_format and s.step_reward == 0 and s.episode_reward == 0 for s in samples)
    # a step prompt over the token bound ends the trajectory before generating
    with EnvPool(make_toy_env, num_workers=1, step_timeout_s=10.0) as pool:
        samples, episodes = rollout_steps(pool, [game(3, 2, "a")], [0], policy, renderer,
                                          eos_token_ids=policy.eos_token_ids, max_steps=5, max_prompt_tokens=20)
    assert episodes[0].end == "prompt_too_long" and samples == []
    # an environment that crashes mid-episode: score 0 for that trajectory, the others go on
    crash_once = ScriptedPolicy(tokenizer, reply=lambda text: "crash" if "room 1 of a corridor of 3" in text.split("Now:")[-1]
                                else "<action>go right</action>")
    with EnvPool(make_faulty_env, num_workers=2, step_timeout_s=10.0) as pool:
        samples, episodes = rollout_steps(pool, [game(3, 2, "a"), game(2, 1, "b")], [0, 1], crash_once, renderer,
                                          eos_token_ids=policy.eos_token_ids, max_steps=4, reward_scale=10.0)
    assert episodes[0].end == "env_failed" and episodes[0].error == "env_worker_crashed" and episodes[0].reward == 0
    assert all(s.step_reward == 0 and s.episode_reward == 0 for s in samples if s.group == 0)
    assert episodes[1].end == "max_steps"


# ---- training through `resrl train` -------------------------------------------------------------------

@pytest.mark.parametrize("algorithm", ["grpo", "gigpo", "empg", "resrl"])
def test_two_step_training_through_resrl_train(algorithm, model_dir, tmp_path, monkeypatch):
    from resrl import cli
    from resrl.core import registry
    from resrl.engines import multiturn

    seen = []
    real = registry.compute_token_advantages

    def spy(inputs, config):
        adv, stats = real(inputs, config)
        seen.append((inputs, adv))
        return adv, stats

    monkeypatch.setattr("resrl.engines.trl.step_round.compute_token_advantages", spy)  # the step round calls the core
    from resrl.engines import steps as steps_module

    real_rollout, rolled = steps_module.rollout_steps, []

    def rollout_spy(pool, prompts, groups, *args, **kwargs):
        rolled.append((list(prompts), list(groups)))
        return real_rollout(pool, prompts, groups, *args, **kwargs)

    monkeypatch.setattr(steps_module, "rollout_steps", rollout_spy)

    # the tiny random model never writes an <action>: a seeded scripted policy stands in for sampling
    rounds = []

    def scripted(model, tokenizer, **kwargs):
        rounds.append(ScriptedPolicy(tokenizer, p_random=0.6, seed=len(rounds)))
        return rounds[-1]

    monkeypatch.setattr(multiturn, "HFStepPolicy", scripted)
    games = write_games(tmp_path / "games.jsonl", n=4)
    out = tmp_path / algorithm
    config = tmp_path / "agent.yaml"
    config.write_text(
        f"model: {{path: {model_dir}}}\ndata: {{train: {games}}}\nreward: {{function: env}}\n"
        "env: {name: 'resrl.envs.toy:make_toy_env', layout: step, history_window: 2, max_steps: 4, "
        "max_step_tokens: 32, num_workers: 2}\n"
        f"train: {{output_dir: {out}, max_steps: 2, rollout_prompts: 2, group_size: 2, learning_rate: 0.01, "
        "max_prompt_length: 700}\n"
        "loss: {agg: token-mean}\nlog: {progress: false, report_to: [none]}\n")
    kl = ["loss.kl_coef=0.01"] if algorithm == "gigpo" else []  # the reference-model pass on step rows too
    rc = cli.main(["train", "--config", str(config), f"algorithm.name={algorithm}", *kl])
    assert rc == 0
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert len(metrics) == 2 and all(math.isfinite(m["loss"]) for m in metrics)
    assert all(m["step_rows"] > 4 for m in metrics)  # rows are steps: more rows than trajectories
    assert len(seen) == 2 and len(rolled) == 2
    for prompts, groups in rolled:  # a group is the G trajectories of ONE game
        assert sorted(groups) == [0, 0, 1, 1]
        for g in set(groups):
            assert len({p for p, gg in zip(prompts, groups) if gg == g}) == 1
        assert len(set(prompts)) == 2
    for inputs, adv in seen:
        # every group is one game with G = 2 trajectories, every trajectory's steps 0..n-1
        for g in inputs.group_index.unique().tolist():
            rows = inputs.group_index == g
            trajs = inputs.trajectory_index[rows].unique()
            assert trajs.numel() == 2
            for t in trajs.tolist():
                steps = sorted(inputs.step_index[inputs.trajectory_index == t].tolist())
                assert steps == list(range(len(steps)))
        assert (adv[~inputs.response_mask.bool()] == 0).all()
        if algorithm == "empg":
            assert inputs.step_entropy is not None and (inputs.step_entropy > 0).all()
        if algorithm == "resrl":
            assert inputs.hidden is not None and inputs.hidden.shape[:2] == inputs.response_mask.shape
    assert any(adv.abs().sum() > 0 for _, adv in seen), "no learning signal in two rounds"
    assert (out / "model" / "config.json").is_file()


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ["grpo", "gigpo", "empg", "resrl"])
def test_two_step_training_on_alfworld_synth(algorithm, alfworld_synth, tmp_path_factory, tmp_path):
    """The same run on generated ALFWorld-format games played by ALFWorld's engine (skipped without
    the 'agents' extra unless RESRL_AGENT_TESTS=1). The random tiny model never writes a valid
    action: the pipeline (pool, step prompts, anchors, advantages, loss) is what is tested here."""
    from resrl import cli
    from resrl.models.tiny import TinyModelConfig, build_tiny_model

    model = tmp_path_factory.getbasetemp() / "alfworld-tiny-model"
    if not (model / "config.json").is_file():
        build_tiny_model(model, TinyModelConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                                num_key_value_heads=1, head_dim=16, intermediate_size=64,
                                                max_position_embeddings=4096))
    out = tmp_path / algorithm
    rc = cli.main(["train", "--config", "configs/qwen_alfworld_resrl.yaml", f"model.path={model}",
                   "model.dtype=float32", "model.gradient_checkpointing=false", f"data.train=alfworld-synth:{alfworld_synth}:train",
                   f"train.output_dir={out}", "train.max_steps=2", "train.rollout_prompts=1", "train.group_size=2",
                   "train.micro_batch_size=null", "train.update_prompts=null", "train.bf16=false", "train.use_cpu=true",
                   "train.max_prompt_length=4000", "env.max_steps=2", "env.max_step_tokens=8", "env.num_workers=1",
                   "loss.kl_coef=0.0", f"algorithm.name={algorithm}", "log.progress=false", "log.report_to=[none]"])
    assert rc == 0
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert len(metrics) == 2 and all(math.isfinite(m["loss"]) for m in metrics)
    assert all(m["step_rows"] == 4 and m["episode/end_max_steps"] == 1.0 for m in metrics)


def test_training_survives_environments_that_all_fail(model_dir, tmp_path):
    """Every game fails to build (the factory raises in the worker): each round has no step row;
    training goes on with a token-less row (zero loss) and reports the failures."""
    from resrl.train import load_config, run_training

    games = write_games(tmp_path / "games.jsonl", n=2)
    cfg = load_config(None, [f"model.path={model_dir}", f"data.train={games}", "reward.function=env",
                             "env.name=agent_envs:make_broken_env", "env.layout=step", "env.num_workers=1",
                             f"train.output_dir={tmp_path / 'out'}", "train.max_steps=2", "train.rollout_prompts=2",
                             "train.group_size=2", "train.max_prompt_length=700", "algorithm.name=gigpo",
                             "log.progress=false", "log.report_to=[none]"])
    result = run_training(cfg, save_final=False)
    assert len(result.metrics) == 2
    for m in result.metrics:
        assert m["step_rows"] == 0 and m["episode/end_env_failed"] == 1.0 and m["loss"] == 0.0


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("algorithm", ["gigpo", "resrl"])
def test_two_process_step_training(algorithm, model_dir, tmp_path):
    """Two CPU processes (gloo): each plays its own game (a variable number of rows per process);
    the collectives of the step path (metrics, token counts, loss) line up and training finishes."""
    from pathlib import Path

    from test_engine_distributed import launch

    games = write_games(tmp_path / "games.jsonl", n=4)
    out = launch(Path(__file__).resolve().parent / "dist_step_script.py", model_dir, games, str(tmp_path / "out"),
                 algorithm)
    metrics = json.loads(out.split("METRICS ", 1)[1].splitlines()[0])
    assert len(metrics) == 2 and all(math.isfinite(m["loss"]) for m in metrics)
    # process 1: 2 trajectories x 6 steps; process 0: 2 winning trajectories of 3-5 steps
    assert all(12 + 6 <= m["step_rows"] <= 12 + 10 for m in metrics)
    assert all(m["episode/success"] == 0.5 for m in metrics)
