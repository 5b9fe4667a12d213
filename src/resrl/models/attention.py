"""Which attention layout a decoder has: the key of the table of generation paths and training
shortcuts proved exact per architecture (resrl.models.generation_paths.PROVED, proved by the conformance
matrix tests/test_decoder_matrix.py on tiny random configs of transformers' own classes).

What decides whether a path is exact is not the model's name but how its layers attend:

    "full"      every layer attends to every earlier position (Llama, SmolLM2, Qwen3 without a
                window, Qwen3-MoE, Phi-3, Olmo 2)
    "sliding"   some or all layers attend to a window of the last `sliding_window` positions
                (`config.layer_types` mixing "sliding_attention" and "full_attention": Gemma 2/3,
                GPT-OSS, Olmo 3, SmolLM3, Qwen2/3 with use_sliding_window; or `config.sliding_window`
                on every layer: Mistral)
    "other: …"  anything else: layer types the matrix has not run (linear attention, chunked
                attention, ...), or a decoder that is not Llama-style (no `get_decoder().layers`
                and final `norm`: GPT-2, ...). Nothing beyond TRL's own call is proved there.
"""

from __future__ import annotations

KNOWN_LAYER_TYPES = {"full_attention": "full", "sliding_attention": "sliding"}


def attention_layout(model_or_config) -> str:
    """"full", "sliding" or "other: <why>" for a model (or its config; a model is also checked for
    the Llama-style decoder layout the matrix's families share)."""
    config = getattr(model_or_config, "config", model_or_config)
    if config is not model_or_config:  # a model: its decoder must be Llama-style
        from resrl.models.freeze import decoder_layers

        try:
            decoder_layers(model_or_config)
        except Exception:  # noqa: BLE001 - any other layout is simply not proved
            return f"other: {type(model_or_config).__name__} is not a Llama-style decoder (get_decoder().layers, .norm)"
    text = config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config
    layer_types = getattr(text, "layer_types", None)
    if layer_types:
        unknown = sorted(set(layer_types) - set(KNOWN_LAYER_TYPES))
        if unknown:
            return f"other: layer types {unknown}"
        return "sliding" if "sliding_attention" in layer_types else "full"
    return "sliding" if getattr(text, "sliding_window", None) else "full"


__all__ = ["attention_layout", "KNOWN_LAYER_TYPES"]
