"""Time per training step on the tiny model: ResRL vs GRPO in the same trainer (aligned and
extra-pass modes), and the project's GRPO vs plain TRL `GRPOTrainer` on the same settings.

    python benchmarks/bench_step.py              # default: 8 prompts x G=4, 48 new tokens
    python benchmarks/bench_step.py --steps 6 --repeats 3 --tokens 64

Generation length is fixed (min_new_tokens = max_new_tokens) so every variant processes the
same number of tokens. Reported per variant: median seconds per optimiser step (whole step:
generation + scoring + weights + forward/backward), and the same without generation (`train`),
which is where the variants differ. Numbers are the best median over `--repeats` interleaved
repeats; on a shared machine they are noisy (a few %), read the ratios with that in mind.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--prompts", type=int, default=8, help="prompts per step")
    p.add_argument("--group-size", type=int, default=4)
    p.add_argument("--tokens", type=int, default=48, help="completion length (fixed)")
    p.add_argument("--steps", type=int, default=5, help="timed steps per run (after one warm-up step)")
    p.add_argument("--repeats", type=int, default=2, help="interleaved repeats; the best median is kept")
    p.add_argument("--threads", type=int, default=1, help="torch threads (1 avoids OpenMP spinning on shared cores)")
    return p.parse_args()


def variants(args):
    micro_all = args.prompts * args.group_size
    # (label, trainer kind, algorithm, resrl_mode, micro-batch)
    return [
        ("grpo (ours)", "ours", "grpo", "auto", micro_all),
        ("resrl aligned", "ours", "resrl", "aligned", micro_all),
        ("resrl extra-pass", "ours", "resrl", "extra-pass", micro_all),
        ("grpo (plain TRL)", "trl", "grpo", "auto", micro_all),
    ]


def interleaved(todo, repeats):
    """(repeat, variant) in run order: even repeats in `todo`'s order, odd ones reversed, so that a
    machine getting slower or faster during the run weighs on every variant alike."""
    for r in range(repeats):
        for item in (todo if r % 2 == 0 else list(reversed(todo))):
            yield r, item


def build_trainer(model_dir, out_dir, args, kind, algorithm, mode, micro, *, dataset=None, reward=None,
                  overrides=(), logging_steps=10_000, device="cpu"):
    """A trainer as `resrl train` would configure it (config -> GRPOConfig) on a fixed-length batch:
    ResRLTrainer (`kind` "ours") or plain TRL GRPOTrainer ("trl"). `dataset` and `reward` default to
    short arithmetic prompts and a parity reward (0 or 1 from the text: most groups mix both); `overrides` are more
    config keys (`log.phase_times=true`, `model.dtype=...`). `args` needs steps, prompts, group_size
    and tokens; the trainer runs `args.steps + 1` optimiser steps (the first is a warm-up). `device`:
    "cpu" (TrainingArguments.use_cpu) or "cuda" (the Trainer's own device placement)."""
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import GRPOTrainer

    from resrl.engines.rewards import RewardAdapter
    from resrl.engines.trl import ResRLTrainer
    from resrl.train import load_config
    from resrl.train.runner import grpo_args, load_model

    cfg = load_config(None, [
        f"model.path={model_dir}", f"train.output_dir={out_dir}", f"algorithm.name={algorithm}",
        f"train.max_steps={args.steps + 1}", f"train.rollout_prompts={args.prompts}",
        f"train.group_size={args.group_size}", f"train.micro_batch_size={micro}",
        f"train.max_completion_length={args.tokens}", "train.learning_rate=1e-4", "log.progress=false",
        "log.report_to=[none]", f"engine.resrl_mode={mode}", "algorithm.resrl.rank=16", *overrides])
    grpo_config = grpo_args(cfg, 1, use_cpu=device == "cpu")
    grpo_config.generation_kwargs = {"min_new_tokens": args.tokens}
    grpo_config.logging_steps = logging_steps  # 10_000: keep the table readable (the Trainer prints every log)
    if dataset is None:
        dataset = Dataset.from_list([{"prompt": [{"role": "user", "content": f"{i}+{i % 7}="}], "answer": str(i)}
                                     for i in range(64)])
    if reward is None:
        reward = RewardAdapter(lambda c, a: [float(sum(map(ord, x)) % 2) for x in c], name="parity")
    model = load_model(cfg, model_dir)  # the runner's: dtype and model.trainable_layers
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    common = dict(model=model, reward_funcs=reward, args=grpo_config, train_dataset=dataset,
                  processing_class=tokenizer)
    if kind == "ours":
        return ResRLTrainer(**common, algorithm=cfg.algorithm, loss_config=cfg.loss, resrl_mode=mode,
                            phase_times=cfg.log.phase_times)
    # TRL's "grpo" = per-sequence token mean, then batch mean (= ours here); ResRLTrainer refuses
    # a loss_type it would ignore, so only plain TRL gets it
    grpo_config.loss_type = "grpo"
    return GRPOTrainer(**common)


def run_variant(model_dir, out_dir, args, kind, algorithm, mode, micro):
    trainer = build_trainer(model_dir, out_dir, args, kind, algorithm, mode, micro)
    gen_times = []
    real_generate = trainer._generate

    def timed_generate(*a, **k):
        t0 = time.perf_counter()
        out = real_generate(*a, **k)
        gen_times.append(time.perf_counter() - t0)
        return out

    trainer._generate = timed_generate
    step_times = []
    real_step = trainer.training_step

    def timed_step(*a, **k):
        t0 = time.perf_counter()
        out = real_step(*a, **k)
        step_times.append(time.perf_counter() - t0)
        return out

    trainer.training_step = timed_step
    trainer.train()
    # one micro-step = one optimiser step here (a round is one update); drop the warm-up step
    total = step_times[1:]
    train_only = [s - g for s, g in zip(step_times[1:], gen_times[1:])]
    return statistics.median(total), statistics.median(train_only)


def main() -> None:
    args = parse_args()
    import torch

    torch.set_num_threads(args.threads)
    from resrl.models.tiny import build_tiny_model

    with tempfile.TemporaryDirectory() as tmp:
        model_dir = Path(tmp) / "tiny"
        model, _ = build_tiny_model(model_dir)
        n_params = sum(p.numel() for p in model.parameters())
        results: dict[str, list[tuple[float, float]]] = {}
        todo = variants(args)
        for r, (label, kind, algorithm, mode, micro) in interleaved(todo, args.repeats):
            res = run_variant(model_dir, Path(tmp) / f"out-{r}-{kind}-{algorithm}-{mode}", args,
                              kind, algorithm, mode, micro)
            results.setdefault(label, []).append(res)
            print(f"  repeat {r}: {label:18s} step {res[0]:.3f} s, train {res[1]:.3f} s", flush=True)
    best = {label: (min(r[0] for r in v), min(r[1] for r in v)) for label, v in results.items()}
    base = best["grpo (ours)"]
    print(f"\ntiny model {n_params / 1e6:.2f} M params; {args.prompts} prompts x G={args.group_size}, "
          f"{args.tokens} tokens, torch threads {args.threads}; best of {args.repeats} medians of {args.steps} steps")
    print(f"{'variant':20s} {'s/step':>8s} {'train s':>8s} {'step / grpo':>12s} {'train / grpo':>13s}")
    for label, (step, train) in best.items():
        print(f"{label:20s} {step:8.3f} {train:8.3f} {step / base[0]:12.3f} {train / base[1]:13.3f}")
    plain = best["grpo (plain TRL)"]
    print(f"\nResRL aligned / GRPO (whole step): {best['resrl aligned'][0] / base[0]:.3f}  (target <= 1.10)")
    print(f"ResRL extra-pass / GRPO (whole step): {best['resrl extra-pass'][0] / base[0]:.3f}")
    print(f"our GRPO / plain TRL GRPO (whole step): {base[0] / plain[0]:.3f}")


if __name__ == "__main__":
    main()
