"""ResRLTrainer on the tiny model: every algorithm trains, and the advantages it uses are the core's."""

from __future__ import annotations

import copy
import math

import pytest
import torch
from train_helpers import build_small_model, length_reward, overrides, toy_dataset

from resrl.core.registry import ALGORITHMS, AdvantageInputs, compute_token_advantages
from resrl.engines.trl import trainer as trl_engine
from resrl.engines.hidden import PenultimateHidden, align_response_hidden, reference_penultimate
from resrl.train import load_config, run_training


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return build_small_model(tmp_path_factory.mktemp("tiny") / "model")


# (the step-level algorithms gigpo, empg, gigpo-resrl train on agent environments: tests/test_agent_steps.py)
@pytest.mark.parametrize("algorithm", sorted(a for a, spec in ALGORITHMS.items() if not spec.step_level))
def test_few_steps_every_algorithm(model_dir, tmp_path, algorithm):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir)
    before = [p.detach().clone() for p in model.parameters()]
    extra = ["algorithm.passk_k=2"] if algorithm == "passk" else []  # k < group size (4)
    cfg = load_config(None, overrides(model_dir, tmp_path, f"algorithm.name={algorithm}",
                                      "engine.max_refill_rounds=1", *extra))
    result = run_training(cfg, model=model, train_dataset=toy_dataset(), reward_fn=length_reward, save_final=False)
    assert len(result.metrics) == 2
    for entry in result.metrics:
        assert math.isfinite(entry["loss"]) and math.isfinite(entry["grad_norm"])
        clip = ("clip_ratio/low_mean", "clip_ratio/high_mean", "clip_ratio/region_mean", "clip_ratio/low_min",
                "clip_ratio/high_max") if ALGORITHMS[algorithm].policy_loss == "clipped-surrogate" else ()
        for key in ("reward", "accuracy", "completions/mean_length", "entropy", *clip):
            assert key in entry, key
        # no duplicated TRL metrics, no doubled prefix
        for key in ("reward_mean", "response_length", "train/completions", "loss/clip_frac"):
            assert key not in entry, key
    assert any((a - b).abs().max() > 0 for a, b in zip(before, model.parameters())), "parameters did not change"
    if algorithm == "resrl":
        assert result.resrl_mode == "aligned"
        assert "resrl/omega_mean" in result.metrics[0] and "resrl/effective_rank" in result.metrics[0]
    if algorithm == "dapo":
        assert "dynamic_sampling/kept_frac" in result.metrics[0]
    lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == 2


def test_hook_captures_penultimate_layer_only(model_dir):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir)
    ids = torch.randint(5, 60, (3, 9))
    mask = torch.ones_like(ids)
    hook = PenultimateHidden(model)
    with torch.no_grad(), hook.capture(keep_last=5) as outs:
        model(input_ids=ids, attention_mask=mask)
    assert len(outs) == 1
    expected = reference_penultimate(model, ids, mask)
    torch.testing.assert_close(outs[0], expected[:, -5:])
    # predicting: the state at t-1 feeds token t; token: the state at t
    torch.testing.assert_close(align_response_hidden(outs[0], 4, "predicting"), expected[:, -5:-1])
    torch.testing.assert_close(align_response_hidden(outs[0], 4, "token"), expected[:, -4:])
    with torch.no_grad():  # outside capture(): nothing is recorded, and no hook is left on the model
        model(input_ids=ids, attention_mask=mask)
    assert len(outs) == 1
    assert not any(getattr(h, "__self__", None) is hook for h in hook.layer._forward_hooks.values())


@pytest.mark.parametrize("algorithm,mode,alignment", [
    ("resrl", "aligned", "predicting"),
    ("resrl", "extra-pass", "predicting"),
    ("resrl", "aligned", "token"),
    ("grpo", "auto", "predicting"),
])
def test_trainer_advantages_equal_core(model_dir, tmp_path, monkeypatch, algorithm, mode, alignment):
    """The (B, T) advantages reaching the loss equal resrl.core on the same batch, with hidden
    states recomputed independently (output_hidden_states[-2] of the pre-update model)."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir)
    initial = copy.deepcopy(model).eval()
    seen = []  # (inputs, advantages) per micro-batch
    real_compute_loss = trl_engine.ResRLTrainer._compute_loss
    real_get_policy_loss = trl_engine.get_policy_loss

    def compute_loss_spy(self, model, inputs):
        seen.append({"inputs": inputs})
        return real_compute_loss(self, model, inputs)

    def get_policy_loss_spy(name):  # the trainer looks its loss up once, in __init__
        loss_fn = real_get_policy_loss(name)

        def spy(inputs, config):
            seen[-1]["advantages"] = inputs.advantages.detach().clone()
            return loss_fn(inputs, config)
        return spy

    monkeypatch.setattr(trl_engine.ResRLTrainer, "_compute_loss", compute_loss_spy)
    monkeypatch.setattr(trl_engine, "get_policy_loss", get_policy_loss_spy)
    micro = "train.micro_batch_size=16" if mode == "aligned" else "train.micro_batch_size=2"
    cfg = load_config(None, overrides(model_dir, tmp_path, f"algorithm.name={algorithm}", "train.max_steps=1",
                                      f"engine.resrl_mode={mode}", micro,
                                      f"algorithm.resrl.hidden_alignment={alignment}",
                                      "algorithm.resrl.svd=exact"))
    result = run_training(cfg, model=model, train_dataset=toy_dataset(), reward_fn=length_reward, save_final=False)
    if algorithm == "resrl":
        assert result.resrl_mode == mode
    # the whole round (one update) from all micro-batches, then the core on it
    keys = ("prompt_ids", "prompt_mask", "completion_ids", "completion_mask", "rewards", "group_index", "truncated")
    width = max(s["inputs"]["completion_ids"].shape[1] for s in seen)
    pwidth = max(s["inputs"]["prompt_ids"].shape[1] for s in seen)
    assert all(s["inputs"]["completion_ids"].shape[1] == width and s["inputs"]["prompt_ids"].shape[1] == pwidth
               for s in seen)
    batch = {k: torch.cat([s["inputs"][k] for s in seen]) for k in keys}
    used = torch.cat([s["advantages"] for s in seen])
    assert batch["rewards"].std() > 0, "degenerate batch: all rewards equal"
    hidden = None
    if algorithm == "resrl":
        ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], 1)
        attn = torch.cat([batch["prompt_mask"], batch["completion_mask"]], 1)
        hidden = align_response_hidden(reference_penultimate(initial, ids, attn), width, alignment)
    expected, _ = compute_token_advantages(
        AdvantageInputs(batch["rewards"], batch["group_index"], batch["completion_mask"], hidden,
                        batch["truncated"]), cfg.algorithm)
    torch.testing.assert_close(used, expected, atol=2e-4, rtol=1e-4)
    if algorithm == "resrl":  # not vacuous: the token weights differ from plain GRPO advantages
        plain, _ = compute_token_advantages(
            AdvantageInputs(batch["rewards"], batch["group_index"], batch["completion_mask"]),
            _as_grpo(cfg.algorithm))
        assert not torch.allclose(used, plain, atol=1e-3)


@pytest.mark.parametrize("mode", ["aligned", "extra-pass"])
def test_micro_batch_grouping_gets_the_prompt_lengths(model_dir, tmp_path, monkeypatch, mode):
    """resrl.grouping=micro-batch balances rows by prompt + response length as veRL's balance_batch
    does: the engine hands the core each row's prompt length (the prompt mask's sum), in both modes."""
    seen = []
    real_local, real_core = trl_engine.local_token_advantages, trl_engine.compute_token_advantages

    def local_spy(inputs, config, accelerator=None):
        seen.append(inputs)
        return real_local(inputs, config, accelerator)

    def core_spy(inputs, config):
        seen.append(inputs)
        return real_core(inputs, config)

    batches = []
    real_compute_loss = trl_engine.ResRLTrainer._compute_loss

    def compute_loss_spy(self, model, inputs):
        batches.append(inputs["prompt_mask"].sum(dim=1))
        return real_compute_loss(self, model, inputs)

    monkeypatch.setattr(trl_engine, "local_token_advantages", local_spy)
    monkeypatch.setattr(trl_engine, "compute_token_advantages", core_spy)
    monkeypatch.setattr(trl_engine.ResRLTrainer, "_compute_loss", compute_loss_spy)
    micro = "train.micro_batch_size=16" if mode == "aligned" else "train.micro_batch_size=2"
    cfg = load_config(None, overrides(model_dir, tmp_path, "algorithm.name=resrl", "train.max_steps=1",
                                      f"engine.resrl_mode={mode}", micro, "algorithm.resrl.grouping=micro-batch",
                                      "algorithm.resrl.svd=exact"))
    run_training(cfg, model=AutoModelForCausalLM_from(model_dir), train_dataset=toy_dataset(),
                 reward_fn=length_reward, save_final=False)
    assert seen and all(x.prompt_lengths is not None for x in seen)
    lengths = torch.cat([x.prompt_lengths for x in seen])
    assert torch.equal(lengths.cpu(), torch.cat(batches).cpu())
    assert lengths.unique().numel() > 1  # the toy prompts differ in length: not vacuous


def AutoModelForCausalLM_from(model_dir):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(model_dir)


def _as_grpo(algorithm):
    import dataclasses

    return dataclasses.replace(algorithm, name="grpo")


def test_dapo_dynamic_sampling_drops_and_refills(model_dir, tmp_path, monkeypatch):
    """Groups whose rewards are all equal are dropped and refilled from fresh prompts: every group
    of the batch that reaches the loss has differing rewards, and the batch keeps its size."""
    batches = []
    real = trl_engine.ResRLTrainer._generate_and_score_completions

    def spy(self, inputs):
        out = real(self, inputs)
        batches.append({k: out[k].clone() for k in ("rewards", "group_index")})
        return out

    def half_uniform(completions, answers):  # odd answers: all-equal groups (always 1.0)
        return [1.0 if int(a) % 2 else float(sum(map(ord, c)) % 2 == 0) for c, a in zip(completions, answers)]

    monkeypatch.setattr(trl_engine.ResRLTrainer, "_generate_and_score_completions", spy)
    cfg = load_config(None, overrides(model_dir, tmp_path, "algorithm.name=dapo", "train.max_steps=2",
                                      "engine.max_refill_rounds=6"))
    result = run_training(cfg, train_dataset=toy_dataset(), reward_fn=half_uniform, save_final=False)
    for batch in batches:
        assert batch["rewards"].numel() == 4 * 4
        for g in batch["group_index"].unique():
            r = batch["rewards"][batch["group_index"] == g]
            assert r.numel() == 4 and r.max() > r.min(), "an all-equal group reached the loss"
    assert any(m["dynamic_sampling/refill_rounds"] > 0 for m in result.metrics)
    assert any(m["dynamic_sampling/kept_frac"] < 1 for m in result.metrics)


@pytest.mark.parametrize("extra,check", [
    (["loss.kl_coef=0.05", "loss.kl_estimator=k2"], "kl"),
    (["loss.entropy_coef=0.01", "loss.dual_clip_c=3.0", "loss.agg=seq-mean-token-sum"], "entropy"),
    (["train.update_prompts=2", "train.micro_batch_size=4", "train.num_iterations=2", "train.max_steps=4"],
     "off-policy"),
    (["algorithm.name=dapo", "algorithm.overlong_buffer=4", "engine.max_refill_rounds=1"], "overlong"),
])
def test_loss_options(model_dir, tmp_path, extra, check):
    """KL to a reference model, entropy bonus with dual-clip, and several updates per generation
    round (old log-probs from the no-grad pass, ResRL in extra-pass mode) all train."""
    cfg = load_config(None, overrides(model_dir, tmp_path, "algorithm.name=resrl", *extra))
    result = run_training(cfg, train_dataset=toy_dataset(), reward_fn=length_reward, save_final=False)
    assert all(math.isfinite(m["loss"]) for m in result.metrics)
    if check == "kl":
        assert result.metrics[-1]["kl"] > 0  # the policy moved away from the reference
    if check == "entropy":
        assert 0 < result.metrics[0]["entropy"] < 10  # per-token mean nats, whatever the aggregation
    if check == "off-policy":
        assert result.resrl_mode == "extra-pass"
        assert any(abs(m["loss/ratio_mean"] - 1) > 1e-4 for m in result.metrics)  # π_old != π_θ


@pytest.mark.parametrize("extra,mode,passes_per_round", [
    (["train.micro_batch_size=16"], "aligned", 0),                       # weights in the training forward
    (["train.micro_batch_size=2", "engine.resrl_mode=extra-pass"], "extra-pass", 1),   # our one pass
    (["train.update_prompts=2", "train.micro_batch_size=4"], "extra-pass", 1),         # TRL's old-logp pass
])
def test_number_of_no_grad_passes(model_dir, tmp_path, monkeypatch, extra, mode, passes_per_round):
    """Aligned mode adds no forward; extra-pass mode runs exactly one no-grad pass per generation
    round, which yields both the hidden states and the old log-probs."""
    counts = []
    real_gen = trl_engine.ResRLTrainer._generate_and_score_completions
    real_logps = trl_engine.GRPOTrainer._get_per_token_logps_and_entropies

    def gen_spy(self, inputs):
        counts.append(0)
        return real_gen(self, inputs)

    def logps_spy(self, *args, **kwargs):
        if not torch.is_grad_enabled():
            counts[-1] += 1
        return real_logps(self, *args, **kwargs)

    monkeypatch.setattr(trl_engine.ResRLTrainer, "_generate_and_score_completions", gen_spy)
    monkeypatch.setattr(trl_engine.GRPOTrainer, "_get_per_token_logps_and_entropies", logps_spy)
    cfg = load_config(None, overrides(model_dir, tmp_path, "algorithm.name=resrl", *extra))
    result = run_training(cfg, train_dataset=toy_dataset(), reward_fn=length_reward, save_final=False)
    assert result.resrl_mode == mode
    assert counts and all(c == passes_per_round for c in counts), counts
    assert "resrl/omega_mean" in result.metrics[0]  # logged once per generation round
