"""A tiny Qwen3-architecture causal LM with a character-level tokenizer, built entirely offline.

Used by the demo, the tests and the benchmarks: nothing is downloaded. The tokenizer is made
with the `tokenizers` library (one token per character of a fixed alphabet plus special tokens)
and wrapped in `PreTrainedTokenizerFast`, with a ChatML-style chat template so that chat-list
prompts work the same as with real models. Both are written with `save_pretrained`, so the
result is an ordinary local Hugging Face model directory.
"""

from __future__ import annotations

import string
from dataclasses import asdict, dataclass
from pathlib import Path

# printable ASCII without the rarely useful vertical whitespace, plus newline
DEFAULT_ALPHABET = "".join(c for c in string.printable if c not in "\r\x0b\x0c")

PAD, EOS, IM_START, IM_END, UNK = "<|pad|>", "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|unk|>"
SPECIAL_TOKENS = [PAD, EOS, IM_START, IM_END, UNK]

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


@dataclass
class TinyModelConfig:
    """Shape of the tiny model. The defaults give about 1 M parameters (d = 128, 4 layers)."""

    hidden_size: int = 128
    num_hidden_layers: int = 4
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    head_dim: int = 32
    intermediate_size: int = 384
    max_position_embeddings: int = 512
    alphabet: str = DEFAULT_ALPHABET
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("hidden_size", "num_hidden_layers", "num_attention_heads",
                     "num_key_value_heads", "head_dim", "intermediate_size",
                     "max_position_embeddings"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"TinyModelConfig.{name} must be a positive int, got {value!r}")
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError("TinyModelConfig.num_attention_heads must be a multiple of num_key_value_heads")
        if len(set(self.alphabet)) != len(self.alphabet) or not self.alphabet:
            raise ValueError("TinyModelConfig.alphabet must be a non-empty string of distinct characters")


def build_char_tokenizer(alphabet: str = DEFAULT_ALPHABET):
    """A `PreTrainedTokenizerFast` with one token per character of `alphabet` plus special tokens."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS)}
    for ch in alphabet:
        vocab.setdefault(ch, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    # every character is its own pre-token; [\s\S] so that newlines split too
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tok.decoder = decoders.Fuse()  # join characters back without spaces
    tok.add_special_tokens(SPECIAL_TOKENS)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token=PAD,
        eos_token=IM_END,  # as in Qwen chat models: a turn (and a generation) ends at <|im_end|>
        unk_token=UNK,
        additional_special_tokens=[IM_START, EOS],
        padding_side="left",  # generation batches are left-padded
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def build_tiny_model(output_dir: str | Path | None = None, config: TinyModelConfig | None = None):
    """Build (and save, when `output_dir` is given) a randomly initialised tiny Qwen3 model.

    Returns `(model, tokenizer)`. The directory written loads with
    `AutoModelForCausalLM.from_pretrained(output_dir)` / `AutoTokenizer.from_pretrained(output_dir)`.
    """
    import torch
    from transformers import AutoModelForCausalLM, Qwen3Config

    config = config or TinyModelConfig()
    tokenizer = build_char_tokenizer(config.alphabet)
    model_config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=config.hidden_size,
        intermediate_size=config.intermediate_size,
        num_hidden_layers=config.num_hidden_layers,
        num_attention_heads=config.num_attention_heads,
        num_key_value_heads=config.num_key_value_heads,
        head_dim=config.head_dim,
        max_position_embeddings=config.max_position_embeddings,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        model = AutoModelForCausalLM.from_config(model_config, dtype=torch.float32)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    if output_dir is not None:
        output_dir = Path(output_dir)
        output_dir.mkdir(parents=True, exist_ok=True)
        model.save_pretrained(output_dir)
        tokenizer.save_pretrained(output_dir)
        (output_dir / "resrl_tiny_config.json").write_text(
            __import__("json").dumps({k: v for k, v in asdict(config).items()}, indent=1)
        )
    return model, tokenizer
