"""Time per training step on the tiny model: ResRL vs GRPO in the same trainer (aligned and
extra-pass modes), and the project's GRPO vs plain TRL `GRPOTrainer` on the same settings.

    python benchmarks/bench_step.py              # default: 8 prompts x G=4, 48 new tokens
    python benchmarks/bench_step.py --steps 6 --repeats 3 --tokens 64

Generation length is fixed (min_new_tokens = max_new_tokens) so every variant processes the
same number of tokens. Variants are interleaved, their order shuffled in every repeat (`--seed`),
and each variant's timed steps of all repeats pooled; reported per variant: the median seconds per
optimiser step and of its exclusive parts, timed on the trainer's own methods (the same methods in
both trainers):

    generate   `_generate`: tokenising, sampling the completions, decoding them
    score      the rest of `_generate_and_score_completions`: rewards, advantages (ResRL's weights
               in extra-pass mode, and its no-grad pass), TRL's bookkeeping
    loss       `compute_loss`: the training forward and the loss (ResRL's weights in aligned mode)
    rest       the rest of the step: backward, optimiser, the Trainer's own work

and our GRPO over plain TRL's part by part, and per repeat (its spread). On a shared machine the
numbers are noisy (a few %), read the ratios with that in mind.
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
    p.add_argument("--seed", type=int, default=0, help="seed of the variants' order in each repeat")
    p.add_argument("--json", type=Path, default=None, help="write every step's parts here")
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

    from resrl.engines.trl.rewards import RewardAdapter
    from resrl.engines.trl.trainer import ResRLTrainer
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
                            phase_times=cfg.log.phase_times, generation=cfg.generation)
    # TRL's "grpo" = per-sequence token mean, then batch mean (= ours here); ResRLTrainer refuses
    # a loss_type it would ignore, so only plain TRL gets it
    grpo_config.loss_type = "grpo"
    return GRPOTrainer(**common)


PARTS = ("generate", "score", "loss", "rest")  # exclusive parts of a step (see the module docstring)


def _timed(obj, name: str, times: list) -> None:
    """Wrap the instance's method `name` so that each call's seconds are appended to `times`."""
    real = getattr(obj, name)

    def wrapped(*a, **k):
        t0 = time.perf_counter()
        out = real(*a, **k)
        times.append(time.perf_counter() - t0)
        return out

    setattr(obj, name, wrapped)


def run_variant(model_dir, out_dir, args, kind, algorithm, mode, micro) -> list[dict[str, float]]:
    """Per timed step (the first, a warm-up, dropped): {"step", "generate", "score", "loss", "rest"}."""
    trainer = build_trainer(model_dir, out_dir, args, kind, algorithm, mode, micro)
    t = {name: [] for name in ("training_step", "_generate_and_score_completions", "_generate", "compute_loss")}
    for name, times in t.items():
        _timed(trainer, name, times)
    trainer.train()
    rows = []
    # one micro-step = one optimiser step here (a round is one update); drop the warm-up step
    for step, gs, gen, loss in list(zip(t["training_step"], t["_generate_and_score_completions"], t["_generate"],
                                        t["compute_loss"]))[1:]:
        rows.append({"step": step, "generate": gen, "score": gs - gen, "loss": loss, "rest": step - gs - loss})
    return rows


def main() -> None:
    args = parse_args()
    import json
    import random

    import torch

    torch.set_num_threads(args.threads)
    from resrl.models.tiny import build_tiny_model

    todo = variants(args)
    runs: dict[str, list[list[dict]]] = {label: [] for label, *_ in todo}
    order = []
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = Path(tmp) / "tiny"
        model, _ = build_tiny_model(model_dir)
        n_params = sum(p.numel() for p in model.parameters())
        rng = random.Random(args.seed)
        for r in range(args.repeats):
            batch = list(todo)
            rng.shuffle(batch)  # variants interleaved, their order drawn afresh each repeat
            for label, kind, algorithm, mode, micro in batch:
                rows = run_variant(model_dir, Path(tmp) / f"out-{r}-{kind}-{algorithm}-{mode}", args,
                                   kind, algorithm, mode, micro)
                runs[label].append(rows)
                order.append(label)
                med = statistics.median(x["step"] for x in rows)
                print(f"  repeat {r}: {label:18s} step {med:.3f} s (median of {len(rows)})", flush=True)
    pooled = {label: [x for rows in reps for x in rows] for label, reps in runs.items()}
    med = {label: {c: statistics.median(x[c] for x in rows) for c in ("step", *PARTS)} for label, rows in pooled.items()}
    # per repeat: our GRPO's median step over plain TRL's, to show the spread of the headline ratio
    per_repeat = [statistics.median(x["step"] for x in a) / statistics.median(x["step"] for x in b)
                  for a, b in zip(runs["grpo (ours)"], runs["grpo (plain TRL)"])]
    base, plain = med["grpo (ours)"], med["grpo (plain TRL)"]
    print(f"\ntiny model {n_params / 1e6:.2f} M params; {args.prompts} prompts x G={args.group_size}, "
          f"{args.tokens} tokens, torch threads {args.threads}; median over {args.steps} steps x {args.repeats} "
          f"repeats (variants interleaved, order shuffled per repeat, seed {args.seed}); seconds per step")
    head = f"{'variant':20s} {'step':>7s} " + " ".join(f"{c:>8s}" for c in PARTS) + f" {'step/grpo':>10s} {'step/TRL':>9s}"
    print(head)
    for label, m in med.items():
        print(f"{label:20s} {m['step']:7.3f} " + " ".join(f"{m[c]:8.3f}" for c in PARTS)
              + f" {m['step'] / base['step']:10.3f} {m['step'] / plain['step']:9.3f}")
    print("\nour GRPO / plain TRL, part by part: " + ", ".join(
        f"{c} {base[c] / plain[c]:.3f}" if plain[c] > 0 else f"{c} —" for c in ("step", *PARTS)))
    print(f"our GRPO / plain TRL (whole step): {base['step'] / plain['step']:.3f}; per repeat: "
          + ", ".join(f"{x:.3f}" for x in per_repeat))
    print(f"ResRL aligned / GRPO (whole step): {med['resrl aligned']['step'] / base['step']:.3f}  (target <= 1.10)")
    print(f"ResRL extra-pass / GRPO (whole step): {med['resrl extra-pass']['step'] / base['step']:.3f}")
    if args.json:
        args.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "order": order,
                                         "medians": med, "per_repeat_ours_over_trl": per_repeat, "steps": runs},
                                        indent=1) + "\n")


if __name__ == "__main__":
    main()
