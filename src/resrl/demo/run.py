"""`run_demo(config)`: the whole offline demo, from a random tiny model to report.md.

    task + tiny model -> supervised warm start (greedy ~30 %) -> evaluate
        -> for each algorithm: RL from the same warm start, same seed and budget (resrl.train) -> evaluate
        -> ω analysis of negative completions -> plots -> report.md

Every phase shows progress; everything is deterministic given `config.seed`. The RL runs go one
after the other in this process, or as worker processes (`resrl.demo.parallel`) with identical
numbers. The building blocks are in `resrl.demo.pipeline`.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import asdict, replace
from pathlib import Path

from resrl.demo.display import Display
from resrl.demo.evaluate import EvalResult, greedy_accuracy
from resrl.demo.parallel import run_workers
from resrl.demo.pipeline import (DemoConfig, _algorithm_names, _console, _evaluate, _jsonable, _print_table, _quiet,
                                 _tiny_config, eval_problems, run_dir_name, train_and_evaluate, train_config)
from resrl.demo.tasks import build_task, get_demo_task
from resrl.demo.warmstart import warm_start
from resrl.errors import InputError


def default_workers(cfg: DemoConfig) -> int:
    """Worker processes for the RL runs when `--workers` is not given: min(CPUs, runs); 1 with
    --quick, whose RL runs take about a second each, less than a worker process takes to start
    (importing torch, transformers and TRL: measured ~5 s of CPU)."""
    from resrl.eval.jobs import available_cpus

    if cfg.is_quick:
        return 1
    return max(1, min(available_cpus(), len(cfg.algorithms)))


def run_demo(cfg: DemoConfig, workers: int | None = None) -> dict:
    """Run everything; returns the summary written to `out/summary.json`.

    workers: processes for the RL runs (None: `default_workers`). With 1 every phase runs in this
    process, one after the other. With more, once the warm start is saved, each algorithm's RL run
    and its evaluation is a worker process (`resrl.demo.parallel`, one torch thread each, at most
    `workers` at once) while this process evaluates the warm start and runs the ω analysis. Each
    run has its own seed and starts from the saved warm start, so every number is the same either
    way (tested bit for bit); only the timings differ."""
    import torch

    from resrl.models.tiny import build_tiny_model

    unknown = [a for a in cfg.algorithms if a.split("/")[0] not in _algorithm_names()]
    if unknown or not cfg.algorithms:
        raise InputError(f"--algorithms: unknown {unknown} (choose from {sorted(_algorithm_names())}, "
                         "optionally with /key=value settings)")
    for algo in cfg.algorithms:  # a bad variant setting fails here, before the warm start
        train_config(cfg, algo, Path(cfg.out) / run_dir_name(algo))
    workers = default_workers(cfg) if workers is None else workers
    if workers < 1:
        raise InputError(f"--workers must be >= 1, got {workers}")
    workers = min(workers, len(cfg.algorithms))
    if cfg.threads:
        torch.set_num_threads(cfg.threads)  # process-wide: the demo is its own process
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    log_path = out / "demo.log"
    log_path.write_text("")
    shutil.rmtree(out / "eval", ignore_errors=True)  # this run's policies are new: no evaluation to resume
    console = _console()
    display = Display(console)
    t_start = time.perf_counter()
    timings: dict[str, float] = {}
    demo_task = get_demo_task(cfg.task_name)
    task = build_task(cfg)
    test = eval_problems(task, cfg)
    summary: dict = {"config": _jsonable(asdict(cfg)), "results": {}, "timings": timings,
                     "example": {"prompt": test[0].prompt, "target": demo_task.target(test[0])}, "workers": workers}

    console.rule(f"[bold]ResRL demo: {demo_task.title} on a tiny Qwen3 model (offline, CPU)")
    console.print(f"task: {test[0].prompt}{demo_task.target(test[0])}  ({demo_task.description(cfg.task)}); "
                  f"{'held-out' if cfg.eval_split == 'test' else 'dev'} split: {len(test)} problems; "
                  f"RL runs: {len(cfg.algorithms)}, " + ("one after the other" if workers == 1 else
                                                          f"{workers} worker processes"))

    with display:
        # 1. model + warm start -------------------------------------------------------------------
        model, tokenizer = build_tiny_model(None, _tiny_config(cfg))
        n_params = sum(p.numel() for p in model.parameters())
        summary["num_parameters"] = n_params
        dev = task.train_problems(cfg.dev_problems, stream="dev")
        sft = task.train_problems(cfg.warm.max_steps * cfg.warm.batch_size, stream="sft")
        bar = display.start("warm start (supervised)", total=cfg.warm.max_steps)

        def dev_accuracy() -> float:
            return greedy_accuracy(model, tokenizer, dev, cfg.eval, scorer=demo_task.reward)

        def on_step(step: int, loss: float, acc: float | None) -> None:
            info = f"loss {loss:.3f}" + (f"  dev greedy {acc:.0%}" if acc is not None else "")
            display.update(bar, completed=step + 1, info=info if acc is not None or step % 10 == 0 else None)

        with _quiet(log_path):
            ws = warm_start(model, tokenizer, sft, replace(cfg.warm, seed=cfg.seed), dev_accuracy, on_step,
                            target=demo_task.target)
        display.update(bar, total=ws["steps"])
        warm_dir = out / "warm_start"
        with _quiet(log_path):
            model.save_pretrained(warm_dir)
            tokenizer.save_pretrained(warm_dir)
        summary["warm_start"] = {"steps": ws["steps"], "dev_accuracy": ws["dev_accuracy"],
                                 "final_loss": ws["losses"][-1] if ws["losses"] else None}
        last = f", dev greedy {ws['dev_accuracy'][-1][1]:.0%}" if ws["dev_accuracy"] else ""
        timings["warm start"] = display.done(bar, info=f"{ws['steps']} steps{last}")

        # 2-4. RL with each algorithm (same warm start / seed / budget) + evaluations + ω analysis --
        evals: dict[str, EvalResult] = {}
        runs: dict[str, list[dict]] = {}
        analysis: dict = {}  # the ω analysis, filled by warm_start_and_omega

        def warm_start_and_omega() -> None:
            """The warm start's evaluation and the ω analysis: both read only the warm-start model."""
            t0 = time.perf_counter()
            evals["warm start"] = _evaluate(display, "warm start", model, tokenizer, test, cfg, log_path)
            timings["evaluate warm start"] = time.perf_counter() - t0
            from resrl.demo.weights import analyse_omega

            bar = display.start("ω analysis (warm-start policy)", total=1)
            with _quiet(log_path):
                omega = analyse_omega(model, tokenizer, task.train_problems(cfg.omega_problems, stream="omega"),
                                      group_size=cfg.rl.group_size, temperature=cfg.rl.temperature,
                                      max_new_tokens=cfg.rl.max_completion_length, seed=cfg.seed,
                                      reward=demo_task.reward, target=demo_task.target)
            summary["omega"] = omega.to_dict()
            timings["ω analysis"] = display.done(bar)
            analysis["omega"] = omega

        if workers == 1:
            warm_start_and_omega()
            records = {algo: train_and_evaluate(cfg, algo, task, log_path, display) for algo in cfg.algorithms}
        else:
            t1 = time.perf_counter()
            records = run_workers(cfg, workers, display, while_waiting=warm_start_and_omega)
            timings["RL runs + evaluations (parallel)"] = time.perf_counter() - t1
        omega = analysis["omega"]
        summary["results"]["warm start"] = evals["warm start"].to_dict()
        for algo, record in records.items():
            runs[algo], evals[algo] = record.metrics, record.eval
            timings[f"RL {algo}"], timings[f"evaluate {algo}"] = record.rl_seconds, record.eval_seconds
            summary["results"][algo] = {**record.eval.to_dict(), "rl_seconds": record.rl_seconds,
                                        "resrl_mode": record.resrl_mode}

        # 5. plots + report ------------------------------------------------------------------------
        bar = display.start("plots + report", total=1)
        from resrl.demo.report import write_outputs

        files = write_outputs(out, cfg, summary, evals, runs, omega)
        timings["plots + report"] = display.done(bar)

    timings["total"] = time.perf_counter() - t_start
    # the report carries the timing table: rewrite it now that the total is known
    files = write_outputs(out, cfg, summary, evals, runs, omega, plots=False) or files
    (out / "summary.json").write_text(json.dumps(_jsonable(summary), indent=1))
    _print_table(console, summary, evals)
    console.print(f"\n[bold]done in {timings['total']:.0f} s.[/bold] Outputs in {out}/:")
    for f in files:
        console.print(f"  {f}")
    console.print(f"  {out / 'summary.json'}")
    return summary


__all__ = ["default_workers", "run_demo"]
