"""scripts/plant_learning_bugs.py plants issue 23's bugs by replacing one source line each: every
anchor must still be in the code exactly once, or the planted-bug evidence silently goes stale
after a refactor (the script would stop with an error only when someone runs it)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_plant_anchor_is_in_the_source_once():
    spec = importlib.util.spec_from_file_location("plant_learning_bugs", ROOT / "scripts" / "plant_learning_bugs.py")
    plants = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plants)
    counts = {name: (ROOT / "src" / rel).read_text().count(anchor)
              for name, (rel, anchor, _, _) in plants.PLANTS.items()}
    assert counts and all(n == 1 for n in counts.values()), counts
