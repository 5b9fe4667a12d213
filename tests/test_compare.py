"""`resrl compare`: metrics of eval summaries, the comparison table on hand-made results, resumable
jobs, and (slow) train + eval of two algorithms end to end on the tiny model."""

from __future__ import annotations

import json

import pytest

from resrl.errors import InputError
from resrl.experiments.compare import overall_metrics, write_comparison
from resrl.experiments.grid import choose_on_dev, parse_grid
from resrl.experiments.jobs import Job, Step, run_jobs


def _eval_summary(avg, p2):
    return {"overall": {"avg@2": avg, "pass@k": {"1": avg, "2": p2}, "num_problems": 4}, "benchmarks": {}}


def test_overall_metrics_and_table(tmp_path):
    assert overall_metrics(_eval_summary(0.25, 0.5)) == {"avg@2": 0.25, "pass@1": 0.25, "pass@2": 0.5}
    per_seed = {0: {"grpo": overall_metrics(_eval_summary(0.2, 0.4)), "resrl": overall_metrics(_eval_summary(0.3, 0.5))},
                1: {"grpo": overall_metrics(_eval_summary(0.4, 0.6)), "resrl": overall_metrics(_eval_summary(0.3, 0.6))}}
    files = write_comparison(tmp_path, per_seed, "grpo")
    md = files[0].read_text()
    assert "| grpo | 0.300 [" in md and "(1/2)" in md  # resrl − grpo on avg@2: +0.1, −0.1
    data = json.loads(files[1].read_text())
    assert data["paired_vs_grpo"]["resrl"]["avg@2"]["mean"] == pytest.approx(0.0, abs=1e-12)
    assert data["paired_vs_grpo"]["resrl"]["pass@2"]["mean"] == pytest.approx(0.05)
    assert files[2].stat().st_size > 0


def test_jobs_skip_finished_steps(tmp_path):
    done = tmp_path / "done.txt"
    done.write_text("x")
    # the only step is done: nothing is started (the bogus command would fail)
    run_jobs([Job("j", [Step(["no-such-command"], done)], tmp_path / "log")], workers=1, poll_s=0.01)
    assert not (tmp_path / "log").exists()


def _plant(run_dir, avg):
    """A finished (train, eval) job: its done markers, with an eval summary of avg@2 = avg."""
    (run_dir / "model").mkdir(parents=True, exist_ok=True)
    (run_dir / "model" / "config.json").write_text("{}")
    (run_dir / "eval").mkdir(parents=True, exist_ok=True)
    (run_dir / "eval" / "summary.json").write_text(json.dumps(_eval_summary(avg, min(1.0, avg + 0.1))))


def test_a_grid_chooses_each_method_on_the_dev_split_only(tmp_path, capsys):
    """Dev and held-out optima differ: GRPO is best at 3e-4 on dev but 1e-4 on held-out, ResRL the
    reverse. The choice follows dev; the table reports the chosen point's held-out runs."""
    from resrl.cli import main

    (tmp_path / "config.yaml").write_text("train: {max_steps: 1}\n")
    for name, rows in (("dev", range(0, 4)), ("test", range(10, 14))):
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps({"problem": f"{i}+1=", "answer": str(i + 1)}) + "\n"
                                                        for i in rows))
    out = tmp_path / "cmp"
    dev = {"grpo": {"1e-4": 0.2, "3e-4": 0.5}, "resrl": {"1e-4": 0.4, "3e-4": 0.1}}
    held_out = {"grpo": {"1e-4": 0.9, "3e-4": 0.3}, "resrl": {"1e-4": 0.35, "3e-4": 0.95}}
    for method in ("grpo", "resrl"):
        for lr in ("1e-4", "3e-4"):
            label = f"{method}+train.learning_rate={lr}"
            _plant(out / "dev" / label / "seed-0", dev[method][lr])
            for seed in (0, 1):
                _plant(out / label / f"seed-{seed}", held_out[method][lr])
    args = ["compare", "--config", str(tmp_path / "config.yaml"), "--algorithms", "grpo,resrl", "--seeds", "0,1",
            "--data", str(tmp_path / "test.jsonl"), "--dev-data", str(tmp_path / "dev.jsonl"),
            "--grid", "train.learning_rate=1e-4,3e-4", "--out", str(out), "--workers", "1"]
    assert main(args) == 0  # every job planted as done: nothing is trained, only chosen and reported
    result = json.loads((out / "compare.json").read_text())
    assert result["settings_chosen_on_dev"] == {"grpo": "grpo/train.learning_rate=3e-4",
                                                "resrl": "resrl/train.learning_rate=1e-4"}
    assert result["aggregate"]["grpo"]["avg@2"]["mean"] == pytest.approx(0.3)
    assert result["aggregate"]["resrl"]["avg@2"]["mean"] == pytest.approx(0.35)
    devj = json.loads((out / "dev.json").read_text())
    assert devj["metric"] == "avg@2" and devj["methods"]["grpo"]["chosen"] == {"train.learning_rate": "3e-4"}
    assert "**(chosen)**" in (out / "dev.md").read_text() and (out / "dev_grid.png").stat().st_size > 0
    # a dev split that shares a prompt with the held-out data is refused
    (tmp_path / "dev.jsonl").write_text(json.dumps({"problem": "10+1=", "answer": "11"}) + "\n")
    capsys.readouterr()
    assert main(args) == 2
    assert "--dev-data and --data share 1 prompt(s)" in capsys.readouterr().err


def test_grid_parsing_and_ties():
    assert parse_grid(["a=1,2", "b=x"]) == [{"a": "1", "b": "x"}, {"a": "2", "b": "x"}]
    with pytest.raises(InputError, match="KEY=V1,V2"):
        parse_grid(["a="])
    assert choose_on_dev({"m": [({"a": "1"}, 0.5), ({"a": "2"}, 0.5), ({"a": "3"}, 0.1)]}) == {"m": {"a": "1"}}


@pytest.mark.slow
def test_compare_end_to_end_tiny(tmp_path):
    from train_helpers import build_small_model

    from resrl.cli import main

    model = build_small_model(tmp_path / "model")
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps({"problem": f"{i}+1=", "answer": str(i + 1)}) + "\n" for i in range(8)))
    reward = tmp_path / "reward.py"
    reward.write_text("def parity(completions, answers):\n"
                      "    return [float(sum(map(ord, c)) % 2 == 0) for c in completions]\n")
    config = tmp_path / "config.yaml"
    config.write_text(f"""
model: {{path: {model}}}
data: {{train: {data}}}
reward: {{function: "{reward}:parity", num_workers: 1}}
train: {{max_steps: 2, rollout_prompts: 4, group_size: 4, max_completion_length: 6, learning_rate: 1.0e-2,
        max_prompt_length: null}}
log: {{report_to: [none], progress: false}}
""")
    out = tmp_path / "cmp"
    args = ["compare", "--config", str(config), "--algorithms", "grpo,resrl/train.learning_rate=3e-3", "--seeds", "0",
            "--data", str(data),
            "--out", str(out), "--workers", "2",
            "--eval-args", f"--n 2 --max-new-tokens 6 --no-chat-template --reward {reward}:parity"]
    assert main(args) == 0
    data_out = json.loads((out / "compare.json").read_text())
    resrl = "resrl/train.learning_rate=3e-3"  # a method at its own learning rate
    assert set(data_out["aggregate"]) == {"grpo", resrl} and resrl in data_out["paired_vs_grpo"]
    trained = json.loads((out / "resrl+train.learning_rate=3e-3" / "seed-0" / "train_config.json").read_text())
    assert trained["train"]["learning_rate"] == 3e-3 and trained["algorithm"]["name"] == "resrl"
    assert json.loads((out / "grpo" / "seed-0" / "train_config.json").read_text())["train"]["learning_rate"] == 1e-2
    for a in ("grpo", "resrl+train.learning_rate=3e-3"):
        assert (out / a / "seed-0" / "model" / "config.json").is_file()
        assert (out / a / "seed-0" / "eval" / "summary.json").is_file()
    stamp = (out / "grpo" / "seed-0" / "eval" / "summary.json").stat().st_mtime
    assert main(args) == 0  # resumed: nothing rerun
    assert (out / "grpo" / "seed-0" / "eval" / "summary.json").stat().st_mtime == stamp
