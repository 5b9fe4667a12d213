"""Multi-seed demo: aggregation over seeds and paired differences on hand-made per-seed results,
seed parsing, resuming, and (slow) `resrl demo --seeds` end to end with --quick."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pytest

from resrl.demo.tasks import get_demo_task
from resrl.experiments.command import seed_configs
from resrl.experiments.seeds import per_seed_metrics, run_seeds, write_multiseed
from resrl.eval.seeds import aggregate_seeds, paired_differences, parse_seeds

PER_SEED = {
    0: {"grpo": {"greedy": 0.50, "avg": 0.40}, "resrl": {"greedy": 0.60, "avg": 0.38}},
    1: {"grpo": {"greedy": 0.52, "avg": 0.45}, "resrl": {"greedy": 0.55, "avg": 0.41}},
    2: {"grpo": {"greedy": 0.61, "avg": 0.50}, "resrl": {"greedy": 0.70, "avg": 0.52}},
}
T2 = 4.303  # t_{0.975} with 2 degrees of freedom


def test_aggregate_hand_made():
    agg = aggregate_seeds(PER_SEED)
    g = agg["grpo"]["greedy"]
    vals = np.array([0.50, 0.52, 0.61])
    assert g["mean"] == pytest.approx(vals.mean()) and g["n"] == 3
    half = T2 * vals.std(ddof=1) / math.sqrt(3)
    assert g["low"] == pytest.approx(vals.mean() - half) and g["high"] == pytest.approx(vals.mean() + half)


def test_paired_differences_hand_made():
    diffs = paired_differences(PER_SEED, "grpo")
    assert set(diffs) == {"resrl"}
    d = diffs["resrl"]["greedy"]  # differences 0.10, 0.03, 0.09
    x = np.array([0.10, 0.03, 0.09])
    assert d["mean"] == pytest.approx(x.mean()) and d["wins"] == 3
    assert d["low"] == pytest.approx(x.mean() - T2 * x.std(ddof=1) / math.sqrt(3))
    a = diffs["resrl"]["avg"]  # -0.02, -0.04, +0.02: one win, interval straddles 0
    assert a["wins"] == 1 and a["low"] < 0 < a["high"]
    # pairing matters: the unpaired spread of greedy is much larger than the paired one
    agg = aggregate_seeds(PER_SEED)
    assert d["high"] - d["low"] < agg["resrl"]["greedy"]["high"] - agg["resrl"]["greedy"]["low"]
    assert paired_differences(PER_SEED, "dapo") == {}


def test_policies_missing_in_a_seed_are_left_out():
    per_seed = {0: {"grpo": {"avg": 0.1}, "nsr": {"avg": 0.2}}, 1: {"grpo": {"avg": 0.3}}}
    assert set(aggregate_seeds(per_seed)) == {"grpo"}
    assert paired_differences(per_seed) == {}


def test_parse_seeds():
    assert parse_seeds("0,1,2") == [0, 1, 2]
    assert parse_seeds("3-5") == [3, 4, 5]
    assert parse_seeds(" 7 ") == [7]
    for bad in ("", "a", "1,1", "-1"):
        with pytest.raises(ValueError):
            parse_seeds(bad)


def _summary(greedy, avg):
    return {"results": {"warm start": {"greedy": 0.3, "avg": 0.2, "pass_at": {"1": 0.2, "2": 0.3}},
                        "grpo": {"greedy": greedy, "avg": avg, "pass_at": {"1": avg, "2": avg + 0.1}}}}


def test_finished_seeds_are_not_rerun_and_outputs_are_written(tmp_path):
    for s, (g, a) in enumerate([(0.5, 0.4), (0.6, 0.45)]):
        (tmp_path / f"seed-{s}").mkdir()
        (tmp_path / f"seed-{s}" / "summary.json").write_text(json.dumps(_summary(g, a)))
    # nothing to run: a seed's process would fail here (an unknown method), so this also proves no rerun
    bogus = replace(get_demo_task("math").config(quick=True), algorithms=("no-such-algo",))
    summaries = run_seeds(seed_configs(bogus, [0, 1], out=tmp_path), workers=2, poll_s=0.01)
    assert per_seed_metrics(summaries)[1]["grpo"] == {"greedy": 0.6, "avg": 0.45, "pass@1": 0.45, "pass@2": 0.55}
    files = write_multiseed(tmp_path, summaries)
    assert all(f.stat().st_size > 0 for f in files)
    md = (tmp_path / "multiseed.md").read_text()
    assert "| grpo | 0.550 [" in md and "Pass@2" in md
    data = json.loads((tmp_path / "multiseed.json").read_text())
    assert data["aggregate"]["grpo"]["greedy"]["mean"] == pytest.approx(0.55)
    # paired with the warm start (did RL improve its own start?) and with GRPO, seed by seed
    vs_warm = data["paired_vs_warm_start"]["grpo"]
    assert vs_warm["greedy"]["mean"] == pytest.approx(0.25) and vs_warm["avg"]["wins"] == 2
    assert data["paired_vs_grpo"]["warm start"]["greedy"]["mean"] == pytest.approx(-0.25)
    assert "| policy − warm start |" in md and "| policy − grpo |" in md


def test_failing_seeds_are_reported_after_all_ran(tmp_path, capsys):
    bogus = replace(get_demo_task("math").config(quick=True), algorithms=("no-such-algo",))
    with pytest.raises(RuntimeError, match=r"jobs failed: \{'seed 0': 'exit 2.*'seed 1': 'exit 2"):
        run_seeds(seed_configs(bogus, [0, 1], out=tmp_path), workers=2, poll_s=0.05)
    assert "unknown" in (tmp_path / "seed-1" / "console.log").read_text()


@pytest.mark.slow
def test_demo_seeds_end_to_end_quick(tmp_path):
    from resrl.cli import main

    # one seed keeps this under a minute on a busy 2-core machine; parallel scheduling is covered above
    args = ["demo", "--seeds", "3", "--quick", "--algorithms", "grpo,w-reinforce", "--rl-steps", "2",
            "--eval-samples", "2", "--out", str(tmp_path), "--workers", "2"]
    assert main(args) == 0
    data = json.loads((tmp_path / "multiseed.json").read_text())
    assert data["seeds"] == [3] and set(data["aggregate"]) == {"warm start", "grpo", "w-reinforce"}
    assert set(data["paired_vs_grpo"]) == {"warm start", "w-reinforce"}
    assert (tmp_path / "passk_seeds.png").stat().st_size > 0
    stamp = (tmp_path / "seed-3" / "summary.json").stat().st_mtime
    assert main(args) == 0  # resumed: nothing rerun
    assert (tmp_path / "seed-3" / "summary.json").stat().st_mtime == stamp


def test_the_multiseed_table_keeps_its_columns_when_a_policy_lacks_a_metric(tmp_path):
    """The pretrained demo's base model may have no \\boxed{} answer on a seed (accuracy among
    formatted answers: null): its cell is a dash, every row keeps the header's columns."""
    def summary(base_af, rl_af):
        res = lambda avg, af: {"greedy": avg, "avg": avg, "pass_at": {"1": avg, "2": avg + 0.1}, "format_rate": 0.5,
                               "accuracy_formatted": af, "truncated": 0.1, "accuracy_finished": avg + 0.05}
        return {"results": {"warm start": res(0.1, base_af), "grpo": res(0.4, rl_af)}}

    files = write_multiseed(tmp_path, {0: summary(None, 0.6), 1: summary(0.2, 0.7)}, baseline="grpo")
    table = [line for line in files[0].read_text().splitlines() if line.startswith("|")]
    assert "accuracy among formatted" in table[0] and "format rate" in table[0] and "accuracy among finished" in table[0]
    assert len({line.count("|") for line in table}) == 1
    assert any(line.startswith("| warm start |") and "—" in line for line in table)
    assert "its own model initialisation" in files[0].read_text()  # a summary without its config: a demo's
    # the pretrained demo's seeds share one start, the base model; the report says so
    (tmp_path / "p").mkdir()
    pretrained = {s_: {**summary(0.2, 0.6), "config": {"task_name": "smollm2-arithmetic"}} for s_ in (0, 1)}
    text = write_multiseed(tmp_path / "p", pretrained, baseline="grpo", shared_start=True)[0].read_text()
    assert "the warm start is the base model" in text and "its own model initialisation" not in text
