"""`resrl demo`: an experiment of `resrl.experiments` on a demo task (`resrl.demo.tasks`): one seed,
`--seeds` (one process per seed), `--grid` (each method's settings chosen on the dev split first);
`--worker-run` is the worker protocol's job (`resrl.experiments.workers`). Every task, whatever its
experiment kind, runs through the one pipeline, `resrl.experiments.pipeline.run_experiment`."""

from __future__ import annotations

import argparse
from dataclasses import replace

from resrl.errors import InputError

DEFAULT_OUT = "runs/demo"


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "demo",
        help="offline demo: an experiment on a task (--task: math, code, tools, agents, smollm2-arithmetic, ...), "
             "RL with each algorithm, report + plots",
        description="Runs an experiment (resrl.experiments) on a demo task (--task; chained addition by default): "
                    "a tiny Qwen3 model warm-started on the task (or, for smollm2-arithmetic, the pretrained "
                    "SmolLM2-135M-Instruct), trained with each algorithm from the same start (same seed and "
                    "budget), evaluated (Avg@k / Pass@k) on a held-out split; writes report.md and PNG plots. "
                    "Fully offline. The default task on 2 CPU cores: under 10 minutes with the RL runs in "
                    "parallel (the default); --quick: about 15-20 s.",
    )
    from resrl.demo.tasks import DEFAULT_TASK, DEMO_TASKS

    p.add_argument("--out", default=DEFAULT_OUT, help="output directory (default: runs/demo; agents: runs/demo-agents); "
                                                      "the same command on the same OUT resumes a killed run")
    p.add_argument("--task", default=DEFAULT_TASK, choices=sorted(DEMO_TASKS), metavar="NAME",
                   help="the demo task; each brings its own budgets, --quick included: "
                        + "; ".join(f"{t.name}: {t.summary}" for t in DEMO_TASKS.values()))
    p.add_argument("--algorithms", default=None,
                   help="comma-separated algorithm names, or variants name/key=value (e.g. "
                        "resrl/resrl.hidden_alignment=token, resrl/resrl.rank=4); default: the task's own list "
                        "(math and most tasks: grpo,w-reinforce,resrl; agents: grpo,gigpo,empg,resrl; "
                        "smollm2-arithmetic: grpo, resrl, two ResRL variants, nsr)")
    p.add_argument("--seed", type=int, default=0, help="seed of everything (default: 0)")
    p.add_argument("--seeds", default=None,
                   help="several seeds, e.g. 0,1,2: one demo process per seed in OUT/seed-S (resumable: finished "
                        "seeds are kept), then mean and 95 %% interval over seeds and paired differences vs GRPO")
    p.add_argument("--workers", type=int, default=None,
                   help="processes at once, one torch thread each: the RL runs (each with its evaluation) after "
                        "the warm start, or with --seeds the seeds (default: min(CPUs, runs or seeds); 1: one "
                        "process, one phase after the other). The numbers do not depend on it")
    p.add_argument("--worker-run", default=None, help=argparse.SUPPRESS)  # internal: one RL run of OUT's demo
    p.add_argument("--quick", action="store_true", help="tiny budgets and an easier task: a smoke run")
    p.add_argument("--rl-steps", type=int, default=None, help="RL steps per algorithm (default: 250; quick: 6)")
    p.add_argument("--lr", type=float, default=None, help="RL learning rate (default: 1e-4)")
    p.add_argument("--eval-samples", type=int, default=None, help="samples per held-out problem (default: 16)")
    p.add_argument("--curve-steps", type=_steps, default=None, metavar="N1,N2,...",
                   help="also keep each method's model at these RL steps (multiples of the task's checkpoint "
                        "interval) and evaluate it like the final one: held-out accuracy along training, "
                        "e.g. --rl-steps 60 --curve-steps 20,40 (tasks that generate problems)")
    p.add_argument("--grid", action="append", default=[], metavar="KEY=V1,V2,...",
                   help="choose each algorithm's setting first: every (algorithm, value) from one start of the "
                        "first seed, evaluated on the dev split (disjoint from the held-out one) in OUT/dev; each "
                        "algorithm's best Avg@n there then runs on every seed (--seeds) and is reported on the "
                        "held-out split, e.g. --grid train.learning_rate=3e-5,1e-4,3e-4 (repeat for a product)")
    p.add_argument("--reuse-training", default=None, metavar="DIR",
                   help="an earlier experiment's OUT: each method whose run finished there with the same training "
                        "(settings, task, seed, start) is evaluated from that model instead of trained again "
                        "(smollm2-arithmetic; --grid does this for the first seed with OUT/dev)")
    p.add_argument("--dev-eval-samples", type=int, default=None, metavar="N",
                   help="with --grid: samples per dev problem when choosing (default: as --eval-samples); the "
                        "choice needs only the dev Avg@n, the held-out split keeps --eval-samples for Pass@k")
    p.add_argument("--eval-split", choices=("test", "dev"), default="test",
                   help="evaluate on the held-out split (default) or the dev split settings are chosen on")
    p.add_argument("--threads", type=int, default=1,
                   help="torch CPU threads (default: 1, fastest for the tiny model, robust on a busy machine)")
    p.set_defaults(func=run)



def _steps(text: str) -> tuple[int, ...]:
    """"20,40" -> (20, 40): distinct positive steps, ascending."""
    try:
        steps = tuple(sorted({int(v) for v in text.split(",") if v.strip()}))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected steps N1,N2,..., got {text!r}") from None
    if not steps or steps[0] < 1:
        raise argparse.ArgumentTypeError(f"expected steps >= 1, got {text!r}")
    return steps


# the command line's options an experiment kind maps onto its config (`ExperimentKind.settings`)
KIND_OPTIONS = ("rl_steps", "lr", "eval_samples", "curve_steps")


def config_from_args(args: argparse.Namespace):
    """The demo task's config (its experiment kind's type) with the command line's shared options
    (--out, --algorithms, --seed, --threads, --eval-split, --reuse-training, and --rl-steps, --lr,
    --eval-samples through the kind's `settings`); every option checked here, before any work."""
    from resrl.demo.tasks import get_demo_task
    from resrl.experiments.kinds import kind_of

    task = get_demo_task(args.task)
    kind = kind_of(task)
    cfg = task.config(quick=args.quick)
    eval_split = getattr(args, "eval_split", "test")
    if eval_split != "test" and not kind.has_dev_split(cfg):
        raise InputError(f"--task {task.name} has no dev split (its {kind.name} kind holds out one split, the "
                         "held-out one): --grid and --eval-split dev are for the tasks that generate problems")
    if getattr(args, "reuse_training", None) and not hasattr(cfg, "reuse_training"):
        raise InputError(f"--reuse-training: task {task.name!r} trains each seed from its own start; only tasks "
                         "that start from a shared pretrained model reuse runs")
    out = kind.default_out(cfg) if args.out == DEFAULT_OUT and kind.default_out(cfg) else args.out
    changes = {"out": out, "seed": args.seed, "threads": args.threads}
    if hasattr(cfg, "eval_split"):
        changes["eval_split"] = eval_split
    if getattr(args, "reuse_training", None):
        changes["reuse_training"] = args.reuse_training
    if args.algorithms is not None:
        changes["algorithms"] = tuple(a.strip() for a in args.algorithms.split(",") if a.strip())
    cfg = replace(cfg, **changes)
    for option in KIND_OPTIONS:
        value = getattr(args, option, None)
        if value is None:
            continue
        flag = "--" + option.replace("_", "-")
        if option not in kind.settings:
            raise InputError(f"{flag}: not a setting of task {task.name!r} (its {kind.name} kind sets "
                             f"{', '.join('--' + o.replace('_', '-') for o in kind.settings)})")
        if not isinstance(value, tuple) and not value > 0:
            raise InputError(f"{flag} must be {'> 0' if isinstance(value, float) else '>= 1'}, got {value}")
        cfg = _set(cfg, kind.settings[option], value)
    return cfg


def _set(cfg, path: str, value):
    """`cfg` with the field at dotted `path` set (nested dataclass sections replaced, not mutated); an
    evaluation's sample count also resets its ks (powers of two up to the new n)."""
    head, _, rest = path.partition(".")
    if rest:
        return replace(cfg, **{head: _set(getattr(cfg, head), rest, value)})
    extra = {"ks": None} if head == "n" and hasattr(cfg, "ks") else {}
    return replace(cfg, **{head: value}, **extra)


def run(args: argparse.Namespace) -> int:
    if args.worker_run is None and args.workers is not None and args.workers < 1:
        raise InputError(f"--workers must be >= 1, got {args.workers}")
    if args.worker_run is not None:
        from resrl.experiments.workers import worker_main

        return worker_main(args.out, args.worker_run)
    if args.dev_eval_samples is not None and not args.grid:
        raise InputError("--dev-eval-samples: only with --grid (the dev split is where --grid chooses)")
    if args.grid:
        return run_grid(args)
    if args.seeds is not None:
        return run_multiseed(args)
    from resrl.experiments.pipeline import run_experiment

    run_experiment(config_from_args(args), workers=args.workers)
    return 0


def run_multiseed(args: argparse.Namespace) -> int:
    from resrl.experiments.seeds import parse_seeds, run_multiseed_demo

    seeds = parse_seeds(args.seeds)
    cfg = config_from_args(args)  # validate the shared options before starting any process
    return run_multiseed_demo(args, seeds, args.task, ",".join(cfg.algorithms), cfg.out,
                              baseline=_baseline(cfg.algorithms))


def _baseline(labels) -> str:
    """What the other methods are paired with besides the warm start: GRPO when it runs, else the warm start."""
    from resrl.experiments.seeds import WARM_START

    return "grpo" if "grpo" in labels else WARM_START


def run_grid(args: argparse.Namespace) -> int:
    """`resrl demo --grid KEY=V1,V2 [--seeds ...]`: each algorithm's setting chosen on the dev split of
    the first seed (one demo run in OUT/dev with every (algorithm, value), `--eval-split dev`), then
    the chosen variants over the seeds (`run_multiseed_demo`, OUT/seed-S), reported on the held-out
    split; OUT/dev.md, dev.json, dev_grid.png show the choice (resrl.experiments.grid's report)."""
    import json
    from pathlib import Path

    from resrl.experiments.grid import choose_on_dev, parse_grid, write_dev_report
    from resrl.experiments.seeds import budget_args, parse_seeds, run_multiseed_demo, run_seeds
    from resrl.train.variants import with_settings

    seeds = parse_seeds(args.seeds) if args.seeds is not None else [args.seed]
    grid = parse_grid(args.grid)
    # validate the shared options (and that the task has a dev split) before starting any process
    dev_cfg = config_from_args(argparse.Namespace(**{**vars(args), "eval_split": "dev"}))
    methods = list(dev_cfg.algorithms)
    out = Path(args.out)
    labels = {m: [(pt, with_settings(m, pt)) for pt in grid] for m in methods}
    every = ",".join(label for m in methods for _, label in labels[m])
    print(f"choosing {', '.join(grid[0])} for {', '.join(methods)} on the dev split (seed {seeds[0]}, "
          f"{len(methods) * len(grid)} RL runs from one start) in {out / 'dev'}", flush=True)
    from resrl.experiments.jobs import default_workers

    inner = args.workers or default_workers(len(methods) * len(grid), quick=args.quick)
    shared = ["--task", args.task, "--eval-split", "dev", "--algorithms", every, "--workers", str(inner),
              *budget_args(args, dev=True)]
    summary = run_seeds(out, [seeds[0]], shared, workers=1, subdir="dev")[seeds[0]]
    dev_scores = {m: [(pt, float(summary["results"][label]["avg"])) for pt, label in labels[m]] for m in methods}
    chosen = choose_on_dev(dev_scores)
    files = write_dev_report(out, dev_scores, chosen, f"Avg@{summary['config']['eval']['n']}",
                             [f"{args.task} dev split"], seeds[0])
    print(files[0].read_text(), flush=True)
    final = [with_settings(m, chosen[m]) for m in methods]
    (out / "chosen.json").write_text(json.dumps(dict(zip(methods, final)), indent=1))
    baseline = final[methods.index("grpo")] if "grpo" in methods else final[0]
    # the first seed's chosen runs were trained in OUT/dev: where the task's runs share their start (a
    # pretrained model), that seed evaluates them on the held-out split instead of training them again
    reuse = {seeds[0]: ["--reuse-training", str(out / "dev")]} if hasattr(dev_cfg, "reuse_training") else {}
    return run_multiseed_demo(args, seeds, args.task, ",".join(final), out, baseline=baseline, per_seed_args=reuse)
