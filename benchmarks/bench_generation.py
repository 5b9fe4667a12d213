"""Rollout generation, path by path, against HF `generate` as TRL calls it and against the hardware.

    # the SmolLM2 experiment's shape on CPU: its prompts (4 x G = 8 rows), 48 new tokens, float32
    python benchmarks/bench_generation.py --device cpu --shape smollm2 --model runs/models/smollm2-135m-instruct \\
        --json benchmarks/results/generation_cpu.json
    # the GPU check's shape: Qwen3-0.6B's config with random weights, bf16, prompts of 256 tokens, 128 new tokens
    python benchmarks/bench_generation.py --device cuda --shape qwen3-0.6b --rows 32,128,512
    # CI size (tests/test_bench_generation.py): the tiny model
    python benchmarks/bench_generation.py --device cpu --shape tiny --repeats 1

Paths (`--paths`, resrl.models.rollout and resrl.models.generation_paths):

    hf               `model.generate` with TRL's GenerationConfig (dynamic cache, disable_compile=True):
                     the baseline every ratio is taken against
    hf+shared        the same, each prompt's prefill computed once for its G rows
    hf+static        TRL's `cache_implementation="static"` (a static cache, still no compilation)
    compiled         static cache + torch.compile'd decode steps (CUDA graphs on CUDA), prompt lengths bucketed
    compiled+shared  the same with the shared prefill
    paged            transformers' continuous batching, as TRL's use_transformers_continuous_batching calls it
    vllm             vLLM (needs the vllm package; reported as unavailable otherwise)

Every row decodes the same tokens: no eos (`eos_token_id=None`), so each path generates exactly
`--tokens` new tokens per row; sampling at temperature 1 (no top-k / top-p). Each (path, rows)
case runs in its own process (peak memory is the process's; compile caches start cold: a fresh
TORCHINDUCTOR_CACHE_DIR per benchmark run) and reports:

    first call s      the first call, compilation / CUDA-graph capture included
    s / call          median of `--repeats` later calls (the steady state)
    tokens/s          rows x tokens / (s / call)
    x hf              tokens/s over the hf path's, same rows, same run
    prefill s         one call with 1 new token (prompt prefill + one sample)
    ms / decode step  (s / call - prefill s) / (tokens - 1)
    floor ms / step   the hardware's floor for one decode step: CUDA, the bytes a step must read
                      (the weights once + the KV cache of every row at the mean context length) over
                      the device's measured copy bandwidth; CPU, the step's FLOPs (2 x rows x the
                      matrix parameters + attention) over the measured matmul rate (a 2048^3 GEMM,
                      same threads)
    peak MiB          CUDA: torch.cuda.max_memory_allocated; CPU: the process's peak RSS (ru_maxrss),
                      with the RSS after loading the model beside it

On a shared machine the numbers are noisy: ratios of a few % are noise.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
BASELINE = "hf"
PATHS = ("hf", "hf+shared", "hf+static", "compiled", "compiled+shared", "paged", "vllm")
DEFAULT_PATHS = {"cpu": ("hf", "hf+shared", "hf+static", "compiled", "compiled+shared", "paged"),
                 "cuda": ("hf", "hf+shared", "hf+static", "compiled", "compiled+shared", "paged", "vllm")}

# Qwen/Qwen3-0.6B's config.json (the fields that set the compute), as scripts/gpu_check.py writes it
QWEN3_06B = dict(vocab_size=151936, hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
                 num_attention_heads=16, num_key_value_heads=8, head_dim=128, max_position_embeddings=40960,
                 rope_theta=1000000, rms_norm_eps=1e-6, hidden_act="silu", tie_word_embeddings=True,
                 attention_bias=False, attention_dropout=0.0)
SHAPES = {  # rows, group size, prompt tokens (None: the model's own prompts), new tokens, dtype per device
    "qwen3-0.6b": dict(rows=(32, 128, 512), group=8, prompt=256, tokens=128, dtype={"cuda": "bfloat16",
                                                                                     "cpu": "float32"}),
    "smollm2": dict(rows=(32,), group=8, prompt=None, tokens=48, dtype={"cuda": "float32", "cpu": "float32"}),
    "tiny": dict(rows=(16,), group=4, prompt=None, tokens=8, dtype={"cuda": "float32", "cpu": "float32"}),
}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--shape", default="tiny", choices=sorted(SHAPES))
    p.add_argument("--model", default=None, help="smollm2: the directory of `resrl convert-smollm2`")
    p.add_argument("--rows", default=None, help="comma-separated row counts (default: the shape's)")
    p.add_argument("--tokens", type=int, default=None, help="new tokens per row (default: the shape's)")
    p.add_argument("--paths", default=None, help=f"comma-separated subset of {','.join(PATHS)}")
    p.add_argument("--repeats", type=int, default=2, help="timed calls after the first (median kept)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (CPU)")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds per (path, rows) case")
    p.add_argument("--budget", type=float, default=None,
                   help="seconds for the whole run: a case gets what is left (cases past it are skipped)")
    p.add_argument("--compile-backend", default="inductor",
                   help="torch.compile backend of the compiled paths (eager: the path without compilation, tests)")
    p.add_argument("--json", type=Path, default=None, help="write every number here")
    p.add_argument("--out-md", type=Path, default=None, help="write the markdown table here")
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)  # internal: one case, JSON to stdout file
    p.add_argument("--worker-out", default=None, help=argparse.SUPPRESS)
    p.add_argument("--work", default=None, help=argparse.SUPPRESS)
    return p.parse_args(argv)


# ==== one case, in its own process ===================================================================

def build_model(args, work: Path):
    """(model, prompt rows' token ids per distinct prompt) for the shape."""
    import torch
    from transformers import AutoModelForCausalLM

    shape = SHAPES[args.shape]
    dtype = getattr(torch, shape["dtype"][args.device])
    if args.shape == "qwen3-0.6b":
        from transformers import Qwen3Config

        torch.manual_seed(0)
        cfg = Qwen3Config(**QWEN3_06B, pad_token_id=0, eos_token_id=None, bos_token_id=None)
        with torch.device(args.device):
            model = AutoModelForCausalLM.from_config(cfg, dtype=dtype)
        return model, None
    if args.shape == "tiny":
        from resrl.models.tiny import build_tiny_model

        path = work / "tiny"
        if not (path / "config.json").is_file():
            build_tiny_model(path)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype).to(args.device)
        return model, path
    if not args.model:
        raise SystemExit("--shape smollm2 needs --model (the directory of `resrl convert-smollm2`)")
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=dtype).to(args.device)
    return model, Path(args.model)


def prompt_rows(args, rows: int, tokenizer_dir, vocab_size: int) -> list[list[int]]:
    """rows // G distinct prompts, each repeated G times (TRL's layout: a group's rows adjacent)."""
    import random

    shape = SHAPES[args.shape]
    G = shape["group"]
    n = max(1, rows // G)
    if shape["prompt"] is not None:  # random ids of the stated length (a random-weight model)
        rng = random.Random(0)
        prompts = [[rng.randrange(10, vocab_size) for _ in range(shape["prompt"])] for _ in range(n)]
    else:  # the model's own chat template: the SmolLM2 experiment's additions (bench_smollm2_step.py)
        from transformers import AutoTokenizer

        sys.path.insert(0, str(HERE))
        from bench_smollm2_step import addition_prompts

        tok = AutoTokenizer.from_pretrained(tokenizer_dir)
        prompts = [list(tok.apply_chat_template(r["prompt"], add_generation_prompt=True, tokenize=True,
                                                return_dict=False)) for r in addition_prompts(n)]
    return [p for p in prompts for _ in range(G)]


def generation_config(tokens: int, pad_token_id: int):
    """TRL's GenerationConfig for the run (temperature 1, no top-k / top-p, disable_compile=True)
    with no eos: every row decodes exactly `tokens` tokens."""
    from transformers import GenerationConfig

    return GenerationConfig(max_new_tokens=tokens, do_sample=True, pad_token_id=pad_token_id, bos_token_id=None,
                            eos_token_id=None, temperature=1.0, top_p=1.0, top_k=0, min_p=None,
                            repetition_penalty=1.0, cache_implementation=None, disable_compile=True)


def paged_seconds(model, rows, cfg, max_memory_percent: float = 0.5) -> float:
    """One call of transformers' continuous batching (`model.generate_batch`) as TRL 1.16 makes it
    (`use_transformers_continuous_batching`, its default max_memory_percent 0.5; trl/trainer/
    grpo_trainer.py), under the model-defaults hiding the trainer puts around TRL's call: seconds.
    TRL runs this path itself (resrl.models.generation_paths selects it), so only this benchmark
    calls it from here."""
    from transformers.generation import ContinuousBatchingConfig

    from resrl.models.generation import model_defaults_hidden

    t0 = time.perf_counter()
    with model_defaults_hidden(model):
        outputs = model.generate_batch([list(r) for r in rows], generation_config=cfg, progress_bar=False,
                                       continuous_batching_config=ContinuousBatchingConfig(
                                           max_memory_percent=max_memory_percent))
    if len(outputs) != len(rows):
        raise RuntimeError(f"paged: {len(outputs)} outputs for {len(rows)} prompts")
    return time.perf_counter() - t0


def run_path(path: str, model, rows, cfg, model_dir):
    """One call of `path`: seconds."""
    from resrl.models.rollout import RolloutSettings, generate_rollouts

    if path == "paged":
        return paged_seconds(model, rows, cfg)
    if path == "vllm":
        raise RuntimeError("vllm runs through run_vllm")
    base, _, extra = path.partition("+")
    if extra == "static":
        cfg = copy.deepcopy(cfg)
        cfg.cache_implementation = "static"  # TRL's cache_implementation, compilation still disabled
    settings = RolloutSettings(base, shared_prefill=extra == "shared", record_logprobs=path != BASELINE,
                               compile_backend=os.environ.get("BENCH_GEN_COMPILE_BACKEND", "inductor"))
    return generate_rollouts(model, rows, cfg, settings, pad_token_id=cfg.pad_token_id, eos_token_ids=[]).seconds


def run_vllm(args, rows, tokens, model, work: Path) -> dict:
    """vLLM on the same token ids (its own engine: weights saved to disk first)."""
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        return {"status": "unavailable", "note": "vllm is not installed (generation.backend: vllm needs it)"}
    from vllm import LLM, SamplingParams

    path = work / "vllm-model"
    model.save_pretrained(path)
    llm = LLM(model=str(path), skip_tokenizer_init=True, seed=0, dtype=str(model.dtype).replace("torch.", ""),
              gpu_memory_utilization=0.5)
    params = SamplingParams(temperature=1.0, top_p=1.0, top_k=-1, max_tokens=tokens, min_tokens=tokens,
                            ignore_eos=True, detokenize=False)
    prompts = [{"prompt_token_ids": r} for r in rows]
    times = []
    for _ in range(1 + args.repeats):
        t0 = time.perf_counter()
        llm.generate(prompts, params, use_tqdm=False)
        times.append(time.perf_counter() - t0)
    return {"status": "ok", "first_s": times[0], "call_s": statistics.median(times[1:]), "prefill_s": None}


def worker(args) -> dict:
    import resource

    import torch

    torch.set_num_threads(args.threads)
    work = Path(args.work)
    path, rows_n = args.worker.split("@")
    rows_n = int(rows_n)
    shape = SHAPES[args.shape]
    tokens = args.tokens or shape["tokens"]
    model, model_dir = build_model(args, work)
    model.eval()
    params = {id(p): p for p in model.parameters()}.values()
    weight_bytes = sum(p.numel() * p.element_size() for p in params)
    rss_model = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    rows = prompt_rows(args, rows_n, model_dir, model.config.vocab_size)
    pad = model.config.pad_token_id if model.config.pad_token_id is not None else 0
    cfg = generation_config(tokens, pad)
    res = {"path": path, "rows": rows_n, "tokens": tokens, "prompt_tokens": max(len(r) for r in rows),
           "weight_bytes": weight_bytes, "rss_after_model_mib": rss_model}
    if args.device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()

    def sync():
        if args.device == "cuda":
            torch.cuda.synchronize()

    if path == "vllm":
        res.update(run_vllm(args, rows, tokens, model, work))
    else:
        torch.manual_seed(0)
        sync()
        t0 = time.perf_counter()
        run_path(path, model, rows, cfg, model_dir)
        sync()
        res["first_s"] = time.perf_counter() - t0
        times = []
        for _ in range(args.repeats):
            sync()
            t0 = time.perf_counter()
            run_path(path, model, rows, cfg, model_dir)
            sync()
            times.append(time.perf_counter() - t0)
        res["call_s"] = statistics.median(times)
        res["call_times_s"] = times
        one = generation_config(1, pad)
        sync()
        t0 = time.perf_counter()
        run_path(path, model, rows, one, model_dir)  # prompt prefill + one sample (compiled: another shape)
        sync()
        res["prefill_s"] = time.perf_counter() - t0
        res["status"] = "ok"
    if args.device == "cuda":
        res["peak_mib"] = torch.cuda.max_memory_allocated() / 2 ** 20
    else:
        res["peak_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    res.update(floor(args, model, rows_n, res["prompt_tokens"], tokens))
    return res


# ==== the hardware floor ==============================================================================

def measured_rate(device: str, threads: int) -> dict:
    """CUDA: device-to-device copy bandwidth (bytes/s); CPU: float32 GEMM rate (FLOP/s)."""
    import torch

    if device == "cuda":
        x = torch.empty(2 ** 28, dtype=torch.float32, device="cuda")  # 1 GiB
        y = torch.empty_like(x)
        y.copy_(x)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(10):
            y.copy_(x)
        torch.cuda.synchronize()
        return {"bandwidth_bytes_s": 2 * x.numel() * 4 * 10 / (time.perf_counter() - t0),
                "how": "1 GiB device copy (read + write), 10 times"}
    torch.set_num_threads(threads)
    n = 2048
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    t0 = time.perf_counter()
    for _ in range(3):
        a @ b
    return {"flops_s": 3 * 2 * n ** 3 / (time.perf_counter() - t0), "how": f"float32 {n}^3 matmul, {threads} thread(s)"}


def floor(args, model, rows: int, prompt: int, tokens: int) -> dict:
    """The decode step's floor (see the module docstring), from the model's shape and the rate measured
    in the parent (environment variable BENCH_GEN_RATE)."""
    rate = json.loads(os.environ.get("BENCH_GEN_RATE", "{}"))
    cfg = model.config
    layers, kv, hd = cfg.num_hidden_layers, cfg.num_key_value_heads, getattr(cfg, "head_dim", None) or (
        cfg.hidden_size // cfg.num_attention_heads)
    ctx = prompt + tokens / 2  # mean context length over the decode steps
    elem = next(model.parameters()).element_size()
    kv_bytes = rows * layers * 2 * kv * hd * ctx * elem
    matrix_params = sum(p.numel() for n, p in model.named_parameters() if p.dim() == 2 and "embed" not in n)
    if cfg.tie_word_embeddings:
        matrix_params += model.get_output_embeddings().weight.numel()
    flops = 2 * rows * matrix_params + 4 * rows * layers * cfg.num_attention_heads * hd * ctx
    weight_bytes = sum(p.numel() * p.element_size() for p in {id(p): p for p in model.parameters()}.values())
    out = {"step_bytes": weight_bytes + kv_bytes, "step_flops": flops}
    if "bandwidth_bytes_s" in rate:
        out["floor_ms"] = 1e3 * (weight_bytes + kv_bytes) / rate["bandwidth_bytes_s"]
        out["floor_basis"] = "bytes / measured bandwidth"
    elif "flops_s" in rate:
        out["floor_ms"] = 1e3 * flops / rate["flops_s"]
        out["floor_basis"] = "FLOPs / measured matmul rate"
    return out


# ==== the driver ======================================================================================

def case(args, path: str, rows: int, work: Path, env: dict, timeout: float) -> dict:
    import importlib.util

    if path == "vllm" and importlib.util.find_spec("vllm") is None:
        return {"path": path, "rows": rows, "status": "unavailable",
                "note": "vllm is not installed (generation.backend: vllm needs it)"}
    out = work / f"case-{path}-{rows}.json"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", f"{path}@{rows}", "--worker-out", str(out),
           "--work", str(work), "--device", args.device, "--shape", args.shape, "--repeats", str(args.repeats),
           "--threads", str(args.threads)]
    if args.model:
        cmd += ["--model", args.model]
    if args.tokens:
        cmd += ["--tokens", str(args.tokens)]
    log = work / f"case-{path}-{rows}.log"
    t0 = time.perf_counter()
    with open(log, "w") as f:
        try:
            rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            rc = None
    if out.is_file():
        res = json.loads(out.read_text())
    else:
        tail = log.read_text(errors="replace")[-1500:]
        res = {"path": path, "rows": rows, "status": "timeout" if rc is None else "error",
               "note": (f"over {timeout:.0f} s" if rc is None else _last_error(tail)), "log_tail": tail}
    res["case_wall_s"] = time.perf_counter() - t0
    return res


def _last_error(tail: str) -> str:
    lines = [line for line in tail.splitlines() if line.strip()]
    return (lines[-1] if lines else "no output")[:300]


def summarise(results: list[dict]) -> list[dict]:
    """Each ok case with tokens/s, × hf (same rows), decode ms/step and × floor."""
    base = {r["rows"]: r for r in results if r["path"] == BASELINE and r.get("status") == "ok"}
    for r in results:
        if r.get("status") != "ok":
            continue
        r["tokens_s"] = r["rows"] * r["tokens"] / r["call_s"]
        b = base.get(r["rows"])
        r["x_hf"] = r["tokens_s"] / b["tokens_s"] if b else None
        if r.get("prefill_s") is not None and r["tokens"] > 1:
            r["decode_ms"] = 1e3 * max(0.0, r["call_s"] - r["prefill_s"]) / (r["tokens"] - 1)
        if r.get("decode_ms") and r.get("floor_ms"):
            r["x_floor"] = r["decode_ms"] / r["floor_ms"]
    return results


def _f(x, nd=2):
    return "—" if x is None else f"{x:.{nd}f}"


def markdown_table(results: list[dict]) -> str:
    head = ["rows", "path", "first call s", "s / call", "tokens/s", "× hf", "prefill s", "ms / decode step",
            "floor ms / step", "× floor", "peak MiB", "note"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results:
        ok = r.get("status") == "ok"
        lines.append("| " + " | ".join([
            str(r["rows"]), r["path"], _f(r.get("first_s")) if ok else "—", _f(r.get("call_s"), 3) if ok else "—",
            _f(r.get("tokens_s"), 0) if ok else "—", _f(r.get("x_hf")) if ok else "—", _f(r.get("prefill_s"), 3),
            _f(r.get("decode_ms"), 1), _f(r.get("floor_ms"), 2), _f(r.get("x_floor"), 1),
            _f(r.get("peak_mib"), 0), ("" if ok else f"{r.get('status')}: {r.get('note', '')}").replace("|", "/"),
        ]) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.worker:
        res = worker(args)
        Path(args.worker_out).write_text(json.dumps(res, default=str))
        return 0
    import torch
    import transformers

    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: torch sees no GPU")
    shape = SHAPES[args.shape]
    rows_list = [int(x) for x in args.rows.split(",")] if args.rows else list(shape["rows"])
    paths = args.paths.split(",") if args.paths else list(DEFAULT_PATHS[args.device])
    unknown = set(paths) - set(PATHS)
    if unknown:
        raise SystemExit(f"unknown paths {sorted(unknown)}; paths: {PATHS}")
    if BASELINE not in paths:
        paths.insert(0, BASELINE)
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    rate = measured_rate(args.device, args.threads)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        env = {**os.environ, "BENCH_GEN_RATE": json.dumps(rate), "TORCHINDUCTOR_CACHE_DIR": str(work / "inductor"),
               "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": str(args.threads),
               "BENCH_GEN_COMPILE_BACKEND": args.compile_backend}
        deadline = None if args.budget is None else time.perf_counter() + args.budget
        for rows in rows_list:
            for path in paths:
                left = args.timeout if deadline is None else min(args.timeout, deadline - time.perf_counter())
                if left < 5:
                    res = {"path": path, "rows": rows, "status": "skipped", "note": "the run's --budget ran out"}
                else:
                    res = case(args, path, rows, work, env, left)
                results.append(res)
                print(f"  {rows:4d} rows  {path:16s} {res.get('status')}: "
                      + (f"first {res['first_s']:.2f} s, {res['call_s']:.3f} s/call" if res.get("status") == "ok"
                         else res.get("note", "")), flush=True)
    summarise(results)
    table = markdown_table(results)
    device = torch.cuda.get_device_name() if args.device == "cuda" else f"CPU ({platform.processor() or 'x86_64'}, " \
                                                                         f"{args.threads} thread(s))"
    header = (f"{args.shape} shape, {shape['group']} rows per prompt, {args.tokens or shape['tokens']} new tokens per row "
              f"(no eos), temperature 1; {device}; {rate['how']}: "
              + (f"{rate['bandwidth_bytes_s'] / 1e9:.0f} GB/s" if "bandwidth_bytes_s" in rate
                 else f"{rate['flops_s'] / 1e9:.1f} GFLOP/s")
              + f"; median of {args.repeats} calls after the first"
              + ("" if args.compile_backend == "inductor" else f"; compiled paths with torch.compile backend "
                                                                 f"{args.compile_backend!r}"))
    print(f"\n{header}\n\n{table}\n")
    if args.out_md:
        args.out_md.write_text(header + "\n\n" + table + "\n")
    if args.json:
        args.json.write_text(json.dumps({
            "command": " ".join(["python", *sys.argv]), "started": started, "device": device, "rate": rate,
            "versions": {"python": platform.python_version(), "torch": torch.__version__,
                         "transformers": transformers.__version__},
            "header": header, "results": results, "table": table}, indent=1, default=str) + "\n")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
