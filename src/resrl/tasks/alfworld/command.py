"""`resrl make-alfworld DIR --train N --seen N --unseen N --seed S [--workers W]`: generate `alfworld-synth`."""

from __future__ import annotations


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "make-alfworld", help="generate ALFWorld-format games (alfworld-synth) with ALFWorld's engine",
        description="Generate ALFWorld-format household games (alfworld-synth: ALFWorld's engine, PDDL domain, "
                    "goal library and AI2-THOR floor plans; NOT ALFWorld's data) under DIR/json_2.1.1/{train,"
                    "valid_seen,valid_unseen}. Every game is solved by ALFWorld's planner expert; the same seed "
                    "gives byte-identical files. Needs the optional extra 'agents'.")
    p.add_argument("out", metavar="DIR", help="output directory (use it as ALFWORLD_DATA or alfworld-synth:DIR:SPLIT)")
    p.add_argument("--train", type=int, default=0, help="games in train (ALFRED's train scenes)")
    p.add_argument("--seen", type=int, default=0, help="games in valid_seen (other games on the train scenes)")
    p.add_argument("--unseen", type=int, default=0, help="games in valid_unseen (ALFRED's test scenes)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workers", type=int, default=1, help="generator processes (default 1)")
    p.set_defaults(func=run)


def run(args) -> int:
    from pathlib import Path

    from resrl.tasks.alfworld.generator import generate
    from resrl.errors import InputError

    sizes = {"train": args.train, "valid_seen": args.seen, "valid_unseen": args.unseen}
    if min(sizes.values()) < 0 or not sum(sizes.values()):
        raise InputError("make-alfworld: give at least one of --train / --seen / --unseen (counts >= 0)")
    if args.workers < 1:
        raise InputError(f"make-alfworld: --workers must be >= 1, got {args.workers}")
    out = Path(args.out)
    if (out / "json_2.1.1").exists() and any((out / "json_2.1.1").iterdir()):
        raise InputError(f"make-alfworld: {out / 'json_2.1.1'} already holds games; use an empty directory")
    manifest = generate(out, sizes, seed=args.seed, workers=args.workers, progress=lambda line: print(line, flush=True))
    for split, counts in manifest["task_type_counts"].items():
        print(f"{split}: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    print(f"{sum(sizes.values())} games in {manifest['seconds']:.1f} s ({manifest['games_per_s']:.2f} games/s, "
          f"{manifest['attempts']} attempts); wrote {out / 'json_2.1.1'} and {out / 'manifest.json'}")
    return 0
