"""`resrl train` plumbing with the code reward: a tiny random model, a tiny offline code data set,
`reward.function: code` from the config (no learning claim: a random model writes no code)."""

from __future__ import annotations

import json

import pytest

from resrl.train import load_config, run_training

from train_helpers import build_small_model, overrides


def code_rows(n: int = 8) -> list[dict]:
    rows = []
    for i in range(n):
        if i % 2:
            tests = {"inputs": [f"{i}\n", f"{i + 1}\n"], "outputs": [str(2 * i), str(2 * i + 2)]}
            rows.append({"problem": f"Read n and print 2n. ({i})", "tests": tests})
        else:
            tests = {"fn_name": "add", "inputs": [[i, 1], [0, i]], "outputs": [i + 1, i]}
            rows.append({"problem": f"Write add(a, b). ({i})", "tests": tests})
    return rows


@pytest.mark.slow
@pytest.mark.parametrize("reward", ["code", "code-fraction"])
def test_train_with_the_code_reward_from_a_config(tmp_path, reward):
    model_dir = build_small_model(tmp_path / "model")
    data = tmp_path / "code.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in code_rows()))
    cfg = load_config(None, overrides(model_dir, tmp_path / "run", "algorithm.name=resrl", f"data.train={data}",
                                      f"reward.function={reward}", "reward.timeout_s=2", "reward.num_workers=2"))
    result = run_training(cfg, save_final=False)
    assert len(result.metrics) == 2
    for step in result.metrics:
        assert step["reward"] == 0.0  # nothing a random model writes passes
        assert step["reward/no_code"] + step["reward/errors"] > 0  # the reward ran (and counted) each item
        assert 0.0 <= step["reward/pass_rate"] <= 1.0
