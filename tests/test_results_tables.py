"""docs/results.md's tables of the loss grid (issue 43) are the committed run's: the script beside its
result files (benchmarks/results/issue43_loss_grid/table.py) prints them from dev.json and
multiseed.json, and the page holds exactly those lines, in that order."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _table_module():
    path = ROOT / "benchmarks" / "results" / "issue43_loss_grid" / "table.py"
    spec = importlib.util.spec_from_file_location("issue43_loss_grid_table", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_loss_grid_tables_in_the_results_page_are_the_committed_results():
    table = _table_module()
    page = (ROOT / "docs" / "results.md").read_text(encoding="utf-8")
    for lines in (table.dev_table(), table.held_out_table()):
        assert len(lines) == 2 + 12 + (lines[0].count("| lr |"))  # 12 methods (+ the warm start held out)
        assert "\n".join(lines) + "\n" in page, lines[0]
    # the command that produced them, with the methods the tables list
    ms = (ROOT / "benchmarks" / "results" / "issue43_loss_grid" / "chosen.json").read_text()
    assert "resrl demo --grid train.learning_rate=5e-5,1e-4,2e-4 --seeds 0,1,2" in page
    for method in __import__("json").loads(ms):
        assert method in page.replace("\\\n", ""), method
