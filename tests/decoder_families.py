"""Tiny random configs of transformers' own decoder classes, one per family users train: what the
conformance matrix (tests/test_decoder_matrix.py) runs every generation path and the training
forward's frozen-layer shortcut on. Each builds offline in well under a second.

Every config has 4 layers (2 frozen under the matrix's `trainable_layers=2`), d = 32, a 64-token
vocabulary, float32 and attention dropout 0; the sliding ones a window of WINDOW tokens, shorter
than the matrix's long prompts. `layer_types` are set so that the bottom layers differ from the top
ones: slicing the layer list (the frozen-layer shortcut's old defect) then hands a top layer the
wrong mask / RoPE table.
"""

from __future__ import annotations

WINDOW = 6  # sliding window (tokens); the matrix's long prompts are longer, its short ones shorter
VOCAB = 64
COMMON = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=4, num_attention_heads=2,
              num_key_value_heads=1, head_dim=16, max_position_embeddings=256, pad_token_id=0, eos_token_id=1,
              bos_token_id=None, tie_word_embeddings=True, attention_dropout=0.0)
SW, FA = "sliding_attention", "full_attention"
MIXED = [SW, SW, FA, FA]  # bottom (frozen) layers sliding, top (trainable) layers full: a sliced index swaps them
MIXED_INTERLEAVED = [SW, FA, FA, SW]  # top layer i differs from bottom layer i (what a sliced index reads)


def _cfg(cls_name: str, **kw):
    import transformers

    cls = getattr(transformers, cls_name)
    return cls(**{**COMMON, **kw})


# family -> (config class, its settings); "sliding": some layer attends to a window only
FAMILIES = {
    "llama": ("LlamaConfig", dict()),
    "qwen2-sliding": ("Qwen2Config", dict(use_sliding_window=True, sliding_window=WINDOW, layer_types=MIXED)),
    "qwen3": ("Qwen3Config", dict()),
    "qwen3-sliding": ("Qwen3Config", dict(use_sliding_window=True, sliding_window=WINDOW, layer_types=MIXED)),
    "qwen3-moe": ("Qwen3MoeConfig", dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                                         decoder_sparse_step=1, mlp_only_layers=[], norm_topk_prob=True)),
    "gemma2": ("Gemma2Config", dict(sliding_window=WINDOW, layer_types=MIXED, query_pre_attn_scalar=16,
                                    final_logit_softcapping=30.0, attn_logit_softcapping=50.0)),
    "gemma3": ("Gemma3TextConfig", dict(sliding_window=WINDOW, layer_types=MIXED, query_pre_attn_scalar=16,
                                        rope_local_base_freq=10.0)),
    "mistral-sliding": ("MistralConfig", dict(sliding_window=WINDOW)),
    "phi3-sliding": ("Phi3Config", dict(sliding_window=WINDOW)),  # Phi-3-mini-4k: a 2047-token window
    "olmo2": ("Olmo2Config", dict()),
    "olmo3": ("Olmo3Config", dict(sliding_window=WINDOW, layer_types=MIXED_INTERLEAVED)),
    "smollm3": ("SmolLM3Config", dict(use_sliding_window=True, sliding_window=WINDOW, layer_types=MIXED,
                                      no_rope_layers=[1, 0, 1, 0])),
    "gpt-oss": ("GptOssConfig", dict(num_local_experts=4, num_experts_per_tok=2, sliding_window=WINDOW,
                                     layer_types=MIXED, rope_parameters={"rope_type": "default", "rope_theta": 10000.0})),
}


def config_of(family: str):
    cls_name, kw = FAMILIES[family]
    return _cfg(cls_name, **kw)


def build(family: str, seed: int = 0):
    """(model, config) of `family`: random weights (seed), float32, eval mode, the final norm scaled
    until the most likely next token has on average >= 0.2 of the mass (a random model's distribution
    is near uniform otherwise, and temperature or truncation would hardly show)."""
    import torch
    from transformers import AutoModelForCausalLM

    config = config_of(family)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        probe = torch.randint(2, VOCAB, (4, 16))
    norm = model.get_decoder().norm
    gemma = "gemma" in config.model_type  # Gemma's norms scale by (1 + w)
    with torch.no_grad():
        for _ in range(6):
            if model(input_ids=probe).logits.softmax(-1).max(-1).values.mean() >= 0.2:
                break
            if gemma:
                norm.weight.add_(1.0).mul_(2.0).sub_(1.0)
            else:
                norm.weight.mul_(2.0)
    model.generation_config.pad_token_id = 0
    model.generation_config.eos_token_id = 1
    return model.eval(), config


def is_sliding(config) -> bool:
    return "sliding_attention" in (getattr(config, "layer_types", None) or []) or bool(
        getattr(config, "sliding_window", None))


def save_with_tokenizer(family: str, path, seed: int = 0, **overrides) -> str:
    """`family`'s config (with `overrides`) sized to resrl's character tokenizer, random weights
    (seed), the final norm sharpened like `build`'s, saved with the tokenizer at `path`: a model
    directory `resrl train` / ResRLTrainer load like any other. Returns `path`."""
    import torch
    from transformers import AutoModelForCausalLM

    from resrl.models.tiny import build_char_tokenizer

    tok = build_char_tokenizer()
    cls_name, kw = FAMILIES[family]
    config = _cfg(cls_name, **{**kw, "vocab_size": len(tok), "pad_token_id": tok.pad_token_id,
                               "eos_token_id": tok.eos_token_id, **overrides})
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    norm = model.get_decoder().norm
    with torch.no_grad():
        if "gemma" in config.model_type:
            norm.weight.add_(1.0).mul_(4.0).sub_(1.0)
        else:
            norm.weight.mul_(4.0)
    model.generation_config.pad_token_id = tok.pad_token_id
    model.generation_config.eos_token_id = tok.eos_token_id
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return str(path)
