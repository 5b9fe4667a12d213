"""The evaluation's samplers: Hugging Face `generate` in left-padded batches (CPU or GPU), vLLM optionally.

The unit of work is a `GenerationJob` (one prompt, one sample index); a generator maps a list of
jobs to a list of `Sample`s. `HFGenerator` is the default: it samples through the package's one
`generate` call (resrl.models.generation.generate_with, each job from its own seed) and cuts at
eos there (`cut_after_eos`). `VLLMGenerator` is used by `resrl eval` when vLLM is installed and a
GPU is present (`--backend auto`), never required: vLLM is its own engine (`LLM.generate` with
`SamplingParams`, the same temperature / top-p / no top-k; it stops at eos itself), so the HF
entry does not apply to it. Tests plug in scripted generators with the same call signature.

Sampling follows the paper's evaluation (spec §5): temperature and nucleus (top-p) sampling with
no top-k; temperature 0 means greedy decoding.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable, Sequence

logger = logging.getLogger(__name__)


@dataclass
class Sample:
    """One completion. num_tokens counts generated tokens incl. the end-of-sequence token;
    truncated = it hit max_new_tokens without producing an end-of-sequence token."""

    text: str
    num_tokens: int
    truncated: bool


@dataclass
class GenerationJob:
    """One sample to draw: the rendered prompt text and where the result belongs. `seed_name`: the
    name its sampling seed is derived from instead of `benchmark` (None: the benchmark's name), so a
    split recorded under a new name can draw the samples it drew under its old one."""

    prompt: str
    benchmark: str = ""
    problem_id: str = ""
    sample_index: int = 0
    seed_name: str | None = None


Generator = Callable[[Sequence[GenerationJob]], list[Sample]]


def eos_token_ids(model, tokenizer) -> list[int]:
    """Every token id that ends a generation: the tokenizer's eos and the model's generation eos."""
    ids = set()
    if tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    gen_eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if gen_eos is not None:
        ids.update(int(i) for i in (gen_eos if isinstance(gen_eos, (list, tuple)) else [gen_eos]))
    if not ids:
        raise ValueError("neither the tokenizer nor the model's generation config defines an eos token")
    return sorted(ids)


class HFGenerator:
    """`jobs -> samples` with `model.generate` (resrl.models.generation.generate_with), all jobs of
    a call in one left-padded batch.

    Randomness belongs to each job: its sample is drawn with a random stream seeded from
    (seed, benchmark, problem id, sample index) (`generate_with(row_seeds=...)`: PerSampleSampler),
    so a resumed or differently batched run draws the same samples as an uninterrupted one, and
    different seeds compare like with like. add_special_tokens: whether the tokenizer adds BOS etc.
    to the prompt text (False for chat-template text, which already holds every special token).
    """

    def __init__(self, model, tokenizer, temperature: float = 0.6, top_p: float = 0.95,
                 max_new_tokens: int = 1024, seed: int = 0, add_special_tokens: bool = False) -> None:
        import torch  # noqa: F401  (fail early if torch is missing)

        if temperature < 0 or not 0 < top_p <= 1 or max_new_tokens < 1:
            raise ValueError(f"bad sampling settings: temperature={temperature} (>= 0), top_p={top_p} "
                             f"(in (0, 1]), max_new_tokens={max_new_tokens} (>= 1)")
        self.model, self.tokenizer = model, tokenizer
        self.temperature, self.top_p = float(temperature), float(top_p)
        self.max_new_tokens, self.seed = int(max_new_tokens), int(seed)
        self.add_special_tokens = add_special_tokens
        self.eos_ids = eos_token_ids(model, tokenizer)
        if tokenizer.pad_token_id is None:
            raise ValueError("the tokenizer has no pad token; set tokenizer.pad_token (e.g. to the eos token)")

    def __call__(self, jobs: Sequence[GenerationJob]) -> list[Sample]:
        from resrl.models.generation import cut_after_eos, generate_with, sampling_config

        if not jobs:
            return []
        tok = self.tokenizer
        side = tok.padding_side
        tok.padding_side = "left"  # generation continues every row from its right end
        try:
            enc = tok([j.prompt for j in jobs], return_tensors="pt", padding=True,
                      add_special_tokens=self.add_special_tokens)
        finally:
            tok.padding_side = side
        device = next(self.model.parameters()).device
        input_ids = enc["input_ids"].to(device)            # (B, L)
        attention_mask = enc["attention_mask"].to(device)  # (B, L)
        seeds = [_stable_seed(self.seed, j.benchmark if j.seed_name is None else j.seed_name, j.problem_id,
                              j.sample_index) for j in jobs]
        # the paper samples with temperature and top-p, no top-k; each job from its own seed
        config = sampling_config(temperature=self.temperature, top_p=self.top_p, top_k=0,
                                 max_new_tokens=self.max_new_tokens, eos_token_id=self.eos_ids,
                                 pad_token_id=self.tokenizer.pad_token_id)
        out = generate_with(self.model, config, row_seeds=seeds, input_ids=input_ids, attention_mask=attention_mask)
        generated = out[:, input_ids.shape[1]:].tolist()  # (B, <= max_new_tokens)
        lengths, ended = cut_after_eos(generated, self.eos_ids)
        return [self._to_sample(row[:n], e) for row, n, e in zip(generated, lengths, ended)]

    def _to_sample(self, tokens: list[int], ended: bool) -> Sample:
        # no eos: the row ran to max_new_tokens (a batch only stops early when every row ended)
        truncated = not ended and len(tokens) >= self.max_new_tokens
        text = self.tokenizer.decode(tokens, skip_special_tokens=True)
        return Sample(text=text, num_tokens=len(tokens), truncated=truncated)


def _stable_seed(*parts) -> int:
    import zlib

    return zlib.crc32("|".join(map(str, parts)).encode()) & 0x7FFFFFFF


class VLLMGenerator:
    """`jobs -> samples` with vLLM (optional; needs `pip install vllm` and a GPU).

    Not exercised by the test suite (no GPU in CI); same Sample semantics as HFGenerator.
    """

    def __init__(self, model_dir: str, temperature: float = 0.6, top_p: float = 0.95,
                 max_new_tokens: int = 1024, seed: int = 0, **llm_kwargs) -> None:
        from vllm import LLM, SamplingParams

        self.llm = LLM(model=str(model_dir), seed=seed, **llm_kwargs)
        self.params = SamplingParams(temperature=temperature, top_p=top_p if temperature > 0 else 1.0,
                                     top_k=-1, max_tokens=max_new_tokens)  # seeded once in LLM(seed=...): a
        # per-request seed would make the n samples of a prompt identical
        self.max_new_tokens = max_new_tokens

    def __call__(self, jobs: Sequence[GenerationJob]) -> list[Sample]:
        outputs = self.llm.generate([j.prompt for j in jobs], self.params, use_tqdm=False)
        samples = []
        for o in outputs:
            c = o.outputs[0]
            truncated = c.finish_reason == "length"
            samples.append(Sample(text=c.text, num_tokens=len(c.token_ids), truncated=truncated))
        return samples


def vllm_available() -> bool:
    """True when vLLM imports and a CUDA GPU is visible."""
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        return False
    import torch

    return torch.cuda.is_available()


def generate_samples(model, tokenizer, prompts: Sequence[str], n: int, temperature: float = 0.6,
                     top_p: float = 0.95, max_new_tokens: int = 1024, batch_size: int = 16, seed: int = 0,
                     progress: bool = False) -> list[list[Sample]]:
    """n samples for each prompt: returns (len(prompts), n) nested lists of Sample.

    prompts are final model input texts (render them with `resrl.data.prompts.render_prompt`).
    Batches hold up to `batch_size` rows, the n samples of one prompt adjacent (little padding).
    """
    if n < 1 or batch_size < 1:
        raise ValueError(f"generate_samples: need n >= 1 and batch_size >= 1, got n={n}, batch_size={batch_size}")
    gen = HFGenerator(model, tokenizer, temperature=temperature, top_p=top_p,
                      max_new_tokens=max_new_tokens, seed=seed)
    jobs = [GenerationJob(prompt=p, problem_id=str(i), sample_index=s) for i, p in enumerate(prompts) for s in range(n)]
    flat: list[Sample] = []
    bar = _progress_bar(len(jobs), "generating") if progress else None
    for start in range(0, len(jobs), batch_size):
        batch = jobs[start:start + batch_size]
        flat.extend(gen(batch))
        if bar is not None:
            bar.update(len(batch))
    if bar is not None:
        bar.close()
    return [flat[i * n:(i + 1) * n] for i in range(len(prompts))]


def _progress_bar(total: int, desc: str):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="sample", dynamic_ncols=True)


__all__ = ["Sample", "GenerationJob", "Generator", "HFGenerator", "VLLMGenerator", "vllm_available", "generate_samples",
           "eos_token_ids"]
