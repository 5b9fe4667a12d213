"""`resrl compare --config FILE --algorithms A,B --seeds 0,1,2 --data NAME_OR_FILE`: a multi-seed
comparison of any `resrl train` configuration, each method at its own hyper-parameters.

For every (method, seed): `resrl train --config FILE <the method's settings> train.seed=S
train.output_dir=OUT/<method>/seed-S`, then `resrl eval` of its final model on `--data` with sampling
seed S (`OUT/<method>/seed-S/eval`). A method is a variant label (`resrl.train.variants`): a
registry algorithm with its own settings, any config key among them (`resrl/train.learning_rate=3e-5`).
Jobs run in parallel processes (one torch thread each, `--workers` at once) and resume: a finished
training (its `model/` directory) or evaluation (its `summary.json`) is kept. Then per method the
mean and 95 % Student-t interval over seeds of Avg@n and Pass@k (the evaluation's "overall"
numbers), and paired differences against the baseline (GRPO when present): `compare.md`,
`compare.json`, `passk_seeds.png`.

With `--grid KEY=V1,V2,...` (repeatable: the product of the lists) each method's values are chosen
first, on the first seed, by the `--select` metric on `--dev-data` (a split disjoint from `--data`:
checked), each point trained and evaluated under OUT/dev/; the chosen point of each method then runs
on every seed and is reported on `--data`. `dev.md`, `dev.json` and `dev_grid.png` show every point's
dev score and what was chosen; the held-out split never takes part in the choice.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from resrl.errors import InputError


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "compare",
        help="train and evaluate several methods over several seeds, each at its own (dev-chosen) settings; "
             "mean, 95 %% intervals, paired differences",
        description="For every method and seed: resrl train (the config with the method's settings and train.seed) "
                    "then resrl eval of its model; parallel processes, resumable; then mean and 95 %% interval "
                    "over seeds per method and paired differences against a baseline. --grid chooses each "
                    "method's settings on --dev-data first.",
    )
    p.add_argument("--config", required=True, help="resrl train YAML config")
    p.add_argument("--algorithms", required=True,
                   help="comma-separated methods: registry names or variants with their own settings, e.g. "
                        "grpo,w-reinforce,resrl/train.learning_rate=3e-5/resrl.rank=16")
    p.add_argument("--seeds", default="0,1,2", help="e.g. 0,1,2 or 0-4 (default 0,1,2)")
    p.add_argument("--data", required=True, nargs="+", metavar="NAME_OR_FILE", help="held-out evaluation data "
                                                                                     "(as resrl eval)")
    p.add_argument("--grid", action="append", default=[], metavar="KEY=V1,V2,...",
                   help="a setting searched for each method on --dev-data with the first seed, e.g. "
                        "train.learning_rate=1e-5,3e-5,1e-4 (repeat for a product of several keys)")
    p.add_argument("--dev-data", nargs="+", default=None, metavar="NAME_OR_FILE",
                   help="the dev split --grid chooses on (needed with --grid; must not share a prompt with --data)")
    p.add_argument("--select", default=None, metavar="METRIC",
                   help="the dev metric that chooses, e.g. avg@16 or pass@4 (default: the evaluation's avg@n)")
    p.add_argument("--out", default="runs/compare")
    p.add_argument("--baseline", default=None, help="method the others are paired against (default grpo, "
                                                    "else the first)")
    p.add_argument("--workers", type=int, default=None, help="jobs at once (default: the number of CPUs)")
    p.add_argument("--eval-args", default="", help="extra resrl eval options as one string, e.g. "
                                                   "'--n 16 --limit 100 --reward exact'")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="config overrides for every training run")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import shlex

    from resrl.core.registry import ALGORITHMS
    from resrl.experiments.grid import check_disjoint, choose_on_dev, parse_grid, write_dev_report
    from resrl.experiments.jobs import Job, Step, available_cpus, run_jobs
    from resrl.experiments.layout import SUMMARY_FILE, run_dir, seed_dir
    from resrl.eval.seeds import parse_seeds
    from resrl.train.variants import parse_variant, with_settings

    labels = [a.strip() for a in args.algorithms.split(",") if a.strip()]
    variants = {label: parse_variant(label) for label in labels}
    unknown = [v.name for v in variants.values() if v.name not in ALGORITHMS]
    if unknown or not labels:
        raise InputError(f"--algorithms: unknown {unknown} (choose from {sorted(ALGORITHMS)})")
    if not Path(args.config).is_file():
        raise FileNotFoundError(f"--config {args.config}: no such file")
    seeds = parse_seeds(args.seeds)
    baseline = args.baseline or ("grpo" if "grpo" in labels else labels[0])
    if baseline not in labels:
        raise InputError(f"--baseline {baseline!r} is not among --algorithms {labels}")
    grid = parse_grid(args.grid) if args.grid else []
    if grid and not args.dev_data:
        raise InputError("--grid needs --dev-data: the split each method's settings are chosen on")
    out = Path(args.out)
    eval_args = shlex.split(args.eval_args)
    workers = args.workers or available_cpus()

    def job(label: str, seed: int, data: list[str], root: Path) -> tuple[Job, Path]:
        run = seed_dir(run_dir(root, label), seed)  # OUT/<run>/seed-S (resrl.experiments.layout)
        train = ["train", "--config", args.config, *args.overrides, *parse_variant(label).train_overrides(),
                 f"train.seed={seed}", f"train.output_dir={run}"]
        evaluate = ["eval", "--model", str(run / "model"), "--data", *data, "--seed", str(seed),
                    "--out", str(run / "eval"), "--threads", "1", "--no-progress", *eval_args]
        return (Job(f"{label} seed {seed}" + (" (dev)" if root != out else ""),
                    [Step(train, run / "model" / "config.json"), Step(evaluate, run / "eval" / SUMMARY_FILE)],
                    run / "console.log"), run / "eval" / SUMMARY_FILE)

    final = {label: label for label in labels}  # method -> the label it runs at on every seed
    if grid:
        check_disjoint(args.dev_data, args.data)
        points = {label: [(pt, with_settings(label, pt)) for pt in grid] for label in labels}
        dev_jobs = {(label, pl): job(pl, seeds[0], args.dev_data, out / "dev")
                    for label in labels for _, pl in points[label]}
        print(f"choosing {', '.join(g.split('=')[0] for g in args.grid)} for {len(labels)} method(s) on "
              f"{' '.join(args.dev_data)} (seed {seeds[0]}, {len(dev_jobs)} runs)", flush=True)
        run_jobs([j for j, _ in dev_jobs.values()], workers)
        metric = args.select
        dev_scores = {}
        for label in labels:
            scored = []
            for pt, pl in points[label]:
                metrics = overall_metrics(json.loads(dev_jobs[(label, pl)][1].read_text()))
                metric = metric or _default_metric(metrics)
                if metric not in metrics:
                    raise InputError(f"--select {metric!r}: the evaluation reports {sorted(metrics)}")
                scored.append((pt, metrics[metric]))
            dev_scores[label] = scored
        chosen = choose_on_dev(dev_scores)
        final = {label: with_settings(label, chosen[label]) for label in labels}
        files = write_dev_report(out, dev_scores, chosen, metric, args.dev_data, seeds[0])
        print(files[0].read_text(), flush=True)

    main_jobs = {(label, s): job(final[label], s, args.data, out) for label in labels for s in seeds}
    run_jobs([j for j, _ in main_jobs.values()], workers)
    per_seed = {s: {label: overall_metrics(json.loads(main_jobs[(label, s)][1].read_text())) for label in labels}
                for s in seeds}
    files = write_comparison(out, per_seed, baseline, settings={label: final[label] for label in labels if grid})
    print(files[0].read_text())
    print("wrote " + ", ".join(map(str, files)))
    return 0


def _default_metric(metrics: dict) -> str:
    avg = sorted(m for m in metrics if m.startswith("avg@"))
    if not avg:
        raise InputError(f"the evaluation reports no avg@n to choose on ({sorted(metrics)}): pass --select")
    return avg[-1]


def overall_metrics(summary: dict) -> dict[str, float]:
    """Flat metrics of a `resrl eval` summary.json: avg@n and pass@k of its "overall" entry."""
    m = summary["overall"]
    out = {k: float(v) for k, v in m.items() if k.startswith("avg@") and isinstance(v, (int, float))}
    out.update({f"pass@{k}": float(v) for k, v in m["pass@k"].items()})
    return out


def write_comparison(out: Path, per_seed: dict, baseline: str, settings: dict | None = None) -> list[Path]:
    from resrl.eval.plots import plot_passk
    from resrl.eval.seeds import aggregate_seeds, paired_differences, passk_band_summaries

    agg = aggregate_seeds(per_seed)
    diffs = paired_differences(per_seed, baseline)
    seeds = sorted(per_seed)
    (out / "compare.json").write_text(json.dumps({"seeds": seeds, "per_seed": {str(s): v for s, v in per_seed.items()},
                                                  "aggregate": agg, f"paired_vs_{baseline}": diffs,
                                                  **({"settings_chosen_on_dev": settings} if settings else {})},
                                                 indent=1, default=lambda x: None))
    first = next(iter(agg.values()))
    metrics = sorted((m for m in first if m.startswith("avg@"))) + sorted(
        (m for m in first if m.startswith("pass@")), key=lambda m: int(m[5:]))

    def cell(d):
        return f"{d['mean']:.3f}" if d["n"] < 2 else f"{d['mean']:.3f} [{d['low']:.3f}, {d['high']:.3f}]"

    lines = [f"# {len(agg)} algorithms over {len(seeds)} seeds ({', '.join(map(str, seeds))})", "",
             "Mean over seeds and 95 % Student-t interval over seeds.", "",
             "| algorithm | " + " | ".join(metrics) + " |", "|---|" + "---|" * len(metrics)]
    lines += [f"| {a} | " + " | ".join(cell(d[m]) for m in metrics) + " |" for a, d in agg.items()]
    if settings:
        lines += ["", "Each method ran at the settings chosen on the dev split (dev.md):", ""]
        lines += [f"- {a}: `{settings[a]}`" for a in agg if a in settings]
    if diffs:
        lines += ["", f"Paired difference against {baseline} (same seed), and seeds where higher:", "",
                  f"| algorithm − {baseline} | " + " | ".join(metrics) + " |", "|---|" + "---|" * len(metrics)]
        lines += [f"| {a} | " + " | ".join(f"{cell(d[m])} ({d[m]['wins']}/{d[m]['n']})" for m in metrics) + " |"
                  for a, d in diffs.items()]
    (out / "compare.md").write_text("\n".join(lines) + "\n")
    summaries = passk_band_summaries(agg, "overall")
    plot_passk(summaries, list(agg), out / "passk_seeds.png", title=f"mean and 95 % interval over {len(seeds)} seeds")
    return [out / "compare.md", out / "compare.json", out / "passk_seeds.png"]


__all__ = ["register", "run", "overall_metrics", "write_comparison"]
