"""The paths people use to train real models: KL with ResRL in both modes, LoRA (states of the
adapted policy, reference = adapters off, checkpoint + resume of the adapter), gradient
checkpointing with the hook, extreme log-ratios, the `trl:` pass-through, and which errors the
CLI turns into one line."""

from __future__ import annotations

import math

import pytest
import torch
from train_helpers import build_small_model, length_reward, overrides, toy_dataset

from resrl.core.loss import LossConfig, kl_estimate, policy_loss
from resrl.engines.trl import trainer as trl_engine
from resrl.engines.hidden import PenultimateHidden, align_response_hidden, reference_penultimate
from resrl.train import ConfigError, load_config, run_training


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return build_small_model(tmp_path_factory.mktemp("tiny") / "model")


def _record_rounds(monkeypatch):
    """Spy on `_generate_once`: each round's output (with `hidden` in extra-pass mode) and, computed
    at that moment with output_hidden_states, the states of the policy and of the reference policy
    (the reference model, or the policy with its PEFT adapters disabled) and the reference log-probs."""
    rounds = []
    real = trl_engine.ResRLTrainer._generate_once

    def spy(self, inputs):
        out = real(self, inputs)
        ids = torch.cat([out["prompt_ids"], out["completion_ids"]], 1)
        attn = torch.cat([out["prompt_mask"], out["completion_mask"]], 1)
        C = out["completion_ids"].shape[1]
        rec = {k: v.detach().clone() for k, v in out.items() if isinstance(v, torch.Tensor)}
        rec["policy_states"] = align_response_hidden(reference_penultimate(self.model, ids, attn), C, "predicting")
        if self.ref_model is not None:
            rec["ref_states"] = align_response_hidden(reference_penultimate(self.ref_model, ids, attn), C, "predicting")
        elif hasattr(self.model, "disable_adapter"):
            with self.model.disable_adapter(), torch.no_grad():
                rec["ref_states"] = align_response_hidden(reference_penultimate(self.model, ids, attn), C,
                                                          "predicting")
                rec["ref_logps"] = trl_engine.GRPOTrainer._get_per_token_logps_and_entropies(
                    self, self.model, ids, attn, C)[0]
        rec["trainer"] = self
        rounds.append(rec)
        return out

    monkeypatch.setattr(trl_engine.ResRLTrainer, "_generate_once", spy)
    return rounds


# ---- KL with ResRL ------------------------------------------------------------------------------

@pytest.mark.parametrize("micro,mode", [(16, "aligned"), (2, "extra-pass")])
def test_resrl_with_kl_both_modes(model_dir, tmp_path, monkeypatch, micro, mode):
    """The crash of issue 7 (extra-pass + KL took the reference's pass); the states used are the
    policy's own (equal to output_hidden_states[-2] of the policy), never the reference model's."""
    rounds = _record_rounds(monkeypatch)
    cfg = load_config(None, overrides(model_dir, tmp_path, "algorithm.name=resrl", f"train.micro_batch_size={micro}",
                                      "loss.kl_coef=0.05", "train.max_steps=2"))
    result = run_training(cfg, train_dataset=toy_dataset(), reward_fn=length_reward, save_final=False)
    assert result.resrl_mode == mode
    assert all(math.isfinite(m["loss"]) and "kl" in m for m in result.metrics)
    assert result.metrics[-1]["kl"] > 0  # the policy moved from the reference
    assert all(m["completions/update_rows"] == 16 for m in result.metrics)
    if mode == "extra-pass":  # round 2 runs after one update: policy and reference differ by then
        out = rounds[-1]
        assert out["trainer"].ref_model is not None and "ref_per_token_logps" in out
        m = out["completion_mask"].bool()
        torch.testing.assert_close(out["hidden"][m], out["policy_states"][m], atol=1e-5, rtol=1e-5)
        assert (out["hidden"][m] - out["ref_states"][m]).abs().max() > 1e-4


# ---- LoRA ---------------------------------------------------------------------------------------

LORA = ("model.lora.r=4", "model.lora.alpha=8", "model.lora.dropout=0.0")


def test_resrl_with_lora_uses_adapted_states_and_adapter_free_reference(model_dir, tmp_path, monkeypatch):
    rounds = _record_rounds(monkeypatch)
    cfg = load_config(None, overrides(model_dir, tmp_path, "algorithm.name=resrl", "train.micro_batch_size=2",
                                      "loss.kl_coef=0.05", "train.max_steps=2", *LORA))
    result = run_training(cfg, train_dataset=toy_dataset(), reward_fn=length_reward)
    from peft import PeftModel

    out = rounds[-1]
    assert isinstance(out["trainer"].model, PeftModel) and out["trainer"].ref_model is None  # reference = adapters off
    m = out["completion_mask"].bool()
    # the adapter is non-zero after the first update: the states differ, and ResRL used the adapted ones
    assert (out["policy_states"][m] - out["ref_states"][m]).abs().max() > 1e-4
    torch.testing.assert_close(out["hidden"][m], out["policy_states"][m], atol=1e-5, rtol=1e-5)
    # the reference log-probs TRL computed are the adapter-free model's
    torch.testing.assert_close(out["ref_per_token_logps"][m], out["ref_logps"][m], atol=1e-5, rtol=1e-5)
    # exported: the adapter and a merged plain causal LM
    assert (tmp_path / "adapter" / "adapter_config.json").is_file()
    from transformers import AutoModelForCausalLM

    merged = AutoModelForCausalLM.from_pretrained(tmp_path / "model")
    assert not any("lora" in name for name, _ in merged.named_parameters())
    assert result.model_dir == tmp_path / "model"


def test_lora_checkpoint_and_resume(model_dir, tmp_path):
    def cfg(out):
        return load_config(None, overrides(model_dir, out, "algorithm.name=resrl", "train.max_steps=4",
                                           "checkpoint.save_steps=2", "checkpoint.save_total_limit=null", *LORA))

    full = run_training(cfg(tmp_path / "full"), train_dataset=toy_dataset(), reward_fn=length_reward)
    part = tmp_path / "part"
    run_training(cfg(part), train_dataset=toy_dataset(), reward_fn=length_reward)
    import shutil

    shutil.rmtree(part / "checkpoint-4")  # as if killed after checkpoint-2
    assert (part / "checkpoint-2" / "adapter_model.safetensors").is_file()
    resumed = run_training(cfg(part), train_dataset=toy_dataset(), reward_fn=length_reward, resume=True)
    assert [m["step"] for m in resumed.metrics] == [3, 4]
    lora_full = {n: p for n, p in full.model.named_parameters() if "lora" in n}
    lora_resumed = dict((n, p) for n, p in resumed.model.named_parameters() if "lora" in n)
    assert lora_full and lora_full.keys() == lora_resumed.keys()
    assert any(p.abs().max() > 0 for n, p in lora_full.items() if "lora_B" in n)  # the adapter trained
    for name, p in lora_full.items():
        torch.testing.assert_close(lora_resumed[name], p, atol=1e-5, rtol=1e-4)


# ---- gradient checkpointing ---------------------------------------------------------------------

def test_gradient_checkpointing_with_the_hook(model_dir, tmp_path, monkeypatch):
    """The backward's recomputation of the checkpointed layers is never captured: same weights,
    same update as without checkpointing."""
    captured = []
    real = PenultimateHidden._hook

    def counting_hook(self, module, args, output):
        captured.append(torch.is_grad_enabled())
        return real(self, module, args, output)

    monkeypatch.setattr(PenultimateHidden, "_hook", counting_hook)
    results = {}
    for gc in (False, True):
        captured.clear()
        cfg = load_config(None, overrides(model_dir, tmp_path / str(gc), "algorithm.name=resrl", "train.max_steps=2",
                                          f"model.gradient_checkpointing={str(gc).lower()}"))
        results[gc] = (run_training(cfg, train_dataset=toy_dataset(), reward_fn=length_reward, save_final=False),
                       len(captured))
    (plain, n_plain), (ckpt, n_ckpt) = results[False], results[True]
    assert plain.resrl_mode == ckpt.resrl_mode == "aligned"
    assert n_plain == n_ckpt == 2  # one capture per training forward, none from the recomputation
    for a, b in zip(plain.metrics, ckpt.metrics):
        for key in ("loss", "resrl/omega_mean", "grad_norm"):
            assert math.isclose(a[key], b[key], rel_tol=1e-4, abs_tol=1e-6), key
    for p, q in zip(plain.model.parameters(), ckpt.model.parameters()):
        torch.testing.assert_close(p, q, atol=1e-5, rtol=1e-4)


# ---- extreme log-ratios -------------------------------------------------------------------------

@pytest.mark.parametrize("case", ["valid", "masked", "clipped", "zero_advantage"])
@pytest.mark.parametrize("cfg", [LossConfig(), LossConfig(dual_clip_c=3.0, agg="token-mean", kl_coef=0.1)])
def test_log_ratio_of_100_gives_finite_loss_and_gradient(case, cfg):
    logp = torch.full((2, 4), -2.0, requires_grad=True)
    old = torch.full((2, 4), -2.0)
    adv = torch.tensor([[1.0] * 4, [-1.0] * 4])
    mask = torch.ones(2, 4, dtype=torch.bool)
    old[0, 1] = -102.0  # log π_θ − log π_old = 100 on one token
    if case == "masked":
        mask[0, 1] = False
    if case == "clipped":
        adv[0, 1] = 1.0  # positive advantage, ratio above 1 + ε: the clipped branch is active
    if case == "zero_advantage":
        adv[0, 1] = 0.0
    ref = old.clone() if cfg.kl_coef > 0 else None
    loss, metrics = policy_loss(logp, old, adv, mask, cfg, ref_logprobs=ref)
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(logp.grad).all()
    assert all(math.isfinite(v) for v in metrics.values())
    if case == "masked":  # the masked token changes nothing
        loss_no_token, _ = policy_loss(logp.detach(), old, adv, mask, cfg, ref_logprobs=ref)
        old2 = old.clone()
        old2[0, 1] = -2.0
        loss_plain, _ = policy_loss(logp.detach(), old2, adv, mask, cfg, ref_logprobs=None if ref is None else old2)
        assert math.isclose(loss_no_token.item(), loss_plain.item(), rel_tol=1e-6, abs_tol=1e-7)
        assert logp.grad[0, 1] == 0


def test_kl_and_importance_weights_are_finite_and_exact():
    lp = torch.tensor([[0.0, -1.0]], requires_grad=True)
    ref = torch.tensor([[-100.0, -1.0]])
    k3 = kl_estimate(lp, ref, "k3")
    assert torch.isfinite(k3).all() and k3[0, 1] == 0
    # importance weights multiply the per-token surrogate (vLLM correction), detached
    adv, mask = torch.tensor([[1.0, -1.0]]), torch.ones(1, 2)
    w = torch.tensor([[0.5, 2.0]], requires_grad=True)
    loss, _ = policy_loss(lp, lp.detach(), adv, mask, LossConfig(agg="token-mean"), importance_weights=w)
    assert math.isclose(loss.item(), -(0.5 * 1.0 + 2.0 * -1.0) / 2, rel_tol=1e-6)
    loss.backward()
    assert w.grad is None
    torch.testing.assert_close(lp.grad, torch.tensor([[-0.25, 1.0]]))


# ---- the trl: pass-through ----------------------------------------------------------------------

def test_trl_pass_through_reaches_grpo_config(model_dir, tmp_path):
    from resrl.train.runner import grpo_args

    cfg = load_config(None, overrides(model_dir, tmp_path, "trl.optim=sgd", "trl.mask_truncated_completions=true",
                                      "trl.vllm_gpu_memory_utilization=0.25"))
    cfg.validate(need_data=False)
    args = grpo_args(cfg, num_processes=1, use_cpu=True)
    assert args.optim == "sgd" and args.mask_truncated_completions is True
    assert args.vllm_gpu_memory_utilization == 0.25


@pytest.mark.parametrize("key,message", [
    ("trl.vllm_mdoe=colocate", r"unknown config key 'trl\.vllm_mdoe'.*vllm_mode"),
    ("trl.per_device_train_batch_size=4", r"'trl\.per_device_train_batch_size' has no resrl equivalent .*"
                                          r"use 'train\.micro_batch_size'"),
    ("trl.num_train_epochs=3", r"use 'train\.max_steps'"),
    ("trl.loss_type=ppo", r"'trl\.loss_type': GRPOConfig\.loss_type='ppo' is not a TRL 1\.16 loss type"),
    ("trl.loss_type=cispo", r"'trl\.loss_type': .*caps the importance weight at epsilon_high"),
    ("trl.use_adaptive_entropy=true", r"use 'loss\.entropy_coef'"),
])
def test_trl_pass_through_errors_name_the_key(model_dir, tmp_path, key, message):
    with pytest.raises(ConfigError, match=message):
        cfg = load_config(None, overrides(model_dir, tmp_path, key))
        cfg.validate(need_data=False)


@pytest.mark.parametrize("key,target,value", [
    ("trl.beta=0.1", "loss.kl_coef", 0.1),
    ("trl.epsilon_high=0.28", "loss.clip_eps_high", 0.28),
    ("trl.loss_type=dr_grpo", "loss.agg", "seq-mean-token-sum-norm"),
    ("trl.num_generations=4", "train.group_size", 4),  # agreeing with the base run's train.group_size=4
    ("trl.scale_rewards=false", "algorithm.scale_rewards", "none"),
    ("trl.logging_steps=5", "log.logging_steps", 5),
    ("trl.top_entropy_quantile=0.2", "loss.top_entropy_quantile", 0.2),
    ("trl.importance_sampling_level=sequence", "loss.importance_sampling_level", "sequence"),
    ("trl.delta=3.0", "loss.delta", 3.0),
    ("trl.off_policy_mask_threshold=0.5", "loss.off_policy_mask_threshold", 0.5),
    ("trl.loss_type=sapo", "loss.policy_loss", "sapo"),
])
def test_trl_names_of_resrl_keys_are_mapped_and_logged(model_dir, tmp_path, caplog, key, target, value):
    import logging

    with caplog.at_level(logging.WARNING, logger="resrl.train.config"):
        cfg = load_config(None, overrides(model_dir, tmp_path, key))
    section, name = target.split(".")
    assert getattr(getattr(cfg, section), name) == value and not cfg.trl
    assert any("is TRL's name for" in r.getMessage() and f"'{target}' = {value!r}" in r.getMessage()
               for r in caplog.records)
    with pytest.raises(ConfigError, match="disagree"):  # both names, two values: one error
        other = "1.3" if isinstance(value, float) else ("token-mean" if name == "agg" else
                                                       "cispo" if name == "policy_loss" else
                                                       "group" if name == "scale_rewards" else
                                                       "token" if name == "importance_sampling_level" else "3")
        load_config(None, overrides(model_dir, tmp_path, key, f"{target}={other}"))


def test_trainer_adopts_trl_gspo_and_entropy_options(model_dir, tmp_path):
    """GRPOConfig's importance_sampling_level / top_entropy_quantile are honoured by the core's loss
    (adopted into the LossConfig), and a conflicting LossConfig value is one error naming the field."""
    from trl import GRPOConfig

    from resrl.core.loss import LossConfig as LC
    from resrl.core.registry import AlgorithmConfig
    from resrl.models.checkpointing import checkpointing_args

    def trainer(loss_config, **trl_kwargs):
        args = GRPOConfig(output_dir=str(tmp_path), use_cpu=True, per_device_train_batch_size=4, num_generations=4,
                          report_to="none", **checkpointing_args(False), **trl_kwargs)
        return trl_engine.ResRLTrainer(model=model_dir, reward_funcs=lambda prompts, completions, **kw: [0.0] * len(prompts),
                                       args=args, train_dataset=toy_dataset(), algorithm=AlgorithmConfig(name="grpo"),
                                       loss_config=loss_config)

    t = trainer(LC(), top_entropy_quantile=0.2, importance_sampling_level="sequence")
    assert t.loss_config.top_entropy_quantile == 0.2 and t.loss_config.importance_sampling_level == "sequence"
    with pytest.raises(ValueError, match="top_entropy_quantile=0.2 conflicts"):
        trainer(LC(top_entropy_quantile=0.5), top_entropy_quantile=0.2)


def test_bad_value_passed_through_is_one_config_error(model_dir, tmp_path):
    from resrl.train.runner import grpo_args

    cfg = load_config(None, overrides(model_dir, tmp_path, "trl.optim=not_an_optimizer"))
    with pytest.raises(ConfigError, match="optim"):
        grpo_args(cfg, num_processes=1, use_cpu=True)


# ---- which errors become one line ---------------------------------------------------------------

def test_cli_prints_input_errors_as_one_line_and_keeps_internal_tracebacks(model_dir, tmp_path, monkeypatch, capsys):
    from resrl import cli
    from resrl.train import runner

    cfg_file = tmp_path / "c.yaml"
    cfg_file.write_text(f"model: {{path: {model_dir}}}\ndata: {{train: gsm8k}}\ntrl: {{num_train_epochs: 3}}\n")
    assert cli.main(["train", "--config", str(cfg_file)]) == 2
    assert "use 'train.max_steps'" in capsys.readouterr().err

    cfg_file.write_text(f"model: {{path: {model_dir}}}\ndata: {{train: gsm8k}}\n")

    def internal_bug(*args, **kwargs):
        raise ValueError("expected a non-empty list of Tensors")  # like torch's own, from deep inside

    monkeypatch.setattr(runner, "run_training", internal_bug)
    with pytest.raises(ValueError, match="non-empty list"):
        cli.main(["train", "--config", str(cfg_file)])


# ---- partial fine-tuning: model.trainable_layers ----------------------------------------------------

def test_trainable_layers_trains_the_top_layers_only(model_dir, tmp_path):
    """With model.trainable_layers=1 the training changes the last decoder layer and the final norm
    and nothing else (embeddings, output head and the layer below stay bit-identical); without it the
    lower layer changes too (so the comparison could fail)."""
    from transformers import AutoModelForCausalLM

    before = {k: v.clone() for k, v in AutoModelForCausalLM.from_pretrained(model_dir).state_dict().items()}

    def changed(*extra):
        cfg = load_config(None, overrides(model_dir, tmp_path / f"out{len(extra)}", "algorithm.name=resrl", *extra))
        after = run_training(cfg, train_dataset=toy_dataset(), reward_fn=length_reward, save_final=False).model
        return {k for k, v in after.state_dict().items() if not torch.equal(v, before[k])}

    top = changed("model.trainable_layers=1")
    assert top and all(k.startswith("model.layers.1.") or k == "model.norm.weight" for k in top), top
    assert any(k.startswith("model.layers.1.") for k in top)
    full = changed()
    assert any(k.startswith("model.layers.0.") for k in full) and any(k.startswith("model.embed") for k in full)


def test_trainable_layers_refuses_what_it_cannot_do(model_dir, tmp_path):
    from resrl.errors import InputError

    with pytest.raises(ConfigError, match="trainable_layers' must be >= 1"):
        load_config(None, overrides(model_dir, tmp_path, "model.trainable_layers=0")).validate(need_data=False)
    with pytest.raises(ConfigError, match="exclude each other"):
        load_config(None, overrides(model_dir, tmp_path, "model.trainable_layers=1", *LORA)).validate(need_data=False)
    cfg = load_config(None, overrides(model_dir, tmp_path, "model.trainable_layers=3"))  # the model has 2
    with pytest.raises(InputError, match="has 2 decoder layers"):
        run_training(cfg, train_dataset=toy_dataset(), reward_fn=length_reward, save_final=False)
