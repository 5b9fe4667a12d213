"""`generate` with the caller's sampling settings and nothing else.

A Hugging Face model carries its own `generation_config` (Qwen3 ships do_sample, temperature 0.6,
top_k 20, top_p 0.95; Qwen2.5-Instruct adds repetition_penalty 1.05), and transformers 5.x
`model.generate(generation_config=g)` fills every field that `g` leaves None from it, then from
transformers' global defaults (top_k 50). A rollout sampled that way is not a draw from
softmax(logits / T), the distribution the policy loss assumes; an evaluation sampled that way does
not follow its configuration. Here:

    sampling_config(temperature=T, top_p=..., top_k=0, min_p=None, repetition_penalty=1.0,
                    max_new_tokens=..., eos_token_id=..., pad_token_id=...)   # every setting explicit
    with model_defaults_hidden(model):      # model.generation_config holds only token ids meanwhile
        model.generate(..., generation_config=cfg)
    generate_with(model, cfg, input_ids=..., attention_mask=...)             # both in one call

top_k = 0 (or None) means no top-k cut, top_p = 1 no nucleus cut, min_p = None no min-p cut:
the full softmax at temperature T. temperature = 0 is greedy decoding.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

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


def generate_with(model, generation_config, **inputs):
    """`model.generate(**inputs, generation_config=generation_config)` with the model's own
    generation defaults hidden (`model_defaults_hidden`)."""
    with model_defaults_hidden(model):
        return model.generate(**inputs, generation_config=generation_config)


__all__ = ["sampling_config", "model_defaults_hidden", "model_defaults_dropped", "generate_with", "TOKEN_ID_FIELDS"]
