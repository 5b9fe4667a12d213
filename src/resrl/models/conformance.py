"""The conformance matrix's decoder families and checks (issue 51): tiny random configs of
transformers' own classes, one per family users train, and the checks that prove each generation
path and the frozen-layer shortcut exact on them. tests/test_decoder_matrix.py runs them on CPU in
float32; scripts/gpu_check.py's `matrix` part runs the sliding-window and mixed-layer families in
bfloat16 on CUDA with the compiled path's CUDA graphs (`run_matrix`). Offline: nothing is downloaded.

Every family: 4 layers (2 frozen under `trainable_layers=2`), d = 32, a 64-token vocabulary,
attention dropout 0; the sliding ones a window of WINDOW tokens, which the matrix's long prompts
exceed and its short ones do not. Mixed `layer_types` are chosen so that the i-th top layer differs
in type from the i-th bottom one (what a layer list sliced to its top layers would read).

    model, config = build("gemma3")                        # float32, eval mode, sharpened logits
    out, cfg = run_path(model, "compiled+shared", "top-k/top-p")
    generation_error(model, out, cfg)                       # max |recorded − independent| (nats)
    shortcut_gradient_error("qwen3-sliding", "reentrant")   # relative gradient difference
"""

from __future__ import annotations

import time

WINDOW = 6  # sliding window (tokens)
VOCAB = 64
COMMON = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=4, num_attention_heads=2,
              num_key_value_heads=1, head_dim=16, max_position_embeddings=256, pad_token_id=0, eos_token_id=1,
              bos_token_id=None, tie_word_embeddings=True, attention_dropout=0.0)
SW, FA = "sliding_attention", "full_attention"
MIXED = [SW, SW, FA, FA]  # bottom (frozen) layers sliding, top (trainable) ones full
MIXED_INTERLEAVED = [SW, FA, FA, SW]  # top layer i differs from bottom layer i, and a sliding layer trains

# family -> (transformers config class, its settings)
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
    "mistral-sliding": ("MistralConfig", dict(sliding_window=WINDOW)),  # a window on every layer
    "phi3-sliding": ("Phi3Config", dict(sliding_window=WINDOW)),  # Phi-3-mini-4k: a 2047-token window
    "olmo2": ("Olmo2Config", dict()),
    "olmo3": ("Olmo3Config", dict(sliding_window=WINDOW, layer_types=MIXED_INTERLEAVED)),
    "smollm3": ("SmolLM3Config", dict(use_sliding_window=True, sliding_window=WINDOW, layer_types=MIXED,
                                      no_rope_layers=[1, 0, 1, 0])),
    "cohere2": ("Cohere2Config", dict(sliding_window=WINDOW, layer_types=MIXED_INTERLEAVED)),  # parallel block, LayerNorm
    "ministral": ("MinistralConfig", dict(sliding_window=WINDOW, layer_types=MIXED)),
    "gpt-oss": ("GptOssConfig", dict(num_local_experts=4, num_experts_per_tok=2, sliding_window=WINDOW,
                                     layer_types=MIXED, rope_parameters={"rope_type": "default", "rope_theta": 10000.0})),
}

PROMPT_LENGTHS = (3, 5, 11, 17)  # shorter and longer than WINDOW: left padding and overflowing windows
GROUP = 2  # each prompt twice: a group whose prefix the shared prefill computes once
MAX_NEW = 8
SAMPLING = {"temperature": dict(temperature=0.7), "top-k/top-p": dict(temperature=0.9, top_k=8, top_p=0.8)}
# path -> (RolloutSettings fields, GenerationConfig fields); the compiled ones take the compile backend
PATH_SPECS = {
    "hf": (dict(path="hf"), {}),
    "hf+shared": (dict(path="hf", shared_prefill=True), {}),
    "hf+static": (dict(path="hf"), {"cache_implementation": "static"}),
    "hf+shared+static": (dict(path="hf", shared_prefill=True), {"cache_implementation": "static"}),
    "compiled": (dict(path="compiled", prompt_bucket=8), {}),
    "compiled+shared": (dict(path="compiled", shared_prefill=True, prompt_bucket=8), {}),
}


def config_of(family: str, **overrides):
    import transformers

    cls_name, kw = FAMILIES[family]
    return getattr(transformers, cls_name)(**{**COMMON, **kw, **overrides})


def _sharpen(model, config, factor: float) -> None:
    """Scale the final norm's gain by `factor` (Gemma's norms scale by 1 + w)."""
    norm = model.get_decoder().norm
    if "gemma" in config.model_type:
        norm.weight.add_(1.0).mul_(factor).sub_(1.0)
    else:
        norm.weight.mul_(factor)


def build(family: str, seed: int = 0, dtype=None, device=None):
    """(model, config) of `family`: random weights (seed), eval mode, the final norm scaled until the
    most likely next token holds on average >= 0.2 of the mass (a random model's distribution is near
    uniform otherwise, and temperature or truncation would hardly show); then cast to `dtype` and
    moved to `device` (default float32, CPU)."""
    import torch
    from transformers import AutoModelForCausalLM

    config = config_of(family)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        probe = torch.randint(2, VOCAB, (4, 16))
    with torch.no_grad():
        for _ in range(6):
            if model(input_ids=probe).logits.softmax(-1).max(-1).values.mean() >= 0.2:
                break
            _sharpen(model, config, 2.0)
    model.generation_config.pad_token_id = 0
    model.generation_config.eos_token_id = 1
    model = model.to(dtype=dtype or torch.float32, device=device or "cpu")
    return model.eval(), config


def save_with_tokenizer(family: str, path, seed: int = 0, **overrides) -> str:
    """`family`'s config (with `overrides`) sized to resrl's character tokenizer, random weights
    (seed), the final norm x 4, saved with the tokenizer at `path`: a model directory `resrl train`
    and ResRLTrainer load like any other. Returns `path`."""
    import torch
    from transformers import AutoModelForCausalLM

    from resrl.models.tiny import build_char_tokenizer

    tok = build_char_tokenizer()
    config = config_of(family, vocab_size=len(tok), pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
                       **overrides)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    with torch.no_grad():
        _sharpen(model, config, 4.0)
    model.generation_config.pad_token_id = tok.pad_token_id
    model.generation_config.eos_token_id = tok.eos_token_id
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return str(path)


def prompt_rows() -> list[list[int]]:
    """The matrix's batch: prompts of PROMPT_LENGTHS tokens (seed 0), each GROUP times in a row."""
    import torch

    g = torch.Generator().manual_seed(0)
    prompts = [torch.randint(2, VOCAB, (n,), generator=g).tolist() for n in PROMPT_LENGTHS]
    return [p for p in prompts for _ in range(GROUP)]


def generation_config(sampling: str, **extra):
    """TRL-style GenerationConfig: every sampling setting explicit, eos id 1, MAX_NEW new tokens."""
    from transformers import GenerationConfig

    fields = dict(max_new_tokens=MAX_NEW, do_sample=True, top_p=1.0, top_k=0, min_p=None, repetition_penalty=1.0,
                  pad_token_id=0, eos_token_id=[1], disable_compile=True)
    return GenerationConfig(**{**fields, **SAMPLING[sampling], **extra})


def path_settings(path: str, compile_backend: str = "eager"):
    """(RolloutSettings, GenerationConfig fields) of a matrix path."""
    from resrl.models.rollout import RolloutSettings

    fields, extra = PATH_SPECS[path]
    if fields["path"] == "compiled":
        fields = {**fields, "compile_backend": compile_backend}
    return RolloutSettings(**fields), extra


def run_path(model, path: str, sampling: str, rows=None, compile_backend: str = "eager", seed: int = 0, **fields):
    """(rollouts, their GenerationConfig) of `path` on `rows` (default: prompt_rows()); `fields`:
    more GenerationConfig fields."""
    import torch

    from resrl.models.rollout import generate_rollouts

    settings, extra = path_settings(path, compile_backend)
    cfg = generation_config(sampling, **extra, **fields)
    torch.manual_seed(seed)
    out = generate_rollouts(model, rows or prompt_rows(), cfg, settings, pad_token_id=0, eos_token_ids=[1])
    return out, cfg


def reference_distribution(logits, temperature: float, top_k: int, top_p: float):
    """(..., V) the distribution the settings define, written out independently of the code under
    test, in HF's order: softmax(z / T) restricted to the top_k most likely tokens, then to the
    smallest set of most likely tokens holding at least top_p of the mass, renormalised (float64)."""
    import torch

    p = torch.softmax(logits.double() / temperature, -1)
    if top_k:
        kth = p.topk(top_k, -1).values[..., -1:]
        p = torch.where(p >= kth, p, torch.zeros_like(p))
        p = p / p.sum(-1, keepdim=True)
    if top_p < 1.0:
        sorted_p, order = p.sort(-1, descending=True)
        keep = torch.zeros_like(p, dtype=torch.bool).scatter(-1, order, (sorted_p.cumsum(-1) - sorted_p) < top_p)
        p = torch.where(keep, p, torch.zeros_like(p))
        p = p / p.sum(-1, keepdim=True)
    return p


def reference_logprobs(model, rows, completions, cfg) -> list[list[float]]:
    """Each completion token's log-prob under `reference_distribution` of the model's plain forward
    of its own row (prompt + completion: no padding, no cache), in float32 (a float32 copy of a
    lower-precision model)."""
    import torch

    ref = model if next(model.parameters()).dtype == torch.float32 else _float32_copy(model)
    device = next(ref.parameters()).device
    out = []
    with torch.no_grad():
        for prompt, completion in zip(rows, completions):
            if not completion:
                out.append([])
                continue
            logits = ref(input_ids=torch.tensor([prompt + completion], device=device)).logits[0, len(prompt) - 1:-1]
            p = reference_distribution(logits.float().cpu(), cfg.temperature, cfg.top_k or 0, cfg.top_p)
            out.append(torch.log(p.gather(-1, torch.tensor(completion)[:, None])[:, 0]).tolist())
    return out


def _float32_copy(model):
    import copy

    import torch

    return copy.deepcopy(model).to(torch.float32)


def generation_error(model, out, cfg, rows=None) -> float:
    """max over every sampled token of |recorded log-prob − `reference_logprobs`| (inf: a token drawn
    outside the reference's top-k / top-p support)."""
    found = generation_errors(model, out, cfg, rows)
    return float("inf") if found["outside"] else found["max_abs"]


def generation_errors(model, out, cfg, rows=None) -> dict:
    """{"max_abs": max |recorded − reference| over the tokens inside the reference's support, "outside":
    how many sampled tokens the reference's top-k / top-p excludes, "tokens"}. In float32 "outside" is
    0 on an exact path; in bfloat16 a token at a truncation boundary falls on either side of it now and
    then (HF generate's own bf16 draws do too), so the GPU check reads both."""
    import math

    rows = rows or prompt_rows()
    ref = reference_logprobs(model, rows, out.completion_ids, cfg)
    pairs = [(a, b) for r1, r2 in zip(out.logprobs, ref) for a, b in zip(r1, r2)]
    inside = [abs(a - b) for a, b in pairs if math.isfinite(b)]
    return {"max_abs": max(inside, default=0.0), "outside": len(pairs) - len(inside), "tokens": len(pairs)}


def shortcut_gradient_error(family: str, option: str = "off", dtype=None, device=None, sampling: str = "temperature"):
    """Relative L2 difference of the trainable gradients of a loss over the completion tokens: the
    training forward above the 2 frozen layers (resrl.models.frozen_trunk.above_trunk, on the states
    the hf path with a shared prefill recorded) against the full forward from the embeddings (no
    checkpointing). option: off | reentrant | non-reentrant (activation checkpointing of the shortcut's
    forward). The model-level check; tests/test_decoder_matrix.py also runs it through the trainer's
    wiring (TrainerGeneration), with LoRA and unfrozen layers."""
    import torch

    from resrl.models.checkpointing import set_checkpointing
    from resrl.models.freeze import train_last_layers
    from resrl.models.frozen_trunk import above_trunk, frozen_depth
    from resrl.models.rollout import RolloutSettings, generate_rollouts, left_pad

    model, _ = build(family, dtype=dtype, device=device)
    device = next(model.parameters()).device
    train_last_layers(model, 2)
    depth = frozen_depth(model)
    rows = prompt_rows()
    cfg = generation_config(sampling)
    torch.manual_seed(0)
    out = generate_rollouts(model, rows, cfg, RolloutSettings("hf", shared_prefill=True), pad_token_id=0,
                            eos_token_ids=[1], trunk_depth=depth)
    W = out.prompt_width
    prompt_ids, prompt_mask = left_pad(rows, 0, W)
    completion_ids = out.completion_ids_tensor()
    C = completion_ids.shape[1]
    completion_mask = torch.zeros_like(completion_ids)
    for i, c in enumerate(out.completion_ids):
        completion_mask[i, :len(c)] = 1
    ids = torch.cat([prompt_ids, completion_ids], 1).to(device)
    attn = torch.cat([prompt_mask, completion_mask], 1).to(device)
    mask = completion_mask.bool().to(device)
    weights = torch.randn(completion_ids.shape, generator=torch.Generator().manual_seed(1)).to(device)

    def loss():
        logits = model(input_ids=ids, attention_mask=attn).logits[:, W - 1:-1].float() / cfg.temperature
        lp = torch.log_softmax(logits, -1).gather(-1, ids[:, W:, None])[..., 0]
        return (lp * weights * mask).sum()

    def grads():
        return {n: p.grad.detach().float().clone() for n, p in model.named_parameters()
                if p.requires_grad and p.grad is not None}

    model.train()
    loss().backward()
    ref = grads()
    model.zero_grad(set_to_none=True)
    if option != "off":
        set_checkpointing(model, True, {"use_reentrant": option == "reentrant"})
    with above_trunk(model, depth, out.trunk_states[:, :W + C].to(device), ids):
        value = loss()
    value.backward()
    got = grads()
    names = set(ref) | set(got)
    zero = {n: torch.zeros_like((ref.get(n) if n in ref else got[n])) for n in names}
    num = sum(((got.get(n, zero[n]) - ref.get(n, zero[n])) ** 2).sum() for n in names)
    return float((num / sum((g ** 2).sum() for g in ref.values())).sqrt())


def compiled_graphs(model, compile_backend: str, tokens: int = 5) -> int:
    """Graphs dynamo compiled for one compiled-path call decoding `tokens` tokens (1: one decode
    step for the whole call)."""
    import torch._dynamo
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    out, _ = run_path(model, "compiled", "temperature", [[5, 6, 7] * 4] * 2, compile_backend=compile_backend,
                      max_new_tokens=tokens, eos_token_id=None)
    if [len(c) for c in out.completion_ids] != [tokens, tokens]:
        raise RuntimeError(f"compiled_graphs: decoded {[len(c) for c in out.completion_ids]} tokens, not {tokens}")
    return int(counters["stats"]["unique_graphs"])


def run_matrix(families, paths, *, device, dtype, compile_backend: str, deadline: float | None = None,
               on_result=None, shortcut_options=("off", "reentrant"), compiled_first: int = 2) -> list[dict]:
    """The matrix's checks for `families` x `paths` x SAMPLING on `device` in `dtype` (the GPU check:
    bfloat16 on CUDA with compile backend inductor, whose "reduce-overhead" mode replays the decode
    step as a CUDA graph), one result row per cell: {family, check, path | option, sampling, value,
    seconds} or {..., error}. Families in order; the compiled paths (each family compiles anew, and
    one call's graphs are counted) run with the first `compiled_first` families and, for the others,
    after every family's uncompiled paths and shortcut gradient: a short budget covers every family
    and the compiled path on the first ones. Rows go to `on_result` as they come; a cell not started
    before `deadline` (time.monotonic()) is reported skipped."""
    import torch._dynamo

    rows = []

    def add(row):
        rows.append(row)
        if on_result is not None:
            on_result(row)

    def cell(row, fn):
        if deadline is not None and time.monotonic() > deadline:
            add({**row, "skipped": "out of the part's time"})
            return
        t0 = time.perf_counter()
        try:
            row.update(fn())
        except Exception as exc:  # noqa: BLE001 - a cell's failure is reported, the others run
            row["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
        row["seconds"] = round(time.perf_counter() - t0, 2)
        add(row)

    def logprobs(model, path, sampling):
        out, cfg = run_path(model, path, sampling, compile_backend=compile_backend)
        found = generation_errors(model, out, cfg)
        return {"value": found["max_abs"], "outside": found["outside"], "tokens": found["tokens"]}

    uncompiled = [p for p in paths if not p.startswith("compiled")]
    compiled = [p for p in paths if p.startswith("compiled")]

    def run_uncompiled(family):
        model, _ = build(family, dtype=dtype, device=device)
        for path in uncompiled:
            for sampling in SAMPLING:
                cell({"family": family, "check": "logprobs", "path": path, "sampling": sampling},
                     lambda: logprobs(model, path, sampling))
        for option in shortcut_options:
            cell({"family": family, "check": "shortcut_gradient", "option": option},
                 lambda: {"value": shortcut_gradient_error(family, option, dtype=dtype, device=device)})

    def run_compiled(family):
        if not compiled:
            return
        torch._dynamo.reset()  # dynamo's recompile limit counts per code object, shared by every family
        model, _ = build(family, dtype=dtype, device=device)
        for path in compiled:
            for sampling in SAMPLING:
                cell({"family": family, "check": "logprobs", "path": path, "sampling": sampling},
                     lambda: logprobs(model, path, sampling))
        cell({"family": family, "check": "compiled_graphs"}, lambda: {"value": compiled_graphs(model, compile_backend)})

    for i, family in enumerate(families):
        run_uncompiled(family)
        if i < compiled_first:
            run_compiled(family)
    for family in list(families)[compiled_first:]:
        run_compiled(family)
    return rows


__all__ = ["FAMILIES", "WINDOW", "MIXED", "MIXED_INTERLEAVED", "PROMPT_LENGTHS", "SAMPLING", "PATH_SPECS", "build",
           "config_of", "save_with_tokenizer", "prompt_rows", "generation_config", "path_settings", "run_path",
           "reference_distribution", "reference_logprobs", "generation_error", "generation_errors", "shortcut_gradient_error",
           "compiled_graphs", "run_matrix"]
