"""Rollout generation paths: the same sampler, different ways of running the model.

A rollout batch is B rows of prompt token ids (TRL repeats each prompt G times, one group of G
rows per prompt) and one `GenerationConfig` (TRL's: temperature, top-p, top-k, min-p, repetition
penalty, max / min new tokens, eos). Every path here samples through Hugging Face `generate` with
that config — the same logits processors, `softmax`, `torch.multinomial`, through the package's one
`generate` call (resrl.models.generation.generate_with) — and differs only in how the model's work
is laid out:

    "hf"        `model.generate` on the left-padded batch, a dynamic KV cache, no compilation:
                what TRL's GRPOTrainer does (its GenerationConfig carries disable_compile=True)
    "compiled"  a static KV cache and `torch.compile`d decode steps (CUDA graphs on CUDA,
                mode "reduce-overhead"); prompt lengths are left-padded up to a multiple of
                `prompt_bucket`, and the static cache is never shorter than `cache_length`: a
                caller that passes back each call's `Rollouts.cache_length` (the trainer does) keeps
                one cache shape, hence one compiled decode step, until a longer prompt bucket
                grows it (each new cache length is a recompile: an H200 run of 2026-11-28 spent
                30-39 s of a step recompiling when the cache followed each batch's bucket); the
                static cache's sliding-window layers keep every position like full ones
                (`static_cache`: transformers' window-sized ring buffer recompiled the step at every
                token), the sliding-window mask doing the windowing
    shared prefill (either path, `shared_prefill=True`): the prompt's prefill — every prompt
                token but the last — is computed once per distinct prompt and its KV cache
                copied to the G rows of the group (`Cache.reorder_cache`); `generate` then
                starts from that cache. The G samples of a group have the same prefix, so this
                is the same computation done once instead of G times (up to float rounding:
                a matrix product over 1 row and over G rows may round differently).

Each path can record, for every sampled token, its log-probability under the distribution it was
drawn from (`SampledLogprobs`: log-softmax of the scores after generate's own processors and its
sampling warpers, at the sampled id). With temperature only (top-p 1, top-k 0, no min-p or repetition penalty) that is
log softmax(z / T), the quantity the policy loss recomputes in the training forward: on-policy
means the two agree within the dtype's rounding (tests/test_rollout.py, and the trainer logs
their difference as `generation/logp_diff_max`).

    out = generate_rollouts(model, prompt_ids, generation_config, RolloutSettings("compiled", shared_prefill=True),
                            pad_token_id=tok.pad_token_id, eos_token_ids=[tok.eos_token_id])
    out.completion_ids   # B lists of ids, cut after the first eos (eos kept), as TRL cuts them
                         # (resrl.models.generation.cut_after_eos)
    out.logprobs         # B lists of floats (same lengths) or None

Transformers' continuous batching ("paged") and vLLM are TRL's own paths (`use_transformers_continuous_batching`,
`use_vllm`), run by TRL's code; resrl.models.generation_paths chooses among all of them.
"""

from __future__ import annotations

import contextlib
import copy
import time
from dataclasses import dataclass
from typing import Sequence

PATHS = ("hf", "compiled")  # the paths this module runs; "paged" and "vllm" are TRL's


@dataclass(frozen=True)
class RolloutSettings:
    path: str = "hf"  # hf | compiled
    shared_prefill: bool = False  # one prefill per distinct prompt, copied to its rows
    prompt_bucket: int = 64  # compiled: prompts left-padded to a multiple of this many tokens
    record_logprobs: bool = True  # return each sampled token's log-probability
    compile_backend: str = "inductor"  # compiled: torch.compile's backend ("eager" exercises the path uncompiled)
    cache_length: int = 0  # static cache: at least this many positions (a previous call's Rollouts.cache_length)

    def __post_init__(self) -> None:
        if self.path not in PATHS:
            raise ValueError(f"RolloutSettings.path must be one of {PATHS}, got {self.path!r}")
        if self.prompt_bucket < 1:
            raise ValueError(f"RolloutSettings.prompt_bucket must be >= 1, got {self.prompt_bucket}")
        if self.cache_length < 0:
            raise ValueError(f"RolloutSettings.cache_length must be >= 0, got {self.cache_length}")


@dataclass
class Rollouts:
    completion_ids: list[list[int]]  # (B, <= max_new_tokens) ids, cut after the first eos
    logprobs: list[list[float]] | None  # same shape: log-prob of each sampled id, or None
    prefill_rows: int  # rows whose prefill was computed (distinct prompts with shared prefill, else B)
    seconds: float  # wall time of the call
    trunk_states: "torch.Tensor | None" = None  # noqa: F821 (B, prompt_width + generated columns, d), trunk_depth > 0
    prompt_width: int = 0  # the prompts' left-padded width in trunk_states
    prompt_rows: list[list[int]] | None = None  # the prompts generated from (for prompt_ids_tensor)
    pad_token_id: int = 0
    cache_length: int = 0  # positions of the static KV cache used (0: a dynamic cache)

    def prompt_ids_tensor(self):
        """(B, prompt_width) the prompts, left-padded as generated."""
        return left_pad(self.prompt_rows, self.pad_token_id, self.prompt_width)[0]

    def completion_ids_tensor(self):
        """(B, longest completion) the completions, right-padded with the pad id."""
        import torch

        C = max((len(c) for c in self.completion_ids), default=0)
        out = torch.full((len(self.completion_ids), C), int(self.pad_token_id), dtype=torch.long)
        for i, c in enumerate(self.completion_ids):
            out[i, :len(c)] = torch.as_tensor(c, dtype=torch.long)
        return out


# ---- helpers -------------------------------------------------------------------------------------

def distinct_prompts(prompt_ids: Sequence[Sequence[int]]) -> tuple[list[list[int]], list[int]]:
    """(the distinct prompts in order of first appearance, row -> index of its prompt). TRL's
    sampler puts a group's G copies next to each other, but any order works."""
    seen: dict[tuple[int, ...], int] = {}
    index = []
    for ids in prompt_ids:
        index.append(seen.setdefault(tuple(ids), len(seen)))
    return [list(k) for k in seen], index


def left_pad(rows: Sequence[Sequence[int]], pad_token_id: int, length: int | None = None):
    """(ids (B, L), attention mask (B, L)) left-padded to `length` (default: the longest row)."""
    import torch

    L = max(len(r) for r in rows) if length is None else length
    ids = torch.full((len(rows), L), int(pad_token_id), dtype=torch.long)
    mask = torch.zeros((len(rows), L), dtype=torch.long)
    for i, r in enumerate(rows):
        if r:
            ids[i, L - len(r):] = torch.as_tensor(list(r), dtype=torch.long)
            mask[i, L - len(r):] = 1
    return ids, mask


def bucketed(length: int, bucket: int) -> int:
    """`length` rounded up to a multiple of `bucket`."""
    return -(-length // bucket) * bucket


class SampledLogprobs:
    """A logits processor that keeps log-softmax of the scores the next token is sampled from, and at
    the next step (or `finish`) reads the sampled id's entry: each sampled token's log-probability
    under the distribution it was drawn from. `generate` runs the caller's processors after its own
    and before its sampling warpers (temperature, top-k, top-p, ...), so this one applies those
    warpers (`sampling_warpers`, the same classes in generate's order) to a copy of the scores it
    is given, and passes the scores on unchanged."""

    def __init__(self, warpers=()) -> None:
        self.warpers = list(warpers)
        self.steps: list = []  # (B,) per decoded step
        self._last = None  # (B, V) log-probs of the step whose token is not known yet

    def __call__(self, input_ids, scores):
        import torch

        if self._last is not None:
            self._take(input_ids[:, -1])
        processed = scores.clone()
        for warper in self.warpers:
            processed = warper(input_ids, processed)
        self._last = torch.log_softmax(processed.float(), dim=-1)
        return scores

    def _take(self, sampled) -> None:
        self.steps.append(self._last.gather(1, sampled[:, None].to(self._last.device))[:, 0])
        self._last = None

    def finish(self, last_ids) -> "torch.Tensor":  # noqa: F821
        """(B, steps) after `generate` returned: `last_ids` are the ids of its final step."""
        import torch

        if self._last is not None:
            self._take(last_ids)
        return torch.stack(self.steps, 1) if self.steps else torch.zeros(len(last_ids), 0)


# ---- the paths -------------------------------------------------------------------------------------

def _compile_config(device_type: str, backend: str = "inductor"):
    from transformers import CompileConfig

    # CUDA graphs replay a decode step as one launch ("reduce-overhead"); other devices compile the
    # step with inductor's default mode (generate compiles on CUDA only unless told)
    cfg = CompileConfig(fullgraph=False, dynamic=False, backend=backend,
                        mode=None if backend != "inductor" else "reduce-overhead" if device_type == "cuda" else "default")
    if device_type != "cuda":
        cfg._compile_all_devices = True
    return cfg


def sampling_warpers(cfg) -> list:
    """The warpers `generate` builds from `cfg` when sampling, in its order (transformers 5.x
    `_get_logits_processor`; min_tokens_to_keep 1: no beams): what `SampledLogprobs` applies."""
    from transformers import (EpsilonLogitsWarper, EtaLogitsWarper, MinPLogitsWarper, TemperatureLogitsWarper,
                              TopKLogitsWarper, TopPLogitsWarper, TypicalLogitsWarper)

    if not cfg.do_sample:
        return []
    out = []
    if cfg.temperature is not None and cfg.temperature != 1.0:
        out.append(TemperatureLogitsWarper(cfg.temperature))
    if getattr(cfg, "top_h", None) is not None:
        from transformers.generation.logits_process import TopHLogitsWarper

        out.append(TopHLogitsWarper(top_h=cfg.top_h))
    if cfg.top_k is not None and cfg.top_k != 0:
        out.append(TopKLogitsWarper(top_k=cfg.top_k, min_tokens_to_keep=1))
    if cfg.top_p is not None and cfg.top_p < 1.0:
        out.append(TopPLogitsWarper(top_p=cfg.top_p, min_tokens_to_keep=1))
    if cfg.min_p is not None:
        out.append(MinPLogitsWarper(min_p=cfg.min_p, min_tokens_to_keep=1))
    if cfg.typical_p is not None and cfg.typical_p < 1.0:
        out.append(TypicalLogitsWarper(mass=cfg.typical_p, min_tokens_to_keep=1))
    if cfg.epsilon_cutoff is not None and 0.0 < cfg.epsilon_cutoff < 1.0:
        out.append(EpsilonLogitsWarper(epsilon=cfg.epsilon_cutoff, min_tokens_to_keep=1))
    if cfg.eta_cutoff is not None and 0.0 < cfg.eta_cutoff < 1.0:
        out.append(EtaLogitsWarper(epsilon=cfg.eta_cutoff, min_tokens_to_keep=1, device="cpu"))
    return out


def path_generation_config(generation_config, settings: RolloutSettings, device_type: str):
    """The caller's GenerationConfig for `settings.path`: sampling fields untouched; the cache and
    compilation fields set for the path."""
    cfg = copy.deepcopy(generation_config)
    if settings.path == "compiled":
        cfg.cache_implementation = "static"
        cfg.disable_compile = False
        cfg.compile_config = _compile_config(device_type, settings.compile_backend)
    return cfg


def static_cache(config, max_cache_len: int):
    """A StaticCache of `max_cache_len` positions in every layer, sliding-window layers included.

    transformers' own StaticCache gives a sliding layer a window-sized ring buffer
    (StaticSlidingWindowLayer) that tracks how many positions it has seen in a Python int: a
    compiled decode step guards on that int and recompiles at every step until the window fills
    (then dynamo's recompile limit sends it back to eager), and a prefix copied in without that
    count is attended as if it were shorter (the shared prefill's defect). Here a sliding layer
    keeps every position like a full one, and the sliding-window *mask* — which the model builds
    from positions for every sliding layer — restricts its attention: the same attention, one
    compiled shape, a state that is only keys, values and a length tensor."""
    from transformers import StaticCache
    from transformers.cache_utils import StaticLayer

    cache = StaticCache(config=config, max_cache_len=max_cache_len)
    cache.layers = [StaticLayer(max_cache_len=max_cache_len) if getattr(layer, "is_sliding", False) else layer
                    for layer in cache.layers]
    return cache


def _prefix_cache(model, prompts: list[list[int]], index: list[int], pad_token_id: int, length: int, static: bool,
                  max_cache_len: int):
    """The KV cache of every prompt token but the last, computed once per distinct prompt (left-
    padded to `length` - 1 like the full batch) and copied to the rows (`index`).

    static: the prefix is computed into a cache whose every layer keeps every position (a
    DynamicCache without a config: no sliding-window truncation) and written into `static_cache`'s
    layers through their own `update`, so each layer's length is the prefix's. (Copying the layers
    of a config-built DynamicCache, whose sliding layers keep only the last window - 1 positions,
    gave a sliding layer a 7-position history for a 61-token prefix: issue 51.)"""
    import torch
    from transformers import DynamicCache

    device = next(model.parameters()).device
    ids, mask = left_pad([p[:-1] if len(p) > 1 else [] for p in prompts], pad_token_id, length - 1)
    # positions as generate computes them for a left-padded row: count real tokens only
    position_ids = (mask.cumsum(-1) - 1).clamp(min=0)
    cache = DynamicCache() if static else DynamicCache(config=model.config)
    with torch.no_grad():
        model(input_ids=ids.to(device), attention_mask=mask.to(device), position_ids=position_ids.to(device),
              past_key_values=cache, use_cache=True, logits_to_keep=1)
    rows = torch.as_tensor(index, device=device)
    cache.reorder_cache(rows)  # (U, ...) -> (B, ...): each row gets its prompt's states
    if not static:
        return cache
    out = static_cache(model.config, max_cache_len)
    if len(cache.layers) != len(out.layers):
        raise RuntimeError(f"generate_rollouts: the prefix filled {len(cache.layers)} cache layers, the static cache "
                           f"has {len(out.layers)}")
    for layer, lay in enumerate(cache.layers):
        if lay.keys.shape[-2] != length - 1:
            raise RuntimeError(f"generate_rollouts: the prefix cache's layer {layer} holds {lay.keys.shape[-2]} "
                               f"positions, not the prefix's {length - 1}")
        out.update(lay.keys, lay.values, layer)
    return out


def generate_rollouts(model, prompt_ids: Sequence[Sequence[int]], generation_config, settings: RolloutSettings,
                      *, pad_token_id: int, eos_token_ids: Sequence[int], trunk_depth: int = 0) -> Rollouts:
    """B rollouts of `prompt_ids` sampled with `generation_config` along `settings.path` (see the
    module docstring). The model's own generation_config is not consulted for sampling settings:
    pass a complete config (TRL's, or resrl.models.generation.sampling_config).

    trunk_depth > 0 (hf path): also return the output of decoder layer trunk_depth - 1 at every
    prompt and completion position (`Rollouts.trunk_states`, resrl.models.frozen_trunk)."""
    import torch
    from transformers import DynamicCache, LogitsProcessorList

    from resrl.models.frozen_trunk import TrunkRecorder
    from resrl.models.generation import cut_after_eos, generate_with

    t0 = time.perf_counter()
    device = next(model.parameters()).device
    if not prompt_ids or any(len(p) == 0 for p in prompt_ids):
        raise ValueError("generate_rollouts: every prompt needs at least one token")
    if trunk_depth and settings.path != "hf":
        raise ValueError("generate_rollouts: trunk states are recorded on the hf path only (a compiled decode step "
                         "runs no Python hooks)")
    longest = max(len(p) for p in prompt_ids)
    length = bucketed(longest, settings.prompt_bucket) if settings.path == "compiled" else longest
    ids, mask = left_pad(prompt_ids, pad_token_id, length)
    cfg = path_generation_config(generation_config, settings, device.type)
    max_new = int(cfg.max_new_tokens)
    kwargs: dict = {}
    recorder = SampledLogprobs(sampling_warpers(cfg)) if settings.record_logprobs else None
    if recorder is not None:
        if getattr(cfg, "watermarking_config", None) is not None or getattr(cfg, "renormalize_logits", False):
            raise ValueError("generate_rollouts: record_logprobs cannot follow watermarking_config or "
                             "renormalize_logits (generate applies them after its sampling warpers)")
        kwargs["logits_processor"] = LogitsProcessorList([recorder])
    B, prefill_rows, index = len(prompt_ids), len(prompt_ids), None
    # a static KV cache: the compiled path's, or TRL's cache_implementation="static" on the hf path
    static = settings.path == "compiled" or getattr(cfg, "cache_implementation", None) == "static"
    # its length: the compiled decode step is specialised to it, so it only grows (settings.cache_length)
    cache_len = max(length + max_new, settings.cache_length) if static else 0
    trunk = TrunkRecorder(model, trunk_depth) if trunk_depth else contextlib.nullcontext()
    with torch.no_grad(), trunk:
        if settings.shared_prefill and length > 1:
            prompts, index = distinct_prompts(prompt_ids)
            if len(prompts) < B:  # something to share
                kwargs["past_key_values"] = _prefix_cache(model, prompts, index, pad_token_id, length,
                                                          static=static, max_cache_len=cache_len)
                prefill_rows = len(prompts)
                cfg.cache_implementation = None  # the cache is given (generate refuses both)
            else:
                index = None
        if "past_key_values" not in kwargs and (trunk_depth or static):
            # our own cache: kept for the last token's step below (trunk_depth), or a static one of
            # cache_len positions (generate would size it to this batch's prompt + max_new)
            kwargs["past_key_values"] = static_cache(model.config, cache_len) if static \
                else DynamicCache(config=model.config)
            cfg.cache_implementation = None
        # the model's own generation_config does not fill what cfg leaves unset (top_k 50, ...)
        out = generate_with(model, cfg, input_ids=ids.to(device), attention_mask=mask.to(device), **kwargs)
        n_new = out.shape[1] - length
        trunk_states = None
        if trunk_depth:
            trunk_states = _trunk_states(model, trunk, kwargs["past_key_values"], out, mask, index, length, n_new,
                                         trunk_depth)
    new = out[:, length:].cpu()  # (B, <= max_new)
    lengths, _ = cut_after_eos(new.tolist(), eos_token_ids)
    completion_ids = [row[:n] for row, n in zip(new.tolist(), lengths)]
    logprobs = None
    if recorder is not None:
        lp = recorder.finish(out[:, -1]).cpu()  # (B, steps)
        # (generate may run steps past the end and undo them, DeferredStopCheck: the extra ones are last)
        lp = lp[:, :new.shape[1]]
        if lp.shape[1] != new.shape[1]:
            raise RuntimeError(f"generate_rollouts: {lp.shape[1]} recorded steps for {new.shape[1]} generated tokens "
                               "(the recorder must run once per sampled token)")
        logprobs = [row[:n] for row, n in zip(lp.tolist(), lengths)]
    return Rollouts(completion_ids, logprobs, prefill_rows, time.perf_counter() - t0, trunk_states, length,
                    [list(p) for p in prompt_ids], int(pad_token_id), cache_len)


def _trunk_states(model, trunk, cache, out, prompt_mask, index, length: int, n_new: int, depth: int):
    """(B, length + n_new, d): the recorded trunk outputs of the prompt (the shared prefix expanded to
    its rows) and of every generated token; the last generated token, which generate never feeds
    back, gets one more forward of the trunk layers on the cache."""
    import torch

    from resrl.models.freeze import decoder_layers

    chunks = list(trunk.chunks)
    B = out.shape[0]
    parts = []
    if index is not None:  # shared prefill: the prefix of each distinct prompt, then each row's last prompt token
        prefix = chunks.pop(0)
        parts.append(prefix[torch.as_tensor(index, device=prefix.device)])
    parts.extend(chunks)
    states = torch.cat(parts, dim=1)
    if states.shape[0] != B or any(c.shape[0] != B for c in chunks):
        raise RuntimeError(f"generate_rollouts: trunk chunks of unexpected rows {[tuple(c.shape) for c in chunks]}")
    need = length + n_new
    if states.shape[1] < need - 1:
        raise RuntimeError(f"generate_rollouts: {states.shape[1]} trunk positions recorded for {need}")
    if states.shape[1] == need - 1 and n_new > 0:  # the final token: one trunk-only step
        full_mask = torch.cat([prompt_mask.to(out.device), torch.ones(B, n_new, dtype=prompt_mask.dtype,
                                                                      device=out.device)], 1)
        position_ids = (full_mask.sum(-1, keepdim=True) - 1)
        decoder = model.get_decoder()
        layers, _ = decoder_layers(model)
        before = len(trunk.chunks)
        decoder.layers = torch.nn.ModuleList(list(layers)[:depth])
        try:
            decoder(input_ids=out[:, -1:], attention_mask=full_mask, position_ids=position_ids, past_key_values=cache,
                    use_cache=True)
        finally:
            decoder.layers = layers
        states = torch.cat([states, trunk.chunks[before]], dim=1)
    return states[:, :need]


__all__ = ["PATHS", "RolloutSettings", "Rollouts", "SampledLogprobs", "sampling_warpers", "distinct_prompts", "left_pad",
           "bucketed", "path_generation_config", "generate_rollouts", "static_cache"]


def __getattr__(name: str):
    from resrl._moved import moved_name

    raise moved_name(__name__, name)
