"""The conformance matrix (issue 51): every generation path and the training forward's frozen-layer
shortcut, on every decoder family users train — tiny random configs of transformers' own classes
(resrl.models.conformance: 15 families, 11 of them with sliding-window layers) — exact within a
stated tolerance, or refused.

    python -m pytest tests/test_decoder_matrix.py -n 0 --durations=20

1. Generation (`test_recorded_logprobs_are_exact`): hf, hf + shared prefill, hf + static cache
   (TRL's cache_implementation="static"), hf + shared + static, compiled (torch.compile's "eager"
   backend: inductor's CPU compile takes minutes), compiled + shared. One batch of prompts shorter
   (3, 5 tokens) and longer (11, 17) than the sliding window (6), left-padded, each prompt twice (a
   group to share), 8 new tokens; sampled with temperature only and with top-k + top-p. Every
   recorded log-prob against an independent forward: the model's plain float32 forward of the row
   alone (no padding, no cache), its sampling distribution written out here (softmax(z / T), top-k,
   top-p, renormalised: `reference_distribution`). Tolerance GEN_TOL = 2e-5 nats (measured max
   5.3e-6, Gemma 2). Every sampled token must lie in the reference's support. Paged (transformers'
   continuous batching) records no log-probs: its token distribution is tests/test_rollout.py's
   chi-square test.
2. The training forward above the frozen layers (`test_shortcut_gradient_is_exact`), with the
   `auto` settings (on CPU: hf + shared prefill + the shortcut), through the trainer's own wiring
   (resrl.engines.trl.generation.TrainerGeneration: generate -> attach -> training forward -> on-policy
   check): the gradient of a loss over the completion tokens with the shortcut
   against a full forward from the embeddings, with activation checkpointing off / reentrant /
   non-reentrant, LoRA (peft) under reentrant checkpointing, a layer unfrozen after the generation
   path was built, and one unfrozen between generation and the training forward (the shortcut must
   then stand down). Relative difference GRAD_TOL = 1e-4 (measured max 1.6e-6, Gemma 2); the on-policy check
   under top-k/top-p (the training forward's log-probs through the same warpers) below 1e-4 (measured max
   3.8e-6).
3. `auto` chooses only what this file proves per attention layout (resrl.models.generation_paths.PROVED).

The defects of issue 51, each planted back and watched failing this matrix (transformers 5.23,
torch 2.13 CPU, seed 0; /tmp scripts ran every family under each plant):

  layer types taken from the sliced index (`_sliced_above_trunk`: decoder.layers sliced to the top
  layers, the old frozen_trunk.above_trunk): test_shortcut_gradient_is_exact[*-off] fails on every
  family whose i-th top layer differs in type from its i-th bottom one — rel. difference
  qwen2-sliding 0.55, qwen3-sliding 1.0, gemma2 1.3, gemma3 0.93, olmo3 0.36, smollm3 0.63,
  gpt-oss 0.31 — and its on-policy check under top-k/top-p reads inf (0.37 on gpt-oss); the
  uniform families (llama, qwen3, qwen3-moe, mistral-sliding, phi3-sliding, olmo2) stay at 2e-7 to
  6e-7, as they should: slicing changes nothing there.
  the prefix cache copied without its sliding state (`_unsliding_prefix_cache`: a config-built
  DynamicCache, whose sliding layers keep window - 1 positions, copied into transformers'
  StaticCache): hf+shared+static and compiled+shared raise IndexError (index_copy_ past the
  window-sized buffer) on qwen2-sliding, qwen3-sliding, gemma2, gemma3, olmo3, smollm3, gpt-oss;
  on the uniform-window families hf+shared+static is off by 4.5e-2 nats (mistral-sliding) and
  1.1e-2 (phi3-sliding), while compiled+shared happens to stay exact there (8e-7: its bucketed
  prefix keeps the last window - 1 positions, all a uniform window reads).
  recorded states entering without grad under reentrant checkpointing (`reentrant_checkpointing`
  answering False): "reentrant" fails on every family with rel. 1.0 (every trainable layer's
  gradient zero, only the final norm's left); "lora+reentrant" fails on every family in backward
  ("element 0 of tensors does not require grad": nothing trainable is reached); "non-reentrant"
  is unaffected (2e-7 to 2e-6).
  a stale frozen depth (TrainerGeneration.frozen_depth fixed at construction): "unfrozen-after"
  and "unfrozen-between" fail on every family, rel. 0.47 (olmo2) to 0.72 (gemma2): the unfrozen
  layer's gradient is missing.
  a sliding layer's window-sized ring buffer in the compiled path's static cache (transformers'
  StaticCache): test_compiled_decode_compiles_once_on_sliding_models counts one graph per decoded
  token (4 for 5 tokens; at 12 tokens dynamo's limit of 8, after which the step runs eager) where
  the fix compiles 1.
The plants also run as tests here (`test_planted_*` and the compile count), on families that show them.
"""

from __future__ import annotations

import contextlib
import copy
from collections import defaultdict
from types import SimpleNamespace

import pytest
import torch

from resrl.models import conformance
from resrl.models.attention import attention_layout
from resrl.models.conformance import FAMILIES, PATH_SPECS, PROMPT_LENGTHS, SAMPLING, build, config_of, prompt_rows
from resrl.models.rollout import left_pad

GEN_TOL = 2e-5   # nats: recorded log-prob vs the independent forward (float32; measured max 5.3e-6)
GRAD_TOL = 1e-4  # relative L2 difference of the trainable gradients (float32; measured max 1.6e-6)
ONPOLICY_TOL = 1e-4  # generation/logp_diff_max through the trainer's wiring (float32)

PATHS = list(PATH_SPECS)
SLIDING = [f for f in FAMILIES if attention_layout(config_of(f)) == "sliding"]
# the families whose top (trainable) layers differ in type from their bottom (frozen) ones
MIXED = [f for f in FAMILIES if len(set(getattr(config_of(f), "layer_types", None) or [])) > 1]
generation_config = conformance.generation_config


@pytest.fixture(scope="module")
def models():
    """family -> (model in eval mode, config): built on first use, shared by the generation tests."""
    cache = {}

    def get(family):
        if family not in cache:
            cache[family] = build(family)
        return cache[family]
    return get


_COMPILED_FAMILY = [None]


def _dynamo_for(family: str) -> None:
    """A fresh dynamo cache per family (its recompile limit counts graphs per code object, and every
    family's forward goes through the same transformers wrappers)."""
    if _COMPILED_FAMILY[0] != family:
        import torch._dynamo

        torch._dynamo.reset()
        _COMPILED_FAMILY[0] = family


def generation_error(model, family, path, sampling) -> float:
    """resrl.models.conformance.generation_error of `path` on the matrix's batch, after checking
    that tokens were sampled and (shared paths) that the prefix was shared."""
    if path.startswith("compiled"):
        _dynamo_for(family)
    rows = prompt_rows()
    out, cfg = conformance.run_path(model, path, sampling, rows)
    assert [len(c) for c in out.completion_ids] == [len(lp) for lp in out.logprobs]
    assert sum(len(c) for c in out.completion_ids) >= len(rows) * 3  # tokens were sampled, most rows ran on
    if PATH_SPECS[path][0].get("shared_prefill"):
        assert out.prefill_rows == len(PROMPT_LENGTHS)  # the prefix was shared
    return conformance.generation_error(model, out, cfg, rows)


# ---- 1. generation -------------------------------------------------------------------------------

def test_the_matrix_runs_what_it_claims():
    """>= 10 families; sliding ones whose window the long prompts exceed and the short ones do not;
    mixed layer types whose bottom and top layers differ; two MoE decoders."""
    assert len(FAMILIES) >= 10 and len(SLIDING) >= 8 and len(MIXED) >= 6
    assert SLIDING == ["qwen2-sliding", "qwen3-sliding", "gemma2", "gemma3", "mistral-sliding", "phi3-sliding", "olmo3",
                       "smollm3", "cohere2", "ministral", "gpt-oss"]
    for family in SLIDING:
        window = config_of(family).sliding_window
        assert min(PROMPT_LENGTHS) < window < max(PROMPT_LENGTHS), family
    for family in MIXED:
        types = config_of(family).layer_types
        assert types[:2] != types[2:], family  # the i-th top layer differs from the i-th bottom one
    assert {"Qwen3MoeConfig", "GptOssConfig"} <= {cls for cls, _ in FAMILIES.values()}
    assert len(set(map(len, prompt_rows()))) == len(PROMPT_LENGTHS)  # left padding in play


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("family", list(FAMILIES))
def test_recorded_logprobs_are_exact(models, family, path):
    model, _ = models(family)
    for sampling in SAMPLING:
        delta = generation_error(model, family, path, sampling)
        assert delta < GEN_TOL, f"{family} / {path} / {sampling}: max |recorded − independent| = {delta:.3g}"


def test_compiled_decode_compiles_once_on_sliding_models(models):
    """The compiled path's decode step is compiled once per cache shape, sliding layers included:
    5 decoded tokens, one graph (dynamo's own counter). transformers' StaticCache keeps a sliding
    layer's length in a Python int that the step guards on, so it recompiled at every token until
    dynamo's limit (8) sent it back to eager — the planted variant counts a graph per decode step."""
    from transformers import StaticCache

    from resrl.models import rollout

    model, _ = models("qwen3-sliding")
    _COMPILED_FAMILY[0] = None
    fixed = conformance.compiled_graphs(model, "eager", tokens=5)
    real = rollout.static_cache
    rollout.static_cache = lambda config, n: StaticCache(config=config, max_cache_len=n)  # planted
    try:
        planted = conformance.compiled_graphs(model, "eager", tokens=5)
    finally:
        rollout.static_cache = real
    assert fixed == 1, fixed
    assert planted == 4, planted  # the 4 decode steps after the prefill


def _unsliding_prefix_cache(model, prompts, index, pad_token_id, length, static, max_cache_len):
    """The planted defect: the prefix computed into a config-built DynamicCache (its sliding layers
    keep window - 1 positions) and copied layer by layer into transformers' StaticCache."""
    from transformers import DynamicCache, StaticCache

    device = next(model.parameters()).device
    ids, mask = left_pad([p[:-1] if len(p) > 1 else [] for p in prompts], pad_token_id, length - 1)
    cache = DynamicCache(config=model.config)
    with torch.no_grad():
        model(input_ids=ids, attention_mask=mask, position_ids=(mask.cumsum(-1) - 1).clamp(min=0),
              past_key_values=cache, use_cache=True, logits_to_keep=1)
    cache.reorder_cache(torch.as_tensor(index, device=device))
    if not static:
        return cache
    out = StaticCache(config=model.config, max_cache_len=max_cache_len)
    for layer, lay in enumerate(cache.layers):
        out.update(lay.keys, lay.values, layer)
    return out


@pytest.mark.parametrize("family", ["mistral-sliding", "olmo3", "gemma3"])
def test_planted_prefix_without_its_sliding_state_fails(models, family, monkeypatch):
    from resrl.models import rollout

    model, _ = models(family)
    monkeypatch.setattr(rollout, "_prefix_cache", _unsliding_prefix_cache)
    deltas = {}
    for path in ("hf+shared+static",):  # compiled+shared fails alike (docstring) but compiles: seconds more
        try:
            deltas[path] = max(generation_error(model, family, path, s) for s in SAMPLING)
        except IndexError:  # the prefix does not fit a window-sized static layer
            deltas[path] = float("inf")
    assert max(deltas.values()) > 1e-2, (family, deltas)


# ---- 2. the training forward above the frozen layers ------------------------------------------------

class StubTrainer:
    """What TrainerGeneration reads of a ResRLTrainer (generate, attach, the training forward, the
    on-policy check) around a bare model: TRL's trainer takes seconds to build, this matrix has ~80
    cells. tests/test_generation_engine.py and the end-to-end tests run the real trainer."""

    def __init__(self, model, generation_config):
        self.model = model
        self.args = SimpleNamespace()
        self.accelerator = SimpleNamespace(unwrap_model=lambda m: m, device=torch.device("cpu"))
        self.tools, self.environment_factories, self.rollout_func = [], None, None
        self.use_vllm = self.use_transformers_continuous_batching = False
        self.is_fsdp_enabled = self.is_deepspeed_enabled = False
        self.generation_config = generation_config
        self.eos_token_ids = [1]
        self._tokenizer = SimpleNamespace(pad_token_id=0)
        self._metrics = {"train": defaultdict(list), "eval": defaultdict(list)}

    @contextlib.contextmanager
    def model_for_generation(self):
        """As TRL's: no grad, activation checkpointing off."""
        from resrl.models.checkpointing import checkpointing_disabled

        with torch.no_grad(), checkpointing_disabled(self.model):
            yield self.model


def trl_batch(rows, completions, logprobs):
    """TRL's generation batch: prompts left-padded, completions right-padded, the recorded log-probs."""
    prompt_ids, prompt_mask = left_pad(rows, 0)
    C = max(len(c) for c in completions)
    ids = torch.zeros(len(rows), C, dtype=torch.long)
    mask = torch.zeros(len(rows), C, dtype=torch.long)
    lps = torch.zeros(len(rows), C)
    for i, (c, lp) in enumerate(zip(completions, logprobs)):
        ids[i, :len(c)], mask[i, :len(c)], lps[i, :len(c)] = torch.tensor(c), 1, torch.tensor(lp)
    return {"prompt_ids": prompt_ids, "prompt_mask": prompt_mask, "completion_ids": ids, "completion_mask": mask,
            "sampling_per_token_logps": lps}


def policy_logps(model, batch, temperature: float):
    """(B, C) log softmax(z / T) at the completion tokens — the loss's log-probs, as TRL computes them."""
    input_ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], 1)
    attention_mask = torch.cat([batch["prompt_mask"], batch["completion_mask"]], 1)
    P = batch["prompt_ids"].shape[1]
    logits = model(input_ids=input_ids, attention_mask=attention_mask).logits[:, P - 1:-1].float() / temperature
    return torch.log_softmax(logits, -1).gather(-1, batch["completion_ids"][..., None])[..., 0], input_ids


def trainable_grads(model) -> dict:
    return {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.requires_grad and p.grad is not None}


def relative_difference(got: dict, ref: dict) -> float:
    zero = {n: torch.zeros_like(g) for n, g in ref.items()}
    num = sum(((got.get(n, zero[n]) - ref[n]) ** 2).sum() for n in ref) + sum(
        (g ** 2).sum() for n, g in got.items() if n not in ref)
    return float((num / sum((g ** 2).sum() for g in ref.values())).sqrt())


GRAD_OPTIONS = ("off", "reentrant", "non-reentrant", "lora+reentrant", "unfrozen-after", "unfrozen-between")


def shortcut_step(family: str, option: str, sampling: str = "top-k/top-p"):
    """One trainer step's gradient through TrainerGeneration with the frozen-layer shortcut, and the
    full forward's from the embeddings (no checkpointing) on the same batch with the same trainable
    parameters. Returns (relative difference, generation/logp_diff_max, the TrainerGeneration, facts)."""
    from resrl.engines.trl.generation import TrainerGeneration
    from resrl.models.generation_paths import GenerationSettings
    from resrl.models.checkpointing import set_checkpointing
    from resrl.models.freeze import decoder_layers, train_last_layers

    model, _ = build(family)
    if option.startswith("lora"):
        from peft import LoraConfig, get_peft_model

        model.requires_grad_(False)
        model = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=["o_proj"], layers_to_transform=[2, 3],
                                                 lora_dropout=0.0, init_lora_weights=False))
    else:
        train_last_layers(model, 2)
    layers, _ = decoder_layers(model)
    cfg = generation_config(sampling)
    trainer = StubTrainer(model, cfg)
    gen = TrainerGeneration(trainer, GenerationSettings(), False)  # auto: on CPU hf + shared prefill + shortcut
    assert (gen.resolved.backend, gen.resolved.shared_prefill, gen.resolved.reuse_frozen) == ("hf", True, True)
    gen.set_sampling(cfg)
    built_depth = gen.depth
    if option == "unfrozen-after":  # after the trainer (its generation path) was built
        layers[1].requires_grad_(True)
    rows = prompt_rows()
    torch.manual_seed(0)
    completions, logprobs = gen.generate(trainer, rows, None, None, trl_call=None)
    batch = trl_batch(rows, completions, logprobs)
    gen.attach(trainer, batch)
    if option == "unfrozen-between":  # after generation recorded the frozen layers' outputs
        layers[1].requires_grad_(True)
    weights = torch.randn(batch["completion_ids"].shape, generator=torch.Generator().manual_seed(1))
    mask = batch["completion_mask"].bool()
    model.train()
    if option in ("reentrant", "non-reentrant", "lora+reentrant"):
        set_checkpointing(model, True, {"use_reentrant": option != "non-reentrant"})
    model.zero_grad(set_to_none=True)
    input_ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], 1)
    with gen.training_forward(trainer, model, batch, input_ids):
        logps, _ = policy_logps(model, batch, cfg.temperature)
    (logps * weights * mask).sum().backward()  # outside the context, as the trainer's backward runs
    got = trainable_grads(model)
    sink = trainer._metrics["train"]
    gen.log_onpolicy(sink, logps, batch, mask)
    set_checkpointing(model, False)
    model.zero_grad(set_to_none=True)
    ref_logps, _ = policy_logps(model, batch, cfg.temperature)
    (ref_logps * weights * mask).sum().backward()
    ref = trainable_grads(model)
    facts = dict(built_depth=built_depth, states_depth=gen.states_depth, metrics=dict(sink),
                 trainable=sorted(ref), lp_diff=float((logps - ref_logps).detach().abs()[mask].max()))
    return relative_difference(got, ref), max(sink["generation/logp_diff_max"]), gen, facts


@pytest.mark.parametrize("option", GRAD_OPTIONS)
@pytest.mark.parametrize("family", list(FAMILIES))
def test_shortcut_gradient_is_exact(family, option):
    rel, onpolicy, gen, facts = shortcut_step(family, option)
    assert rel < GRAD_TOL, f"{family} / {option}: gradient rel. difference {rel:.3g}"
    assert onpolicy < ONPOLICY_TOL, f"{family} / {option}: generation/logp_diff_max {onpolicy:.3g}"
    # the situation claimed occurred
    assert facts["built_depth"] == 2
    depth = {"unfrozen-after": 1, "unfrozen-between": 2}.get(option, 2)
    assert facts["states_depth"] == depth, facts  # states recorded at the depth of their generation round
    assert gen.onpolicy.truncated  # the check went through the top-k / top-p warpers
    assert any(".layers.3." in n for n in facts["trainable"]) and not any(".layers.0." in n for n in facts["trainable"])
    if option.startswith("unfrozen"):
        assert any(".layers.1." in n for n in facts["trainable"])  # the unfrozen layer has a gradient to match
    fell_back = "generation/fallback/reuse_frozen" in facts["metrics"]
    assert fell_back == (option == "unfrozen-between"), facts["metrics"]  # stale states: the full forward ran


def _sliced_above_trunk(model, depth, states, input_ids):
    """The planted defect: decoder.layers sliced to its top layers (each reads layer_types[i] of the
    i-th *bottom* layer), the recorded states passed as inputs_embeds."""
    from torch import nn

    from resrl.models.freeze import decoder_layers
    from resrl.models.frozen_trunk import _Rows

    decoder = model.get_decoder()
    layers, _ = decoder_layers(model)
    rows = _Rows(states, input_ids)

    def pre_hook(module, args, kwargs):
        kwargs["inputs_embeds"] = rows.take(kwargs.get("input_ids", args[0] if args else None))
        kwargs["input_ids"] = None
        return (), kwargs

    @contextlib.contextmanager
    def ctx():
        handle = decoder.register_forward_pre_hook(pre_hook, with_kwargs=True)
        decoder.layers = nn.ModuleList(list(layers)[depth:])
        try:
            yield rows
        finally:
            decoder.layers = layers
            handle.remove()
    return ctx()


@pytest.mark.parametrize("family", ["qwen3-sliding", "gemma3"])
def test_planted_sliced_layer_index_fails(family, monkeypatch):
    from resrl.models import frozen_trunk

    monkeypatch.setattr(frozen_trunk, "above_trunk", _sliced_above_trunk)
    rel, _, _, _ = shortcut_step(family, "off", sampling="temperature")
    assert rel > 0.1, rel


@pytest.mark.filterwarnings("ignore:None of the inputs have requires_grad")  # the planted defect itself
def test_planted_states_without_grad_under_reentrant_checkpointing_fail(monkeypatch):
    from resrl.models import frozen_trunk

    monkeypatch.setattr(frozen_trunk, "reentrant_checkpointing", lambda layer: False)
    rel, _, _, _ = shortcut_step("qwen3-sliding", "reentrant", sampling="temperature")
    assert rel > 0.9, rel
    assert shortcut_step("qwen3-sliding", "non-reentrant", sampling="temperature")[0] < GRAD_TOL  # unaffected


def test_planted_stale_frozen_depth_fails(monkeypatch):
    from resrl.engines.trl.generation import TrainerGeneration

    real = TrainerGeneration.frozen_depth

    def fixed_at_construction(self, model):
        if not hasattr(self, "_planted"):
            self._planted = real(self, model)
        return self._planted

    monkeypatch.setattr(TrainerGeneration, "frozen_depth", fixed_at_construction)
    rel, _, _, _ = shortcut_step("gemma3", "unfrozen-after", sampling="temperature")
    assert rel > 0.1, rel


# ---- 3. auto chooses what the matrix proved ------------------------------------------------------

def test_auto_chooses_only_what_the_matrix_proves():
    """One table, keyed by attention layout: every layout of the matrix's families is in it with every
    fast path this file runs; a layout the matrix has not run proves nothing, so auto leaves every fast
    path out (TRL's call) naming why, and asking for one is refused."""
    from resrl.models import generation_paths as gen

    layouts = {attention_layout(config_of(f)) for f in FAMILIES}
    assert layouts == set(gen.PROVED) == {"full", "sliding"}
    assert all(v == set(gen.FAST_OPTIONS) for v in gen.PROVED.values())
    for layout in layouts:
        r = gen.resolve(gen.GenerationSettings(), "cpu", frozen_layers=True, layout=layout)
        assert (r.backend, r.shared_prefill, r.reuse_frozen, r.fallbacks) == ("hf", True, True, ())
    other = "other: layer types ['linear_attention']"
    r = gen.resolve(gen.GenerationSettings(), "cpu", frozen_layers=True, layout=other)
    assert (r.backend, r.shared_prefill, r.reuse_frozen, r.own_path) == ("hf", False, False, False)
    assert [o for o, _ in r.fallbacks] == ["shared_prefill", "reuse_frozen"]
    assert all("linear_attention" in why and "test_decoder_matrix" in why for _, why in r.fallbacks)
    for settings in (gen.GenerationSettings("compiled"), gen.GenerationSettings(shared_prefill=True),
                     gen.GenerationSettings("hf", reuse_frozen=True)):
        with pytest.raises(ValueError, match="not proved exact on this model's attention layout"):
            gen.resolve(settings, "cuda", frozen_layers=True, layout=other)
    # CUDA's auto is TRL's call on every layout
    assert not gen.resolve(gen.GenerationSettings(), "cuda", frozen_layers=True, layout="sliding").own_path


def test_attention_layout_of_configs_outside_the_matrix():
    from transformers import GPT2Config, GPT2LMHeadModel, Qwen3Config

    cfg = Qwen3Config(num_hidden_layers=2, layer_types=["linear_attention", "full_attention"])
    assert attention_layout(cfg) == "other: layer types ['linear_attention']"
    gpt2 = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=32))
    assert attention_layout(gpt2).startswith("other: GPT2LMHeadModel is not a Llama-style decoder")
    assert attention_layout(copy.deepcopy(config_of("mistral-sliding"))) == "sliding"  # a window on every layer
    assert attention_layout(config_of("qwen3")) == "full"
