"""`resrl train --config FILE.yaml [section.key=value ...] [--resume]`."""

from __future__ import annotations

import argparse
import sys

EPILOG = """\
overrides: any config key, after the options, as key=value:
  train.max_steps=50  algorithm.name=resrl  algorithm.resrl.rank=32  loss.agg=token-mean
  train.learning_rate=1e-6  log.report_to=[tensorboard,wandb]  model.path=runs/tiny-model
values are YAML (true/false, numbers, [a, b], null); unknown keys and wrong types are errors.
examples:
  resrl train --config configs/tiny_math.yaml
  resrl train --config configs/tiny_math.yaml algorithm.name=grpo train.output_dir=runs/grpo
  resrl train --config configs/tiny_math.yaml --resume        # continue a killed run
  accelerate launch --num_processes 4 -m resrl.cli train --config configs/qwen3_math_resrl.yaml
  accelerate launch --multi_gpu --num_processes 2 -m resrl.cli train --config FILE train.use_cpu=true  # 2 CPU procs
"""


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "train", help="RL training with TRL for every algorithm of the core registry (train --help lists them)",
        description="Train a local causal LM with RL from verifiable rewards (TRL GRPOTrainer + resrl.core).",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", required=True, help="YAML config file (see configs/)")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="config overrides, e.g. train.max_steps=10")
    p.add_argument("--resume", action="store_true",
                   help="continue from the newest complete checkpoint in train.output_dir")
    p.add_argument("--check", action="store_true", help="validate the config and exit")
    p.set_defaults(func=run)
    with_algorithm_list(p)


def with_algorithm_list(parser: argparse.ArgumentParser) -> None:
    """Append the registry's algorithm names to the epilog when the help is printed (not when the
    parser is built: importing the registry imports torch, and `resrl --help` must stay fast)."""
    format_help, epilog = parser.format_help, parser.epilog

    def format_help_with_algorithms() -> str:
        from resrl.core.registry import ALGORITHMS

        parser.epilog = f"{epilog}algorithms (algorithm.name): {', '.join(ALGORITHMS)}\n"
        try:
            return format_help()
        finally:
            parser.epilog = epilog

    parser.format_help = format_help_with_algorithms


def run(args) -> int:
    from resrl.train.config import ConfigError, load_config

    try:
        config = load_config(args.config, args.overrides)
        from resrl.train.runner import grpo_args, launched_world_size

        config.validate(num_processes=launched_world_size())
        if args.check:  # the values handed to TRL too (a bad `trl:` value is found here, not after loading);
            # use_cpu so that a GPU config can be checked on a machine without one
            grpo_args(config, launched_world_size(), use_cpu=True)
    except ConfigError as exc:
        print(f"resrl train: error: {exc}", file=sys.stderr)
        return 2
    if args.check:
        from resrl.errors import InputError

        try:
            data = _check_data(config)
        except InputError as exc:
            print(f"resrl train: error: {exc}", file=sys.stderr)
            return 2
        print(f"config OK: {args.config} (algorithm {config.algorithm.name}, output {config.train.output_dir}{data})")
        return 0
    from resrl.train.runner import run_training

    try:
        result = run_training(config, resume=args.resume)
    except ConfigError as exc:
        print(f"resrl train: error: {exc}", file=sys.stderr)
        return 2
    finally:
        _destroy_process_group()
    last = result.metrics[-1] if result.metrics else {}
    shown = {k: last[k] for k in ("step", "reward", "accuracy", "completions/mean_length", "entropy") if k in last}
    print(f"done: {result.output_dir} (model: {result.model_dir}; metrics: {result.output_dir}/metrics.jsonl) {shown}")
    return 0


def _check_data(config) -> str:
    """--check: load `data.train` and build the training table as `resrl train` would (rows,
    formats, columns), and resolve the reward; InputError naming the file and row otherwise."""
    if not config.data.train or config.env.name is not None:  # environments read their data at run time
        return ""
    from resrl.tasks.data import load_problems
    from resrl.data.prompts import problems_to_dataset

    problems = load_problems(config.data.train, data_dir=config.data.data_dir,
                             limit=config.data.max_problems or None)
    dataset = problems_to_dataset(problems)
    return (f"; data {config.data.train}: {len(dataset)} rows, columns {dataset.column_names}, "
            f"reward {config.reward_spec(problems)}")


def _destroy_process_group() -> None:
    """Under `accelerate launch`, tear the process group down before exit (gloo can abort the
    process when it is left to interpreter shutdown)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
