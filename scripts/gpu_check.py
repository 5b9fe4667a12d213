"""The project's one prepared GPU check (issue 34; docs/gpu.md): every part in its own subprocess
with a time budget, the report (OUT/gpu_check.md + OUT/gpu_check.json) rewritten after each part,
so a slow or broken part is cut short and reported, never the whole report lost.

    python scripts/gpu_check.py OUT                        # on a GPU: Qwen3-0.6B-shaped model, bf16
    python scripts/gpu_check.py OUT --device cpu --tiny    # the CPU rehearsal (CI, ~1 min)

Usually started by `scripts/gpu-check.sh OUT`, which installs the project and the carried wheels
first. Parts (in priority order, docs/gpu.md):

    env            versions, the device, which optional engines import (vLLM, DeepSpeed)
    model          a random-weight model with a real model's shape (Qwen3-0.6B's config), written locally
    generation     every generation path's tokens/s at the check's shape (benchmarks/bench_generation.py:
                   32 rows, 256-token prompts, 128 new tokens), against HF generate as TRL calls it; the
                   fastest path the trainer can use is what the training parts below run with
    train-grpo-hf  `resrl train` GRPO with HF generation (TRL's call), 2 steps: the step split before
    train-*        `resrl train` (the real CLI) for GRPO, ResRL aligned, ResRL extra-pass with the fastest
                   generation path: loss, per-phase time and peak memory (log.phase_times), checkpoint
                   saved and reloaded
    bench-weights  ResRL's weights vs the authors' per-group loop at d=2560, T=4096, 256 and 1024 rows
    numerics       ResRL's weights from a bf16 forward vs float32 on the same batch
    matrix         the conformance matrix's sliding-window and mixed-layer families (resrl.models.conformance,
                   tests/test_decoder_matrix.py) in bf16: every generation path's recorded log-probs against a
                   float32 per-row forward, the compiled path (inductor, CUDA graphs) compiling one graph, the
                   frozen-layer shortcut's gradient against the full forward's (issue 51)
    engines        vLLM / DeepSpeed / FSDP: what could not run and why

A part is `python scripts/gpu_check.py --part NAME --work DIR [...]`, writing DIR/parts/NAME.json.
Every output goes straight to a file: OUT/gpu_check.md and .json (rewritten after each part),
OUT/progress.log (one line per part), OUT/logs/NAME.log (each part's own output, written as it
comes), OUT/generation.md and .json (the generation part's table); nothing passes through a pipe
that a cut-short call would lose. Models and runs stay in the work folder (DIR, outside OUT).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = 1

# Qwen/Qwen3-0.6B's config.json (the fields that set the compute), written locally: no hub
QWEN3_06B = dict(
    architectures=["Qwen3ForCausalLM"], model_type="qwen3", vocab_size=151936, hidden_size=1024,
    intermediate_size=3072, num_hidden_layers=28, num_attention_heads=16, num_key_value_heads=8, head_dim=128,
    max_position_embeddings=40960, rope_theta=1000000, rms_norm_eps=1e-6, hidden_act="silu",
    tie_word_embeddings=True, attention_bias=False, attention_dropout=0.0,
)

TRAIN_RUNS = {  # part -> (algorithm, engine.resrl_mode, generation: "hf" (TRL's call) | "fastest", steps)
    "train-grpo-hf": ("grpo", "auto", "hf", 2),
    "train-grpo": ("grpo", "auto", "fastest", 3),
    "train-resrl-aligned": ("resrl", "aligned", "fastest", 3),
    "train-resrl-extra-pass": ("resrl", "extra-pass", "fastest", 3),
}
# generation paths the trainer can run (benchmarks/bench_generation.py's names -> generation: settings);
# the generation part's fastest of these is what the "fastest" training parts use
TRAINER_PATHS = {
    "hf": {"backend": "hf", "shared_prefill": False},
    "hf+shared": {"backend": "hf", "shared_prefill": True},
    "compiled": {"backend": "compiled", "shared_prefill": False},
    "compiled+shared": {"backend": "compiled", "shared_prefill": True},
    "paged": {"backend": "paged"},
}
PHASES = ("generation", "old_logps", "weights", "forward_backward", "other")
# the matrix part: resrl.models.conformance's families with sliding-window or mixed layers, the most used first
MATRIX_FAMILIES = ("qwen3-sliding", "gemma3", "gpt-oss", "gemma2", "mistral-sliding", "olmo3", "smollm3",
                   "qwen2-sliding", "phi3-sliding", "cohere2", "ministral")
MATRIX_PATHS = ("hf", "hf+shared", "hf+static", "hf+shared+static", "compiled", "compiled+shared")


def profile(args) -> dict:
    """The sizes of each part: the real ones on a GPU, tiny ones for the CPU rehearsal."""
    if args.tiny:
        return dict(group_size=8, rollout_prompts=2, micro_batch=8, max_new_tokens=24, max_prompt_length=512,
                    bench=dict(d=64, T=64, rows=(32, 64), group_size=4),
                    numerics=dict(groups=2, group_size=8, T=48),
                    # the rehearsal's generation: the tiny model; compiled paths through torch.compile's
                    # "eager" backend (inductor's CPU compile takes minutes) and no paged path (transformers'
                    # continuous batching runs ~10 tokens/s on CPU), and the training parts choose among the
                    # uncompiled paths only (a `resrl train` run would compile with inductor)
                    generation=dict(shape="tiny", rows=16, paths="hf,hf+shared,compiled+shared",
                                    compile_backend="eager", train_candidates=("hf", "hf+shared")),
                    # generous: a rehearsal on a loaded 2-core CI runner took 47 s to import TRL, 88 s per train run
                    # the matrix: two families (a sliding Qwen3, a Gemma 3), float32, torch.compile's "eager"
                    # backend: the CPU-side wiring of the GPU part, at float32's tolerances
                    matrix=dict(families=("qwen3-sliding", "gemma3"), paths=MATRIX_PATHS, dtype="float32",
                                compile_backend="eager", logprob_tol=1e-4, outside_tol=0, grad_tol=1e-4),
                    budgets={"env": 150, "model": 150, "generation": 240, "train": 300, "bench-weights": 150,
                             "numerics": 150, "matrix": 150, "engines": 90},
                    total_budget=None)
    return dict(group_size=8, rollout_prompts=4, micro_batch=8, max_new_tokens=args.max_new_tokens,
                max_prompt_length=512, bench=dict(d=2560, T=4096, rows=(256, 1024), group_size=4),
                numerics=dict(groups=4, group_size=8, T=512),
                # "compiled" without the shared prefill is left to --paths: on the H200 (2026-11-28) the
                # part's 130 s measured hf and compiled+shared only, each path's first call compiling anew
                generation=dict(shape="qwen3-0.6b", rows=32, paths="hf,compiled+shared,hf+shared,paged,vllm",
                                compile_backend="inductor", train_candidates=tuple(TRAINER_PATHS)),
                # measured on an H200 (2026-11-27, benchmarks/results/gpu-2026-11-27-h200/): env 15-18 s, model
                # 16 s, bench-weights 11 s, numerics 23 s, engines 6 s; a train run with HF generation 68-81 s
                # for 3 steps at 128 new tokens (~25 s to its first step, then 8-10 s a step, 7.7 s of it generation)
                # generation: each path in its own process (~10 s to import and build the model), HF generate
                # ~8 s a call, the compiled paths' first call compiles and captures (minutes cold on a CPU; the
                # measured GPU time is what the first run will tell): the likeliest winner runs right after hf
                # H200, 2026-11-28 (benchmarks/results/gpu-2026-11-28-h200/): env 21 s, model 20 s, generation
                # 122 s, bench-weights 11 s, numerics 16 s, engines 5 s; the compiled-path train runs did not
                # finish a step in 70 s cold (~25 s start + the first compile), and took 89-138 s for 3 steps
                # with the inductor cache warm but recompiling per prompt bucket (fixed since: one cache shape)
                # the matrix (issue 51): the sliding-window and mixed-layer families in bf16, the compiled paths
                # with inductor ("reduce-overhead": CUDA graphs). bf16's tolerances, against a float32 per-row
                # forward of the same weights: 0.25 nats inside the reference's top-k/top-p support and at most 2
                # of the 64 sampled tokens on the other side of a truncation boundary (in bf16 on CPU every path,
                # HF generate's own included, measured <= 0.17 nats and <= 1 such token; the shortcut's gradient
                # <= 0.018); the defects they guard against were 0.3-7 nats, several tokens outside the support,
                # gradients off by 0.3-1.3. Not yet run on a GPU, so no timing is known: every family's
                # uncompiled cells first (~15 s on a CPU), the compiled ones of qwen3-sliding and gemma3 with
                # them, the other families' compiles until the budget ends (`--parts matrix` runs it alone)
                matrix=dict(families=MATRIX_FAMILIES, paths=MATRIX_PATHS, dtype="bfloat16", compile_backend="inductor",
                            logprob_tol=0.25, outside_tol=2, grad_tol=0.1),
                budgets={"env": 25, "model": 20, "generation": 110, "train": 90, "train-grpo-hf": 50,
                         "bench-weights": 15, "numerics": 20, "matrix": 80, "engines": 8},
                # 575 s of parts + the install (25 s on a fresh machine, 5-10 s with the wheels installed) stays
                # inside the 10 minutes of a device command; later parts keep at least 10 s each whatever the
                # earlier ones took
                total_budget=575)


# ==== the driver ===================================================================================

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", nargs="?", help="folder for gpu_check.md and gpu_check.json")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--tiny", action="store_true", help="tiny model and sizes (the CPU rehearsal)")
    ap.add_argument("--work", default=None, help="scratch folder for models and runs (default OUT/../gpu-check-work "
                                                  "outside OUT, so that nothing large comes back)")
    # 128: on an H100 (2026-11-27, benchmarks/results/gpu-2026-11-27.md) HF generate of 32 rows of the
    # Qwen3-0.6B-shaped model took 7-17 s for 128 tokens, so at 1024 not one step finished inside its
    # part's 85 s; --max-new-tokens with --budget-scale gives longer rollouts room
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--budget-scale", type=float, default=1.0, help="multiply every part's time budget")
    ap.add_argument("--parts", default=None, help="comma-separated subset of parts")
    ap.add_argument("--part", default=None, help=argparse.SUPPRESS)  # internal: run one part
    ap.add_argument("--plant", default=None, help=argparse.SUPPRESS)  # internal (tests): PART raises, hang:PART hangs
    ap.add_argument("--budget", type=float, default=60.0, help=argparse.SUPPRESS)  # internal: this part's seconds
    ap.add_argument("--out-dir", default=None, help=argparse.SUPPRESS)  # internal: OUT, for the parts' own files
    args = ap.parse_args(argv)
    if args.part:
        return run_part(args)
    if not args.out:
        ap.error("OUT is required")
    return drive(args)


def part_names(args) -> list[str]:
    names = ["env", "model", "generation", *TRAIN_RUNS, "bench-weights", "numerics", "matrix", "engines"]
    if args.parts:
        wanted = args.parts.split(",")
        unknown = set(wanted) - set(names)
        if unknown:
            raise SystemExit(f"gpu_check: unknown parts {sorted(unknown)}; parts: {names}")
        names = [n for n in names if n in wanted]
    return names


def drive(args) -> int:
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    work = Path(args.work).resolve() if args.work else out.parent / f"{out.name}-work"
    (work / "parts").mkdir(parents=True, exist_ok=True)
    prof = profile(args)
    report = {"schema": SCHEMA, "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
              "command": " ".join([sys.executable, *sys.argv]), "device_requested": args.device, "tiny": args.tiny,
              "profile": {k: v for k, v in prof.items() if k != "budgets"}, "out": str(out), "parts": {}}
    install_log = out / "install.log"  # scripts/gpu-check.sh's own lines (pip's output stays in the file)
    if install_log.is_file():
        report["install"] = [line.removeprefix("gpu-check: ") for line in install_log.read_text().splitlines()
                             if line.startswith("gpu-check: ")]
    t_all = time.perf_counter()
    names = part_names(args)
    total = prof["total_budget"] * args.budget_scale if prof["total_budget"] else None
    (out / "logs").mkdir(exist_ok=True)
    progress = out / "progress.log"

    def say(line: str) -> None:  # to the console and straight to OUT/progress.log
        print(line, flush=True)
        with open(progress, "a") as f:
            f.write(line + "\n")

    for i, name in enumerate(names):
        budget = prof["budgets"].get(name, prof["budgets"]["train" if name in TRAIN_RUNS else name]) * args.budget_scale
        if total is not None:  # the whole check stays within `total`: later parts keep at least 10 s each
            left = total - (time.perf_counter() - t_all) - 10 * (len(names) - i - 1)
            budget = max(10.0, min(budget, left))
        say(f"gpu_check: {name}: started (budget {budget:.0f} s)")
        entry = run_subprocess_part(args, name, work, budget, out / "logs" / f"{name}.log")
        report["parts"][name] = entry
        report["wall_s"] = round(time.perf_counter() - t_all, 1)
        report["summary"] = summarise(report)
        write_report(out, report)
        say(f"gpu_check: {name}: {entry['status']} in {entry['wall_s']:.1f} s (budget {budget:.0f} s)")
    report["finished"] = True
    write_report(out, report)
    failed = [n for n, e in report["parts"].items() if e["status"] not in ("ok", "skipped")]
    say(f"gpu_check: report in {out}/gpu_check.md ({report['wall_s']:.0f} s); "
        f"{'not ok: ' + ', '.join(failed) if failed else 'all parts ok'}")
    return 0


def run_group(cmd, timeout: float, log: Path, **kwargs) -> tuple[int | None, str]:
    """Run `cmd` in its own process group, its output written straight to `log` as it comes (a
    cut-short run keeps what it printed); on timeout kill the whole group (a part's `resrl train`,
    its reward workers), so that nothing cut short keeps the GPU busy. (returncode | None, output)."""
    import signal

    with open(log, "ab") as f:
        proc = subprocess.Popen(cmd, start_new_session=True, stdout=f, stderr=subprocess.STDOUT, **kwargs)
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            rc = None
    return rc, log.read_text(errors="replace")


def run_subprocess_part(args, name: str, work: Path, budget: float, log: Path) -> dict:
    result_file = work / "parts" / f"{name}.json"
    result_file.unlink(missing_ok=True)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--part", name, "--work", str(work),
           "--device", args.device, "--max-new-tokens", str(args.max_new_tokens), "--budget", str(budget),
           "--out-dir", str(log.parent.parent)]
    if args.tiny:
        cmd.append("--tiny")
    if args.plant:
        cmd += ["--plant", args.plant]
    t0 = time.perf_counter()
    log.unlink(missing_ok=True)
    rc, _ = run_group(cmd, budget + 5, log, cwd=ROOT)
    status = "timeout" if rc is None else None
    wall = time.perf_counter() - t0
    entry = {"budget_s": round(budget), "wall_s": round(wall, 1)}
    if result_file.is_file():
        entry.update(json.loads(result_file.read_text()))
    entry.setdefault("status", status or ("ok" if rc == 0 else "error"))
    if status == "timeout":
        entry["status"] = "timeout"
    if entry["status"] not in ("ok", "skipped"):
        entry["log_tail"] = log.read_text(errors="replace")[-3000:]
    return entry


# ==== the parts (each in its own process) ==========================================================

def run_part(args) -> int:
    work = Path(args.work)
    res: dict = {}
    try:
        if args.plant == args.part:
            raise RuntimeError(f"planted break in part {args.part!r} (--plant)")
        if args.plant == f"hang:{args.part}":  # a part that never ends: its budget must cut it
            time.sleep(3600)
        fn = PARTS["train" if args.part in TRAIN_RUNS else args.part]
        res = fn(args, work, profile(args)) or {}
        res.setdefault("status", "ok")
    except Exception as exc:  # noqa: BLE001 - reported, never lost
        import traceback

        res = {**res, "status": "error", "error": f"{type(exc).__name__}: {exc}",
               "traceback": traceback.format_exc()[-3000:]}
    (work / "parts" / f"{args.part}.json").write_text(json.dumps(res, indent=1, default=str))
    return 0 if res["status"] in ("ok", "skipped") else 1


def _device(args):
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("--device cuda but torch.cuda.is_available() is False (use --device cpu --tiny on CPU)")
    return torch.device(args.device)


def part_env(args, work, prof) -> dict:
    import importlib.metadata as md

    import torch

    versions = {}
    for dist in ("torch", "transformers", "accelerate", "peft", "trl", "datasets", "numpy", "pyarrow",
                 "math-verify", "vllm", "deepspeed", "flash-attn", "resrl"):
        try:
            versions[dist] = md.version(dist)
        except md.PackageNotFoundError:
            versions[dist] = None
    res = {"python": platform.python_version(), "platform": platform.platform(), "versions": versions,
           "cpu_count": os.cpu_count(), "torch_cuda": torch.version.cuda, "cuda_available": torch.cuda.is_available()}
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        res.update(gpu=p.name, gpu_memory_gib=round(p.total_memory / 1024 ** 3, 1), gpu_count=torch.cuda.device_count(),
                   capability=f"{p.major}.{p.minor}", bf16_supported=torch.cuda.is_bf16_supported())
    import resrl  # the project imports without torch at import time; the engine needs TRL

    res["resrl_path"] = str(Path(resrl.__file__).parent)
    import resrl.engines.trl.trainer  # noqa: F401 - TRL and the engine import (fails here if a wheel is missing)
    return res


def _build_tokenizer(vocab_size: int | None):
    """The project's character tokenizer (ChatML template), padded with filler tokens to `vocab_size`
    so that a random model's samples of any id decode (a real-size output head, offline)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from resrl.models.tiny import CHAT_TEMPLATE, DEFAULT_ALPHABET, EOS, IM_END, IM_START, PAD, SPECIAL_TOKENS, UNK

    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS)}
    for ch in DEFAULT_ALPHABET:
        vocab.setdefault(ch, len(vocab))
    base = len(vocab)
    for i in range(base, vocab_size or base):
        vocab[f"<t{i}>"] = i
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tok.decoder = decoders.Fuse()
    tok.add_special_tokens(SPECIAL_TOKENS)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token=PAD, eos_token=IM_END, unk_token=UNK,
                                   additional_special_tokens=[IM_START, EOS], padding_side="left")
    fast.chat_template = CHAT_TEMPLATE
    return fast


def part_model(args, work, prof) -> dict:
    import torch

    model_dir = work / "model"
    if args.tiny:
        from resrl.models.tiny import build_tiny_model

        model, tok = build_tiny_model(model_dir)
        n = sum(p.numel() for p in model.parameters())
        return {"model": "tiny Qwen3 (resrl make-tiny-model)", "parameters": n, "dtype": "float32",
                "path": str(model_dir)}
    from transformers import AutoModelForCausalLM, Qwen3Config

    tok = _build_tokenizer(QWEN3_06B["vocab_size"])
    cfg = Qwen3Config(**{k: v for k, v in QWEN3_06B.items() if k not in ("architectures", "model_type")},
                      pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, bos_token_id=None)
    t0 = time.perf_counter()
    torch.manual_seed(0)
    with torch.device(_device(args)):
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
    model.generation_config.pad_token_id = tok.pad_token_id
    model.generation_config.eos_token_id = tok.eos_token_id
    model.save_pretrained(model_dir)
    tok.save_pretrained(model_dir)
    n = sum(p.numel() for p in model.parameters())
    return {"model": "Qwen3-0.6B-shaped, random weights", "config": QWEN3_06B, "parameters": n, "dtype": "bfloat16",
            "path": str(model_dir), "build_and_save_s": round(time.perf_counter() - t0, 1)}


REWARD_PY = '''"""gpu_check's reward: a hash of the completion, 1 for about half of them, so that every group
has positives and negatives (a random-weight model solves nothing) and ResRL computes its weights."""
import hashlib


def score(completions, answers):  # resrl's convention, positional (a **kwargs would make it TRL's)
    out = []
    for c in completions:
        text = c if isinstance(c, str) else str(c)
        out.append(float(hashlib.md5(text.encode()).digest()[0] & 1))
    return out
'''


def training_generation(work: Path, which: str) -> tuple[dict, str]:
    """(the `generation:` section, where it came from) of a training part: TRL's call for "hf", else the
    generation part's fastest path that the trainer can run (TRL's call when that part has no answer)."""
    if which == "hf":
        return {"backend": "hf", "shared_prefill": False, "reuse_frozen": False}, "HF generate (TRL's call)"
    found = work / "parts" / "generation.json"
    choice = json.loads(found.read_text()).get("fastest_for_training") if found.is_file() else None
    if not choice:
        return ({"backend": "hf", "shared_prefill": False, "reuse_frozen": False},
                "HF generate: the generation part measured no faster path")
    return {**TRAINER_PATHS[choice["path"]]}, f"{choice['path']} (the generation part's fastest, " \
                                              f"{choice['x_hf']:.2f}× HF generate)"


def train_config(args, work: Path, prof: dict, algo: str, mode: str, out_dir: Path, steps: int,
                 generation: dict) -> Path:
    import yaml

    (work / "reward.py").write_text(REWARD_PY)
    cfg = {
        "model": {"path": str(work / "model"), "dtype": "float32" if args.tiny else "bfloat16",
                  "gradient_checkpointing": False},
        "data": {"train": "gsm8k", "max_problems": 64},
        "reward": {"function": f"{work / 'reward.py'}:score", "num_workers": 1},
        "algorithm": {"name": algo},
        "train": {"output_dir": str(out_dir), "seed": 0, "max_steps": steps, "learning_rate": 1.0e-6,
                  "rollout_prompts": prof["rollout_prompts"], "group_size": prof["group_size"],
                  "micro_batch_size": prof["micro_batch"], "max_prompt_length": prof["max_prompt_length"],
                  "max_completion_length": prof["max_new_tokens"], "temperature": 1.0,
                  "bf16": not args.tiny, "use_cpu": args.device == "cpu"},
        "engine": {"resrl_mode": mode},
        "generation": generation,
        "log": {"logging_steps": 1, "report_to": ["none"], "phase_times": True,
                # on the GPU the progress line is how a cut-short run shows how far it got (cli_tail)
                "progress": not args.tiny},
        "checkpoint": {"save_steps": steps, "save_total_limit": 1},
    }
    path = out_dir.parent / f"{out_dir.name}.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def part_train(args, work, prof) -> dict:
    import shutil

    algo, mode, which, n_steps = TRAIN_RUNS[args.part]
    out_dir = work / "runs" / args.part
    shutil.rmtree(out_dir, ignore_errors=True)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    generation, generation_from = training_generation(work, which)
    cfg_path = train_config(args, work, prof, algo, mode, out_dir, n_steps, generation)
    cmd = [sys.executable, "-m", "resrl", "train", "--config", str(cfg_path)]
    res = {"algorithm": algo, "resrl_mode": mode, "command": " ".join(cmd), "steps_asked": n_steps,
           "generation": generation, "generation_from": generation_from,
           "rows_per_step": prof["rollout_prompts"] * prof["group_size"], "group_size": prof["group_size"],
           "max_new_tokens": prof["max_new_tokens"]}
    t0 = time.perf_counter()
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
    # what the CLI leaves of the budget goes to the checkpoint reload (a few seconds)
    logs = Path(args.out_dir) / "logs" if args.out_dir else work / "parts"
    log = logs / f"{args.part}-cli.log"
    log.unlink(missing_ok=True)
    rc, output = run_group(cmd, max(10.0, args.budget - 10), log, env=env)
    res["cli_rc"], res["cli_tail"] = rc, output[-2000:]
    status = "timeout" if rc is None else "ok" if rc == 0 else "error"
    res["cli_wall_s"] = round(time.perf_counter() - t0, 1)
    steps = [json.loads(line) for line in (out_dir / "metrics.jsonl").read_text().splitlines()
             if line.strip()] if (out_dir / "metrics.jsonl").is_file() else []
    res["steps"] = steps
    res["steps_done"] = len(steps)
    res["loss_finite"] = bool(steps) and all(math.isfinite(float(s.get("loss", float("nan")))) for s in steps)
    res["phases"] = phase_summary(steps)
    # a run whose reward failed trains nothing and would still finish: every score 0, loss 0
    from resrl.engines.trl.rewards import FAULT_KINDS  # logged per step as reward/<kind>

    res["reward_faults"] = {k: sum(int(st.get(f"reward/{k}", 0)) for st in steps) for k in FAULT_KINDS}
    res["rewards_mixed"] = any(float(st.get("reward_std", 0.0)) > 0 for st in steps)
    res["memory_note"] = None if args.device == "cuda" else "unavailable on CPU (peak memory is CUDA's allocator)"
    if status == "ok":
        res["checkpoint"] = check_checkpoint(out_dir, n_steps, args)
        if not res["checkpoint"]["ok"]:
            status = "error"
            res["error"] = f"the checkpoint of step {n_steps} is incomplete or did not reload: {res['checkpoint']}"
        if not res["loss_finite"]:
            status = "error"
        if any(res["reward_faults"].values()) or not res["rewards_mixed"]:
            status = "error"
            res["error"] = (f"the reward failed ({res['reward_faults']}) or never told completions apart "
                            f"(reward_std 0 in every step): the run trained nothing")
    res["status"] = status
    return res


def part_generation(args, work, prof) -> dict:
    """benchmarks/bench_generation.py at the check's shape, within this part's budget: its table and
    JSON straight into OUT (generation.md, generation.json), each path's tokens/s and ratio to HF
    generate, and the fastest path the trainer can run (what the "fastest" training parts use)."""
    g = prof["generation"]
    out = Path(args.out_dir) if args.out_dir else work
    cmd = [sys.executable, str(ROOT / "benchmarks" / "bench_generation.py"), "--device", args.device,
           "--shape", g["shape"], "--rows", str(g["rows"]), "--paths", g["paths"], "--repeats", "1",
           "--compile-backend", g["compile_backend"], "--budget", str(max(10.0, args.budget - 15)),
           "--json", str(out / "generation.json"), "--out-md", str(out / "generation.md")]
    if not args.tiny:
        cmd += ["--tokens", str(args.max_new_tokens)]
    log = (out / "logs" if args.out_dir else work / "parts") / "generation-bench.log"
    log.unlink(missing_ok=True)
    rc, output = run_group(cmd, max(10.0, args.budget - 5), log, cwd=ROOT)
    res = {"command": " ".join(cmd), "bench_rc": rc, "bench_tail": output[-1500:]}
    found = out / "generation.json"
    if not found.is_file():
        res.update(status="timeout" if rc is None else "error",
                   error=f"bench_generation.py wrote no results (rc {rc}); see logs/generation-bench.log")
        return res
    bench = json.loads(found.read_text())
    rows = [r for r in bench["results"] if r.get("rows") == g["rows"]]
    res["header"], res["table"] = bench["header"], bench["table"]
    res["paths"] = {r["path"]: {k: r.get(k) for k in ("status", "note", "first_s", "call_s", "tokens_s", "x_hf",
                                                       "decode_ms", "floor_ms", "x_floor", "peak_mib", "prefill_s")}
                    for r in rows}
    usable = [r for r in rows if r.get("status") == "ok" and r["path"] in g["train_candidates"] and r.get("x_hf")]
    best = max(usable, key=lambda r: r["tokens_s"], default=None)
    res["fastest_for_training"] = None if best is None else {"path": best["path"], "x_hf": best["x_hf"],
                                                             "tokens_s": best["tokens_s"]}
    measured = [r for r in rows if r.get("status") == "ok"]
    res["fastest_measured"] = max(measured, key=lambda r: r["tokens_s"])["path"] if measured else None
    (work / "parts" / "generation.json").write_text(json.dumps(res, default=str))  # read by the training parts
    res["status"] = "ok" if rc == 0 and any(r["path"] == "hf" and r.get("status") == "ok" for r in rows) else "error"
    if res["status"] != "ok":
        res["error"] = "HF generate (the baseline) did not finish: no ratio" if rc == 0 else f"bench rc {rc}"
    return res


def phase_summary(steps: list[dict]) -> dict:
    """Mean per phase over the steps after the first (warm-up; all steps if only one)."""
    use = steps[1:] if len(steps) > 1 else steps
    out = {"steps_averaged": [s.get("step") for s in use]}
    for name in ("step", *PHASES):
        vals = [s[f"time/{name}_s"] for s in use if f"time/{name}_s" in s]
        out[f"{name}_s"] = sum(vals) / len(vals) if vals else None
    for name in ("step", *PHASES[:-1]):
        vals = [s[f"memory/{name}_peak_gib"] for s in steps if f"memory/{name}_peak_gib" in s]
        out[f"{name}_peak_gib"] = max(vals) if vals else None
    out["weights_share_of_step"] = (out["weights_s"] / out["step_s"]
                                    if out["weights_s"] is not None and out["step_s"] else None)
    return out


def check_checkpoint(out_dir: Path, steps: int, args) -> dict:
    """The checkpoint directory is complete and the saved model reloads and runs a finite forward."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    ckpts = sorted(out_dir.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))
    res = {"checkpoints": [p.name for p in ckpts]}
    state = ckpts[-1] / "trainer_state.json" if ckpts else None
    res["global_step"] = json.loads(state.read_text())["global_step"] if state and state.is_file() else None
    model_dir = ckpts[-1] if ckpts else out_dir / "model"  # the checkpoint itself (the final model: same weights)
    res["reloaded_from"] = model_dir.name
    t0 = time.perf_counter()
    optim = model_dir / "optimizer.pt"
    if optim.is_file():  # the optimiser state a --resume would load
        state = torch.load(optim, map_location="cpu", weights_only=True)
        res["optimizer_state_params"] = len(state.get("state", {}))
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16 if not args.tiny else torch.float32)
    model.to(args.device)
    tok = AutoTokenizer.from_pretrained(model_dir)
    ids = tok("1 + 1 =", return_tensors="pt").input_ids.to(args.device)
    with torch.no_grad():
        logits = model(ids).logits
    res["reload_s"] = round(time.perf_counter() - t0, 1)
    res["reloaded_forward_finite"] = bool(torch.isfinite(logits.float()).all())
    res["ok"] = (res["global_step"] == steps and res["reloaded_forward_finite"]
                 and res.get("optimizer_state_params", 0) > 0)
    return res


def _sync(device):
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize()


def make_states(B, T, d, group_size, device, dtype, seed=0):
    """bench_weights' inputs (decaying spectrum, variable lengths), built on `device` in row chunks
    (a (B, T, d) float32 tensor at B = 1024, T = 4096, d = 2560 would be 43 GB)."""
    import torch

    from resrl.core import grpo_advantages

    g = torch.Generator(device=device).manual_seed(seed)
    n_basis = min(d, 256)
    basis = torch.randn(n_basis, d, generator=g, device=device) / d ** 0.5
    scales = 20.0 / (1.0 + torch.arange(n_basis, dtype=torch.float32, device=device))
    hidden = torch.empty(B, T, d, dtype=dtype, device=device)
    chunk = max(1, (1 << 28) // (T * d))
    for i in range(0, B, chunk):
        n = min(chunk, B - i)
        h = (torch.randn(n, T, n_basis, generator=g, device=device) * scales) @ basis * d ** 0.5
        hidden[i:i + n] = (h + 0.2 * torch.randn(n, T, d, generator=g, device=device)).to(dtype)
        del h
    lengths = torch.randint(T // 4, T + 1, (B,), generator=g, device=device)
    mask = torch.arange(T, device=device)[None, :] < lengths[:, None]
    rewards = (torch.rand(B, generator=g, device=device) < 0.5).float()
    rewards[::group_size] = 1.0
    rewards[1::group_size] = 0.0
    group_index = torch.arange(B // group_size, device=device).repeat_interleave(group_size)
    return hidden, mask, grpo_advantages(rewards, group_index), group_index


def part_bench_weights(args, work, prof) -> dict:
    import torch

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_weights import authors_weights

    from resrl.core import ResRLConfig, resrl_token_advantages

    device = _device(args)
    b = prof["bench"]
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    res = {"d": b["d"], "T": b["T"], "group_size": b["group_size"], "states_dtype": str(dtype).replace("torch.", ""),
           "device": str(device), "timing": "one run per shape, after a warm-up on the first", "shapes": []}
    deadline = time.perf_counter() + args.budget - 5
    for rows in b["rows"]:
        entry = {"rows": rows}
        res["shapes"].append(entry)
        try:
            inputs = make_states(rows, b["T"], b["d"], b["group_size"], device, dtype)
            entry["response_tokens"] = int(inputs[1].sum())
            for name, fn in (("resrl", lambda: resrl_token_advantages(*inputs, ResRLConfig())),
                             ("authors_loop", lambda: authors_weights(*inputs))):
                if time.perf_counter() > deadline:
                    entry[f"{name}_s"] = None
                    entry[f"{name}_note"] = "skipped: the part's time budget ran out"
                    continue
                if device.type == "cuda":
                    torch.cuda.reset_peak_memory_stats()
                    base = torch.cuda.memory_allocated()
                if rows == b["rows"][0]:
                    fn()  # warm-up (kernels, allocator) on the first shape only
                _sync(device)
                t0 = time.perf_counter()
                fn()
                _sync(device)
                entry[f"{name}_s"] = time.perf_counter() - t0
                if device.type == "cuda":
                    entry[f"{name}_peak_gib_above_inputs"] = (torch.cuda.max_memory_allocated() - base) / 1024 ** 3
            if entry.get("resrl_s") and entry.get("authors_loop_s"):
                entry["speedup_vs_authors"] = entry["authors_loop_s"] / entry["resrl_s"]
            entry["share_of_step"] = share_of_step(entry, device)
            del inputs
        except torch.OutOfMemoryError as exc:
            entry["error"] = f"out of memory: {str(exc)[:300]}"
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return res


def share_of_step(entry: dict, device) -> dict | None:
    """The weights' share of a step of the paper's model (Qwen3-4B, 4.0e9 parameters) on the same
    tokens: a training step costs at least the update's 6·N·tokens FLOPs (forward + backward, no
    generation), here at an assumed 40 % of the GPU's dense bf16 peak — an estimate (generation
    excluded, so the real share is smaller), labelled as such in the report."""
    import torch

    if device.type != "cuda" or not entry.get("resrl_s"):
        return None
    name = torch.cuda.get_device_properties(0).name
    peak = 989e12 if ("H100" in name or "H200" in name) else None  # dense bf16 FLOP/s (SXM)
    if peak is None:
        return {"note": f"no bf16 peak known for {name}"}
    update_s = 6 * 4.0e9 * entry["response_tokens"] / (0.4 * peak)
    return {"estimated_update_s": update_s, "share": entry["resrl_s"] / (update_s + entry["resrl_s"]),
            "assumptions": "Qwen3-4B, 6·N·tokens FLOPs at 40 % of 989 TFLOP/s, generation excluded"}


def spearman(a, b) -> float:
    import torch

    def ranks(x):  # average ranks: ties (ω clamped at its bounds) share one rank
        _, inverse, counts = torch.unique(x, return_inverse=True, return_counts=True)
        ends = counts.cumsum(0).double()
        return (ends - (counts.double() - 1) / 2)[inverse]

    ra, rb = ranks(a.double()), ranks(b.double())
    ra, rb = ra - ra.mean(), rb - rb.mean()
    return max(-1.0, min(1.0, float((ra * rb).sum() / (ra.norm() * rb.norm()).clamp(min=1e-12))))


def part_numerics(args, work, prof) -> dict:
    """ResRL's ω from the penultimate-layer states of a bf16 forward vs a float32 forward of the same
    model on the same recorded batch (token ids, masks, rewards), float32 with TF32 off."""
    import torch
    from transformers import AutoModelForCausalLM

    from resrl.core import ResRLConfig, grpo_advantages, resrl_token_advantages

    device = _device(args)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    n = prof["numerics"]
    B, T = n["groups"] * n["group_size"], n["T"]
    model32 = AutoModelForCausalLM.from_pretrained(work / "model", dtype=torch.float32).to(device).eval()
    V = model32.config.vocab_size
    g = torch.Generator().manual_seed(0)
    P = 16
    ids = torch.randint(10, min(V, 100), (B, P + T), generator=g)  # the recorded batch
    lengths = torch.randint(T // 4, T + 1, (B,), generator=g)
    mask = torch.arange(T)[None, :] < lengths[:, None]
    attn = torch.cat([torch.ones(B, P, dtype=torch.long), mask.long()], 1)
    rewards = (torch.rand(B, generator=g) < 0.5).float()
    rewards[::n["group_size"]], rewards[1::n["group_size"]] = 1.0, 0.0
    gidx = torch.arange(n["groups"]).repeat_interleave(n["group_size"])
    adv = grpo_advantages(rewards, gidx)
    batch = {"input_ids": ids, "attention_mask": attn, "response_mask": mask, "rewards": rewards}
    torch.save(batch, work / "numerics_batch.pt")

    def omega(model) -> "torch.Tensor":
        states = []
        with torch.no_grad():
            for i in range(0, B, 4):
                o = model(ids[i:i + 4].to(device), attention_mask=attn[i:i + 4].to(device), output_hidden_states=True)
                # the state at position t-1 predicts response token t ("predicting" alignment)
                states.append(o.hidden_states[-2][:, P - 1:P - 1 + T].float().cpu())
        h = torch.cat(states)
        tok_adv, _ = resrl_token_advantages(h, mask, adv, gidx, ResRLConfig())
        neg = (adv < 0)[:, None] & mask
        return (tok_adv / adv[:, None].where(adv[:, None] != 0, torch.ones(()))) [neg]

    w32 = omega(model32)
    del model32
    model16 = AutoModelForCausalLM.from_pretrained(work / "model", dtype=torch.bfloat16).to(device).eval()
    w16 = omega(model16)
    diff = (w16 - w32).abs()
    return {"rows": B, "T": T, "negative_tokens": int(w32.numel()), "device": str(device),
            "reference": "float32 forward on the same device, TF32 off",
            "max_abs_delta_omega": float(diff.max()), "mean_abs_delta_omega": float(diff.mean()),
            "spearman_omega": spearman(w16, w32), "omega32_range": [float(w32.min()), float(w32.max())],
            "finite": bool(torch.isfinite(w16).all() and torch.isfinite(w32).all())}


def part_matrix(args, work, prof) -> dict:
    """The conformance matrix's sliding-window and mixed-layer families (resrl.models.conformance.run_matrix)
    on this device in the profile's dtype: each cell's value against the profile's tolerance. Rows are
    written to the part's result file as they come, so a part cut short by its budget keeps them."""
    import torch

    from resrl.models import conformance

    m = prof["matrix"]
    device = _device(args)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False  # the float32 reference stays float32
    rows: list[dict] = []
    partial = work / "parts" / "matrix.json"
    settings = {k: (list(v) if isinstance(v, tuple) else v) for k, v in m.items()}

    def keep(row):
        rows.append(row)
        partial.write_text(json.dumps({"status": "timeout", "settings": settings, "rows": rows}, default=str))

    deadline = time.monotonic() + max(5.0, args.budget - 15)
    conformance.run_matrix(m["families"], m["paths"], device=device, dtype=getattr(torch, m["dtype"]),
                           compile_backend=m["compile_backend"], deadline=deadline, on_result=keep)
    return {"settings": settings, "rows": rows, **matrix_verdict(rows, m)}


def matrix_verdict(rows: list[dict], m: dict) -> dict:
    """Each row judged: log-probs within logprob_tol (nats) inside the reference's support with at most
    outside_tol tokens outside it, one compiled graph, the shortcut's gradient within grad_tol;
    {"failed": [...], "skipped": n, "cells": n, "status", "error"}."""
    failed, skipped = [], 0
    for r in rows:
        if r.get("skipped"):
            skipped += 1
            continue
        tol = {"logprobs": m["logprob_tol"], "shortcut_gradient": m["grad_tol"]}.get(r["check"])
        value = r.get("value")
        ok = "error" not in r and value is not None and (
            value == 1 if r["check"] == "compiled_graphs" else math.isfinite(value) and value <= tol
            and r.get("outside", 0) <= m["outside_tol"])
        r["ok"] = ok
        if not ok:
            failed.append({k: r.get(k) for k in ("family", "check", "path", "option", "sampling", "value", "outside",
                                                  "error")})
    res = {"failed": failed, "skipped": skipped, "cells": len(rows)}
    if failed:
        res.update(status="error", error=f"{len(failed)} of {len(rows)} matrix cells not exact: {failed[0]}")
    else:
        res["status"] = "ok"
    return res


def part_engines(args, work, prof) -> dict:
    import importlib.util

    import torch

    res = {}
    for name, mod, why in (
            ("vLLM rollouts", "vllm", "vLLM is not installed on this machine (its wheels are hundreds of MB and pin "
                                      "one torch); the generation part measured the other paths"),
            ("DeepSpeed ZeRO", "deepspeed", "DeepSpeed is not installed on this machine; its configs "
                                            "(configs/accelerate/deepspeed_zero*.yaml) need it and several GPUs")):
        found = importlib.util.find_spec(mod) is not None
        res[name] = {"ran": False, "installed": found,
                     "why": why if not found else "installed, but not exercised by this check (one GPU, one call)"}
    res["FSDP2"] = {"ran": False, "installed": True,
                    "why": f"torch ships FSDP, but configs/accelerate/fsdp2.yaml shards over several processes and "
                           f"this machine has {torch.cuda.device_count()} GPU(s); not exercised by this check"}
    res["multi-GPU / several processes"] = {"ran": False, "why": "the check runs one process on one GPU"}
    return res


PARTS = {"env": part_env, "model": part_model, "generation": part_generation, "train": part_train,
         "bench-weights": part_bench_weights, "numerics": part_numerics, "matrix": part_matrix, "engines": part_engines}


# ==== the report ===================================================================================

def summarise(report: dict) -> dict:
    parts = report["parts"]
    grpo = (parts.get("train-grpo") or {}).get("phases") or {}
    ratios = {}
    for run in ("train-resrl-aligned", "train-resrl-extra-pass"):
        ph = (parts.get(run) or {}).get("phases") or {}
        r = {}
        for key in ("step_s", "step_peak_gib"):
            a, b = ph.get(key), grpo.get(key)
            r[key] = a / b if a and b else None
        ratios[run.removeprefix("train-")] = r
    # the step split before (HF generate, TRL's call) and after (the fastest path), GRPO
    hf = (parts.get("train-grpo-hf") or {}).get("phases") or {}
    speedup = {}
    for key in ("step_s", "generation_s", "forward_backward_s"):
        a, b = hf.get(key), grpo.get(key)
        speedup[key] = a / b if a and b else None
    gen = parts.get("generation") or {}
    return {"status": {n: e["status"] for n, e in parts.items()}, "resrl_over_grpo": ratios,
            "grpo_hf_over_fastest": speedup, "generation_fastest": gen.get("fastest_measured"),
            "generation_for_training": gen.get("fastest_for_training")}


def _f(x, nd=3) -> str:
    if x is None:
        return "—"
    if isinstance(x, float):
        return f"{x:.{nd}f}" if abs(x) >= 10 ** -nd or x == 0 else f"{x:.2e}"
    return str(x)


def write_report(out: Path, report: dict) -> None:
    (out / "gpu_check.json").write_text(json.dumps(report, indent=1, default=str))
    parts, lines = report["parts"], []
    env = (parts.get("env") or {})
    lines += ["# resrl GPU check", "",
              f"Started {report['started']}; {'finished' if report.get('finished') else 'IN PROGRESS / cut'} after "
              f"{report.get('wall_s', 0):.0f} s. Device requested: `{report['device_requested']}`"
              f"{' (tiny CPU rehearsal)' if report['tiny'] else ''}.", "",
              f"Command: `{report['command']}`", ""]
    if env.get("status") == "ok":
        v = env.get("versions", {})
        lines += [f"Machine: {env.get('gpu', 'no GPU')} ({env.get('gpu_memory_gib', '—')} GiB), "
                  f"{env.get('cpu_count')} CPUs, Python {env.get('python')}, torch {v.get('torch')} "
                  f"(CUDA {env.get('torch_cuda')}), transformers {v.get('transformers')}, trl {v.get('trl')}, "
                  f"accelerate {v.get('accelerate')}, peft {v.get('peft')}.", ""]
    if report.get("install"):
        lines += ["Install (`scripts/gpu-check.sh`; pip's output in install.log):", "",
                  *[f"- {line}" for line in report["install"]], ""]
    lines += ["## Parts", "", "| part | status | wall s | budget s | note |", "|---|---|---|---|---|"]
    for name, e in parts.items():
        lines.append(f"| {name} | {e['status']} | {e['wall_s']:.1f} | {e['budget_s']} | "
                     f"{(e.get('error') or '').replace('|', '/')[:160]} |")
    ge = parts.get("generation")
    if ge:
        lines += ["", "## Generation (`benchmarks/bench_generation.py`)", ""]
        if ge.get("table"):
            lines += [ge.get("header", ""), "", ge["table"], ""]
            best = ge.get("fastest_for_training")
            lines.append(f"Fastest measured: {ge.get('fastest_measured')}; the training parts below ran with "
                         + (f"**{best['path']}** ({best['x_hf']:.2f}× HF generate)" if best else
                            "HF generate (no faster path the trainer runs was measured)") + ".")
        else:
            lines.append(f"not measured: {ge.get('error') or ge['status']}")
    lines += ["", "## Training (`resrl train`, log.phase_times)", ""]
    runs = [n for n in TRAIN_RUNS if n in parts]
    if runs:
        p0 = parts[runs[0]]
        lines += [f"{p0.get('rows_per_step')} rows per step (G = {p0.get('group_size')}), at most "
                  f"{p0.get('max_new_tokens')} new tokens; grpo-hf: HF generate (TRL's call), the others: the "
                  "generation path named; mean per step over steps ≥ 2 (seconds; peak memory in GiB, the maximum "
                  "over steps).", "",
                  "| run | generation | status | steps | loss finite | checkpoint | step s | generation s | "
                  "old log-probs s | weights s | fwd-bwd s | other s | step peak GiB | gen peak | old-lp peak | "
                  "weights peak | fwd-bwd peak |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for n in runs:
            e, ph = parts[n], parts[n].get("phases") or {}
            ck = e.get("checkpoint") or {}
            gen_cfg = e.get("generation") or {}
            gen_label = gen_cfg.get("backend", "—") + ("+shared" if gen_cfg.get("shared_prefill") else "")
            lines.append(f"| {n.removeprefix('train-')} | {gen_label} | {e['status']} | {e.get('steps_done', 0)} | "
                         f"{e.get('loss_finite')} | {'saved+reloaded' if ck.get('ok') else '—'} | "
                         + " | ".join(_f(ph.get(f"{k}_s")) for k in ("step", *PHASES)) + " | "
                         + " | ".join(_f(ph.get(f"{k}_peak_gib"), 2)
                                      for k in ("step", "generation", "old_logps", "weights", "forward_backward")) + " |")
        note = next((parts[n].get("memory_note") for n in runs if parts[n].get("memory_note")), None)
        if note:
            lines += ["", f"Peak memory: {note}."]
        sp = report.get("summary", {}).get("grpo_hf_over_fastest", {})
        if sp.get("step_s"):
            lines += ["", f"GRPO, HF generate ÷ the fastest path: step {_f(sp['step_s'], 2)}×, generation "
                          f"{_f(sp.get('generation_s'), 2)}×, forward-backward {_f(sp.get('forward_backward_s'), 2)}× "
                          "(higher: the fastest path saves more)."]
        r = report.get("summary", {}).get("resrl_over_grpo", {})
        lines += ["", "ResRL ÷ GRPO (both with the fastest path): " + "; ".join(
            f"{k}: step time {_f(v.get('step_s'), 2)}×, peak memory {_f(v.get('step_peak_gib'), 2)}×"
            for k, v in r.items()) + ".", "",
            "Weights' share of the step (weights s ÷ step s): " + "; ".join(
                f"{n.removeprefix('train-')} {_f((parts[n].get('phases') or {}).get('weights_share_of_step'), 4)}"
                for n in runs) + "."]
    bw = parts.get("bench-weights")
    if bw:
        lines += ["", "## ResRL's weights at the paper's sizes (`benchmarks/bench_weights.py`'s inputs and loop)", "",
                  f"d = {bw.get('d')}, T = {bw.get('T')}, G = {bw.get('group_size')}, states {bw.get('states_dtype')} "
                  f"on {bw.get('device')}; one timed run per shape (warm-up on the first shape).", "",
                  "| rows | response tokens | resrl s | authors' loop s | speed-up | resrl peak GiB | "
                  "est. share of a Qwen3-4B update | note |", "|---|---|---|---|---|---|---|---|"]
        for s in bw.get("shapes", []):
            sh = s.get("share_of_step") or {}
            lines.append(f"| {s['rows']} | {s.get('response_tokens', '—')} | {_f(s.get('resrl_s'))} | "
                         f"{_f(s.get('authors_loop_s'))} | {_f(s.get('speedup_vs_authors'), 1)} | "
                         f"{_f(s.get('resrl_peak_gib_above_inputs'), 2)} | {_f(sh.get('share'), 4)} | "
                         f"{s.get('error') or s.get('authors_loop_note') or ''} |")
        lines += ["", "Share of a step: an estimate (6·N·tokens FLOPs of Qwen3-4B at 40 % of the bf16 peak, "
                  "generation excluded, so the real share is smaller); the measured share is the training table's "
                  "weights ÷ step."]
    nu = parts.get("numerics")
    if nu:
        lines += ["", "## Numerics: ω from a bf16 forward vs float32", ""]
        if nu.get("status") == "ok":
            lines += [f"{nu['rows']} rows × {nu['T']} tokens, {nu['negative_tokens']} negative tokens, reference: "
                      f"{nu['reference']}: max |Δω| = {_f(nu['max_abs_delta_omega'], 4)}, mean |Δω| = "
                      f"{_f(nu['mean_abs_delta_omega'], 4)}, Spearman ρ(ω_bf16, ω_fp32) = {_f(nu['spearman_omega'], 4)}."]
        else:
            lines.append(f"not measured: {nu.get('error') or nu['status']}")
    ma = parts.get("matrix")
    if ma:
        lines += ["", "## Conformance matrix (`resrl.models.conformance`, tests/test_decoder_matrix.py)", ""]
        st = ma.get("settings") or {}
        lines += [f"{st.get('dtype')} on `{report['device_requested']}`, compile backend {st.get('compile_backend')}; "
                  f"log-probs: max |recorded − float32 per-row forward| inside its top-k/top-p support (nats, "
                  f"tolerance {st.get('logprob_tol')}) and the sampled tokens outside it (at most "
                  f"{st.get('outside_tol')}); "
                  f"shortcut: gradient rel. difference (tolerance {st.get('grad_tol')}); compiled graphs for one "
                  f"call (1: no recompiles). {ma.get('cells', 0)} cells, {ma.get('skipped', 0)} skipped for time.", "",
                  "| family | check | path / option | sampling | value | outside | s | ok |",
                  "|---|---|---|---|---|---|---|---|"]
        for r in ma.get("rows") or []:
            lines.append(f"| {r.get('family')} | {r.get('check')} | {r.get('path') or r.get('option') or ''} | "
                         f"{r.get('sampling') or ''} | {_f(r.get('value'), 4) if 'value' in r else ''} | "
                         f"{r.get('outside', '')} | {r.get('seconds', '')} | "
                         f"{r.get('skipped') or r.get('error', '')[:80] or ('yes' if r.get('ok') else 'NO')} |")
    en = parts.get("engines")
    lines += ["", "## What did not run, and why", ""]
    for name, e in parts.items():
        if e["status"] not in ("ok", "skipped"):
            lines.append(f"- part `{name}`: {e['status']} — {e.get('error') or 'see gpu_check.json (log_tail)'}")
    if en and en.get("status") == "ok":
        for name, e in en.items():
            if isinstance(e, dict) and not e.get("ran", True):
                lines.append(f"- {name}: {e['why']}")
    (out / "gpu_check.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())
