"""Multi-turn training through `resrl train`'s config (env section): the environment's answers are
context only, its reward is the reward, and BFCL multi-turn entries map back to their environment."""

from __future__ import annotations

import math

import pytest
from train_helpers import build_small_model, overrides, toy_dataset

from resrl.engines import multiturn
from resrl.engines.trl import trainer as trl_engine
from resrl.train import ConfigError, load_config, run_training


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return build_small_model(tmp_path_factory.mktemp("tiny") / "model")


def test_multi_turn_training_from_the_config(model_dir, tmp_path, monkeypatch):
    seen = []
    real_loss = trl_engine.ResRLTrainer._compute_loss

    def spy(self, model, inputs):
        seen.append({k: inputs[k].detach().clone() for k in ("tool_mask", "completion_mask", "advantages")
                     if inputs.get(k) is not None})
        return real_loss(self, model, inputs)

    monkeypatch.setattr(trl_engine.ResRLTrainer, "_compute_loss", spy)
    # a random tiny model rarely samples EOS: end each message after <= 4 sampled tokens
    real_policy = multiturn.HFStepPolicy.__call__

    def short_messages(self, contexts, max_new_tokens):
        outs = real_policy(self, contexts, [min(4, m) for m in max_new_tokens])
        return [((ids if ids and ids[-1] in self.eos_token_ids else ids + [self.eos_token_ids[0]]), None)
                for ids, _ in outs]

    monkeypatch.setattr(multiturn.HFStepPolicy, "__call__", short_messages)
    cfg = load_config(None, overrides(model_dir, tmp_path, "algorithm.name=grpo", "env.name=train_helpers:make_two_step_env",
                                      "reward.function=env", "env.max_turns=3", "env.max_step_tokens=6",
                                      "train.max_completion_length=48"))
    result = run_training(cfg, train_dataset=toy_dataset())
    assert len(result.metrics) == 2 and all(math.isfinite(m["loss"]) for m in result.metrics)
    assert any(0 < m["reward"] < 1 for m in result.metrics)  # the environment's 0/1 rewards
    env_tokens = 0
    for batch in seen:
        env = (batch["completion_mask"] == 1) & (batch["tool_mask"] == 0)
        env_tokens += int(env.sum())
        assert (batch["advantages"][env] == 0).all()
    assert env_tokens > 0, "no environment token reached the loss: the rollout was single-turn"


@pytest.mark.parametrize("extra,message", [
    (["env.name=train_helpers:make_two_step_env", "reward.function=math"], "reward.function"),
    (["reward.function=env"], "env.name"),
    (["env.name=bfcl", "reward.function=env"], "bfcl:multi_turn_base"),
])
def test_env_config_errors_name_the_keys(model_dir, tmp_path, extra, message):
    cfg = load_config(None, overrides(model_dir, tmp_path, *extra, "data.train=gsm8k"))
    with pytest.raises(ConfigError, match=message):
        cfg.validate()


def test_an_env_section_without_a_reward_is_scored_by_the_environment(model_dir, tmp_path):
    cfg = load_config(None, overrides(model_dir, tmp_path, "env.name=train_helpers:make_two_step_env",
                                      "data.train=gsm8k"))
    cfg.validate()
    assert cfg.reward.function is None and cfg.reward_spec() == "env"


def test_bfcl_multi_turn_rows_map_back_to_their_environment(model_dir, tmp_path):
    pytest.importorskip("bfcl_eval", reason="bfcl-eval is installed by scripts/setup.sh")
    from resrl.train.runner import _multi_turn

    cfg = load_config(None, overrides(model_dir, tmp_path, "env.name=bfcl", "reward.function=env",
                                      "data.train=bfcl:multi_turn_base", "data.max_problems=3"))
    cfg.validate()
    dataset, rollout_func = _multi_turn(cfg, None)
    assert len(dataset) == 3 and callable(rollout_func)
    # the environment built for a round-tripped prompt is the row's BFCL entry
    from resrl.tasks.tools.bfcl_env import BFCLMultiTurnEnv

    made = _env_for_prompt(cfg)
    for row in dataset:
        env = made(row["prompt"])
        assert isinstance(env, BFCLMultiTurnEnv) and env.entry["id"] == row["answer"]


def _env_for_prompt(cfg):
    """The runner's env_for_prompt for this config, taken from the rollout function it builds."""
    from resrl.engines import multiturn as mt
    from resrl.train.runner import _multi_turn

    captured = {}
    real = mt.make_trl_rollout_func

    def grab(env_for_prompt, **kwargs):
        captured["f"] = env_for_prompt
        return real(env_for_prompt, **kwargs)

    mt.make_trl_rollout_func = grab
    try:
        _multi_turn(cfg, None)
    finally:
        mt.make_trl_rollout_func = real
    return captured["f"]
