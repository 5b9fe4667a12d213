"""The step-layout evaluator (resrl.eval.steps): the agents demo's numbers on the corridor, `resrl eval
--env` end to end, and an ALFWorld-format game played by the same evaluator (a fake engine: tests/agent_envs)."""

from __future__ import annotations

import json
import math

import pytest

from agent_envs import write_fake_alfworld_games

PLAY_KEYS = ("success", "se", "pass", "episodes", "steps", "invalid_format_rate", "per_game")


def _play_before(model, tok, games, history_window, max_steps, seed=0, temperature=0.0, samples=1, max_step_tokens=32):
    """resrl.demo.agents_task.play as it was before the step evaluator moved to resrl.eval.steps
    (commit 1457d4f), frozen here: the evaluator must give its numbers."""
    from resrl.engines.multiturn import ChatRenderer, HFStepPolicy
    from resrl.engines.steps import episode_stats, rollout_steps
    from resrl.envs.pool import EnvPool
    from resrl.envs.toy import make_toy_env

    policy = HFStepPolicy(model, tok, temperature=temperature, seed=seed)
    prompts = [g for g in games for _ in range(samples)]
    groups = [i for i in range(len(games)) for _ in range(samples)]
    with EnvPool(make_toy_env, num_workers=1, options={"history_window": history_window}) as pool:
        _, episodes = rollout_steps(pool, prompts, groups, policy, ChatRenderer(tok),
                                    eos_token_ids=policy.eos_token_ids, max_steps=max_steps,
                                    max_step_tokens=max_step_tokens)
    per_game = [[] for _ in games]
    for e in episodes:
        per_game[e.group].append(1.0 if e.won else 0.0)
    means = [sum(w) / len(w) for w in per_game]
    n = len(means)
    mean = sum(means) / n
    se = math.sqrt(sum((m - mean) ** 2 for m in means) / (n - 1) / n) if n > 1 else 0.0
    s = episode_stats(episodes)
    return {"success": mean, "se": se, "pass": sum(1.0 for w in per_game if max(w) > 0) / n,
            "episodes": len(episodes), "steps": s["episode/steps"],
            "invalid_format_rate": s["episode/invalid_format_rate"], "per_game": means}


@pytest.fixture(scope="module")
def corridor(tmp_path_factory):
    """A tiny model (the agents demo's) behaviour-cloned for 100 steps on the expert's walkthroughs of the
    quick demo's training games (doors without colours, which it learns faster), and 6 of those games: its
    sampled episodes win some of them and lose others."""
    import torch

    from resrl.demo.agents_task import agents_config, expert_samples, games_for
    from resrl.demo.config import with_overrides
    from resrl.experiments.warmstart import behaviour_cloning
    from resrl.models.tiny import TinyModelConfig, build_tiny_model

    torch.set_num_threads(1)
    cfg = with_overrides(agents_config(quick=True), ["task.colours=[]"])
    train, _ = games_for(cfg.task, 0)
    root = tmp_path_factory.mktemp("corridor")
    build_tiny_model(root / "init", TinyModelConfig(**cfg.start.model, seed=0))
    behaviour_cloning(str(root / "init"), str(root / "bc"), expert_samples(train, 0), 100, seed=0, batch=16, log=lambda line: None)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(root / "bc")
    model = AutoModelForCausalLM.from_pretrained(root / "bc").eval()
    return root / "bc", model, tok, train[:6]  # games it was cloned on: it wins some of them


def test_evaluator_gives_todays_play_numbers_on_the_corridor(corridor):
    from resrl.demo.agents_task import agents_config
    from resrl.envs.toy import make_toy_env
    from resrl.eval.steps import evaluate_steps
    from resrl.experiments.kinds import StepsKind

    _, model, tok, games = corridor
    demo = agents_config(quick=True)  # env.max_steps 8, env.max_step_tokens 32, no history, temperature 1.0
    for kw, sampled in ((dict(), {}), (dict(seed=7, temperature=1.0, samples=4), dict(seed=7, sampled=True, samples=4))):
        before = _play_before(model, tok, games, 0, 8, max_step_tokens=32, **kw)  # greedy, then as the demo samples
        now = evaluate_steps(model, tok, games, make_toy_env, {"history_window": 0}, max_steps=8, max_step_tokens=32,
                             **kw)
        assert {k: now[k] for k in PLAY_KEYS} == before  # bit-identical, not approximately
        assert {k: v for k, v in StepsKind.play(demo, model, tok, games, **sampled).items()
                if k in PLAY_KEYS} == before  # the demo's play is the evaluator
    assert 0 < before["success"] < 1 and len(set(before["per_game"])) > 1  # numbers that a changed seed would move
    assert now["pass_at"]["4"] == pytest.approx(now["pass"]) and now["pass_at"]["1"] == pytest.approx(now["success"])
    assert now["wins"] and all(len(w) == 4 for w in now["wins"])


def test_resrl_eval_env_on_the_corridor(corridor, tmp_path, capsys):
    from resrl.cli import main
    from resrl.envs.toy import make_toy_env
    from resrl.eval.steps import evaluate_steps

    model_dir, model, tok, games = corridor
    data = tmp_path / "corridor_games.jsonl"
    data.write_text("".join(json.dumps({"problem": g, "answer": ""}) + "\n" for g in games))  # as the demo writes them
    out = tmp_path / "eval"
    assert main(["eval", "--model", str(model_dir), "--env", "resrl.envs.toy:make_toy_env", "--data", str(data),
                 "--n", "4", "--temperature", "1", "--top-p", "1", "--seed", "7", "--max-steps", "8", "--history-window", "0",
                 "--max-step-tokens", "32", "--out", str(out), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text())
    r = summary["datasets"]["corridor_games"]
    assert r["games"] == len(games) and r["episodes"] == 4 * len(games)
    assert set(r["pass_at"]) == {"1", "2", "4"}
    direct = evaluate_steps(model, tok, games, make_toy_env, {"history_window": 0}, max_steps=8, max_step_tokens=32,
                            seed=7, temperature=1.0, samples=4)
    assert {k: r[k] for k in (*PLAY_KEYS, "pass_at")} == {k: direct[k] for k in (*PLAY_KEYS, "pass_at")}
    assert summary["settings"]["env"] == "resrl.envs.toy:make_toy_env" and summary["settings"]["n"] == 4
    table = (out / "results.md").read_text()
    assert "Pass@4" in table and f"{100 * r['success']:.1f} ± " in table and table in printed
    assert not (out / "samples.jsonl").exists()  # nothing was sampled as single prompts


class _Scripted:
    """A StepPolicy answering, at its t-th call, step t of each episode's script still running (episodes
    run in lockstep; an episode whose script is done has ended)."""

    def __init__(self, tokenizer, scripts):
        self.tok, self.scripts, self.t = tokenizer, scripts, 0
        self.eos_token_ids = [tokenizer.eos_token_id]

    def __call__(self, contexts, budgets):
        running = [s for s in self.scripts if len(s) > self.t]
        assert len(running) == len(contexts)
        out = [(self.tok(f"<think>plan</think><action>{s[self.t]}</action>", add_special_tokens=False)["input_ids"]
                + self.eos_token_ids, None) for s in running]
        self.t += 1
        return out


def test_an_alfworld_format_game_played_by_the_step_evaluator(corridor, tmp_path, capsys):
    from resrl.cli import main
    from resrl.eval.steps import evaluate_steps
    from resrl.tasks.envs import step_games

    from agent_envs import fake_alfworld_step_env

    model_dir, _, tok, _ = corridor
    spec = write_fake_alfworld_games(tmp_path / "games")
    rows = step_games(spec)  # the family's rows: the task row as JSON
    assert [json.loads(r["prompt"])["task_type"] for r in rows] == ["look", "pick"]
    walks = [json.loads(open(json.loads(r["prompt"])["game_file"]).read())["walkthrough"] for r in rows]
    # game 0 plays its walkthrough and wins at step 3; game 1 tries a command that is not admissible, 5 times
    policy = _Scripted(tok, [walks[0], ["dance"] * 5])
    r = evaluate_steps(None, tok, [row["prompt"] for row in rows], fake_alfworld_step_env,
                       {"history_window": 2, "max_steps": 5}, max_steps=5, max_step_tokens=200, policy=policy)
    assert r["per_game"] == [1.0, 0.0] and r["success"] == 0.5 and r["pass"] == 0.5
    assert r["steps"] == (3 + 5) / 2 and r["invalid_action_rate"] == 5 / 8 and r["invalid_format_rate"] == 0
    # and through `resrl eval --env`: the games go to the step evaluator, not to the ALFWorld family's own
    out = tmp_path / "eval"
    assert main(["eval", "--model", str(model_dir), "--env", "agent_envs:fake_alfworld_step_env", "--data", spec,
                 "--max-steps", "2", "--max-step-tokens", "8", "--temperature", "0", "--out", str(out),
                 "--no-progress"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["datasets"][spec]["episodes"] == 2 and summary["datasets"][spec]["steps"] <= 2
    assert not (out / "alfworld_summary.json").exists()
