"""NTHR, ResRL weighting="interference", Pass@k training, GSPO and the top-entropy mask through the
TRL engine (`resrl train`): the advantages reaching the loss equal resrl.core's on a head sketch
recomputed independently from the pre-update model, in both capture modes."""

from __future__ import annotations

import copy
import math

import pytest
import torch
from train_helpers import build_small_model, length_reward, overrides, toy_dataset

from resrl.core import sketch_from_logits
from resrl.core.registry import AdvantageInputs, compute_token_advantages
from resrl.engines.trl import trainer as trl_engine
from resrl.engines.hidden import align_response_hidden, reference_last_layer
from resrl.train import load_config, run_training


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return build_small_model(tmp_path_factory.mktemp("tiny") / "model")


@pytest.mark.parametrize("settings,mode", [
    (["algorithm.name=nthr", "algorithm.nthr.topk=8"], "aligned"),
    (["algorithm.name=nthr", "algorithm.nthr.topk=8"], "extra-pass"),
    (["algorithm.name=resrl", "algorithm.resrl.weighting=interference", "algorithm.resrl.interference_topk=8"],
     "aligned"),
    (["algorithm.name=resrl", "algorithm.resrl.weighting=interference", "algorithm.resrl.interference_topk=8"],
     "extra-pass"),
])
def test_head_sketch_advantages_equal_core(model_dir, tmp_path, monkeypatch, settings, mode):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir)
    initial = copy.deepcopy(model).eval()
    seen = []
    real_compute_loss = trl_engine.ResRLTrainer._compute_loss
    real_get_policy_loss = trl_engine.get_policy_loss

    def compute_loss_spy(self, model, inputs):
        seen.append({"inputs": inputs})
        return real_compute_loss(self, model, inputs)

    def get_policy_loss_spy(name):
        loss_fn = real_get_policy_loss(name)

        def spy(inputs, config):
            seen[-1]["advantages"] = inputs.advantages.detach().clone()
            return loss_fn(inputs, config)
        return spy

    monkeypatch.setattr(trl_engine.ResRLTrainer, "_compute_loss", compute_loss_spy)
    monkeypatch.setattr(trl_engine, "get_policy_loss", get_policy_loss_spy)
    micro = "train.micro_batch_size=16" if mode == "aligned" else "train.micro_batch_size=2"
    cfg = load_config(None, overrides(model_dir, tmp_path, *settings, "train.max_steps=1", f"engine.resrl_mode={mode}",
                                      micro, "train.temperature=0.9"))
    result = run_training(cfg, model=model, train_dataset=toy_dataset(), reward_fn=length_reward, save_final=False)
    assert result.resrl_mode == mode
    keys = ("prompt_ids", "prompt_mask", "completion_ids", "completion_mask", "rewards", "group_index", "truncated")
    batch = {k: torch.cat([s["inputs"][k] for s in seen]) for k in keys}
    used = torch.cat([s["advantages"] for s in seen])
    assert batch["rewards"].std() > 0, "degenerate batch: all rewards equal"
    ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], 1)
    attn = torch.cat([batch["prompt_mask"], batch["completion_mask"]], 1)
    C = batch["completion_ids"].shape[1]
    x = align_response_hidden(reference_last_layer(initial, ids, attn), C, "predicting")  # hidden_states[-1]
    W = initial.get_output_embeddings().weight.detach()
    sketch = sketch_from_logits(x, (x @ W.T) / 0.9, batch["completion_ids"], 8)
    inputs = AdvantageInputs(batch["rewards"], batch["group_index"], batch["completion_mask"], None,
                             batch["truncated"], sketch)
    expected, _ = compute_token_advantages(inputs, cfg.algorithm)
    torch.testing.assert_close(used, expected, atol=2e-4, rtol=1e-4)
    import dataclasses
    plain, _ = compute_token_advantages(inputs, dataclasses.replace(cfg.algorithm, name="grpo"))
    assert not torch.allclose(used, plain, atol=1e-3)  # not vacuous: some tokens were reweighted


@pytest.mark.parametrize("extra", [
    ["algorithm.name=passk", "algorithm.passk_k=2"],
    ["algorithm.name=grpo", "loss.importance_sampling_level=sequence", "loss.top_entropy_quantile=0.5"],
    ["algorithm.name=resrl", "loss.importance_sampling_level=sequence"],
])
def test_new_settings_train(model_dir, tmp_path, extra):
    cfg = load_config(None, overrides(model_dir, tmp_path, *extra))
    result = run_training(cfg, train_dataset=toy_dataset(), reward_fn=length_reward, save_final=False)
    assert len(result.metrics) == 2 and all(math.isfinite(m["loss"]) for m in result.metrics)
    if "loss.top_entropy_quantile=0.5" in extra:
        assert 0 < result.metrics[0]["loss/entropy_kept_frac"] < 1


def test_passk_k_larger_than_the_group_is_one_error(model_dir, tmp_path):
    from resrl.train.schema import ConfigError

    cfg = load_config(None, overrides(model_dir, tmp_path, "algorithm.name=passk", "algorithm.passk_k=4"))
    with pytest.raises(ConfigError, match="algorithm.passk_k' = 4 must be < 'train.group_size' = 4"):
        cfg.validate(need_data=False)
