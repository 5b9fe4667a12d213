"""benchmarks/compare_versions.py: the comparison of two code versions' benchmark summaries (median
over rounds of each side's median, after / before), and one round end to end on a stand-in benchmark
that reads which version it runs from its PYTHONPATH. No model, no timing asserted."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "compare_versions.py"


@pytest.fixture(scope="module")
def cv():
    spec = importlib.util.spec_from_file_location("compare_versions", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _summary(step, generation, variants=("grpo", "resrl aligned")):
    return {v: {"median_s": {"generation": generation, "step": step * (1 + 0.1 * i)}} for i, v in enumerate(variants)}


def test_the_ratio_is_after_over_before_of_the_median_over_rounds(cv):
    before = [_summary(10, 4), _summary(12, 5), _summary(30, 4)]  # one noisy round: the median ignores it
    after = [_summary(9, 4), _summary(11, 2), _summary(10.5, 4), ]
    out = cv.compare(before, after)
    assert out["grpo"]["step"] == pytest.approx({"before_s": 12, "after_s": 10.5, "ratio": 10.5 / 12})
    assert out["grpo"]["generation"]["ratio"] == pytest.approx(1.0)
    assert out["resrl aligned"]["step"]["before_s"] == pytest.approx(12 * 1.1)
    # a variant one side lacks (a new benchmark variant) is left out, not compared with nothing
    assert set(cv.compare([_summary(1, 1, ("grpo", "new"))], [_summary(1, 1, ("grpo",))])) == {"grpo"}
    assert "| grpo | 12.00 | 10.50 | 0.875 |" in cv.table(out)


def test_each_side_runs_its_own_checkout(cv, tmp_path):
    """Two stand-in checkouts whose `src/version.py` differ: each side's benchmark must import its own
    (its src/ first on PYTHONPATH, its own copy of the script), or the ratio compares a version with itself."""
    bench = ("import argparse, json, version\n"
             "p = argparse.ArgumentParser(); p.add_argument('--json'); a = p.parse_args()\n"
             "json.dump({'summary': {'v': {'median_s': {'step': version.STEP}}}}, open(a.json, 'w'))\n")
    for name, step in (("old", 2.0), ("new", 1.0)):
        (tmp_path / name / "src").mkdir(parents=True)
        (tmp_path / name / "src" / "version.py").write_text(f"STEP = {step}\n")
        (tmp_path / name / "bench.py").write_text(bench)
    out = tmp_path / "cmp.json"
    subprocess.run([sys.executable, str(SCRIPT), "--before", str(tmp_path / "old"), "--after", str(tmp_path / "new"),
                    "--rounds", "2", "--json", str(out), "--", "bench.py"], check=True, capture_output=True)
    data = json.loads(out.read_text())
    assert data["comparison"]["v"]["step"] == {"before_s": 2.0, "after_s": 1.0, "ratio": 0.5}
    assert len(data["rounds"]["before"]) == 2
