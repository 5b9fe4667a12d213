"""The one experiment pipeline behind `resrl demo`, for every kind (`resrl.experiments.kinds`):

    checks -> the start (warm start / behaviour cloning / base model), saved to OUT/warm_start
        -> every method from that start (`run_methods`: here or as worker processes), each its
           training (checkpointed, resumable) and its evaluation (`resrl.experiments.method`),
           while the start itself is evaluated
        -> records -> the kind's report -> OUT/summary.json -> the results table

A run is resumable: the same command on the same OUT keeps the start (OUT/start.json) and every
method that finished under the same settings, resumes a method killed while training from its newest
checkpoint (the trainer's exact resume) and one killed while evaluating from its evaluation records.
Everything is deterministic given `cfg.seed`; the numbers do not depend on the number of workers.
"""

from __future__ import annotations

import functools
import json
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from resrl.demo.config import START, ExperimentConfig
from resrl.errors import InputError
from resrl.experiments.kinds import ExperimentKind, Start, kind_of
from resrl.experiments.layout import (HANDOFF_FILE, SUMMARY_FILE, jsonable, read_handoff, read_result, run_dir,
                                      write_json_atomic)

START_FILE = "start.json"  # OUT/start.json: the start phase finished (its summary fields and inputs)


@dataclass
class Experiment:
    """One seed's experiment as it runs: its config, task, kind, and where it writes and shows."""

    cfg: ExperimentConfig
    task: object  # the DemoTask (resrl.demo.tasks)
    kind: ExperimentKind  # bound to the task
    display: object  # resrl.experiments.present.display.Display
    log_path: Path
    summary: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)

    @property
    def out(self) -> Path:
        return Path(self.cfg.out)


def validate_methods(cfg: ExperimentConfig, kind: ExperimentKind) -> None:
    """Every method is a registry algorithm whose training config (the experiment's, its variant
    settings over it) is valid (`TrainConfig.validate`: the start and the rows aside, which the start
    makes): one error naming the key, before any work."""
    from resrl.core.registry import ALGORITHMS

    unknown = [a for a in cfg.algorithms if a.split("/")[0] not in ALGORITHMS]
    if unknown or not cfg.algorithms:
        raise InputError(f"--algorithms: unknown {unknown} (choose from {sorted(ALGORITHMS)}, "
                         "optionally with /key=value settings)")
    inputs = {"data_path": "train.jsonl", "test_games": []}  # placeholders: only the settings are checked
    for algo in cfg.algorithms:  # a bad variant setting fails here
        kind.train_config(cfg, algo, inputs, Path(cfg.out)).validate(need_model=False, need_data=False)


def check_methods(cfg: ExperimentConfig, kind: ExperimentKind, workers: int | None) -> int:
    """Before anything runs: the methods' training configs are valid (`validate_methods`), `workers`
    (None: one per method up to the CPUs, 1 with --quick: `jobs.default_workers`) is >= 1; returns the
    workers to use (at most one per method) and sets this process's torch threads (process-wide: the
    demo is its own process)."""
    import torch

    from resrl.experiments.jobs import default_workers

    validate_methods(cfg, kind)
    workers = default_workers(len(cfg.algorithms), quick=cfg.is_quick) if workers is None else workers
    if workers < 1:
        raise InputError(f"--workers must be >= 1, got {workers}")
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    return min(workers, len(cfg.algorithms))


def _kept_start(out: Path, cfg: ExperimentConfig) -> dict | None:
    """OUT/start.json when the experiment in OUT is this one (same task and settings; the list of
    methods and where OUT is aside: a copied OUT keeps its start): its start is kept."""
    from resrl.experiments.workers import same_experiment

    if not (out / START_FILE).is_file() or not (out / HANDOFF_FILE).is_file():
        return None
    before = read_handoff(out)
    before = {**before, "config": {**before.get("config", {}), "out": cfg.out}, "inputs": {}}
    if not same_experiment(before, cfg.task_name, cfg, {}):
        return None
    kept = json.loads((out / START_FILE).read_text())
    data = kept.get("inputs", {}).get("data_path")
    if data is not None and not (out / data).is_file():  # the start's rows are part of it
        return None
    return kept


def run_experiment(cfg: ExperimentConfig, workers: int | None = None, kind: ExperimentKind | None = None) -> dict:
    """One seed, end to end (see the module docstring); returns the summary written to OUT/summary.json.

    workers: processes for the methods' runs (None: `check_methods`'s default). With 1 every phase runs in
    this process, one after the other. With more, once the start is saved, each method's run is a
    worker process (`resrl.experiments.workers`, one torch thread each) while this process evaluates
    the start. Each run seeds itself and loads its start from disk, so every number is the same
    either way (tested bit for bit); only the timings differ."""
    from resrl.demo.tasks import get_demo_task
    from resrl.experiments.method import eval_dir, run_one
    from resrl.experiments.present.display import (Display, console, eval_info, follow_metrics, header, print_table,
                                                   split_title)
    from resrl.experiments.workers import run_methods

    kind = kind or kind_of(get_demo_task(cfg.task_name))  # the task's kind, bound to it (`kind_of`)
    task = kind.task
    workers = check_methods(cfg, kind, workers)
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    log_path = out / "demo.log"
    log_path.write_text("")
    screen = console()
    exp = Experiment(cfg, task, kind, Display(screen), log_path)
    t_start = time.perf_counter()
    exp.summary.update({"config": jsonable(asdict(cfg)), "results": {}, "timings": exp.timings, "workers": workers})
    header(exp, workers)

    with exp.display:
        kept = _kept_start(out, cfg)
        if kept is not None:
            exp.summary.update(kept["summary"])
            exp.timings.update(kept["timings"])
            start = Start(out / "warm_start", inputs=kept["inputs"])
            exp.display.say(f"{START}: kept from an earlier run of this experiment (OUT/{START_FILE})")
        else:
            (out / START_FILE).unlink(missing_ok=True)
            shutil.rmtree(out / "eval", ignore_errors=True)  # a new start: no evaluation to resume
            start = kind.start(exp)
            fields = {k: v for k, v in exp.summary.items() if k not in ("config", "results", "timings", "workers")}
            write_json_atomic(out / START_FILE, {"summary": fields, "timings": dict(exp.timings),
                                                 "inputs": start.inputs})
        start_result: dict = {}

        def evaluate_start() -> None:
            start_result.update(kind.evaluate_start(exp, start))

        bars, seen = {}, {}
        steps = kind.train_config(cfg, cfg.algorithms[0], start.inputs, out).train.max_steps

        def say(line: str) -> None:
            """The job runner's lines become phases: a bar per run on a terminal, start/end lines in a log."""
            name, _, rest = line.partition(": ")
            algo = name[3:] if name.startswith("RL ") else None
            if algo in cfg.algorithms and rest.startswith("started"):
                bars[algo] = exp.display.start(f"RL + evaluate {algo}", total=steps, info="worker process")
            elif algo in cfg.algorithms and rest.startswith("done") and algo in bars:
                exp.display.done(bars[algo], info=eval_info(read_result(out, algo)["result"]))
            else:
                exp.display.say(line)

        def on_poll() -> None:
            """On a terminal, each worker's bar follows its run's metrics.jsonl."""
            if exp.display.live:
                for algo, bar in list(bars.items()):
                    follow_metrics(exp.display, bar, run_dir(out, algo) / "metrics.jsonl", seen, algo, steps)

        t1 = time.perf_counter()
        # run_one(cfg, label, inputs) of the worker protocol; in this process with its bars and its log (exp)
        one = functools.partial(run_one, kind=kind, exp=exp)
        results = run_methods(out, cfg.task_name, cfg, cfg.algorithms, one, workers, inputs=start.inputs,
                              say=say, on_poll=on_poll, while_waiting=evaluate_start, resume=True,
                              on_discard=lambda label: shutil.rmtree(eval_dir(out, label), ignore_errors=True))
        if workers > 1:
            exp.timings["RL runs + evaluations (parallel)"] = time.perf_counter() - t1
        exp.summary["results"][START] = start_result
        for label in cfg.algorithms:
            exp.timings[f"RL {label}"] = results[label]["rl_seconds"]
            exp.timings[f"evaluate {label}"] = results[label]["eval_seconds"]
            exp.summary["results"][label] = kind.entry(exp.summary, label, results[label])

        bar = exp.display.start("plots + report", total=1)
        files = kind.report(exp, exp.summary)
        exp.timings["plots + report"] = exp.display.done(bar)

    exp.timings["total"] = time.perf_counter() - t_start
    files = kind.report(exp, exp.summary, plots=False) or files  # the report's timing table, with the total
    (out / SUMMARY_FILE).write_text(json.dumps(jsonable(exp.summary), indent=1))
    print_table(screen, exp.summary["results"], title=split_title(cfg))
    screen.print(f"\n[bold]done in {exp.timings['total']:.0f} s.[/bold] Outputs in {out}/:")
    for f in [*files, out / SUMMARY_FILE]:
        screen.print(f"  {f}")
    return exp.summary


__all__ = ["Experiment", "START_FILE", "validate_methods", "check_methods", "run_experiment"]
