"""`run_demo(config)`: the whole offline demo, from a random tiny model to report.md.

    task + tiny model -> supervised warm start (greedy ~30 %) -> evaluate
        -> for each algorithm: RL from the same warm start, same seed and budget (resrl.train) -> evaluate
        -> ω analysis of negative completions -> plots -> report.md

Every phase shows progress; everything is deterministic given `config.seed`.
"""

from __future__ import annotations

from resrl.errors import InputError

import contextlib
import json
import shutil
import sys
import time
import warnings
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from resrl.data.synthetic import ChainAdditionConfig, ChainAdditionTask, chain_target
from resrl.demo.evaluate import EvalResult, demo_eval_config, evaluate, greedy_accuracy
from resrl.eval.runner import EvalConfig
from resrl.demo.warmstart import WarmStartConfig, warm_start

DEFAULT_ALGORITHMS = ("grpo", "w-reinforce", "resrl")


@dataclass
class RLConfig:
    """What every algorithm gets (the same for all). lr 1e-4: 3e-4 and 1e-3 collapse the tiny model."""

    steps: int = 250
    learning_rate: float = 1e-4
    rollout_prompts: int = 16
    group_size: int = 8
    temperature: float = 1.0
    max_completion_length: int = 16


@dataclass
class DemoConfig:
    out: str = "runs/demo"
    algorithms: tuple[str, ...] = DEFAULT_ALGORITHMS
    seed: int = 0
    task: ChainAdditionConfig = field(default_factory=lambda: ChainAdditionConfig(num_test=256))
    hidden_size: int = 128
    num_layers: int = 4
    warm: WarmStartConfig = field(default_factory=WarmStartConfig)
    dev_problems: int = 128  # greedy accuracy that stops the warm start (not the test split)
    rl: RLConfig = field(default_factory=RLConfig)
    eval: EvalConfig = field(default_factory=demo_eval_config)  # resrl.eval.runner's, demo settings
    omega_problems: int = 48  # groups sampled for the ω analysis
    # torch CPU threads. 1 by default: the ops of a 1 M-parameter model are too small to gain from
    # more, and on a busy machine OpenMP threads that spin-wait for a core made a warm-start step
    # 10x slower with 2 threads than with 1 (measured: 1.25 s vs 0.13 s per step)
    threads: int | None = 1
    is_quick: bool = False

    @classmethod
    def quick(cls, **overrides) -> "DemoConfig":
        """About a minute: an easier task (one-digit terms) and tiny budgets, same pipeline."""
        cfg = cls(
            task=ChainAdditionConfig(num_terms=3, min_value=1, max_value=9, num_test=48),
            warm=WarmStartConfig(max_steps=150, target_accuracy=0.3, check_every=25),
            dev_problems=48,
            rl=RLConfig(steps=6, rollout_prompts=8, group_size=4),
            eval=demo_eval_config(n=8, batch_size=384),
            omega_problems=16,
            is_quick=True,
        )
        return replace(cfg, **overrides)


def _console():
    from rich.console import Console

    return Console(file=sys.stdout)


def _progress(console):
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn("[bold]{task.description:<30}"), BarColumn(bar_width=24), MofNCompleteColumn(),
                    TextColumn("{task.fields[info]}"), TimeElapsedColumn(), console=console,
                    redirect_stdout=False, redirect_stderr=False)


@contextlib.contextmanager
def _quiet(log_path: Path):
    """Send what TRL / transformers print (per-step dicts, warnings) to a log file, keep our console."""
    import logging

    import transformers

    with open(log_path, "a") as log, contextlib.redirect_stdout(log), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        old, old_resrl = transformers.logging.get_verbosity(), logging.getLogger("resrl").level
        transformers.logging.set_verbosity_error()
        transformers.logging.disable_progress_bar()  # save/load bars would break our rich display
        logging.getLogger("resrl").setLevel(logging.ERROR)
        try:
            yield
        finally:
            transformers.logging.set_verbosity(old)
            transformers.logging.enable_progress_bar()
            logging.getLogger("resrl").setLevel(old_resrl)


def algorithm_section(label: str) -> dict:
    """An `--algorithms` entry -> the config's `algorithm` section.

    A plain registry name (`resrl`), or a variant: the name followed by `/key=value` settings of
    the algorithm section, e.g. `resrl/resrl.hidden_alignment=token` or `resrl/resrl.rank=4`.
    """
    from resrl.train.schema import apply_overrides

    name, *settings = label.split("/")
    section: dict = {"name": name}
    for item in settings:
        if "=" not in item:
            raise InputError(f"--algorithms: {label!r}: a variant setting looks like key=value, got {item!r}")
    apply_overrides(section, settings)
    return section


def run_dir_name(label: str) -> str:
    """A variant label as one directory name (`resrl/resrl.rank=4` -> `resrl+resrl.rank=4`)."""
    return label.replace("/", "+")


def train_config(cfg: DemoConfig, algorithm: str, output_dir: Path):
    """The demo's RL run as an ordinary `resrl train` configuration (see configs/demo.yaml);
    `algorithm` is a registry name or a variant label (`algorithm_section`)."""
    from resrl.train.config import config_from_dict

    rl = cfg.rl
    return config_from_dict({
        "algorithm": algorithm_section(algorithm),
        "train": {"output_dir": str(output_dir), "seed": cfg.seed, "max_steps": rl.steps,
                  "learning_rate": rl.learning_rate, "lr_scheduler": "constant",
                  "rollout_prompts": rl.rollout_prompts, "group_size": rl.group_size,
                  "temperature": rl.temperature, "max_completion_length": rl.max_completion_length,
                  "max_prompt_length": None, "use_cpu": True},
        "log": {"report_to": ["none"], "progress": False, "jsonl": True},
        "checkpoint": {"save_steps": 0},
    })


def run_demo(cfg: DemoConfig) -> dict:
    """Run everything; returns the summary written to `out/summary.json`."""
    import torch

    from resrl.models.tiny import build_tiny_model

    unknown = [a for a in cfg.algorithms if a.split("/")[0] not in _algorithm_names()]
    if unknown or not cfg.algorithms:
        raise InputError(f"--algorithms: unknown {unknown} (choose from {sorted(_algorithm_names())}, "
                         "optionally with /key=value settings)")
    for algo in cfg.algorithms:  # a bad variant setting fails here, before the warm start
        train_config(cfg, algo, Path(cfg.out) / run_dir_name(algo))
    if cfg.threads:
        torch.set_num_threads(cfg.threads)  # process-wide: the demo is its own process
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    log_path = out / "demo.log"
    log_path.write_text("")
    shutil.rmtree(out / "eval", ignore_errors=True)  # this run's policies are new: no evaluation to resume
    console = _console()
    t_start = time.perf_counter()
    timings: dict[str, float] = {}
    task = ChainAdditionTask(replace(cfg.task, seed=cfg.seed))
    test = task.test
    summary: dict = {"config": _jsonable(asdict(cfg)), "results": {}, "timings": timings,
                     "example": {"prompt": test[0].prompt, "target": chain_target(test[0])}}

    console.rule("[bold]ResRL demo: chained addition on a tiny Qwen3 model (offline, CPU)")
    console.print(f"task: {test[0].prompt}{chain_target(test[0])}  ({cfg.task.num_terms} terms in "
                  f"[{cfg.task.min_value}, {cfg.task.max_value}]); held-out split: {len(test)} problems")

    with _progress(console) as progress:
        # 1. model + warm start -------------------------------------------------------------------
        t0 = time.perf_counter()
        model, tokenizer = build_tiny_model(None, _tiny_config(cfg))
        n_params = sum(p.numel() for p in model.parameters())
        summary["num_parameters"] = n_params
        dev = task.train_problems(cfg.dev_problems, stream="dev")
        sft = task.train_problems(cfg.warm.max_steps * cfg.warm.batch_size, stream="sft")
        bar = progress.add_task("warm start (supervised)", total=cfg.warm.max_steps, info="")

        def dev_accuracy() -> float:
            return greedy_accuracy(model, tokenizer, dev, cfg.eval)

        def on_step(step: int, loss: float, acc: float | None) -> None:
            info = f"loss {loss:.3f}" + (f"  dev greedy {acc:.0%}" if acc is not None else "")
            progress.update(bar, completed=step + 1, info=info if acc is not None or step % 10 == 0 else None)

        with _quiet(log_path):
            ws = warm_start(model, tokenizer, sft, replace(cfg.warm, seed=cfg.seed), dev_accuracy, on_step)
        progress.update(bar, total=ws["steps"], completed=ws["steps"])
        warm_dir = out / "warm_start"
        with _quiet(log_path):
            model.save_pretrained(warm_dir)
            tokenizer.save_pretrained(warm_dir)
        summary["warm_start"] = {"steps": ws["steps"], "dev_accuracy": ws["dev_accuracy"],
                                 "final_loss": ws["losses"][-1] if ws["losses"] else None}
        timings["warm start"] = time.perf_counter() - t0

        # 2. evaluate the warm start ----------------------------------------------------------------
        evals: dict[str, EvalResult] = {}
        evals["warm start"] = _evaluate(progress, "warm start", model, tokenizer, test, cfg, log_path)
        timings["evaluate warm start"] = time.perf_counter() - t0 - timings["warm start"]
        summary["results"]["warm start"] = evals["warm start"].to_dict()

        # 3. RL, same warm start / seed / budget for each algorithm ---------------------------------
        from datasets import Dataset

        from resrl.data.synthetic import chain_reward
        from resrl.train import run_training

        rl_rows = [{"prompt": p.prompt, "answer": p.answer}
                   for p in task.train_problems(cfg.rl.steps * cfg.rl.rollout_prompts, stream="rl")]
        runs: dict[str, list[dict]] = {}
        for algo in cfg.algorithms:
            t1 = time.perf_counter()
            bar = progress.add_task(f"RL {algo}", total=cfg.rl.steps, info="")

            def on_log(entry: dict, bar=bar) -> None:
                acc = entry.get("accuracy", entry.get("reward_mean"))
                info = f"reward {acc:.2f}" if acc is not None else ""
                if "resrl/omega_mean" in entry:
                    info += f"  ω̄ {entry['resrl/omega_mean']:.2f}"
                progress.update(bar, completed=entry.get("step", 0), info=info)

            with _quiet(log_path):
                result = run_training(train_config(cfg, algo, out / run_dir_name(algo)), model=str(warm_dir),
                                      tokenizer=None,
                                      train_dataset=Dataset.from_list(rl_rows), reward_fn=chain_reward,
                                      on_log=on_log, save_final=False)
                result.model.save_pretrained(out / run_dir_name(algo) / "model")
            runs[algo] = result.metrics
            timings[f"RL {algo}"] = time.perf_counter() - t1
            t2 = time.perf_counter()
            evals[algo] = _evaluate(progress, algo, result.model, result.tokenizer, test, cfg, log_path)
            timings[f"evaluate {algo}"] = time.perf_counter() - t2
            summary["results"][algo] = {**evals[algo].to_dict(), "rl_seconds": timings[f"RL {algo}"],
                                        "resrl_mode": result.resrl_mode}

        # 4. where ResRL's weights land ------------------------------------------------------------
        t3 = time.perf_counter()
        from resrl.demo.weights import analyse_omega

        bar = progress.add_task("ω analysis (warm-start policy)", total=1, info="")
        with _quiet(log_path):
            omega = analyse_omega(model, tokenizer, task.train_problems(cfg.omega_problems, stream="omega"),
                                  group_size=cfg.rl.group_size, temperature=cfg.rl.temperature,
                                  max_new_tokens=cfg.rl.max_completion_length, seed=cfg.seed)
        progress.update(bar, completed=1)
        summary["omega"] = omega.to_dict()
        timings["ω analysis"] = time.perf_counter() - t3

        # 5. plots + report ------------------------------------------------------------------------
        t4 = time.perf_counter()
        bar = progress.add_task("plots + report", total=1, info="")
        from resrl.demo.report import write_outputs

        files = write_outputs(out, cfg, summary, evals, runs, omega)
        progress.update(bar, completed=1)
        timings["plots + report"] = time.perf_counter() - t4

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


def _tiny_config(cfg: DemoConfig):
    from resrl.models.tiny import TinyModelConfig

    return TinyModelConfig(hidden_size=cfg.hidden_size, num_hidden_layers=cfg.num_layers,
                           alphabet="0123456789+=", seed=cfg.seed)


def eval_dir(out: str | Path, policy: str) -> Path:
    """Where a policy's evaluation records go: OUT/eval/<policy> (greedy/ and sampled/ runs)."""
    return Path(out) / "eval" / run_dir_name(policy).replace(" ", "-")


def _evaluate(progress, policy, model, tokenizer, test, cfg: DemoConfig, log_path: Path) -> EvalResult:
    n = cfg.eval.n
    bar = progress.add_task(f"evaluate {policy}", total=len(test) * (1 + n), info=f"greedy + {n} samples/problem")
    with _quiet(log_path):
        res = evaluate(model, tokenizer, test, cfg.eval, eval_dir(cfg.out, policy),
                       on_progress=lambda done: progress.update(bar, completed=done))
    progress.update(bar, info=f"greedy {res.greedy:.0%}  Avg@{n} {res.avg:.0%}")
    return res


def _print_table(console, summary: dict, evals: dict[str, EvalResult]) -> None:
    from rich.table import Table

    ks = sorted(next(iter(evals.values())).pass_at)
    n = max(ks)
    table = Table(title="held-out split")
    for col in ["policy", "greedy", f"Avg@{n}"] + [f"Pass@{k}" for k in ks]:
        table.add_column(col, justify="right" if col != "policy" else "left")
    for name, r in evals.items():
        table.add_row(name, f"{r.greedy:.3f}", f"{r.avg:.3f}", *[f"{r.pass_at[k]:.3f}" for k in ks])
    console.print(table)


def _algorithm_names():
    from resrl.core.registry import ALGORITHMS

    return set(ALGORITHMS)


def _jsonable(obj):
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, float) and obj != obj:
        return None
    if hasattr(obj, "item"):
        return obj.item()
    return obj
