"""`resrl demo --task agents` (resrl.demo.agents_task): the quick demo end to end through the CLI."""

from __future__ import annotations

import json

import pytest

from resrl.demo.agents_task import AgentsDemoConfig, games_for, split_tasks, task_of


def test_held_out_tasks_are_disjoint_from_training_tasks():
    for seed in (0, 1, 2):
        train, test = split_tasks(7, 0.4, seed)
        assert train and test and not set(train) & set(test)
        assert len(train) + len(test) == 21  # every (length, goal) of corridors of 2..7 rooms, once
        tr, te = games_for(AgentsDemoConfig(seed=seed))
        assert {task_of(g) for g in tr} <= set(train) and {task_of(g) for g in te} == set(test)


@pytest.mark.slow
def test_quick_agents_demo_end_to_end(tmp_path):
    from resrl.cli import main

    out = tmp_path / "agents"
    assert main(["demo", "--task", "agents", "--quick", "--out", str(out), "--algorithms", "grpo,gigpo"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["task"] == "agents"
    assert list(summary["results"]) == ["warm start", "grpo", "gigpo"]
    cfg = AgentsDemoConfig.quick()
    for policy, r in summary["results"].items():
        for key in ("greedy", "avg", "avg_se", "invalid_format_rate"):
            assert 0.0 <= r[key] <= 1.0, (policy, key, r[key])
        assert set(r["pass_at"]) == {"1", str(cfg.eval_samples)}
        assert r["episodes"] == summary["test_games"] * cfg.eval_samples
    for algo in ("grpo", "gigpo"):  # one training-success value per round, each a rate
        s = summary["training"][algo]["train_success"]
        assert len(s) == cfg.rounds and all(0.0 <= v <= 1.0 for v in s)
    train = {task_of(json.loads(line)["problem"]) for line in (out / "train_games.jsonl").read_text().splitlines()}
    test = {task_of(json.loads(line)["problem"]) for line in (out / "test_games.jsonl").read_text().splitlines()}
    assert train and test and not train & test
    assert {tuple(t) for t in summary["test_tasks"]} == test
    assert (out / "report.md").is_file() and (out / "training_success.png").stat().st_size > 0
