"""`resrl demo`: an experiment of `resrl.experiments` on a demo task (`resrl.demo.tasks`): one seed,
`--seeds` (one process per seed), `--grid` (each method's settings chosen on the dev split first).
Every task, whatever its experiment kind, runs through the one pipeline,
`resrl.experiments.pipeline.run_experiment`, from one `ExperimentConfig` (`config_from_args`).

A task's experiment is a `resrl train` config plus a start and an evaluator: any of its keys is set
as `resrl train` sets it, `KEY=VALUE` after the options (`train.learning_rate=3e-4`, `env.max_steps=8`,
and `start.*`, `eval.*`, `task.*` for the other sections); `--rl-steps`, `--lr` and `--eval-samples`
are aliases (`resrl.demo.config.ALIASES`), `--print-config` prints the result."""

from __future__ import annotations

import argparse
from dataclasses import replace

from resrl.errors import InputError
from resrl.train.schema import ConfigError


def register(subparsers) -> None:
    import textwrap

    p = subparsers.add_parser(
        "demo",
        help="offline demo: an experiment on a task (--task: math, code, tools, agents, smollm2-arithmetic, ...), "
             "RL with each algorithm, report + plots",
        description=textwrap.fill(
            "Runs an experiment (resrl.experiments) on a demo task (--task; chained addition by default): a tiny "
            "Qwen3 model warm-started on the task (or, for smollm2-arithmetic, the pretrained SmolLM2-135M-Instruct), "
            "trained with each algorithm from the same start (same seed and budget), evaluated (Avg@k / Pass@k) on a "
            "held-out split; writes report.md and PNG plots. Fully offline. A task's experiment is a `resrl train` "
            "config (KEY=VALUE sets any of its keys; --print-config shows it) plus a start and an evaluator. The "
            "default task on 2 CPU cores: under 10 minutes with the RL runs in parallel (the default); --quick: "
            "about 15-20 s.", 100),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    from resrl.demo.tasks import DEFAULT_TASK, DEMO_TASKS

    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                   help="settings of the task's experiment, after the options: any `resrl train` key (train.learning_rate="
                        "3e-4, env.max_steps=8, loss.agg=token-mean, ...), or start.*, eval.*, task.* (--print-config "
                        "shows them all)")
    p.add_argument("--out", default=None, help="output directory (default: the task's, below); the same command on "
                                               "the same OUT resumes a killed run")
    p.add_argument("--task", default=DEFAULT_TASK, choices=sorted(DEMO_TASKS), metavar="NAME",
                   help="the demo task; each brings its own budgets, --quick included: "
                        + "; ".join(f"{t.name}: {t.summary}" for t in DEMO_TASKS.values()))
    p.add_argument("--algorithms", default=None,
                   help="comma-separated algorithm names, or variants name/key=value (e.g. "
                        "resrl/resrl.hidden_alignment=token, resrl/resrl.rank=4); default: the task's own list (below)")
    p.add_argument("--seed", type=int, default=0, help="seed of everything (default: 0)")
    p.add_argument("--seeds", default=None,
                   help="several seeds, e.g. 0,1,2: one demo process per seed in OUT/seed-S (resumable: finished "
                        "seeds are kept), then mean and 95 %% interval over seeds and paired differences vs GRPO")
    p.add_argument("--workers", type=int, default=None,
                   help="processes at once, one torch thread each: the RL runs (each with its evaluation) after "
                        "the warm start, or with --seeds the seeds (default: min(CPUs, runs or seeds); 1: one "
                        "process, one phase after the other). The numbers do not depend on it")
    p.add_argument("--quick", action="store_true", help="tiny budgets and an easier task: a smoke run")
    from resrl.demo.config import ALIASES

    for option, what in (("rl_steps", "RL steps (optimiser updates) per algorithm"), ("lr", "RL learning rate"),
                         ("eval_samples", "samples (episodes) per held-out problem (game)")):
        p.add_argument("--" + option.replace("_", "-"), type=float if option == "lr" else int, default=None,
                       metavar=ALIASES[option].split(".")[-1].upper(),
                       help=f"{what}: the same as {ALIASES[option]}=VALUE (the task's default: below)")
    p.add_argument("--curve-steps", type=_steps, default=None, metavar="N1,N2,...",
                   help="also keep each method's model at these RL steps (multiples of the task's checkpoint "
                        "interval, checkpoint.save_steps) and evaluate it like the final one: held-out accuracy "
                        "along training, e.g. --rl-steps 60 --curve-steps 20,40")
    p.add_argument("--grid", action="append", default=[], metavar="KEY=V1,V2,...",
                   help="choose each algorithm's setting first: every (algorithm, value) from one start of the "
                        "first seed, evaluated on the dev split (disjoint from the held-out one) in OUT/dev; each "
                        "algorithm's best Avg@n there then runs on every seed (--seeds) and is reported on the "
                        "held-out split, e.g. --grid train.learning_rate=3e-5,1e-4,3e-4 (repeat for a product)")
    p.add_argument("--reuse-training", default=None, metavar="DIR",
                   help="an earlier experiment's OUT: each method whose run finished there with the same training "
                        "(settings, task, seed, start) is evaluated from that model instead of trained again "
                        "(tasks whose seeds share their start: smollm2-arithmetic; --grid does this for the first "
                        "seed with OUT/dev)")
    p.add_argument("--dev-eval-samples", type=int, default=None, metavar="N",
                   help="with --grid: samples per dev problem when choosing (default: as --eval-samples); the "
                        "choice needs only the dev Avg@n, the held-out split keeps --eval-samples for Pass@k")
    p.add_argument("--eval-split", choices=("test", "dev"), default="test",
                   help="evaluate on the held-out split (default) or the dev split settings are chosen on")
    p.add_argument("--threads", type=int, default=1,
                   help="torch CPU threads (default: 1, fastest for the tiny model, robust on a busy machine)")
    p.add_argument("--print-config", action="store_true",
                   help="print the task's experiment (its `resrl train` config as YAML, then its start, evaluation "
                        "and task) with these options and overrides, and exit")
    p.set_defaults(func=run)
    with_task_defaults(p)


def with_task_defaults(parser: argparse.ArgumentParser) -> None:
    """Append each task's effective defaults to the epilog when the help is printed (building the
    tasks' configs only then: `resrl --help` must stay fast)."""
    format_help = parser.format_help

    def format_help_with_defaults() -> str:
        parser.epilog = task_defaults()
        try:
            return format_help()
        finally:
            parser.epilog = None

    parser.format_help = format_help_with_defaults


def task_defaults() -> str:
    """Each demo task's defaults as the help prints them: the keys the short flags set, the output
    directory and the algorithms; `--quick`'s in brackets."""
    from resrl.demo.config import ALIASES, with_overrides  # noqa: F401
    from resrl.demo.tasks import DEMO_TASKS

    def value(cfg, key: str):
        section, _, name = key.partition(".")
        return cfg.train.get(section, {}).get(name) if section not in ("eval",) else getattr(cfg.eval, name)

    import textwrap

    lines = textwrap.wrap("each task's defaults (--quick's in brackets): " + ", ".join(
        f"{key} ({'--' + option.replace('_', '-')})" for option, key in ALIASES.items()) + "; output directory; "
        "algorithms", 100)
    for name, task in DEMO_TASKS.items():
        full, quick = task.config(quick=False), task.config(quick=True)
        cells = [f"{value(full, k)} [{value(quick, k)}]" for k in ALIASES.values()]
        lines.append(f"  {name:<19} " + ", ".join(cells) + f"; {full.out}; {','.join(full.algorithms)}"
                     + (f" [{','.join(quick.algorithms)}]" if quick.algorithms != full.algorithms else ""))
    return "\n".join(lines) + "\n"


def _steps(text: str) -> tuple[int, ...]:
    """"20,40" -> (20, 40): distinct positive steps, ascending."""
    try:
        steps = tuple(sorted({int(v) for v in text.split(",") if v.strip()}))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected steps N1,N2,..., got {text!r}") from None
    if not steps or steps[0] < 1:
        raise argparse.ArgumentTypeError(f"expected steps >= 1, got {text!r}")
    return steps


def config_from_args(args: argparse.Namespace, kind=None):
    """The demo task's ExperimentConfig with the command line's options and overrides; every option
    checked here, before any work. `kind`: the task's experiment kind (`kind_of`), where the caller has it."""
    from resrl.demo.config import ALIASES, with_overrides
    from resrl.demo.tasks import get_demo_task
    from resrl.experiments.kinds import kind_of

    kind = kind or kind_of(get_demo_task(args.task))
    task = kind.task
    # the short flags as the `key=value` overrides they stand for (ALIASES), then the KEY=VALUE given
    keys = [f"{ALIASES[o]}={getattr(args, o)!r}" for o in ALIASES if getattr(args, o, None) is not None]
    try:
        cfg = with_overrides(task.config(quick=args.quick), keys + list(args.overrides))
    except ConfigError as exc:
        raise _flag_error(args, exc) from exc
    changes = {"seed": args.seed, "threads": args.threads, "eval_split": args.eval_split}
    if args.out is not None:
        changes["out"] = args.out
    if args.algorithms is not None:
        changes["algorithms"] = tuple(a.strip() for a in args.algorithms.split(",") if a.strip())
    if args.curve_steps is not None:
        changes["curve_steps"] = args.curve_steps
    if args.reuse_training:
        if not kind.shares_start:
            raise InputError(f"--reuse-training: task {task.name!r} trains each seed from its own start; only tasks "
                             "that start from a shared pretrained model reuse runs")
        changes["reuse_training"] = args.reuse_training
    cfg = replace(cfg, **changes)
    if (cfg.eval_split != "test" or args.grid) and not kind.has_dev_split(cfg):
        raise InputError(f"--task {task.name} has no dev split (its held-out split is the only one it holds out): "
                         "--grid and --eval-split dev are for the tasks with a dev split")
    from resrl.experiments.pipeline import validate_methods

    try:
        validate_methods(cfg, kind)
    except ConfigError as exc:
        raise _flag_error(args, exc) from exc
    return cfg


def _flag_error(args: argparse.Namespace, exc: Exception) -> ConfigError:
    """A config error, prefixed with the short flag that set its key where one did (`--lr: ...`)."""
    from resrl.demo.config import ALIASES

    flags = [f"--{o.replace('_', '-')}" for o, key in ALIASES.items()
             if getattr(args, o) is not None and f"'{key}'" in str(exc)]
    return ConfigError(f"{flags[0]}: {exc}" if flags else str(exc))


def print_config(cfg, kind) -> str:
    """`--print-config`: the methods' shared `resrl train` config as YAML (what `resrl train --config`
    runs once the start exists: model.path is the start, data.train the rows it writes; each method adds
    its algorithm section and train.output_dir OUT/<method>), then the experiment's other sections as
    comments."""
    import yaml

    from resrl.experiments.layout import jsonable

    task, out = kind.task, cfg.out
    sections = cfg.training(data=kind.data(cfg, {"data_path": kind.ROWS_FILE}), model=f"{out}/warm_start")
    training = {name: sections.pop(name) for name in ("model", "data", "reward") if name in sections}
    training.update(sections)
    if training.get("reward", {}).get("function") is None:  # the task's reward function, handed over in memory
        reward = task.reward
        training["reward"] = {**training.get("reward", {}),
                              "function": f"{reward.__module__}:{getattr(reward, '__name__', type(reward).__name__)}"}
    lines = [f"# resrl demo --task {cfg.task_name}{' --quick' if cfg.is_quick else ''}: the `resrl train` config every "
             f"method shares; each adds its algorithm ({', '.join(cfg.algorithms)}) and train.output_dir "
             f"({out}/<method>). model.path is the start and data.train the training rows, both written by the "
             "experiment's start phase.",
             yaml.safe_dump(jsonable(training), sort_keys=False).rstrip(), "",
             f"# the experiment's other sections (keys start.*, eval.*, task.*; kind: {kind.name})"]
    for name in ("start", "eval", "task"):
        section = getattr(cfg, name)
        lines.append(f"# {name}: {type(section).__name__} " + yaml.safe_dump(jsonable(section), default_flow_style=True,
                                                                            width=10_000).strip())
    lines.append(f"# seed: {cfg.seed}, out: {out}, eval_split: {cfg.eval_split}, curve_steps: {list(cfg.curve_steps)}")
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    if args.workers is not None and args.workers < 1:
        raise InputError(f"--workers must be >= 1, got {args.workers}")
    if args.dev_eval_samples is not None and not args.grid:
        raise InputError("--dev-eval-samples: only with --grid (the dev split is where --grid chooses)")
    if args.dev_eval_samples is not None and args.dev_eval_samples < 1:
        raise InputError(f"--dev-eval-samples must be >= 1, got {args.dev_eval_samples}")
    from resrl.demo.tasks import get_demo_task
    from resrl.experiments.kinds import kind_of
    from resrl.experiments.seeds import parse_seeds

    kind = kind_of(get_demo_task(args.task))  # the task, looked up once: everything below is handed it
    cfg = config_from_args(args, kind)  # every option checked before any process starts
    if args.print_config:
        print(print_config(cfg, kind), end="")
        return 0
    seeds = parse_seeds(args.seeds) if args.seeds is not None else None
    if args.grid:
        from resrl.experiments.grid import parse_grid

        return run_grid(cfg, kind, parse_grid(args.grid), seeds or [cfg.seed], args.workers, args.dev_eval_samples)
    if seeds is not None:
        return run_multiseed(cfg, kind, seeds, args.workers, baseline=_baseline(cfg.algorithms))
    from resrl.experiments.pipeline import run_experiment

    run_experiment(cfg, workers=args.workers, kind=kind)
    return 0


def seed_configs(cfg, seeds, out=None, **changes) -> dict:
    """{seed: cfg for that seed}: its seed, its directory OUT/seed-S (`out`: OUT, default cfg.out), one
    torch thread (the seeds run side by side), and `changes` (fields of ExperimentConfig)."""
    from pathlib import Path

    from resrl.experiments.layout import seed_dir

    out = Path(out if out is not None else cfg.out)
    return {s: replace(cfg, seed=s, out=str(seed_dir(out, s)), threads=1, **changes) for s in seeds}


def run_multiseed(cfg, kind, seeds, workers: int | None, baseline: str, reuse_first: str | None = None) -> int:
    """`--seeds`: cfg over every seed, one process each (`run_multiseed_demo`), in cfg.out/seed-S.
    `reuse_first`: the first seed evaluates the runs finished there (cfg.reuse_training) instead of
    training them again."""
    from resrl.experiments.jobs import default_workers
    from resrl.experiments.seeds import run_multiseed_demo

    configs = seed_configs(cfg, seeds)
    if reuse_first is not None:
        configs[seeds[0]] = replace(configs[seeds[0]], reuse_training=reuse_first)
    return run_multiseed_demo(configs, cfg.out, workers or default_workers(len(seeds)), baseline,
                              shared_start=kind.shares_start)


def _baseline(labels) -> str:
    """What the other methods are paired with besides the start: GRPO when it runs, else the start."""
    from resrl.demo.config import START

    return "grpo" if "grpo" in labels else START


def run_grid(cfg, kind, grid, seeds, workers: int | None = None, dev_eval_samples: int | None = None) -> int:
    """`resrl demo --grid KEY=V1,V2 [--seeds ...]`: each algorithm's setting chosen on the dev split of
    the first seed (one experiment in OUT/dev with every (algorithm, value) of `grid`, evaluated on the
    dev split with `dev_eval_samples` per problem where given), then the chosen variants over the seeds
    (`run_multiseed`, OUT/seed-S), reported on the held-out split; OUT/dev.md, dev.json, dev_grid.png
    show the choice (resrl.experiments.grid's report)."""
    import json
    from pathlib import Path

    from resrl.demo.config import ALIASES, with_overrides
    from resrl.experiments.grid import choose_on_dev, write_dev_report
    from resrl.experiments.jobs import default_workers
    from resrl.experiments.seeds import run_seeds
    from resrl.train.variants import with_settings

    methods = list(cfg.algorithms)
    out = Path(cfg.out)
    labels = {m: [(pt, with_settings(m, pt)) for pt in grid] for m in methods}
    every = tuple(label for m in methods for _, label in labels[m])
    print(f"choosing {', '.join(grid[0])} for {', '.join(methods)} on the dev split (seed {seeds[0]}, "
          f"{len(methods) * len(grid)} RL runs from one start) in {out / 'dev'}", flush=True)
    dev = replace(cfg, algorithms=every, seed=seeds[0], out=str(out / "dev"), eval_split="dev", threads=1)
    if dev_eval_samples is not None:  # the choice needs only the dev Avg@n: fewer samples than Pass@k's
        dev = with_overrides(dev, [f"{ALIASES['eval_samples']}={dev_eval_samples}"])
    inner = workers or default_workers(len(every), quick=cfg.is_quick)
    summary = run_seeds({seeds[0]: dev}, workers=1, inner_workers=inner, phase="dev")[seeds[0]]
    dev_scores = {m: [(pt, float(summary["results"][label]["avg"])) for pt, label in labels[m]] for m in methods}
    chosen = choose_on_dev(dev_scores)
    files = write_dev_report(out, dev_scores, chosen, f"Avg@{summary['config']['eval']['n']}",
                             [f"{cfg.task_name} dev split"], seeds[0])
    print(files[0].read_text(), flush=True)
    final = [with_settings(m, chosen[m]) for m in methods]
    (out / "chosen.json").write_text(json.dumps(dict(zip(methods, final)), indent=1))
    baseline = final[methods.index("grpo")] if "grpo" in methods else final[0]
    # the first seed's chosen runs were trained in OUT/dev: where the task's runs share their start (a
    # pretrained model), that seed evaluates them on the held-out split instead of training them again
    return run_multiseed(replace(cfg, algorithms=tuple(final), eval_split="test"), kind, seeds, workers, baseline,
                         reuse_first=str(out / "dev") if kind.shares_start else None)
