"""`resrl demo --grid`: each algorithm's setting chosen on a dev split that never meets the held-out
split, then the chosen variants over the seeds, reported on the held-out split."""

from __future__ import annotations

import json

import pytest

from resrl.demo.tasks import DEMO_TASKS


@pytest.mark.parametrize("name", sorted(n for n, t in DEMO_TASKS.items() if t.experiment != "steps"))
@pytest.mark.parametrize("quick", [False, True])
def test_the_dev_split_is_disjoint_from_the_held_out_split(name, quick):
    from dataclasses import replace

    from resrl.experiments.kinds import kind_of

    cfg = DEMO_TASKS[name].config(quick=quick)
    task = DEMO_TASKS[name].problems(cfg)
    kind = kind_of(DEMO_TASKS[name])
    dev = kind.eval_problems(replace(cfg, eval_split="dev"))
    assert kind.eval_problems(cfg) == task.test
    assert len(dev) == len(task.test)
    dev_keys, test_keys = {task.split_key(p) for p in dev}, {task.split_key(p) for p in task.test}
    assert len(dev_keys) == len(dev) and not dev_keys & test_keys
    assert dev == task.dev_split(len(task.test))  # deterministic


def test_the_agents_task_has_no_dev_split_and_says_so(tmp_path):
    """The corridor has no dev split (its held-out split is (length, goal) tasks no training game has, and
    its 21 tasks leave no third split), so --grid and --eval-split dev are refused with one error before
    any process starts. WebShop, a step-layout task too, has one (goals for products neither split asks
    for): both are its settings."""
    from resrl.cli import build_parser
    from resrl.errors import InputError
    from resrl.experiments.command import config_from_args, run

    for extra in (["--grid", "train.learning_rate=1e-4,3e-4"], ["--eval-split", "dev"]):
        with pytest.raises(InputError, match="--task agents has no dev split"):
            run(build_parser().parse_args(["demo", "--task", "agents", "--quick", "--out", str(tmp_path), *extra]))
        args = build_parser().parse_args(["demo", "--task", "webshop", "--quick", "--out", str(tmp_path), *extra])
        assert config_from_args(args).task_name == "webshop"
    assert not any(tmp_path.iterdir())


@pytest.mark.slow
def test_demo_grid_chooses_on_dev_and_reports_the_choice_on_held_out(tmp_path):
    from resrl.cli import main

    out = tmp_path / "grid"
    argv = ["demo", "--quick", "--out", str(out), "--algorithms", "grpo,resrl", "--seeds", "0", "--rl-steps", "2",
            "--grid", "train.learning_rate=1e-4,1e-2", "--workers", "2", "--eval-samples", "2"]
    assert main(argv) == 0
    dev = json.loads((out / "dev" / "summary.json").read_text())
    assert dev["config"]["eval_split"] == "dev"
    assert set(dev["results"]) >= {f"{m}/train.learning_rate={lr}" for m in ("grpo", "resrl") for lr in ("1e-4", "1e-2")}
    report = json.loads((out / "dev.json").read_text())
    for m in ("grpo", "resrl"):  # the choice is the dev argmax (the grid's first point on a tie)
        scores = {lr: dev["results"][f"{m}/train.learning_rate={lr}"]["avg"] for lr in ("1e-4", "1e-2")}
        best = "1e-2" if scores["1e-2"] > scores["1e-4"] else "1e-4"
        assert report["methods"][m]["chosen"] == {"train.learning_rate": best}
    chosen = json.loads((out / "chosen.json").read_text())
    held_out = json.loads((out / "seed-0" / "summary.json").read_text())
    assert held_out["config"]["eval_split"] == "test"
    assert set(held_out["results"]) == {"warm start", *chosen.values()}
    assert (out / "dev_grid.png").stat().st_size > 0 and (out / "multiseed.md").is_file()
