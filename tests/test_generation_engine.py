"""The trainer's generation path (issue 42, resrl.models.generation_paths, resrl.engines.trl.generation):
`generation.backend` and TRL's own fields, one clear error for a path that cannot run, `auto`'s choice, and — through `resrl train`'s
path — the training forward that starts above the frozen layers (generation.reuse_frozen) giving
the log-probs sampling recorded (`generation/logp_diff_max`) and the update a full forward gives.
Issue 51: the on-policy check under top-k / top-p (like with like, the loss untruncated) and its
threshold, generation.max_logp_diff. The per-architecture matrix is tests/test_decoder_matrix.py."""

from __future__ import annotations

import math

import pytest
import torch
from train_helpers import length_reward, overrides, toy_dataset

from resrl.engines.trl import generation as gen
from resrl.models import generation_paths as paths
from resrl.models.tiny import TinyModelConfig, build_tiny_model
from resrl.train import load_config, run_training
from resrl.train.schema import ConfigError

# 4 layers (2 frozen under model.trainable_layers=2, with the penultimate layer above them), d = 32
FOUR = TinyModelConfig(hidden_size=32, num_hidden_layers=4, num_attention_heads=2, num_key_value_heads=1,
                       head_dim=16, intermediate_size=64, max_position_embeddings=128)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    torch.set_num_threads(1)
    path = tmp_path_factory.mktemp("gen") / "model"
    build_tiny_model(path, FOUR)
    return str(path)


# ---- settings, TRL's flags, errors ----------------------------------------------------------------

def _cfg(tmp_path, *keys):
    return load_config(None, [f"model.path={tmp_path}", "data.train=gsm8k", *keys])


def test_backend_keys_and_trl_flags(tmp_path):
    from resrl.train.runner import grpo_args

    assert _cfg(tmp_path).generation.backend == "auto"
    paged = _cfg(tmp_path, "generation.backend=paged", "train.use_cpu=true")
    paged.validate()
    assert grpo_args(paged, 1, use_cpu=True).use_transformers_continuous_batching is True
    assert grpo_args(_cfg(tmp_path, "train.use_cpu=true"), 1, use_cpu=True).use_transformers_continuous_batching is False
    with pytest.raises(ConfigError, match="generation.backend"):
        _cfg(tmp_path, "generation.backend=fast")
    # TRL's own flags select their path, and contradict another backend in one error naming both
    with pytest.raises(ConfigError, match="generation.backend: hf contradicts trl.use_vllm"):
        _cfg(tmp_path, "generation.backend=hf", "trl.use_vllm=true").validate()
    with pytest.raises(ConfigError, match="use_transformers_continuous_batching"):
        _cfg(tmp_path, "generation.backend=compiled", "trl.use_transformers_continuous_batching=true").validate()
    with pytest.raises(ConfigError, match="cache_implementation"):
        _cfg(tmp_path, "generation.backend=compiled", "trl.cache_implementation=dynamic").validate()
    with pytest.raises(ConfigError, match="shared_prefill applies to the hf and compiled"):
        _cfg(tmp_path, "generation.backend=paged", "generation.shared_prefill=true").validate()
    _cfg(tmp_path, "trl.use_transformers_continuous_batching=true").validate()  # auto follows TRL's flag


def test_a_path_that_cannot_run_names_what_is_missing(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "vllm" else real(name, *a))
    with pytest.raises(paths.GenerationUnavailable, match="needs the vllm package, which is not installed"):
        paths.resolve(paths.GenerationSettings("vllm"), "cuda", use_vllm=True)
    monkeypatch.setattr(paths.shutil, "which", lambda name: None)
    with pytest.raises(paths.GenerationUnavailable, match="needs a C\\+\\+ compiler"):
        paths.resolve(paths.GenerationSettings("compiled"), "cpu")
    # no silent fallback: the backend named is the backend used, or the error
    assert paths.resolve(paths.GenerationSettings("compiled"), "cuda").backend == "compiled"
    with pytest.raises(ValueError, match="needs GRPOConfig.use_vllm=True"):
        paths.resolve(paths.GenerationSettings("vllm"), "cuda", use_vllm=False)


def test_auto_follows_the_committed_table_and_trls_flags():
    for device, choice in paths.AUTO.items():
        r = paths.resolve(paths.GenerationSettings(), device, frozen_layers=True)
        assert (r.backend, r.shared_prefill, r.reuse_frozen) == (choice.backend, choice.shared_prefill,
                                                                 choice.reuse_frozen)
        assert choice.evidence in r.reason
    assert paths.resolve(paths.GenerationSettings(), "cpu", paged=True).backend == "paged"
    # multi-turn (tools, environments, rollout_func): TRL's own loop; asking for more is refused
    r = paths.resolve(paths.GenerationSettings(), "cpu", multi_turn=True)
    assert (r.backend, r.own_path, r.shared_prefill, r.reuse_frozen) == ("hf", False, False, False)
    with pytest.raises(ValueError, match="single-turn"):
        paths.resolve(paths.GenerationSettings("hf", shared_prefill=True), "cpu", multi_turn=True)
    # nothing to reuse without frozen layers; TRL's own call when nothing differs from it
    r = paths.resolve(paths.GenerationSettings("hf", shared_prefill=False, reuse_frozen=True), "cpu")
    assert r.reuse_frozen is False and r.own_path is False


def test_what_the_onpolicy_check_compares():
    """Temperature only: the loss's own log-probs; truncating warpers (top-k, top-p, min-p): the
    processed distribution; processors that depend on a row's history: nothing, saying why."""
    from transformers import GenerationConfig

    plain = dict(do_sample=True, temperature=0.7, top_p=1.0, top_k=0, min_p=None, repetition_penalty=1.0)
    check = gen.OnPolicyCheck(GenerationConfig(**plain))
    assert check.skip is None and not check.truncated and check.describe() == "temperature"
    for change in (dict(top_k=5), dict(top_p=0.9), dict(min_p=0.1)):
        check = gen.OnPolicyCheck(GenerationConfig(**{**plain, **change}))
        assert check.skip is None and check.truncated, change
    for change, named in ((dict(repetition_penalty=1.1), "repetition_penalty"), (dict(min_new_tokens=4), "min_new_tokens"),
                          (dict(no_repeat_ngram_size=2), "no_repeat_ngram_size"), (dict(do_sample=False), "greedy")):
        assert named in gen.OnPolicyCheck(GenerationConfig(**{**plain, **change})).skip, change


# ---- through resrl train: reuse of the frozen layers -------------------------------------------------

def _train(model_dir, out_dir, algorithm, *keys):
    cfg = load_config(None, overrides(model_dir, out_dir, f"algorithm.name={algorithm}", "train.max_steps=1",
                                      "train.temperature=0.7", "train.micro_batch_size=4",
                                      "model.trainable_layers=2", *keys))
    torch.manual_seed(0)
    return run_training(cfg, train_dataset=toy_dataset(), reward_fn=length_reward, save_final=False).metrics[0]


FULL = ("generation.backend=hf", "generation.shared_prefill=false", "generation.reuse_frozen=false")
FAST = ("generation.shared_prefill=true", "generation.reuse_frozen=true")


def test_training_forward_above_the_frozen_layers_is_on_policy(model_dir, tmp_path):
    full = _train(model_dir, tmp_path / "full", "grpo", *FULL)
    fast = _train(model_dir, tmp_path / "fast", "grpo", *FAST)
    # sampling recorded log softmax(z / T) of each token; the training forward (from the frozen layers'
    # recorded states up) recomputes it
    assert fast["generation/logp_diff_max"] < 1e-4
    assert "generation/logp_diff_max" not in full  # TRL's call records nothing to compare
    # same draws (same seed; the shared prefill tips no draw on this model), same update
    assert fast["reward"] == full["reward"]
    for key in ("loss", "grad_norm", "entropy"):
        assert math.isclose(fast[key], full[key], rel_tol=1e-4, abs_tol=1e-6), (key, fast[key], full[key])


def _advantage_inputs(monkeypatch):
    """The AdvantageInputs each micro-batch hands the core (ResRL aligned: the captured states)."""
    from resrl.engines.trl import trainer as trl_engine

    seen, real = [], trl_engine.compute_token_advantages
    monkeypatch.setattr(trl_engine, "compute_token_advantages", lambda inp, alg: (seen.append(inp), real(inp, alg))[1])
    return seen


@pytest.mark.parametrize("alignment", ["predicting", "token"])  # token: the last token's own state too
def test_resrl_aligned_reads_the_same_states_above_the_frozen_layers(model_dir, tmp_path, monkeypatch, alignment):
    """ResRL's aligned mode: the penultimate states its weights read are the full forward's within
    float32 rounding. (Its loss is compared through the states, not directly: on a 4-layer d = 32
    model a group's positive tokens span a subspace with singular values near the rank cut, where
    1e-8 moves the rank — ω then moves by percent in either run, a property of the tiny inputs.)"""
    seen = _advantage_inputs(monkeypatch)
    key = f"algorithm.resrl.hidden_alignment={alignment}"
    _train(model_dir, tmp_path / "full", "resrl", *FULL, key)
    full, seen[:] = list(seen), []
    fast = _train(model_dir, tmp_path / "fast", "resrl", *FAST, key)
    assert fast["generation/logp_diff_max"] < 1e-4
    assert len(seen) == len(full) == 4  # 4 micro-batches of one group
    for a, b in zip(full, seen):
        mask = a.response_mask.bool()
        assert torch.equal(a.response_mask, b.response_mask) and torch.equal(a.rewards, b.rewards)
        assert (a.hidden - b.hidden)[mask].abs().max() < 1e-5


def test_planted_misaligned_states_are_seen(model_dir, tmp_path, monkeypatch):
    """The frozen layers' states shifted by one completion position (a misaligned reuse): the
    on-policy metric jumps and the update differs — what the test above would catch."""
    real = gen.TrainerGeneration.attach

    def shifted(self, trainer, batch):
        real(self, trainer, batch)
        if gen.FROZEN_KEYS[1] in batch:
            batch[gen.FROZEN_KEYS[1]] = torch.roll(batch[gen.FROZEN_KEYS[1]], 1, dims=1)

    seen = _advantage_inputs(monkeypatch)
    full = _train(model_dir, tmp_path / "full", "resrl", *FULL)
    full_inputs, seen[:] = list(seen), []
    monkeypatch.setattr(gen.TrainerGeneration, "attach", shifted)
    bad = _train(model_dir, tmp_path / "bad", "resrl", *FAST)
    assert bad["generation/logp_diff_max"] > 1e-2
    assert not math.isclose(bad["grad_norm"], full["grad_norm"], rel_tol=1e-4)
    assert max(float((a.hidden - b.hidden)[a.response_mask.bool()].abs().max())
               for a, b in zip(full_inputs, seen)) > 1e-2


def test_frozen_states_travel_with_their_rows_and_check_their_tokens():
    """above_trunk hands each forward chunk its own rows' states and refuses other ids."""
    from resrl.models.frozen_trunk import _Rows

    states, ids = torch.arange(12.0).reshape(4, 3, 1), torch.arange(12).reshape(4, 3)
    rows = _Rows(states, ids)
    assert torch.equal(rows.take(ids[:2]), states[:2]) and torch.equal(rows.take(ids[2:]), states[2:])
    with pytest.raises(RuntimeError, match="not the rows whose frozen-layer states"):
        _Rows(states, ids).take(ids[1:3])


def test_resrl_grpo_config_fields_reach_the_trainer(model_dir, tmp_path):
    """With a TRL script (ResRLGRPOConfig), the generation path is three flat fields, and the on-policy
    check's threshold a fourth."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from resrl.engines.trl.trainer import ResRLGRPOConfig, ResRLTrainer

    args = ResRLGRPOConfig(output_dir=str(tmp_path), use_cpu=True, report_to="none", per_device_train_batch_size=4,
                           num_generations=4, max_completion_length=4, generation_backend="hf",
                           shared_prefill=True, reuse_frozen=False, max_logp_diff=1e-3)
    trainer = ResRLTrainer(model=AutoModelForCausalLM.from_pretrained(model_dir), reward_funcs=length_reward,
                           args=args, train_dataset=toy_dataset(),
                           processing_class=AutoTokenizer.from_pretrained(model_dir))
    r = trainer.rollout_path.resolved
    assert (r.backend, r.shared_prefill, r.reuse_frozen, r.own_path) == ("hf", True, False, True)
    assert r.reason == "generation.backend"
    assert trainer.rollout_path.max_logp_diff == 1e-3


# ---- the on-policy check under every sampling setting (issue 51) ----------------------------------------

TOPKP = ("trl.top_k=5", "trl.top_p=0.9")


def _spy_policy_loss(monkeypatch):
    """[(the micro-batch's inputs, the PolicyLossInputs the loss got)] of every policy-loss call."""
    from resrl.engines.trl import trainer as trl_engine

    seen, real_get, real_compute = [], trl_engine.get_policy_loss, trl_engine.ResRLTrainer.compute_policy_loss
    batches = []

    def get(name):
        fn = real_get(name)
        return lambda inp, cfg: (seen.append((batches[-1], inp)), fn(inp, cfg))[1]

    def compute(self, model, inputs):
        batches.append({k: v for k, v in inputs.items() if isinstance(v, torch.Tensor)})
        return real_compute(self, model, inputs)

    monkeypatch.setattr(trl_engine, "get_policy_loss", get)
    monkeypatch.setattr(trl_engine.ResRLTrainer, "compute_policy_loss", compute)
    return seen


def test_onpolicy_check_under_top_k_and_top_p_keeps_the_loss_untruncated(model_dir, tmp_path, monkeypatch):
    """With top-k 5 and top-p 0.9 the trainer logs generation/logp_diff_max — the training forward's
    log-probs through the same warpers against what generation recorded — and it is at rounding level.
    (Before issue 51 it was not logged at all under top-k / top-p: the check compared the truncated
    distribution with the untruncated one, so it was switched off; planted back, the key is missing.)
    The policy loss still gets the untruncated log softmax(z / T) (as TRL's does): checked against the
    initial model's own forward on the batch of the first step."""
    from transformers import AutoModelForCausalLM

    seen = _spy_policy_loss(monkeypatch)
    metrics = _train(model_dir, tmp_path / "topkp", "grpo", *FAST, *TOPKP)
    assert metrics["generation/logp_diff_max"] < 1e-4
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()  # the weights of the first step's forward
    truncated = 0
    for batch, inp in seen[:2]:
        ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], 1)
        attn = torch.cat([batch["prompt_mask"], batch["completion_mask"]], 1)
        P, m = batch["prompt_ids"].shape[1], inp.response_mask.bool()
        with torch.no_grad():
            logits = model(input_ids=ids, attention_mask=attn).logits[:, P - 1:-1].float() / 0.7
        plain = torch.log_softmax(logits, -1).gather(-1, batch["completion_ids"][..., None])[..., 0]
        assert (inp.logprobs.detach() - plain)[m].abs().max() < 1e-4  # the loss: untruncated
        # what generation recorded: the truncated (renormalised) distribution, larger where mass was cut
        gap = (batch["sampling_per_token_logps"] - plain)[m]
        assert (gap > -1e-5).all()
        truncated += int((gap > 1e-3).sum())
    assert truncated > 0  # the truncation was in play


def test_a_mismatch_under_top_k_shows_and_the_threshold_stops_the_run(tmp_path, monkeypatch):
    """A sampler drawing from the wrong distribution, with top-k/top-p sampling: issue 51's prefix cache
    copied without its sliding state (planted: tests/test_decoder_matrix._unsliding_prefix_cache) on a
    Mistral-style model with TRL's cache_implementation="static". generation/logp_diff_max shows it;
    generation.max_logp_diff turns it into an error. With the old check planted back (off unless
    temperature-only) both this test and the one above fail: KeyError 'generation/logp_diff_max',
    the mismatch went unseen."""
    from resrl.models.conformance import save_with_tokenizer
    from test_decoder_matrix import _unsliding_prefix_cache

    from resrl.engines.trl.generation import OnPolicyMismatch
    from resrl.models import rollout

    model_dir = save_with_tokenizer("mistral-sliding", tmp_path / "mistral")
    keys = ("trl.cache_implementation=static", *TOPKP)
    clean = _train(model_dir, tmp_path / "clean", "grpo", *keys)
    assert clean["generation/logp_diff_max"] < 1e-4
    monkeypatch.setattr(rollout, "_prefix_cache", _unsliding_prefix_cache)
    bad = _train(model_dir, tmp_path / "bad", "grpo", *keys)
    assert bad["generation/logp_diff_max"] > 1e-2
    with pytest.raises(OnPolicyMismatch, match="exceeds generation.max_logp_diff = 0.001"):
        _train(model_dir, tmp_path / "stopped", "grpo", *keys, "generation.max_logp_diff=1e-3")


def test_the_threshold_is_refused_where_it_cannot_be_checked(model_dir, tmp_path):
    with pytest.raises(ConfigError, match="max_logp_diff must be > 0"):
        _cfg(tmp_path, "generation.max_logp_diff=0").validate()
    # TRL's own call records no log-probs
    with pytest.raises(ValueError, match="max_logp_diff needs resrl's own generation path"):
        _train(model_dir, tmp_path / "trl", "grpo", *FULL, "generation.max_logp_diff=1e-3")
    # a repetition penalty depends on each row's history: the training forward does not replay it
    with pytest.raises(ValueError, match="repetition_penalty=1.1"):
        _train(model_dir, tmp_path / "rep", "grpo", *FAST, "trl.repetition_penalty=1.1", "generation.max_logp_diff=1e-3")
