"""`resrl demo --task`: the registry of demo tasks, the `math-hard` generator and its answers."""

from __future__ import annotations

import argparse
import json
import re

import pytest

from resrl.data.synthetic import chain_reward, chain_target, chain_terms
from resrl.demo.tasks import DEFAULT_TASK, DEMO_TASKS, ChainTiersConfig, ChainTiersTask, get_demo_task
from resrl.errors import InputError

TIERS = ((3, 10, 99), (3, 100, 999), (3, 1000, 9999))


def _parser():
    from resrl.experiments.command import register

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    return parser


def _check_chain(problem) -> None:
    """The problem's answer is the sum of its terms, and every step of its worked chain is an
    expression with that same sum whose first term adds up the terms already consumed."""
    terms = chain_terms(problem)
    assert problem.prompt == "+".join(map(str, terms)) + "="
    assert problem.answer == str(sum(terms))
    steps = chain_target(problem).split("=")
    assert len(steps) == len(terms) - 1 and steps[-1] == problem.answer
    for i, step in enumerate(steps):
        numbers = [int(x) for x in step.split("+")]
        assert re.fullmatch(r"\d+(\+\d+)*", step) and sum(numbers) == sum(terms), (problem.prompt, step)
        assert numbers == [sum(terms[: i + 2]), *terms[i + 2:]], (problem.prompt, step)


def test_math_is_the_default_and_the_demo_as_before():
    """`--task math` (the default) is the experiment the demo always had, full and --quick: the tiny
    models' `resrl train` keys, a warm start, the demo's evaluation, chained addition."""
    from resrl.data.synthetic import ChainAdditionConfig
    from resrl.demo.config import TINY_TRAINING, ExperimentConfig, WarmStart, demo_eval_config
    from resrl.experiments.command import config_from_args

    assert DEFAULT_TASK == "math" and {"math", "math-hard"} <= set(DEMO_TASKS)
    full = get_demo_task("math").config(quick=False)
    assert full == ExperimentConfig("math", TINY_TRAINING, WarmStart(), demo_eval_config(), ChainAdditionConfig(num_test=256))
    assert full.train["train"] == {"max_steps": 250, "learning_rate": 1e-4, "lr_scheduler": "constant",
                                   "rollout_prompts": 16, "group_size": 8, "temperature": 1.0,
                                   "max_completion_length": 16, "max_prompt_length": None, "use_cpu": True}
    quick = get_demo_task("math").config(quick=True)
    assert quick.is_quick and quick.task == ChainAdditionConfig(num_terms=3, min_value=1, max_value=9, num_test=48)
    assert (quick.train["train"]["max_steps"], quick.train["train"]["rollout_prompts"],
            quick.train["train"]["group_size"]) == (6, 8, 4)
    assert quick.start == WarmStart(max_steps=150, dev_problems=48, omega_problems=16)
    assert quick.eval == demo_eval_config(n=8, batch_size=384)
    parser = _parser()
    assert config_from_args(parser.parse_args(["demo"])) == full
    assert config_from_args(parser.parse_args(["demo", "--quick"])) == quick
    with pytest.raises(InputError, match="unknown demo task 'nope'.*math-hard"):
        get_demo_task("nope")
    with pytest.raises(SystemExit):  # argparse refuses it before any work
        parser.parse_args(["demo", "--task", "nope"])


def test_hard_task_cli_and_config():
    from resrl.experiments.command import config_from_args
    from resrl.experiments.kinds import handoff_config
    from resrl.experiments.layout import config_to_dict

    parser = _parser()
    for argv in (["demo", "--task", "math-hard"], ["demo", "--task", "math-hard", "--quick", "--seed", "2"]):
        cfg = config_from_args(parser.parse_args(argv))
        assert cfg.task_name == "math-hard" and isinstance(cfg.task, ChainTiersConfig)
        assert cfg.is_quick == ("--quick" in argv)
        back = handoff_config(get_demo_task("math-hard"), json.loads(json.dumps(config_to_dict(cfg))))  # a worker's
        assert back == cfg and type(back.task) is ChainTiersConfig
        task = get_demo_task("math-hard").problems(cfg)
        assert isinstance(task, ChainTiersTask) and len(task.test) == cfg.task.num_test
        # every correct completion fits the RL and evaluation budgets (with the end-of-sequence token)
        longest = max(len(chain_target(p)) + 1 for p in task.test + task.train_problems(500))
        assert longest <= cfg.train["train"]["max_completion_length"] <= cfg.eval.max_new_tokens
    full = get_demo_task("math-hard").config(quick=False)
    assert full.algorithms == ("grpo", "w-reinforce", "resrl") and full.eval.n == 128
    assert full.start.target_accuracy == 0.1 and full.start.max_steps == 2500  # docs/demo.md, "Tasks"


def test_tiers_generator_answers_and_split():
    """Every generated problem's answer and worked chain are right, each tier draws its own shape,
    the held-out split is distinct problems never met by a training stream, all fixed by the seed."""
    task = ChainTiersTask(ChainTiersConfig(tiers=TIERS, num_test=300, seed=5))
    train = {s: task.train_problems(1000, stream=s) for s in ("sft", "rl", "dev", "omega")}
    test_terms = [chain_terms(p) for p in task.test]
    assert len(set(test_terms)) == len(test_terms) == 300
    for problems in (task.test, *train.values()):
        for p in problems:
            _check_chain(p)
            assert chain_reward([chain_target(p)], [p.answer]) == [1.0]
            n, lo, hi = next(t for t in TIERS if len(str(chain_terms(p)[0])) == len(str(t[1])))
            assert len(chain_terms(p)) == n and all(lo <= x <= hi for x in chain_terms(p))
    for stream, problems in train.items():
        assert not {chain_terms(p) for p in problems} & set(test_terms), stream
        assert not any(task.is_test(p) for p in problems)
        counts = [sum(len(str(chain_terms(p)[0])) == d for p in problems) for d in (2, 3, 4)]
        assert all(250 <= c <= 420 for c in counts), (stream, counts)  # the tiers drawn uniformly
    assert {p.id for p in train["sft"]} != {p.id for p in train["rl"]}  # independent streams
    again = ChainTiersTask(ChainTiersConfig(tiers=TIERS, num_test=300, seed=5))
    assert [p.id for p in again.test] == [p.id for p in task.test]
    assert [p.id for p in again.train_problems(50, "rl")] == [p.id for p in train["rl"][:50]]
    other = ChainTiersTask(ChainTiersConfig(tiers=TIERS, num_test=300, seed=6))
    assert [p.id for p in other.test] != [p.id for p in task.test]
    # a small problem space, where a training stream would meet the held-out split all the time
    small = ChainTiersTask(ChainTiersConfig(tiers=((3, 1, 4), (3, 10, 12)), num_test=40))
    held_out = {chain_terms(p) for p in small.test}
    assert len(held_out) == 40
    drawn = {chain_terms(p) for p in small.train_problems(2000)}
    assert not drawn & held_out and len(drawn) == 64 + 27 - 40  # every other problem is drawn


def test_tiers_config_checks():
    with pytest.raises(ValueError, match="num_terms"):
        ChainTiersConfig(tiers=((2, 10, 99),))
    with pytest.raises(ValueError, match="at least one tier"):
        ChainTiersConfig(tiers=())
    with pytest.raises(ValueError, match="num_test"):
        ChainTiersConfig(tiers=((3, 1, 2),), num_test=5)  # 8 distinct problems: at most 4 held out
    assert ChainTiersConfig(tiers=[[3, 1, 9]]).tiers == ((3, 1, 9),)  # JSON lists come back as tuples


def test_wrong_answers_earn_nothing():
    """The reward the hard task trains and evaluates with pays the exact sum only."""
    task = get_demo_task("math-hard").problems(get_demo_task("math-hard").config(quick=False))
    for p in task.test[:50]:
        target = chain_target(p)
        head, _, last = target.rpartition("=")
        for wrong in (int(last) + 1, int(last) - 1, int(last) * 10):
            assert chain_reward([f"{head}={wrong}"], [p.answer]) == [0.0]
        assert chain_reward([target], [p.answer]) == [1.0]


def test_seeds_hand_every_seed_its_config(monkeypatch, tmp_path):
    """`resrl demo --seeds ... --task math-hard`: each seed's process runs the experiment's config (task,
    methods, every setting) with its own seed and directory, read from OUT/seed-S/run_config.json, not
    a command line rebuilt from the options."""
    import resrl.experiments.jobs as jobs
    from resrl.experiments.command import run
    from resrl.experiments.kinds import handoff_config
    from resrl.experiments.layout import RUN_CONFIG_FILE

    seen = []
    monkeypatch.setattr(jobs, "run_jobs", lambda js, *a, **k: seen.extend(js) or 1 / 0)
    args = _parser().parse_args(["demo", "--seeds", "0,1", "--task", "math-hard", "--quick", "--lr", "3e-4", "--out",
                                 str(tmp_path), "--algorithms", "grpo,grpo/train.max_steps=3", "eval.n=4"])
    with pytest.raises(ZeroDivisionError):
        run(args)
    assert [j.name for j in seen] == ["seed 0", "seed 1"]
    for s, job in zip((0, 1), seen):
        (step,) = job.steps
        assert step.module == "resrl.experiments.seeds" and step.args == [str(tmp_path / f"seed-{s}")]
        data = json.loads((tmp_path / f"seed-{s}" / RUN_CONFIG_FILE).read_text())
        assert data["task"] == "math-hard" and data["workers"] == 1
        cfg = handoff_config(get_demo_task("math-hard"), data["config"])
        assert (cfg.seed, cfg.out, cfg.threads, cfg.is_quick) == (s, str(tmp_path / f"seed-{s}"), 1, True)
        assert cfg.algorithms == ("grpo", "grpo/train.max_steps=3")
        assert cfg.train["train"]["learning_rate"] == 3e-4 and cfg.eval.n == 4


def test_a_seed_process_runs_its_config_and_reports_bad_input_in_one_line(tmp_path):
    """`python -m resrl.experiments.seeds DIR`: exit 2 and one `resrl demo: error:` line naming the
    unknown method, as `resrl demo` itself reports it."""
    import subprocess
    import sys
    from dataclasses import replace

    from resrl.experiments.command import seed_configs
    from resrl.experiments.seeds import run_seeds

    cfg = replace(get_demo_task("math").config(quick=True), algorithms=("no-such-algo",))
    (where,) = seed_configs(cfg, [3], out=tmp_path).values()
    with pytest.raises(RuntimeError, match=r"jobs failed: \{'seed 3': 'exit 2"):
        run_seeds({3: where}, workers=1, poll_s=0.05)
    log = (tmp_path / "seed-3" / "console.log").read_text()
    assert "resrl demo: error:" in log and "no-such-algo" in log and "Traceback" not in log
    proc = subprocess.run([sys.executable, "-m", "resrl.experiments.seeds", str(tmp_path / "nowhere")],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "run_config.json" in proc.stderr


@pytest.mark.slow
def test_hard_quick_demo_end_to_end(tmp_path):
    """`resrl demo --task math-hard --quick` runs the whole pipeline on the tiers task, its RL runs in
    two worker processes (which rebuild the task from OUT/experiment.json)."""
    import contextlib
    import io

    from resrl.cli import main

    out = tmp_path / "demo"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["demo", "--task", "math-hard", "--quick", "--algorithms", "grpo,resrl", "--workers", "2",
                     "--seed", "1", "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["config"]["task_name"] == "math-hard" and summary["workers"] == 2
    assert list(summary["results"]) == ["warm start", "grpo", "resrl"]
    cfg = get_demo_task("math-hard").config(quick=True)
    tiers = {len(str(lo)) for _, lo, _ in cfg.task.tiers}
    for policy in ("warm-start", "grpo", "resrl"):
        ids = [json.loads(line)["problem_id"]
               for line in (out / "eval" / policy / "sampled" / "samples.jsonl").read_text().splitlines()]
        assert len(ids) == cfg.eval.n * cfg.task.num_test
        assert {len(i.split("-", 1)[1].split("+")[0]) for i in ids} == tiers  # both tiers held out
    for r in summary["results"].values():
        assert 0 <= r["avg"] <= 1 and sorted(r["pass_at"], key=int) == ["1", "2", "4", "8"]
    assert summary["results"]["warm start"]["avg"] > 0.05
    report = (out / "report.md").read_text()
    assert "tiered addition" in report and "one tier per problem" in report
