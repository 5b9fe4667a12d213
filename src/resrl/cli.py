"""`resrl` command line: one sub-command per module, registered here in one line each.

Each command module exposes `register(subparsers)` which adds its parser and sets
`func=<callable(args) -> int>`. Command modules import heavy libraries (torch, transformers)
inside their run functions so that `resrl --help` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

# sub-command modules, in the order they appear in `resrl --help`; then the task families'
# own (resrl.tasks.registry.command_modules(), e.g. resrl make-alfworld)
COMMAND_MODULES = [
    "resrl.experiments.command",  # resrl demo
    "resrl.train.command",     # resrl train
    "resrl.eval.command",      # resrl eval, resrl plot-passk
    "resrl.models.command",    # resrl make-tiny-model, resrl convert-smollm2
    "resrl.diagnose.command",  # resrl diagnose
    "resrl.experiments.compare",  # resrl compare
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="resrl",
        description="ResRL and RLVR baselines: train (TRL), evaluate (Avg@k, Pass@k), demo.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    from resrl.tasks.registry import command_modules

    for name in COMMAND_MODULES + command_modules():
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:  # a command module not written yet
            if exc.name == name:
                continue
            raise
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    from resrl.errors import InputError

    try:
        return int(args.func(args) or 0)
    except (InputError, FileNotFoundError) as exc:
        # bad input (a config key, a data row, a file): one clear line, not a traceback. Anything
        # else (torch's own ValueErrors from inside training included) is a bug and keeps its
        # traceback. RESRL_DEBUG=1 shows the traceback of bad input too.
        if os.environ.get("RESRL_DEBUG"):
            raise
        print(f"resrl {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
