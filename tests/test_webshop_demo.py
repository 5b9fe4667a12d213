"""`resrl demo --task webshop` (resrl.demo.webshop_task): its goals, expert walkthroughs and environment
reach the family only through the registry, and the quick demo runs end to end through the CLI."""

from __future__ import annotations

import json

import pytest


def test_held_out_goals_ask_for_other_products_and_the_order_follows_the_seed():
    from resrl.demo.webshop_task import WebShopGoals

    train, test, split = WebShopGoals().games(0)
    asins = lambda games: {json.loads(g)["goal"]["asin"] for g in games}  # noqa: E731
    assert not asins(train) & asins(test) and split == {"train_products": 120, "test_products": 50}
    assert len(train) == 480 and len(test) == 200
    other, _, _ = WebShopGoals().games(1)
    assert sorted(other) == sorted(train) and other != train  # the same goals, another order for behaviour cloning
    # the dev split (--eval-split dev, --grid): goals for products neither the training nor the held-out goals ask for
    same, dev, dev_split = WebShopGoals().games(0, "dev")
    assert same == train and WebShopGoals().has_dev_split() and not asins(dev) & (asins(train) | asins(test))
    assert dev and dev_split["test_products"] == len(asins(dev))


def test_cloning_and_rl_goals_ask_for_different_products():
    """Behaviour cloning sees the goals of `bc_products` products; its check and RL get the goals of
    the others, so RL, like the held-out split, meets products the warm start never saw."""
    from resrl.demo.webshop_task import WebShopGoals, webshop_config

    asins = lambda games: {json.loads(g)["goal"]["asin"] for g in games}  # noqa: E731
    cfg = webshop_config()
    goals, start = cfg.task, cfg.start
    train, test, _ = goals.games(0)
    cloned, check, rl = goals.phases(train, start)
    assert (len(asins(cloned)), len(asins(rl))) == (90, 30) and (len(cloned), len(rl)) == (360, 120)
    assert not asins(cloned) & asins(rl) and not asins(rl) & asins(test)
    assert set(check) <= set(rl) and len(check) == start.dev_games
    assert sorted(cloned + rl) == sorted(train) and rl == [g for g in train if g in set(rl)]  # train's order
    assert asins(goals.phases(goals.games(1)[0], start)[0]) != asins(cloned)  # the seed picks the cloned products
    whole = WebShopGoals(clone_products=None)  # every goal cloned (the earlier demo)
    assert whole.phases(train, start) == (train[:400], train[400:416], train)
    with pytest.raises(ValueError, match="clone_products must be in 1..119"):
        WebShopGoals(clone_products=120).phases(train, start)


def test_expert_walkthroughs_are_compact_prompts_that_win():
    from resrl.demo.webshop_task import webshop_config
    from resrl.tasks.envs import load_step_factory

    cfg = webshop_config()
    section = cfg.shared_training().env
    train, _, _ = cfg.task.games(0)
    samples = cfg.task.expert_samples(train[:3], section)
    assert samples and all(m[0]["content"].startswith("Instruction: ") for m, _ in samples)
    assert all(r.startswith("<action>") and r.endswith("</action>") and len(r) <= section.max_step_tokens for _, r in samples)
    env = load_step_factory(section.name, "test")(train[0], history_window=0, max_steps=section.max_steps,
                                                  **section.options)
    env.reset()
    replies = [r for m, r in samples[:next(i for i, (m, r) in enumerate(samples) if "buy now" in r) + 1]]
    for r in replies:
        result = env.step(r)
    assert result.done and result.info["won"] and result.reward == 1.0


@pytest.mark.slow
def test_quick_webshop_demo_end_to_end(tmp_path, capsys):
    from resrl.cli import main
    from resrl.demo.webshop_task import webshop_config

    out = tmp_path / "demo"
    assert main(["demo", "--task", "webshop", "--quick", "--algorithms", "grpo", "--out", str(out), "--workers", "1"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["task"] == "webshop" and set(summary["results"]) == {"warm start", "grpo"}
    for r in summary["results"].values():
        assert 0.0 <= r["avg"] <= 1.0 and 0.0 <= r["score"] <= 1.0 and len(r["per_game"]) == 8
    assert summary["training"]["grpo"]["train_success"] and (out / "report.md").read_text().startswith(
        "# WebShop-format demo")
    cfg = json.loads((out / "experiment.json").read_text())["config"]
    assert cfg["task_name"] == "webshop" and cfg["train"]["env"]["options"]["page_size"] == 5
    # RL trained on the goals of the products behaviour cloning did not see
    rl_goals = [json.loads(line)["problem"] for line in (out / "train_games.jsonl").read_text().splitlines()]
    quick = webshop_config(quick=True)
    assert rl_goals == quick.task.phases(quick.task.games(0)[0], quick.start)[2]
    assert summary["rl_games"] == len(rl_goals) == 120
