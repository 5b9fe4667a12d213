"""The one way resrl samples from a Hugging Face model: every `generate` call of the package is
`generate_with`, with a GenerationConfig that holds every sampling setting.

A Hugging Face model carries its own `generation_config` (Qwen3 ships do_sample, temperature 0.6,
top_k 20, top_p 0.95; Qwen2.5-Instruct adds repetition_penalty 1.05), and transformers 5.x
`model.generate(generation_config=g)` fills every field that `g` leaves None from it, then from
transformers' global defaults (top_k 50). A rollout sampled that way is not a draw from
softmax(logits / T), the distribution the policy loss assumes; an evaluation sampled that way does
not follow its configuration. Here:

    cfg = sampling_config(temperature=T, top_p=..., top_k=0, min_p=None, repetition_penalty=1.0,
                          max_new_tokens=..., eos_token_id=..., pad_token_id=...)  # every setting explicit
    out = generate_with(model, cfg, input_ids=ids, attention_mask=mask)           # (B, L + new) ids
    out = generate_with(model, cfg, row_seeds=seeds, input_ids=ids, attention_mask=mask)
                                        # each row drawn from its own random stream (PerSampleSampler)
    lengths, ended = cut_after_eos(out[:, L:].tolist(), eos_ids)                  # the eos cut

`generate_with` hides the model's own generation_config (`model_defaults_hidden`: generate sees
only its token ids) and runs without gradients. Its callers: the rollout paths
(resrl.models.rollout, with TRL's GenerationConfig), the step-level and multi-turn policy
(resrl.engines.multiturn.HFStepPolicy), the evaluation's generator (resrl.models.generators), the
diagnostics (resrl.diagnose.model_pass) and the omega analysis (resrl.experiments.present.omega).
TRL's own `generate` call (the trainer's hf path when nothing of resrl's is asked for) is TRL's,
under the same hiding (resrl.engines.trl.trainer); vLLM is another engine (resrl.models.generators).

top_k = 0 (or None) means no top-k cut, top_p = 1 no nucleus cut, min_p = None no min-p cut:
the full softmax at temperature T. temperature = 0 is greedy decoding.
"""

from __future__ import annotations

import contextlib
import copy
from typing import Any, Iterable, Iterator, Sequence

TOKEN_ID_FIELDS = ("bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id")
# GenerationConfig fields that shape what generate returns or how it caches, not which tokens it samples
OUTPUT_FIELDS = ("use_cache", "output_attentions", "output_hidden_states", "output_scores", "output_logits",
                 "return_dict_in_generate", "cache_implementation", "cache_config", "disable_compile",
                 "compile_config")


def sampling_config(*, temperature: float, top_p: float = 1.0, top_k: int | None = 0, min_p: float | None = None,
                    repetition_penalty: float = 1.0, max_new_tokens: int, eos_token_id=None, pad_token_id=None,
                    extra: dict[str, Any] | None = None):
    """A GenerationConfig holding every sampling setting explicitly (`extra`: further
    GenerationConfig fields, e.g. TRL's `generation_kwargs`, applied last)."""
    from transformers import GenerationConfig

    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    kwargs: dict[str, Any] = dict(max_new_tokens=int(max_new_tokens), do_sample=temperature > 0,
                                  repetition_penalty=1.0 if repetition_penalty is None else float(repetition_penalty),
                                  eos_token_id=eos_token_id, pad_token_id=pad_token_id)
    if temperature > 0:
        kwargs.update(temperature=float(temperature), top_p=float(top_p), top_k=int(top_k or 0),
                      min_p=None if min_p is None else float(min_p))
    kwargs.update(extra or {})
    return GenerationConfig(**kwargs)


def _owners(model) -> list:
    """The transformers models whose `generation_config` `generate` reads: the model itself, or
    the base model under a PEFT wrapper."""
    from transformers import PreTrainedModel

    found = []
    for m in (model, getattr(model, "get_base_model", lambda: None)()):
        if isinstance(m, PreTrainedModel) and all(m is not f for f in found):
            found.append(m)
    return found


@contextlib.contextmanager
def model_defaults_hidden(model) -> Iterator[Any]:
    """While inside, `model.generate` sees a generation_config holding only the model's token ids
    (bos / eos / pad / decoder start): a setting the caller's GenerationConfig leaves unset falls
    back to transformers' neutral global defaults, never to the model's own choices. The model's
    generation_config is restored on exit (it is what `save_pretrained` writes)."""
    from transformers import GenerationConfig

    saved = [(m, m.generation_config) for m in _owners(model)]
    try:
        for m, cfg in saved:
            m.generation_config = GenerationConfig(**{k: getattr(cfg, k, None) for k in TOKEN_ID_FIELDS})
        yield model
    finally:
        for m, cfg in saved:
            m.generation_config = cfg


def model_defaults_dropped(model, generation_config) -> dict[str, Any]:
    """The settings of the model's own `generation_config` that `generation_config` (e.g. TRL's) leaves
    unset: what `model.generate(generation_config=...)` would fill in from the model (transformers 5.x
    merges every field left None), and what `model_defaults_hidden` drops. Token ids are kept by
    `model_defaults_hidden`, so they are not listed. {field: the model's value}."""
    theirs = generation_config.to_dict() if generation_config is not None else {}
    dropped = {}
    for m in _owners(model):
        for key, value in m.generation_config.to_dict().items():
            if key.startswith("_") or key == "transformers_version" or key in TOKEN_ID_FIELDS + OUTPUT_FIELDS \
                    or value is None:
                continue
            if theirs.get(key) is None:
                dropped.setdefault(key, value)
    return dropped


class PerSampleSampler:
    """A logits processor that makes sampling a function of each row's own seed.

    Temperature and nucleus (top-p) filtering, then Gumbel noise drawn from a generator that
    belongs to the row (e.g. seeded from (seed, benchmark, problem, sample index)); `generate` then
    decodes greedily. argmax(z/T + Gumbel) is an exact draw from softmax(z/T) restricted to the
    nucleus (the Gumbel-max trick), and the row's random stream depends on nothing else: the
    same job gives the same sample whatever batch it is in, and a resumed run reproduces an
    uninterrupted one. (Up to float rounding: padding can change logits in the last bits.)
    """

    def __init__(self, row_seeds: Sequence[int], temperature: float, top_p: float) -> None:
        import torch

        self.generators = [torch.Generator(device="cpu").manual_seed(int(s)) for s in row_seeds]
        self.temperature, self.top_p = float(temperature), float(top_p)

    def __call__(self, input_ids, scores):
        import torch

        z = scores.float() / self.temperature                           # (B, V)
        if self.top_p < 1.0:
            sorted_z, order = torch.sort(z, dim=-1, descending=True)
            probs = torch.softmax(sorted_z, dim=-1)
            before = torch.cumsum(probs, dim=-1) - probs                 # mass of the more likely tokens
            drop_sorted = before >= self.top_p                           # the top token is always kept
            drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
            z = z.masked_fill(drop, float("-inf"))
        V = z.shape[-1]
        u = torch.stack([torch.rand(V, generator=g, dtype=torch.float64) for g in self.generators])
        gumbel = -torch.log(-torch.log(u.clamp(1e-300, 1.0 - 1e-16)))
        return z + gumbel.to(device=z.device, dtype=z.dtype)


# the sampling warpers generate applies when do_sample (field, its neutral values): PerSampleSampler
# does temperature and top-p itself; the others it cannot, so per-row seeds refuse them
_OTHER_WARPERS = (("top_k", (None, 0)), ("min_p", (None,)), ("typical_p", (None, 1.0)), ("epsilon_cutoff", (None, 0.0)),
                  ("eta_cutoff", (None, 0.0)), ("top_h", (None,)))


def per_row_sampling(generation_config, row_seeds: Sequence[int]):
    """(the config `generate` runs, the processor that samples) for a sampling `generation_config`
    drawn row by row from `row_seeds`: `PerSampleSampler` at its temperature and top-p, generate
    decoding greedily. Logits processors the config names (a repetition penalty, ...) still run,
    before the sampler. ValueError for a warper the sampler does not implement."""
    other = [f"{name}={getattr(generation_config, name, None)!r}" for name, neutral in _OTHER_WARPERS
             if getattr(generation_config, name, None) not in neutral]
    if other:
        raise ValueError(f"per-row seeded sampling applies temperature and top-p only; {', '.join(other)} would be "
                         "dropped (sample without row seeds, or leave them unset)")
    greedy = copy.deepcopy(generation_config)
    greedy.do_sample = False
    for name in ("temperature", "top_p", "top_k", "min_p"):
        setattr(greedy, name, None)
    temperature = 1.0 if generation_config.temperature is None else generation_config.temperature
    top_p = 1.0 if generation_config.top_p is None else generation_config.top_p
    return greedy, PerSampleSampler(row_seeds, temperature, top_p)


def generate_with(model, generation_config, *, row_seeds: Sequence[int] | None = None, logits_processor=None,
                  **inputs):
    """(B, L + new) ids: `model.generate(**inputs, generation_config=generation_config)` without
    gradients and with the model's own generation defaults hidden (`model_defaults_hidden`) — the
    package's only `generate` call.

    row_seeds (B,): when the config samples, each row is drawn from its own random stream
    (`per_row_sampling`) instead of the global one. logits_processor: a LogitsProcessorList run
    after generate's own processors (e.g. one recording log-probs, resrl.models.rollout)."""
    import torch

    if row_seeds is not None and generation_config.do_sample:
        from transformers import LogitsProcessorList

        generation_config, sampler = per_row_sampling(generation_config, row_seeds)
        logits_processor = LogitsProcessorList([*(logits_processor or []), sampler])
    if logits_processor is not None:
        inputs["logits_processor"] = logits_processor
    with torch.no_grad(), model_defaults_hidden(model):
        return model.generate(**inputs, generation_config=generation_config)


def cut_after_eos(rows: Sequence[Sequence[int]], eos_token_ids: Iterable[int]) -> tuple[list[int], list[bool]]:
    """The eos cut, written once: (each row's length once cut after its first eos, the eos kept
    — as TRL cuts generate's output; whether the row has an eos). A row without one keeps its
    length: it ran to its token budget (what follows an eos is generate's padding)."""
    eos = {int(e) for e in eos_token_ids}
    lengths, ended = [], []
    for row in rows:
        n = next((i + 1 for i, t in enumerate(row) if int(t) in eos), None)
        lengths.append(len(row) if n is None else n)
        ended.append(n is not None)
    return lengths, ended


def completion_mask(completion, eos_token_ids: Iterable[int]):
    """`cut_after_eos` on a tensor of generated ids (B, C): ((B, C) bool, true up to and including
    each row's first eos; (B,) bool, the row has an eos), on `completion`'s device."""
    import torch

    lengths, ended = cut_after_eos(completion.tolist(), eos_token_ids)
    mask = torch.arange(completion.shape[1])[None, :] < torch.tensor(lengths, dtype=torch.long)[:, None]
    return mask.to(completion.device), torch.tensor(ended, dtype=torch.bool).to(completion.device)


__all__ = ["sampling_config", "generate_with", "PerSampleSampler", "per_row_sampling", "cut_after_eos",
           "completion_mask", "model_defaults_hidden", "model_defaults_dropped", "TOKEN_ID_FIELDS"]
