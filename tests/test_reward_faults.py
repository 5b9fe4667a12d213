"""A reward function's faults — an exception, a NaN / inf, a value that is not a number, a call that
never returns — score the item 0, are counted per kind in the metrics and logged once naming the
reward and the row, in process or isolated; or stop the run with one error naming them
(`reward.on_error: raise`). Training never stops on the default."""

from __future__ import annotations

import logging
import math
import textwrap

import pytest
from train_helpers import build_small_model, overrides, toy_dataset

from resrl.engines.trl.rewards import FAULT_KINDS, IsolatedReward, RewardAdapter, RewardFaultError
from resrl.train import load_config, run_training


def faulty(completions, answers):
    """Scores by the answer: 0 mod 4 raises, 1 NaN, 2 a string, 3 a good score 1.0."""
    out = []
    for a in answers:
        kind = int(a) % 4
        if kind == 0:
            raise RuntimeError(f"user bug on answer {a}")
        out.append(float("nan") if kind == 1 else "1.0" if kind == 2 else 1.0)
    return out


def _call(adapter, answers, prompts=None, **columns):
    metrics = {}
    prompts = prompts or [f"prompt of {a}" for a in answers]
    scores = adapter(prompts, [f"completion {a}" for a in answers], log_metric=metrics.__setitem__,
                     answer=answers, **columns)
    return scores, metrics


def test_each_fault_kind_scores_zero_and_is_counted_once_logged(caplog):
    adapter = RewardAdapter(faulty, name="faulty")
    answers = ["4", "5", "6", "7", "8", "3"]
    with caplog.at_level(logging.WARNING, logger="resrl.engines.trl.rewards"):
        scores, m = _call(adapter, answers, id=["r4", "r5", "r6", "r7", "r8", "r3"])
        _call(adapter, answers, id=["r4", "r5", "r6", "r7", "r8", "r3"])
    assert scores == [0.0, 0.0, 0.0, 1.0, 0.0, 1.0]  # only the faulty items lost their score
    assert m == {"reward/errors": 2.0, "reward/timeouts": 0.0, "reward/nonfinite": 1.0, "reward/wrong_type": 1.0}
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 3  # the first of each kind, not one per item or per step
    assert any("'faulty'" in x and "errors" in x and "row id 'r4'" in x and "user bug" in x for x in lines)
    assert any("nonfinite" in x and "row id 'r5'" in x for x in lines)
    assert any("wrong type" in x and "row id 'r6'" in x for x in lines)


def test_on_error_raise_names_the_reward_and_the_row():
    adapter = RewardAdapter(faulty, name="faulty", on_error="raise")
    with pytest.raises(RewardFaultError, match=r"reward 'faulty': nonfinite on the row with prompt 'prompt of 5'"):
        _call(adapter, ["5", "7"])
    assert _call(adapter, ["7", "3"])[0] == [1.0, 1.0]  # no fault, no error


def test_a_batch_that_fails_as_a_whole_and_wrong_lengths():
    def batch_only_fails(completions, answers):
        if len(completions) > 1:
            raise MemoryError("too big")
        return [1.0]

    scores, m = _call(RewardAdapter(batch_only_fails), ["1", "2"])
    assert scores == [0.0, 0.0] and m["reward/errors"] == 2.0
    scores, m = _call(RewardAdapter(lambda c, a: [1.0]), ["1", "2", "3"])
    assert scores == [0.0] * 3 and m["reward/wrong_type"] == 3.0
    scores, m = _call(RewardAdapter(lambda c, a: 1.0), ["1"])
    assert scores == [0.0] and m["reward/wrong_type"] == 1.0
    # numpy-like and 0-d torch scores are numbers; None is TRL's "does not apply": handed to TRL as None
    # (a row every reward function scores None is unscorable: advantage 0), not a fault
    import numpy as np
    import torch

    scores, m = _call(RewardAdapter(lambda c, a: [np.float32(0.5), torch.tensor(2.0), None, True]), list("1234"))
    assert scores == [0.5, 2.0, None, 1.0] and all(m[f"reward/{k}"] == 0.0 for k in FAULT_KINDS)
    scores, m = _call(RewardAdapter(lambda c, a: [math.inf, -math.inf]), ["1", "2"])
    assert scores == [0.0, 0.0] and m["reward/nonfinite"] == 2.0


def hangs(completions, answers):
    import time

    time.sleep(10 ** 6)


def hangs_on_13(completions, answers):
    """Scores 1.0 per item, but never returns for a batch holding the answer "13" (module level: the worker
    processes the adapter moves it to are forked, they need no pickling of it)."""
    import time

    if "13" in answers:
        time.sleep(10 ** 6)
    return [1.0] * len(answers)


def _reward_threads() -> int:
    import threading

    return sum(t.name.startswith("resrl-reward-") and t.is_alive() for t in threading.enumerate())


def test_an_in_process_call_past_its_deadline_is_abandoned():
    adapter = RewardAdapter(hangs, name="hangs", timeout_s=0.2)
    try:
        scores, m = _call(adapter, ["1", "2", "3"])
    finally:
        adapter.close()
    assert scores == [0.0] * 3 and m["reward/timeouts"] == 3.0
    adapter = RewardAdapter(hangs, name="hangs", timeout_s=0.2, on_error="raise")
    try:
        with pytest.raises(RewardFaultError, match="reward 'hangs': timeouts"):
            _call(adapter, ["1"])
    finally:
        adapter.close()


def test_a_hanging_item_costs_one_score_and_no_thread_per_step():
    """Like a raising batch, a batch past its deadline is scored item by item: the item that hangs scores 0,
    the 15 others their score. The call that timed out is the only thread ever abandoned: later steps run
    in worker processes that the deadline kills."""
    before = _reward_threads()
    adapter = RewardAdapter(hangs_on_13, name="hangs_on_13", timeout_s=0.5)
    answers = [str(k) for k in range(6, 22)]  # "13" is item 7
    try:
        for step in range(3):
            scores, m = _call(adapter, answers)
            assert scores == [1.0] * 7 + [0.0] + [1.0] * 8, (step, scores)
            assert m["reward/timeouts"] == 1.0 and m["reward/errors"] == 0.0
    finally:
        adapter.close()
    assert _reward_threads() - before <= 1


def test_isolated_items_report_the_same_kinds(caplog):
    iso = IsolatedReward(faulty, timeout_s=5.0, num_workers=1)
    try:
        with caplog.at_level(logging.WARNING, logger="resrl.engines.trl.rewards"):
            scores, m = _call(RewardAdapter(iso, name="faulty"), ["4", "5", "6", "7"])
    finally:
        iso.close()
    assert scores == [0.0, 0.0, 0.0, 1.0]
    assert (m["reward/errors"], m["reward/nonfinite"], m["reward/wrong_type"]) == (1.0, 1.0, 1.0)
    assert any("'faulty'" in r.getMessage() and "user bug" in r.getMessage() for r in caplog.records)


def test_environment_rewards_are_checked_too():
    from resrl.engines.trl.rewards import EnvironmentReward

    m = {}
    out = EnvironmentReward()(["p"] * 3, ["c"] * 3, env_reward=[1.0, float("nan"), None], log_metric=m.__setitem__)
    assert out == [1.0, 0.0, None] and m["reward/nonfinite"] == 1.0  # None: unscorable, as TRL's


# ---- through run_training, as `resrl train` runs it --------------------------------------------------

@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return build_small_model(tmp_path_factory.mktemp("tiny") / "model")


def _module(tmp_path):
    path = tmp_path / "faulty_reward.py"
    path.write_text(textwrap.dedent('''
        def score(completions, answers):
            out = []
            for a in answers:
                kind = int(a) % 4
                if kind == 0:
                    raise RuntimeError("user bug on answer " + a)
                out.append(float("nan") if kind == 1 else "1.0" if kind == 2 else 1.0)
            return out
    '''))
    return f"{path}:score"


@pytest.mark.parametrize("isolate", [False, True])
def test_a_faulty_user_reward_does_not_stop_training(model_dir, tmp_path, caplog, isolate):
    cfg = load_config(None, overrides(model_dir, tmp_path / "run", f"reward.function={_module(tmp_path)}",
                                      f"reward.isolate={'true' if isolate else 'false'}"))
    with caplog.at_level(logging.WARNING, logger="resrl.engines.trl.rewards"):
        result = run_training(cfg, train_dataset=toy_dataset(), save_final=False)
    assert len(result.metrics) == 2  # both steps ran
    total = {k: sum(s[f"reward/{k}"] for s in result.metrics) for k in FAULT_KINDS}
    assert total["errors"] > 0 and total["nonfinite"] > 0 and total["wrong_type"] > 0
    assert total["timeouts"] == 0
    logged = [r.getMessage() for r in caplog.records if "reward 'score'" in r.getMessage()]
    assert 1 <= len(logged) <= 3 and all("the row with prompt" in x for x in logged)


def test_on_error_raise_stops_the_run_naming_reward_and_row(model_dir, tmp_path):
    cfg = load_config(None, overrides(model_dir, tmp_path / "run", f"reward.function={_module(tmp_path)}",
                                      "reward.on_error=raise"))
    with pytest.raises(RewardFaultError, match=r"reward 'score': .* on the row with prompt"):
        run_training(cfg, train_dataset=toy_dataset(), save_final=False)


def test_a_user_reward_that_never_returns_is_cut_off_in_process(model_dir, tmp_path):
    path = tmp_path / "hangs.py"
    path.write_text("import time\n\ndef score(completions, answers):\n    time.sleep(10 ** 6)\n")
    cfg = load_config(None, overrides(model_dir, tmp_path / "run", "train.max_steps=1",
                                      f"reward.function={path}:score", "reward.timeout_s=0.5"))
    result = run_training(cfg, train_dataset=toy_dataset(), save_final=False)
    assert result.metrics[0]["reward/timeouts"] == 16  # 4 prompts x 4 samples, all cut at 0.5 s
    assert result.metrics[0]["reward"] == 0.0
