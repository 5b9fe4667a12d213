"""Multi-seed experiments (`resrl demo --seeds`): one demo process per seed (in parallel, one torch thread each, resumable), then
per policy the mean and 95 % interval of every metric over seeds, and paired differences against
a baseline (GRPO) on the same seeds.

The unit of replication is the seed: a seed fixes the tiny model's initialisation, the warm start,
the held-out split, the RL prompts and the sampling. Every policy of one seed is evaluated on that
seed's held-out split, so a per-seed difference (algorithm − GRPO) compares like with like; the
interval is Student's t over seeds (`resrl.statistics`), which is honest about how few seeds there
are (with 3 seeds, t = 4.30).

    aggregate_seeds(per_seed)            {policy: {metric: {mean, low, high, std, n}}}
    paired_differences(per_seed, "grpo") {policy: {metric: {mean, low, high, std, n, wins}}}
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

from resrl.demo.config import START, ExperimentConfig
from resrl.errors import InputError
from resrl.experiments.layout import SUMMARY_FILE, seed_dir
from resrl.eval.seeds import aggregate_seeds, paired_differences, parse_seeds, passk_band_summaries  # noqa: F401

# per_seed: {seed: {policy: {metric: float}}}
PerSeed = dict


# the pretrained demo's accuracy-apart-from-format metrics (`resrl.experiments.kinds.format_metrics`),
# and a step demo's mean episode reward (WebShop's score: `score` sampled, `greedy_score`)
PRETRAINED_METRICS = ("format_rate", "accuracy_formatted", "truncated", "accuracy_finished", "score", "greedy_score")


def metrics_of(result: dict) -> dict[str, float]:
    """Flat metrics of one policy's entry in a demo summary.json: greedy, Avg@n, Pass@k (and the
    pretrained demo's format rate, accuracy among formatted answers, truncation and accuracy among
    the answers finished inside the budget)."""
    out = {"greedy": float(result["greedy"]), "avg": float(result["avg"])}
    for k, v in result.get("pass_at", {}).items():
        out[f"pass@{k}"] = float(v)
    for key in PRETRAINED_METRICS:  # the pretrained demo's, where present
        if result.get(key) is not None and result[key] == result[key]:  # not None, not NaN
            out[key] = float(result[key])
    for step, entry in result.get("curve", {}).items():  # the models kept along training (--curve-steps)
        out[curve_metric("avg", int(step))] = float(entry["avg"])
        out[curve_metric("greedy", int(step))] = float(entry["greedy"])
    return out


def curve_metric(metric: str, step: int) -> str:
    """The per-seed metric name of `metric` at a curve step (`metrics_of`): "avg@step20"."""
    return f"{metric}@step{step}"


def per_seed_metrics(summaries: dict[int, dict]) -> PerSeed:
    """{seed: summary.json} -> {seed: {policy: {metric: value}}}."""
    return {seed: {policy: metrics_of(r) for policy, r in s["results"].items()} for seed, s in summaries.items()}


def run_seeds(configs: dict[int, ExperimentConfig], workers: int, poll_s: float = 1.0, inner_workers: int = 1,
              phase: str | None = None) -> dict[int, dict]:
    """Run the experiment of every seed whose summary.json is missing, at most `workers` at a time, and
    return {seed: summary}. `configs`: {seed: that seed's ExperimentConfig, `out` its own directory}.
    Each seed is one process, `python -m resrl.experiments.seeds DIR`, that runs `run_experiment` on
    the config the parent wrote to DIR/run_config.json (RUN_CONFIG_FILE: the config itself, not a
    command line rebuilt from it), with `inner_workers` processes for its methods' runs (1: one after
    the other in that process). A finished seed is never rerun (resume by running the same command
    again). `phase`: a name shown beside the seed's (the grid's "dev")."""
    from resrl.experiments.jobs import Job, Step, run_jobs
    from resrl.experiments.layout import RUN_CONFIG_FILE, config_to_dict, write_json_atomic

    jobs = []
    for s, cfg in configs.items():
        where = Path(cfg.out)
        where.mkdir(parents=True, exist_ok=True)
        if not (where / SUMMARY_FILE).exists():
            write_json_atomic(where / RUN_CONFIG_FILE, {"task": cfg.task_name, "config": config_to_dict(cfg),
                                                        "workers": inner_workers})
        jobs.append(Job(f"seed {s}" + (f" ({phase})" if phase else ""),
                        [Step([str(where)], where / SUMMARY_FILE, module=__name__)], where / "console.log"))
    run_jobs(jobs, workers, poll_s)
    return {s: json.loads((Path(cfg.out) / SUMMARY_FILE).read_text()) for s, cfg in configs.items()}


def seed_main(where: str | Path) -> int:
    """`python -m resrl.experiments.seeds DIR`: one seed's experiment, from DIR/run_config.json
    (`run_seeds`). Bad input is one line on stderr and exit 2, as `resrl demo` reports it."""
    import sys

    from resrl.demo.tasks import get_demo_task
    from resrl.experiments.kinds import handoff_config, kind_of
    from resrl.experiments.layout import RUN_CONFIG_FILE
    from resrl.experiments.pipeline import run_experiment

    try:
        data = json.loads((Path(where) / RUN_CONFIG_FILE).read_text())
        task = get_demo_task(data["task"])
        run_experiment(handoff_config(task, data["config"]), workers=data["workers"], kind=kind_of(task))
    except (InputError, FileNotFoundError) as exc:
        print(f"resrl demo: error: {exc}", file=sys.stderr)
        return 2
    return 0


def run_multiseed_demo(configs: dict[int, ExperimentConfig], out: str | Path, workers: int, baseline: str,
                       shared_start: bool = False) -> int:
    """`resrl demo --task TASK --seeds ...`: one process per seed (`run_seeds`, `configs`: {seed: its
    config}), then the tables and plot in `out` (`write_multiseed`, paired with the start and `baseline`)."""
    summaries = run_seeds(configs, workers)
    files = write_multiseed(out, summaries, baseline=baseline, shared_start=shared_start)
    print(files[0].read_text())
    print("wrote " + ", ".join(map(str, files)))
    return 0


def write_multiseed(out: str | Path, summaries: dict[int, dict], baseline: str = "grpo",
                    shared_start: bool = False) -> list[Path]:
    """multiseed.json, multiseed.md and passk_seeds.png (Pass@k mean and interval per policy).

    Paired differences are against the warm start (did RL improve the policy it started from?,
    key `paired_vs_warm_start`) and against `baseline` (key `paired_vs_<baseline>`), each where
    that policy is in every seed's summary."""
    out = Path(out)
    per_seed = per_seed_metrics(summaries)
    agg = aggregate_seeds(per_seed)
    seeds = sorted(summaries)
    paired = {}
    for ref in dict.fromkeys((START, baseline)):
        if all(ref in v for v in per_seed.values()):
            paired[ref] = paired_differences(per_seed, ref)
    (out / "multiseed.json").write_text(json.dumps(
        {"seeds": seeds, "per_seed": {str(s): v for s, v in per_seed.items()}, "aggregate": agg,
         **{"paired_vs_" + ref.replace(" ", "_"): d for ref, d in paired.items()}}, indent=1, default=lambda x: None))

    def cell(d):
        if d["n"] < 2:
            return f"{d['mean']:.3f}"
        return f"{d['mean']:.3f} [{d['low']:.3f}, {d['high']:.3f}]"

    first = next(iter(agg.values()))
    present = {m for d in agg.values() for m in d}  # a policy may lack one (no formatted answer on some seed)
    metrics = ["greedy", "avg"] + [m for m in PRETRAINED_METRICS if m in present] + sorted(
        (m for m in first if m.startswith("pass@")), key=lambda m: int(m[5:]))
    names = {"greedy": "greedy", "avg": "Avg@n", "format_rate": "format rate",
             "accuracy_formatted": "accuracy among formatted", "truncated": "truncated",
             "accuracy_finished": "accuracy among finished"}
    if shared_start:  # every seed trains from one pretrained model (ExperimentKind.shares_start)
        what = ("its own training problems, held-out split and sampling, all from the same pretrained model: "
                "the warm start is the base model")
    else:
        what = "its own model initialisation, warm start, held-out split and sampling"
    lines = [f"# Demo over {len(seeds)} seeds ({', '.join(map(str, seeds))})", "",
             f"Mean over seeds and 95 % Student-t interval over seeds (each seed: {what}; every policy of a seed "
             "is evaluated on that seed's split).", "",
             "| policy | " + " | ".join(names.get(m, m.replace("pass@", "Pass@")) for m in metrics) + " |",
             "|---|" + "---|" * len(metrics)]
    for p, d in agg.items():
        lines.append(f"| {p} | " + " | ".join(cell(d[m]) if m in d else "—" for m in metrics) + " |")
    for ref, diffs in paired.items():
        if not diffs:
            continue
        lines += ["", f"Paired difference against the {ref} (same seed), mean [95 % interval], and the number of "
                  f"seeds where the policy is higher:", "",
                  "| policy − " + ref + " | " + " | ".join(names.get(m, m.replace("pass@", "Pass@")) for m in metrics)
                  + " |", "|---|" + "---|" * len(metrics)]
        for p, d in diffs.items():
            lines.append(f"| {p} | " + " | ".join(
                f"{cell(d[m])} ({d[m]['wins']}/{d[m]['n']})" if m in d else "—" for m in metrics) + " |")
    steps = curve_steps(summaries)
    if steps:
        lines += curve_table(agg, paired, steps)
    (out / "multiseed.md").write_text("\n".join(lines) + "\n")

    from resrl.experiments.method import HELD_OUT
    from resrl.eval.plots import plot_passk  # the evaluator's Pass@k plotter, with bands

    plot_passk(passk_band_summaries(agg, HELD_OUT), list(agg), out / "passk_seeds.png",
               title=f"Pass@k, mean and 95 % interval over {len(seeds)} seeds")
    files = [out / "multiseed.md", out / "multiseed.json", out / "passk_seeds.png"]
    if steps:
        files.append(plot_curve(agg, steps, out / "curve_seeds.png", len(seeds)))
    rewards = training_rewards(out, summaries)
    if rewards:
        files.append(plot_training_rewards(rewards, out / "training_reward_seeds.png"))
    return files


def curve_steps(summaries: dict[int, dict]) -> list[int]:
    """The steps at which every seed's methods were evaluated along training, the last one (the final
    model, `config.train.train.max_steps`) included; [] when the experiment kept no curve (--curve-steps)."""
    kept = None
    for s in summaries.values():
        for policy, r in s["results"].items():
            if policy != START:
                steps = {int(k) for k in r.get("curve", {})}
                kept = steps if kept is None else kept & steps
    if not kept:
        return []
    last = {rl_steps(s["config"]) for s in summaries.values()}
    if len(last) != 1:
        raise InputError(f"seeds trained for different numbers of steps {sorted(last)}: no common curve")
    return sorted(kept) + [last.pop()]


def rl_steps(config: dict) -> int:
    """The RL steps of a summary.json's experiment config: its training config's train.max_steps (the
    `rl.steps` of a summary written before the experiment was a `resrl train` config, which a resumed
    `--seeds` may keep)."""
    return int(config["train"]["train"]["max_steps"] if "train" in config else config["rl"]["steps"])


def _at(metric: str, step: int, steps: list[int]) -> str:
    """The per-seed metric at `step` of the curve (the last step is the final model's own metric)."""
    return metric if step == steps[-1] else curve_metric(metric, step)


def curve_table(agg: dict, paired: dict, steps: list[int]) -> list[str]:
    """multiseed.md's curve section: Avg@n of every policy at each step (mean [95 % interval] over
    seeds; the warm start at step 0) and each paired difference per step."""
    def cell(d):
        return f"{d['mean']:.3f}" if d["n"] < 2 else f"{d['mean']:.3f} [{d['low']:.3f}, {d['high']:.3f}]"

    head = "| " + " | ".join(f"step {n}" for n in steps) + " |"
    lines = ["", "Held-out Avg@n along training (the model kept at each step, evaluated like the final one; mean "
             "[95 % interval] over seeds):", "", "| policy " + head, "|---|" + "---|" * len(steps)]
    for p, d in agg.items():
        if p == START:
            lines.append(f"| {p} (step 0) | " + " | ".join(cell(d["avg"]) for _ in steps) + " |")
        elif all(_at("avg", n, steps) in d for n in steps):
            lines.append(f"| {p} | " + " | ".join(cell(d[_at("avg", n, steps)]) for n in steps) + " |")
    for ref, diffs in paired.items():
        rows = [(p, d) for p, d in diffs.items() if p != START and all(_at("avg", n, steps) in d for n in steps)]
        if not rows:
            continue
        lines += ["", f"Avg@n along training, paired difference against the {ref} (same seed), mean [95 % interval] "
                  "(seeds higher):", "", f"| policy − {ref} " + head, "|---|" + "---|" * len(steps)]
        for p, d in rows:
            lines.append(f"| {p} | " + " | ".join(f"{cell(d[_at('avg', n, steps)])} ({d[_at('avg', n, steps)]['wins']}/"
                                                  f"{d[_at('avg', n, steps)]['n']})" for n in steps) + " |")
    return lines


def plot_curve(agg: dict, steps: list[int], path: Path, n_seeds: int) -> Path:
    """Held-out Avg@n against the RL step per policy: mean over seeds with its 95 % band, from the
    warm start's at step 0."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    start = agg.get(START, {}).get("avg")
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    for p, d in agg.items():
        if p == START or not all(_at("avg", n, steps) in d for n in steps):
            continue
        pts = [d[_at("avg", n, steps)] for n in steps]
        xs = [n for n in steps]
        if start is not None:
            pts, xs = [start, *pts], [0, *xs]
        ax.plot(xs, [q["mean"] for q in pts], marker="o", label=p)
        ax.fill_between(xs, [q["low"] if q["n"] > 1 else q["mean"] for q in pts],
                        [q["high"] if q["n"] > 1 else q["mean"] for q in pts], alpha=0.15)
    ax.set_xlabel("RL step")
    ax.set_ylabel("held-out Avg@n")
    ax.set_xticks([0, *steps] if start is not None else steps)
    ax.set_title(f"held-out accuracy along training, mean and 95 % interval over {n_seeds} seeds")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def training_rewards(out: str | Path, summaries: dict[int, dict]) -> dict[str, dict[int, list[tuple[int, float]]]]:
    """{policy: {seed: [(step, mean training reward)]}} from each seed's runs (OUT/seed-S/<run>/result.json),
    for the methods every seed trained; {} when the runs' results are not on disk."""
    from resrl.experiments.layout import RESULT_FILE, run_dir

    rewards: dict = {}
    for seed, s in summaries.items():
        for policy in s["results"]:
            path = run_dir(seed_dir(out, seed), policy) / RESULT_FILE
            if policy == START or not path.is_file():
                continue
            log = [(int(m["step"]), float(m["reward"])) for m in json.loads(path.read_text()).get("metrics", [])
                   if "reward" in m and "step" in m]
            if log:
                rewards.setdefault(policy, {})[seed] = log
    return {p: d for p, d in rewards.items() if len(d) == len(summaries)}


def plot_training_rewards(rewards: dict, path: Path) -> Path:
    """One panel per method: each seed's mean training reward per RL step (thin) and their mean (thick),
    so a collapse and recovery on one seed shows."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(rewards)
    cols = min(3, n)
    rows = -(-n // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.0 * rows), squeeze=False, sharey=True)
    for ax, (policy, seeds) in zip(axes.flat, rewards.items()):
        for seed, log in sorted(seeds.items()):
            ax.plot([x for x, _ in log], [y for _, y in log], lw=0.9, alpha=0.8, label=f"seed {seed}")
        common = sorted(set.intersection(*({x for x, _ in log} for log in seeds.values())))
        by = [dict(log) for log in seeds.values()]
        ax.plot(common, [sum(d[x] for d in by) / len(by) for x in common], color="black", lw=2, label="mean")
        ax.set_title(policy, fontsize=9)
        ax.set_xlabel("RL step")
    for ax in axes.flat[n:]:
        ax.axis("off")
    axes[0][0].set_ylabel("training reward (mean over the step's samples)")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path




def __getattr__(name: str):
    """A name that left this module (WARM_START, budget_args): an ImportError naming its new path (resrl._moved)."""
    from resrl._moved import moved_name

    raise moved_name(__name__, name)


__all__ = ["curve_metric", "curve_steps", "curve_table", "plot_curve", "training_rewards", "plot_training_rewards",
           "run_multiseed_demo", "metrics_of", "per_seed_metrics", "aggregate_seeds", "paired_differences",
           "parse_seeds", "seed_dir", "run_seeds", "seed_main", "write_multiseed"]


if __name__ == "__main__":  # one seed's process of `run_seeds`: python -m resrl.experiments.seeds DIR
    import sys

    sys.exit(seed_main(*sys.argv[1:]))
