"""FlowRL through the TRL engine: the log Z head (trained, checkpointed, resumed, never exported),
the reference policy it needs with a zero KL coefficient, and the gradients into the backbone."""

from __future__ import annotations

import math

import pytest
import torch
from train_helpers import build_small_model, length_reward, overrides, toy_dataset

from resrl.core import LogZHead
from resrl.engines.trl import trainer as trl_engine
from resrl.engines.hidden import LastLayerStates, reference_last_layer
from resrl.train import ConfigError, load_config, run_training


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return build_small_model(tmp_path_factory.mktemp("tiny") / "model")


def _cfg(model_dir, out, *extra):
    return load_config(None, overrides(model_dir, out, "algorithm.name=flowrl", "train.learning_rate=1e-3", *extra))


def test_short_flowrl_run_trains_the_head_and_uses_the_initial_policy_as_reference(model_dir, tmp_path, monkeypatch):
    rounds = []
    real = trl_engine.ResRLTrainer._generate_once

    def spy(self, inputs):
        out = real(self, inputs)
        rounds.append({k: out[k].detach().clone() for k in ("prompt_ids", "prompt_mask", "completion_ids",
                                                               "completion_mask", "ref_per_token_logps")})
        rounds[-1]["trainer"] = self
        return out

    monkeypatch.setattr(trl_engine.ResRLTrainer, "_generate_once", spy)
    result = run_training(_cfg(model_dir, tmp_path, "train.max_steps=3"), train_dataset=toy_dataset(),
                          reward_fn=length_reward)
    trainer = rounds[-1]["trainer"]
    assert trainer.ref_model is not None  # built by the trainer although loss.kl_coef = 0
    m = result.metrics
    assert all(math.isfinite(e["loss"]) for e in m)
    for key in ("flowrl/log_z", "flowrl/delta_abs", "flowrl/is_weight", "flowrl/tb_loss"):
        assert all(key in e for e in m), key
    assert len({round(e["flowrl/log_z"], 6) for e in m}) > 1, "log Z did not move"
    assert all(e["flowrl/is_weight"] == pytest.approx(1.0) for e in m)  # on-policy: w = 1

    # the reference log-probs of the last round (after 2 updates) are the initial model's
    from transformers import AutoModelForCausalLM

    initial = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    r = rounds[-1]
    ids = torch.cat([r["prompt_ids"], r["completion_ids"]], 1)
    attn = torch.cat([r["prompt_mask"], r["completion_mask"]], 1)
    C = r["completion_ids"].shape[1]
    with torch.no_grad():
        logits = initial(input_ids=ids, attention_mask=attn).logits[:, -C - 1:-1]
    expected = torch.log_softmax(logits.float(), -1).gather(-1, r["completion_ids"][..., None])[..., 0]
    mask = r["completion_mask"].bool()
    torch.testing.assert_close(r["ref_per_token_logps"][mask], expected[mask], atol=1e-4, rtol=1e-4)

    # exported policy: a plain causal LM, no head parameters, nothing unexpected
    model, info = AutoModelForCausalLM.from_pretrained(tmp_path / "model", output_loading_info=True)
    assert not info["unexpected_keys"] and not info["missing_keys"]
    assert not any("log_z" in name for name, _ in model.named_parameters())


def test_checkpoint_and_resume_restore_the_head(model_dir, tmp_path):
    def cfg(out):
        return _cfg(model_dir, out, "train.max_steps=4", "checkpoint.save_steps=2", "checkpoint.save_total_limit=null")

    full = run_training(cfg(tmp_path / "full"), train_dataset=toy_dataset(), reward_fn=length_reward)
    part = tmp_path / "part"
    run_training(cfg(part), train_dataset=toy_dataset(), reward_fn=length_reward)
    import shutil

    shutil.rmtree(part / "checkpoint-4")  # as if killed after checkpoint-2
    assert (part / "checkpoint-2" / trl_engine.LOG_Z_FILE).is_file()
    resumed = run_training(cfg(part), train_dataset=toy_dataset(), reward_fn=length_reward, resume=True)
    assert [e["step"] for e in resumed.metrics] == [3, 4]
    by_step = {e["step"]: e for e in full.metrics}
    for e in resumed.metrics:
        for key in ("loss", "flowrl/log_z", "flowrl/delta_abs", "grad_norm"):
            assert math.isclose(e[key], by_step[e["step"]][key], rel_tol=1e-4, abs_tol=1e-6), (e["step"], key)
    head_full = getattr(full.model, trl_engine.LOG_Z_ATTR).state_dict()
    head_resumed = getattr(resumed.model, trl_engine.LOG_Z_ATTR).state_dict()
    for k, v in head_full.items():
        torch.testing.assert_close(head_resumed[k], v, atol=1e-6, rtol=1e-5)


def test_resume_without_head_file_is_a_clear_error(model_dir, tmp_path):
    out = tmp_path / "run"
    cfg = _cfg(model_dir, out, "train.max_steps=2", "checkpoint.save_steps=1")
    run_training(cfg, train_dataset=toy_dataset(), reward_fn=length_reward)
    (out / "checkpoint-2" / trl_engine.LOG_Z_FILE).unlink()
    with pytest.raises(FileNotFoundError, match="log_z_head"):
        run_training(cfg, train_dataset=toy_dataset(), reward_fn=length_reward, resume=True)


@pytest.mark.parametrize("detach", [False, True])
def test_head_gradients_reach_the_backbone_unless_detached(model_dir, detach):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir)
    head = LogZHead(model.config.hidden_size)
    ids = torch.randint(5, 60, (3, 6))
    prompt_mask = torch.tensor([[0, 1, 1, 1], [1, 1, 1, 1], [0, 0, 1, 1]])
    attn = torch.cat([prompt_mask, torch.ones(3, 2, dtype=torch.long)], 1)
    capture = LastLayerStates(model, detach=detach)
    with capture.capture(keep_first=4) as outs:
        model(input_ids=ids, attention_mask=attn)
    torch.testing.assert_close(outs[0].detach(), reference_last_layer(model, ids, attn)[:, :4])  # hidden_states[-1]
    head(torch.cat(outs), prompt_mask).sum().backward()
    backbone = [p.grad for n, p in model.named_parameters() if "layers.0." in n]
    if detach:
        assert all(g is None for g in backbone)
    else:
        assert any(g is not None and g.abs().max() > 0 for g in backbone)
    assert all(p.grad is not None for p in head.parameters())


def test_log_z_params_are_left_out_of_the_vllm_weight_sync():
    stream = [("model.layers.0.mlp.weight", 1), (f"{trl_engine.LOG_Z_ATTR}.net.0.weight", 2),
              ("lm_head.weight", 3)]
    assert [n for n, _ in trl_engine.without_log_z_params(iter(stream))] == ["model.layers.0.mlp.weight",
                                                                             "lm_head.weight"]


def test_flowrl_with_lora_trains_head_and_adapter(model_dir, tmp_path):
    result = run_training(_cfg(model_dir, tmp_path, "train.max_steps=2", "model.lora.r=4", "model.lora.alpha=8",
                               "checkpoint.save_steps=1"), train_dataset=toy_dataset(), reward_fn=length_reward)
    head = getattr(result.model, trl_engine.LOG_Z_ATTR)
    assert all(p.requires_grad for p in head.parameters())
    assert len({round(e["flowrl/log_z"], 6) for e in result.metrics}) > 1
    assert (tmp_path / "checkpoint-2" / trl_engine.LOG_Z_FILE).is_file()
    assert (tmp_path / "adapter" / "adapter_config.json").is_file()


def test_config_refuses_terms_the_flowrl_loss_does_not_have(model_dir, tmp_path):
    with pytest.raises(ConfigError, match="loss.kl_coef"):
        _cfg(model_dir, tmp_path, "loss.kl_coef=0.1").validate(need_data=False)
