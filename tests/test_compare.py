"""`resrl compare`: metrics of eval summaries, the comparison table on hand-made results, resumable
jobs, and (slow) train + eval of two algorithms end to end on the tiny model."""

from __future__ import annotations

import json

import pytest

from resrl.eval.compare import overall_metrics, write_comparison
from resrl.eval.jobs import Job, Step, run_jobs


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
    args = ["compare", "--config", str(config), "--algorithms", "grpo,resrl", "--seeds", "0", "--data", str(data),
            "--out", str(out), "--workers", "2",
            "--eval-args", f"--n 2 --max-new-tokens 6 --no-chat-template --reward {reward}:parity"]
    assert main(args) == 0
    data_out = json.loads((out / "compare.json").read_text())
    assert set(data_out["aggregate"]) == {"grpo", "resrl"} and "resrl" in data_out["paired_vs_grpo"]
    for a in ("grpo", "resrl"):
        assert (out / a / "seed-0" / "model" / "config.json").is_file()
        assert (out / a / "seed-0" / "eval" / "summary.json").is_file()
    stamp = (out / "grpo" / "seed-0" / "eval" / "summary.json").stat().st_mtime
    assert main(args) == 0  # resumed: nothing rerun
    assert (out / "grpo" / "seed-0" / "eval" / "summary.json").stat().st_mtime == stamp
