"""Rollouts and evaluation sample from the distribution their configuration names — softmax(logits / T)
at the configured temperature, what the policy loss assumes — never from a model's own
`generation_config` (Qwen3 ships top_k 20, top_p 0.95; transformers' `generate` fills every setting
its caller leaves unset from it, and top_k 50 from its global defaults).

The model here carries a hostile generation_config (do_sample, temperature 0.3, top_k 2, top_p 0.5,
min_p 0.3, typical_p 0.5, repetition_penalty 1.5, no_repeat_ngram_size 1): any of it leaking
truncates or reshapes the distribution. Two kinds of check:
  - statistical: thousands of one-token draws from a fixed context; every token id appears and the
    frequencies match softmax(logits / T) by a chi-square test (p > 1e-6; seeded, so deterministic);
  - the settings `generate` actually used (transformers' `_prepare_generation_config`, recorded)
    in one training round of each layout through `run_training`.
Before the fix (resrl.models.generation), the step policy sampled with top_k 2 / top_p 0.5 /
min_p 0.3 ... here, the single-turn path with min_p 0.3 and typical_p 0.5, and the evaluator with
the repetition penalty and the n-gram ban: every test below failed.
"""

from __future__ import annotations

import math

import pytest
import torch

from resrl.models.tiny import TinyModelConfig, build_tiny_model

ALPHABET = "abcdefgh"   # + 5 special tokens: a vocabulary of 13 ids
CONTEXT = [{"role": "user", "content": "abc"}]
HOSTILE = dict(do_sample=True, temperature=0.3, top_k=2, top_p=0.5, min_p=0.3, typical_p=0.5, repetition_penalty=1.5,
               no_repeat_ngram_size=1)
T = 0.8                 # the configured temperature (the model's own says 0.3)


@pytest.fixture(scope="module")
def hostile_model(tmp_path_factory):
    """A tiny model whose next-token distribution at CONTEXT is spread (0.02 ... 0.3 at T = 1: the
    final norm scaled by 4) and whose generation_config is HOSTILE. Returns its directory."""
    path = tmp_path_factory.mktemp("hostile") / "model"
    model, tokenizer = build_tiny_model(None, TinyModelConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1, head_dim=16,
        intermediate_size=64, max_position_embeddings=64, alphabet=ALPHABET))
    with torch.no_grad():
        model.model.norm.weight.mul_(4.0)
    model.generation_config.update(**HOSTILE)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)


def load(path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)


def context_ids(tokenizer, messages=CONTEXT) -> list[int]:
    out = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=False)
    return list(out["input_ids"] if isinstance(out, dict) else out)


@torch.no_grad()
def softmax_at(model, ids, temperature: float) -> torch.Tensor:
    model.eval()
    return torch.softmax(model(input_ids=torch.tensor([ids])).logits[0, -1].double() / temperature, dim=-1)


def chi2_pvalue(counts: torch.Tensor, probs: torch.Tensor) -> float:
    """Pearson's chi-square test of `counts` against `probs` (an even number of degrees of freedom:
    the survival function is then exp(-x/2) sum_{i<k} (x/2)^i / i!, k = df / 2)."""
    n = counts.sum().item()
    expected = probs * n
    x = float(((counts.double() - expected) ** 2 / expected).sum())
    df = counts.numel() - 1
    assert df % 2 == 0, "use an odd number of categories"
    half = x / 2
    return math.exp(-half) * sum(half ** i / math.factorial(i) for i in range(df // 2))


def draw_with_step_policy(model, tokenizer, n: int, **settings) -> torch.Tensor:
    from resrl.engines.multiturn import HFStepPolicy

    policy = HFStepPolicy(model, tokenizer, temperature=T, seed=0, **settings)
    ids = context_ids(tokenizer)
    counts = torch.zeros(len(tokenizer), dtype=torch.long)
    for _ in range(n // 500):
        for out, _ in policy([ids] * 500, [1] * 500):
            counts[out[0]] += 1
    return counts


def draw_with_evaluator(model, tokenizer, n: int) -> dict[str, int]:
    """Counts of the sampled completion texts (a special token decodes to "")."""
    from resrl.models.generators import GenerationJob, HFGenerator

    generator = HFGenerator(model, tokenizer, temperature=T, top_p=1.0, max_new_tokens=1, seed=0)
    prompt = tokenizer.decode(context_ids(tokenizer))
    assert tokenizer(prompt, add_special_tokens=False)["input_ids"] == context_ids(tokenizer)
    counts: dict[str, int] = {}
    for start in range(0, n, 500):
        for sample in generator([GenerationJob(prompt, "b", "p", start + i) for i in range(500)]):
            counts[sample.text] = counts.get(sample.text, 0) + 1
    return counts


def test_step_policy_samples_every_token_from_the_full_softmax(hostile_model):
    """The multi-turn and step layouts' policy (and the agents' / BFCL evaluation): 6000 draws."""
    model, tokenizer = load(hostile_model)
    before = model.generation_config.to_dict()
    counts = draw_with_step_policy(model, tokenizer, 6000)
    probs = softmax_at(model, context_ids(tokenizer), T)
    assert (counts > 0).all(), f"token ids never sampled: {(counts == 0).nonzero().flatten().tolist()}"
    assert chi2_pvalue(counts, probs) > 1e-6, (counts.tolist(), (probs * counts.sum()).round().tolist())
    assert model.generation_config.to_dict() == before  # hidden while sampling, never changed


def test_step_policy_applies_the_configured_truncation_only(hostile_model):
    """Settings the configuration does give are applied: top_k 3 keeps the 3 likeliest ids."""
    model, tokenizer = load(hostile_model)
    counts = draw_with_step_policy(model, tokenizer, 3000, top_k=3)
    probs = softmax_at(model, context_ids(tokenizer), T)
    top = probs.topk(3).indices
    assert set((counts > 0).nonzero().flatten().tolist()) == set(top.tolist())


def test_evaluator_samples_from_the_eval_settings_only(hostile_model):
    """`resrl eval`'s sampler (temperature / top_p of the eval config): all 13 outcomes, chi-square.
    A sampled special token decodes to "": those share one category (so 9 categories, df 8)."""
    model, tokenizer = load(hostile_model)
    texts = draw_with_evaluator(model, tokenizer, 6000)
    probs = softmax_at(model, context_ids(tokenizer), T)
    letters = [tokenizer.convert_tokens_to_ids(c) for c in ALPHABET]
    special = [i for i in range(len(tokenizer)) if i not in letters]
    assert set(texts) <= set(ALPHABET) | {""}, texts
    counts = torch.tensor([texts.get(c, 0) for c in ALPHABET] + [texts.get("", 0)])
    grouped = torch.stack([probs[i] for i in letters] + [probs[special].sum()])
    assert (counts > 0).all(), texts
    assert chi2_pvalue(counts, grouped) > 1e-6, (counts.tolist(), (grouped * 6000).round().tolist())


# ---- what `generate` used, in each layout's training round ------------------------------------------

SAMPLING_FIELDS = ("do_sample", "temperature", "top_k", "top_p", "min_p", "typical_p", "epsilon_cutoff", "eta_cutoff",
                   "repetition_penalty", "no_repeat_ngram_size", "top_h")


@pytest.fixture
def used_settings(monkeypatch):
    """The sampling fields of every GenerationConfig that `generate` resolved (after merging the
    model's generation_config and transformers' defaults)."""
    from transformers.generation.utils import GenerationMixin

    seen = []
    real = GenerationMixin._prepare_generation_config

    def spy(self, generation_config, **kwargs):
        config, model_kwargs = real(self, generation_config, **kwargs)
        seen.append({k: getattr(config, k, None) for k in SAMPLING_FIELDS})
        return config, model_kwargs

    monkeypatch.setattr(GenerationMixin, "_prepare_generation_config", spy)
    return seen


def _expected(temperature: float, top_k: int = 0) -> dict:
    """The resolved settings of the full softmax at `temperature` (transformers' neutral defaults)."""
    return {"do_sample": True, "temperature": temperature, "top_k": top_k, "top_p": 1.0, "min_p": None,
            "typical_p": 1.0, "epsilon_cutoff": 0.0, "eta_cutoff": 0.0, "repetition_penalty": 1.0,
            "no_repeat_ngram_size": 0, "top_h": None}


@pytest.mark.parametrize("layout", ["single-turn", "multi-turn", "step"])
@pytest.mark.parametrize("top_k", [None, 5], ids=["config-default", "config-top_k-5"])
def test_training_rollouts_use_the_config_settings_only(layout, top_k, hostile_model, used_settings, tmp_path):
    """One round of each layout through run_training: generate resolved exactly the training
    config's settings (train.temperature 0.7; `trl.top_k` when the config gives it), in every call."""
    from datasets import Dataset

    from resrl.train import load_config, run_training

    common = [f"model.path={hostile_model}", f"train.output_dir={tmp_path / 'out'}", "train.max_steps=1",
              "train.rollout_prompts=2", "train.group_size=2", "train.temperature=0.7", "train.learning_rate=1e-6",
              "log.progress=false", "log.report_to=[none]", "log.jsonl=false"] + (
        [f"trl.top_k={top_k}"] if top_k is not None else [])
    rows = Dataset.from_list([{"prompt": CONTEXT, "answer": "a"}] * 2)
    if layout == "single-turn":
        cfg = load_config(None, common + ["train.max_completion_length=2"])
        run_training(cfg, train_dataset=rows, reward_fn=lambda c, a: [float(x == "a") for x in c], save_final=False)
    elif layout == "multi-turn":
        cfg = load_config(None, common + ["env.name=learning_tasks:make_tool_env", "reward.function=env",
                                          "env.max_turns=2", "env.max_step_tokens=2", "train.max_completion_length=40"])
        run_training(cfg, train_dataset=rows, save_final=False)
    else:
        from learning_tasks import write_step_games

        games = write_step_games(tmp_path / "games.jsonl", n=2)
        cfg = load_config(None, common + [f"data.train={games}", "env.name=learning_tasks:make_two_step_env",
                                          "env.layout=step", "reward.function=env", "env.max_steps=2",
                                          "env.max_step_tokens=2", "env.num_workers=1", "train.max_prompt_length=60"])
        run_training(cfg, save_final=False)
    assert used_settings, "no generate call recorded"
    for settings in used_settings:
        assert settings == _expected(0.7, top_k or 0)
