"""Coming from TRL: every GRPOConfig field is honoured, mapped, refused or irrelevant
(engines/trl/fields.py), ResRLGRPOConfig carries resrl's settings as flat fields, and the same
settings give the same loss under TRL's GRPOTrainer and ResRLTrainer(algorithm="grpo")."""

from __future__ import annotations

import copy
import dataclasses
import math
import subprocess
import sys

import pytest
from train_helpers import build_small_model, toy_dataset

from resrl.engines.trl import fields as trl_fields


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return build_small_model(tmp_path_factory.mktemp("tiny") / "model")


def _grpo_config(**kwargs):
    from trl import GRPOConfig

    return GRPOConfig(output_dir="/tmp/resrl-trl-fields", use_cpu=True, report_to="none", **kwargs)


# ---- the table ---------------------------------------------------------------------------------------

def test_every_grpo_config_field_is_in_the_table():
    """A TRL release that adds (or drops) a GRPOConfig field fails here until it is classified."""
    from trl import GRPOConfig

    fields = {f.name for f in dataclasses.fields(GRPOConfig)}
    assert sorted(fields - set(trl_fields.GRPO_CONFIG_FIELDS)) == []
    assert sorted(set(trl_fields.GRPO_CONFIG_FIELDS) - fields) == []
    assert all(f.category in trl_fields.CATEGORIES and f.note for f in trl_fields.GRPO_CONFIG_FIELDS.values())


def test_every_mapped_field_has_its_mapping():
    """A field the table calls mapped is applied by resolve_trainer_settings (trl_fields.MAPPINGS), and the
    other way round; every mapping names a real resrl key (the YAML path moves trl.<field> onto it)."""
    from resrl.train.config import TrainConfig

    mapped = {n for n, f in trl_fields.GRPO_CONFIG_FIELDS.items() if f.category == trl_fields.MAPPED}
    targets = {m.trl for m in trl_fields.LOSS_MAPPINGS}
    assert sorted(mapped - targets) == ["max_completion_length"]  # the default of the lengths left None
    assert sorted(targets - mapped) == []
    cfg = TrainConfig()
    for m in trl_fields.MAPPINGS:
        node = cfg
        for part in m.key.split("."):
            if part == "micro_batch_size" or part == "update_prompts":  # (None: derived from the batch)
                break
            assert hasattr(node, part), m.key
            node = getattr(node, part)


@pytest.mark.parametrize("name", sorted(n for n, f in trl_fields.GRPO_CONFIG_FIELDS.items()
                                        if f.category == trl_fields.REFUSED))
def test_refused_field_is_an_error_naming_it(name):
    args = copy.copy(_grpo_config(beta=0.1))  # beta != 0: use_bias_correction_kl matters
    field = trl_fields.GRPO_CONFIG_FIELDS[name]
    off = field.accepted[0]
    setattr(args, name, 0.5 if off is None else True if off is False else off + 0.5 if isinstance(off, float)
            else "normalize_then_sum")
    if name != "use_bias_correction_kl":
        args.use_bias_correction_kl = False
    with pytest.raises(ValueError, match=f"GRPOConfig.{name}="):
        trl_fields.resolve_trainer_settings(args, "grpo")


def test_mapped_fields_reach_resrl_settings():
    args = _grpo_config(beta=0.5, epsilon=0.1, scale_rewards="none", loss_type="dr_grpo", max_completion_length=32,
                        importance_sampling_level="sequence", top_entropy_quantile=0.5, use_bias_correction_kl=False)
    algorithm, loss, notes = trl_fields.resolve_trainer_settings(args, "grpo")
    assert (loss.kl_coef, loss.clip_eps_low, loss.clip_eps_high) == (0.5, 0.1, 0.1)  # epsilon_high None: = epsilon
    assert (loss.agg, loss.max_response_length) == ("seq-mean-token-sum-norm", 32)
    assert (loss.importance_sampling_level, loss.top_entropy_quantile) == ("sequence", 0.5)
    assert algorithm.scale_rewards == "none" and notes == []
    # TRL's default loss_type does not replace grpo's documented aggregation: said, not silent
    algorithm, loss, notes = trl_fields.resolve_trainer_settings(_grpo_config(), "grpo")
    assert loss.agg == "seq-mean-token-mean" and any("loss_type='dapo'" in n for n in notes)
    # every TRL 1.16 loss_type: the policy loss and its aggregation
    for loss_type, (policy, agg) in trl_fields.LOSS_TYPES.items():
        _, loss, _ = trl_fields.resolve_trainer_settings(_grpo_config(loss_type=loss_type, epsilon_high=5.0), "grpo")
        if loss_type == "dapo":  # GRPOConfig's default: not told from "not set" (ResRLGRPOConfig tells them apart)
            assert (loss.policy_loss, loss.agg) == (None, "seq-mean-token-mean")
            continue
        assert (loss.policy_loss, loss.agg) == (policy, agg), loss_type
        if loss_type == "cispo":  # TRL's cap at epsilon_high, no lower bound
            assert (loss.clip_eps_low, 1 + loss.clip_eps_high) == (1.0, 5.0)
    with pytest.raises(ValueError, match="loss_type='cispo' caps the importance weight at epsilon_high"):
        trl_fields.resolve_trainer_settings(_grpo_config(loss_type="cispo"), "grpo")  # TRL's cap = epsilon = 0.2
    _, loss, _ = trl_fields.resolve_trainer_settings(
        _grpo_config(loss_type="sapo", sapo_temperature_neg=2.0, delta=None, off_policy_mask_threshold=0.5,
                     entropy_coef=0.01), "resrl")
    assert (loss.sapo_temperature_neg, loss.off_policy_mask_threshold) == (2.0, 0.5)
    assert (loss.entropy_coef, loss.entropy_agg) == (0.01, "token-mean")  # TRL's bonus: a per-token mean
    with pytest.raises(ValueError, match="delta = 4.0 is not read by the 'sapo' policy loss"):
        trl_fields.resolve_trainer_settings(_grpo_config(loss_type="sapo", delta=4.0), "grpo")
    with pytest.raises(ValueError, match="cannot replace algorithm 'flowrl'"):
        trl_fields.resolve_trainer_settings(_grpo_config(loss_type="cispo", epsilon_high=5.0), "flowrl")
    with pytest.raises(ValueError, match="scale_rewards='none'.*'gigpo'"):  # its own gigpo.mode, not scale_rewards
        trl_fields.resolve_trainer_settings(_grpo_config(scale_rewards="none"), "gigpo")
    with pytest.raises(ValueError, match="scale_rewards='batch'.*'nsr'"):
        trl_fields.resolve_trainer_settings(_grpo_config(scale_rewards="batch"), "nsr")
    # TRL's Dr.GRPO recipe (scale_rewards="none", loss_type="dr_grpo") is what drgrpo does
    _, loss, _ = trl_fields.resolve_trainer_settings(_grpo_config(scale_rewards="none", loss_type="dr_grpo"), "drgrpo")
    assert loss.agg == "seq-mean-token-sum-norm"


def test_algorithm_defaults_equal_resrl_train():
    """The same algorithm name gives the same settings from Python as from the YAML path."""
    from resrl.train import load_config

    for name in ("grpo", "dapo", "drgrpo", "resrl", "nsr"):
        cfg = load_config(None, [f"algorithm.name={name}", "train.max_completion_length=64"])
        args = _grpo_config(max_completion_length=64)
        algorithm, loss, _ = trl_fields.resolve_trainer_settings(args, name)
        assert loss == cfg.loss, name
        assert algorithm == cfg.algorithm, name


# ---- ResRLGRPOConfig -----------------------------------------------------------------------------------

def test_config_flat_fields_and_trl_parser(tmp_path):
    from trl import TrlParser

    from resrl.engines.trl.config import FLAT_FIELDS, ResRLGRPOConfig

    yaml = tmp_path / "c.yaml"
    yaml.write_text("algorithm: resrl\nresrl_rank: 8\nloss_agg: token-mean\n")
    (cfg,) = TrlParser((ResRLGRPOConfig,)).parse_args_and_config(
        ["--config", str(yaml), "--output_dir", str(tmp_path), "--resrl_quantile_low", "0.2", "--nthr_beta", "2.0",
         "--entropy_coef", "0.0", "--seed", "3", "--scale_rewards", "none", "--use_cpu", "true", "--report_to", "none"])
    algorithm, loss, _ = trl_fields.resolve_trainer_settings(cfg)
    assert (algorithm.name, algorithm.resrl.rank, algorithm.resrl.quantile_low) == ("resrl", 8, 0.2)
    assert (algorithm.nthr.beta, algorithm.scale_rewards, loss.agg) == (2.0, "none", "token-mean")
    # every flat field reaches its setting
    for name, (where, path, tp, _) in FLAT_FIELDS.items():
        assert hasattr(cfg, name)
    with pytest.raises(ValueError, match="loss_type.*conflicts"):
        trl_fields.resolve_trainer_settings(ResRLGRPOConfig(output_dir=str(tmp_path), use_cpu=True, report_to="none",
                                                            loss_type="grpo", loss_agg="token-mean"))


def test_import_resrl_is_light_and_exports_the_trainer():
    code = ("import sys, resrl; assert 'torch' not in sys.modules, 'torch imported'; "
            "from resrl import ResRLTrainer, ResRLGRPOConfig; "
            "assert issubclass(ResRLTrainer, __import__('trl').GRPOTrainer)")
    subprocess.run([sys.executable, "-c", code], check=True)


# ---- GRPOTrainer and ResRLTrainer(algorithm="grpo"): the same losses -------------------------------------

def parity_reward(completions, **kwargs):
    texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
    return [float(sum(map(ord, t)) % 2 == 0) for t in texts]


def _losses(model_dir, tmp_path, trainer_cls, config_cls, reward=parity_reward, model_generation=None, **kwargs):
    """(loss, grad_norm) of two optimiser steps on one generation round (num_iterations=2: the
    second step is off-policy, so the clip range matters), from a policy nudged away from the
    checkpoint TRL reloads as the reference (so beta's KL term is not 0). model_generation: settings
    put in the model's own generation_config."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(model_dir)
    for key, value in (model_generation or {}).items():
        setattr(model.generation_config, key, value)
    gen = torch.Generator().manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=gen))
        # raise the end-of-sequence logit so completions end at different lengths (the aggregations differ)
        ids = torch.randint(5, 40, (4, 12), generator=gen)
        h = model(input_ids=ids, output_hidden_states=True).hidden_states[-1].reshape(-1, model.config.hidden_size)
        m = h.mean(0)
        model.get_output_embeddings().weight[tokenizer.eos_token_id] += 1.5 * m / m.dot(m)
    args = config_cls(output_dir=str(tmp_path), use_cpu=True, report_to="none", max_steps=2, num_iterations=2,
                      per_device_train_batch_size=8, num_generations=4, max_completion_length=10, learning_rate=0.05,
                      logging_steps=1, seed=0, disable_tqdm=True, save_strategy="no", **kwargs)
    trainer = trainer_cls(model=model, reward_funcs=reward, args=args, train_dataset=toy_dataset(8),
                          processing_class=tokenizer)
    trainer.train()
    logs = [h for h in trainer.state.log_history if "loss" in h]
    logs[0]["trainer"] = trainer
    return [(h["loss"], h["grad_norm"]) for h in logs], logs


CASES = {  # settings both trainers support, under TRL's names
    "grpo-epsilon": dict(loss_type="grpo", epsilon=0.02),
    "dapo-epsilon_high-none": dict(loss_type="dapo", epsilon=0.05, epsilon_high=0.1, scale_rewards="none"),
    "dr_grpo-beta-batch": dict(loss_type="dr_grpo", beta=0.5, scale_rewards="batch"),
    "bnpo-beta-gspo": dict(loss_type="bnpo", beta=0.1, importance_sampling_level="sequence",
                           top_entropy_quantile=0.5),
    # two micro-batches per update (the whole-group shuffle puts other rows together than TRL's, so
    # the gradients agree to float rounding only, and Adam's first update, ≈ lr·sign(g), can amplify
    # that on parameters whose gradient is ≈ 0: compared on the first step)
    "dapo-accumulation": dict(loss_type="dapo", beta=0.1, gradient_accumulation_steps=2),
    "grpo-accumulation": dict(loss_type="grpo", beta=0.1, gradient_accumulation_steps=2),
    # every other TRL 1.16 loss_type and loss option (issue 43), each active where it can be seen:
    # the second step is off-policy, so caps below the ratios it reaches act (ACTIVE says which metric shows it)
    "cispo-cap": dict(loss_type="cispo", epsilon_high=1.02),
    "sapo-temperatures-entropy": dict(loss_type="sapo", sapo_temperature_pos=2.0, sapo_temperature_neg=3.0,
                                      entropy_coef=0.05),
    "luspo-gspo-delta": dict(loss_type="luspo", importance_sampling_level="sequence", delta=1.001, epsilon=0.001),
    "vespo": dict(loss_type="vespo", vespo_k_pos=3.0, vespo_lambda_neg=4.0, beta=0.1),
    "dapo-off-policy-mask": dict(loss_type="dapo", off_policy_mask_threshold=0.0, top_entropy_quantile=0.5),
}
FIRST_STEP_ONLY = ("dapo-accumulation", "grpo-accumulation")
# the metric (of ResRLTrainer's log) that shows an option acting on the off-policy step
ACTIVE = {"cispo-cap": "cispo_clip_ratio", "luspo-gspo-delta": "loss/delta_clip_frac",
          "dapo-off-policy-mask": "loss/off_policy_masked_frac"}


@pytest.mark.parametrize("case", sorted(CASES))
def test_same_losses_as_grpo_trainer(model_dir, tmp_path, case):
    from trl import GRPOTrainer

    from resrl import ResRLGRPOConfig, ResRLTrainer

    # TRL's KL ratio correction is refused by ResRLTrainer (use_bias_correction_kl=False); TRL's group
    # std has eps 1e-4 where resrl's default is 1e-6 (ResRLGRPOConfig.std_eps)
    theirs, _ = _losses(model_dir, tmp_path / "trl", GRPOTrainer, _grpo_config_cls(), use_bias_correction_kl=False,
                        **CASES[case])
    ours, logs = _losses(model_dir, tmp_path / "resrl", ResRLTrainer, ResRLGRPOConfig, algorithm="grpo",
                         std_eps=1e-4, **CASES[case])
    assert len(theirs) == len(ours) == 2
    assert all(math.isfinite(x) for pair in ours for x in pair)
    assert abs(theirs[1][0]) > 1e-4, "the off-policy step's loss should not vanish"
    if case in ACTIVE:
        assert logs[1][ACTIVE[case]] > 0, (case, logs[1])
    compared = 1 if case in FIRST_STEP_ONLY else 2
    for (tl, tg), (ol, og) in zip(theirs[:compared], ours[:compared]):
        assert ol == pytest.approx(tl, rel=1e-3, abs=1e-5) and og == pytest.approx(tg, rel=1e-3, abs=1e-5), (theirs, ours)


def _close(theirs, ours):
    return all(ol == pytest.approx(tl, rel=1e-3, abs=1e-5) and og == pytest.approx(tg, rel=1e-3, abs=1e-5)
               for (tl, tg), (ol, og) in zip(theirs, ours))


def unscorable_reward(completions, **kwargs):
    """parity_reward, but None ("does not apply") for the completions whose text sum is 3 mod 7 (in the
    test's round: one row of each group, both groups mixed, so that scoring it 0 would change the numbers)."""
    texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
    return [None if sum(map(ord, t)) % 7 == 3 else float(sum(map(ord, t)) % 2 == 0) for t in texts]


def test_unscorable_rows_as_grpo_trainer(model_dir, tmp_path):
    """A row every reward function scores None: out of its group's mean and std, advantage 0, as in
    GRPOTrainer (it was reward 0 and trained on), counted in reward/unscorable."""
    from trl import GRPOTrainer

    from resrl import ResRLGRPOConfig, ResRLTrainer

    case = dict(loss_type="grpo", epsilon=0.02)
    theirs, _ = _losses(model_dir, tmp_path / "trl", GRPOTrainer, _grpo_config_cls(), reward=unscorable_reward,
                        use_bias_correction_kl=False, **case)
    ours, logs = _losses(model_dir, tmp_path / "resrl", ResRLTrainer, ResRLGRPOConfig, reward=unscorable_reward,
                         algorithm="grpo", std_eps=1e-4, **case)
    assert logs[0]["reward/unscorable"] > 0  # the situation: some rows were unscorable
    assert _close(theirs, ours), (theirs, ours)
    # the old behaviour (an unscorable row is reward 0) gives other numbers: the test can tell them apart
    zero, _ = _losses(model_dir, tmp_path / "zero", ResRLTrainer, ResRLGRPOConfig, algorithm="grpo", std_eps=1e-4,
                      reward=lambda completions, **kw: [0.0 if r is None else r
                                                        for r in unscorable_reward(completions)], **case)
    assert not _close(theirs, zero), (theirs, zero)


def test_model_generation_config_as_grpo_trainer(model_dir, tmp_path):
    """The model's own generation_config: GRPOTrainer samples with the settings TRL leaves unset
    (no_repeat_ngram_size here); ResRLTrainer names them in a warning and drops them
    (dropped_generation_defaults), and with them in generation_kwargs gives GRPOTrainer's numbers."""
    from trl import GRPOTrainer

    from resrl import ResRLGRPOConfig, ResRLTrainer

    setting = {"no_repeat_ngram_size": 1}
    case = dict(loss_type="grpo", epsilon=0.02)
    theirs, _ = _losses(model_dir, tmp_path / "trl", GRPOTrainer, _grpo_config_cls(), model_generation=setting,
                        use_bias_correction_kl=False, **case)
    ours, logs = _losses(model_dir, tmp_path / "resrl", ResRLTrainer, ResRLGRPOConfig, model_generation=setting,
                         algorithm="grpo", std_eps=1e-4, generation_kwargs=dict(setting), **case)
    assert logs[0]["trainer"].dropped_generation_defaults == {}
    assert _close(theirs, ours), (theirs, ours)
    dropped, logs = _losses(model_dir, tmp_path / "dropped", ResRLTrainer, ResRLGRPOConfig, model_generation=setting,
                            algorithm="grpo", std_eps=1e-4, **case)
    assert logs[0]["trainer"].dropped_generation_defaults == setting  # named (and logged), not silent
    assert not _close(theirs, dropped), (theirs, dropped)  # the setting changes the rollouts: it was dropped


def _grpo_config_cls():
    from trl import GRPOConfig

    return GRPOConfig


# ---- swapping the class, metrics a TRL dashboard reads, the model card -----------------------------------

def test_swap_from_grpo_trainer_metrics_and_model_card(model_dir, tmp_path):
    """GRPOTrainer's call with ResRLTrainer and algorithm="resrl" (a name) trains; TRL's metric names
    are logged, ResRL's ω statistics are on every step (NaN: no group has a correct response), and
    save_model writes TRL's model card naming the algorithm and its settings."""
    from trl import GRPOConfig

    from resrl import ResRLTrainer

    args = GRPOConfig(output_dir=str(tmp_path / "out"), use_cpu=True, report_to="none", max_steps=2,
                      per_device_train_batch_size=8, num_generations=4, max_completion_length=6, logging_steps=1,
                      save_strategy="no", disable_tqdm=True)
    trainer = ResRLTrainer(model=model_dir, reward_funcs=lambda completions, **kw: [0.0] * len(completions),
                           args=args, train_dataset=toy_dataset(8), algorithm="resrl")
    assert trainer.loss_config.agg == "seq-mean-token-mean"  # resrl's documented default, TRL's dapo not applied
    trainer.train()
    logs = [h for h in trainer.state.log_history if "loss" in h]
    assert len(logs) == 2
    for entry in logs:
        for key in ("reward", "completions/mean_length", "clip_ratio/low_mean", "clip_ratio/high_mean",
                    "clip_ratio/region_mean", "clip_ratio/low_min", "clip_ratio/high_max", "entropy", "accuracy"):
            assert key in entry, key
        for key in ("reward_mean", "response_length", "train/completions", "train/train/completions"):
            assert key not in entry, key
        assert math.isnan(entry["resrl/omega_mean"]), entry.get("resrl/omega_mean")
        assert entry["completions/update_rows"] == 8
    trainer.save_model(str(tmp_path / "final"))
    card = (tmp_path / "final" / "README.md").read_text()
    assert "GRPO" in card and "algorithm **resrl**" in card and '"rank": 64' in card and '"agg"' in card
    assert "- resrl" in card  # the tags


def test_loss_config_kl_without_beta_has_a_reference(model_dir, tmp_path):
    """LossConfig(kl_coef > 0) with GRPOConfig's beta left at 0: the KL term acts (a reference model
    is built), and a different beta is an error naming it."""
    from resrl import ResRLTrainer
    from resrl.core.loss import LossConfig

    def trainer(**kwargs):
        args = _grpo_config(max_steps=1, per_device_train_batch_size=4, num_generations=4, max_completion_length=4,
                            save_strategy="no", disable_tqdm=True, use_bias_correction_kl=False, **kwargs)
        return ResRLTrainer(model=model_dir, reward_funcs=parity_reward, args=args, train_dataset=toy_dataset(4),
                            algorithm="grpo", loss_config=LossConfig(kl_coef=0.1))

    t = trainer()
    assert t.loss_config.kl_coef == 0.1 and t.ref_model is not None
    t.train()
    assert any("kl" in h for h in t.state.log_history)
    with pytest.raises(ValueError, match="GRPOConfig.beta=0.5 conflicts with loss_config.kl_coef=0.1"):
        trainer(beta=0.5)


def test_the_docs_counts_are_the_tables():
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "coming-from-trl.md").read_text()
    m = re.search(r"(\d+) honoured, (\d+) mapped, (\d+) refused, (\d+) irrelevant", text)
    counts = trl_fields.category_counts()
    assert m and tuple(map(int, m.groups())) == (counts["honoured"], counts["mapped"], counts["refused"],
                                                 counts["irrelevant"])


def test_the_docs_flat_field_table_names_every_group():
    """docs/coming-from-trl.md's flat-field table names each group of ResRLGRPOConfig's flat fields
    (a nested section `<section>_<name>`, the loss's `loss_<name>`, PPO's `critic_<name>`), and the
    critic's flat fields are the ones ResRLTrainer reads as its CriticConfig."""
    from pathlib import Path

    from resrl.core.value import CriticConfig
    from resrl.engines.trl.config import CRITIC_FIELDS, FLAT_FIELDS

    text = (Path(__file__).resolve().parents[1] / "docs" / "coming-from-trl.md").read_text()
    table = text[text.index("## resrl's settings as flat fields"):text.index("## What becomes of each")]
    groups = {f"`{path[0]}_<name>`" if len(path) == 2 else f"`{where}_<name>`"
              for where, path, _, _ in FLAT_FIELDS.values() if len(path) == 2 or where != "algorithm"}
    assert len(groups) >= 8 and sorted(g for g in groups if g not in table) == []
    assert {key for key, _, _ in CRITIC_FIELDS.values()} == {f.name for f in dataclasses.fields(CriticConfig)}
    assert all(FLAT_FIELDS[name][0] == "critic" for name in CRITIC_FIELDS)
