"""The generated-task experiment behind `resrl demo` (math, math-hard, code, tools): from a random
tiny model to report.md, every stage one of the library's parts.

    task + tiny model -> supervised warm start (resrl.experiments.warmstart) -> evaluate
        -> for each method: RL from the same warm start, same seed and budget (resrl.train) -> evaluate
        -> ω analysis of negative completions -> plots -> report.md (resrl.demo.report)

The task (generator, reward, warm-start target, budgets) is data: `resrl.demo.tasks`. The methods'
runs go one after the other in this process, or as worker processes of the experiments' worker
protocol (`resrl.experiments.workers.run_methods`) with identical numbers. Every phase shows
progress; everything is deterministic given `config.seed`.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
import time
import warnings
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from resrl.data.synthetic import ChainAdditionTask
from resrl.demo.config import DemoConfig
from resrl.demo.display import Display, eval_info, print_table, rl_info
from resrl.demo.evaluate import EvalResult, evaluate, greedy_accuracy
from resrl.demo.tasks import build_task, get_demo_task
from resrl.errors import InputError
from resrl.experiments.layout import config_from_dict as _from_dict
from resrl.experiments.layout import TRAINED_FILE, jsonable, read_result, run_dir, run_dir_name, write_json_atomic
from resrl.experiments.warmstart import warm_start
from resrl.experiments.workers import method_workers, run_methods


def _console():
    from rich.console import Console

    return Console(file=sys.stdout)


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
    """An `--algorithms` entry -> the config's `algorithm` section (`resrl.train.variants`): a plain
    registry name (`resrl`), or a variant with `/key=value` settings, e.g. `resrl/resrl.rank=4`."""
    from resrl.train.variants import parse_variant

    return parse_variant(label).algorithm_section()


def train_config(cfg: DemoConfig, algorithm: str, output_dir: Path):
    """The demo's RL run as an ordinary `resrl train` configuration (see configs/demo.yaml);
    `algorithm` is a registry name or a variant label (`resrl.train.variants`), whose training keys
    override the demo's."""
    from resrl.train.config import config_from_dict

    from resrl.train.schema import apply_overrides
    from resrl.train.variants import parse_variant

    rl = cfg.rl
    variant = parse_variant(algorithm)
    return config_from_dict(apply_overrides({
        "algorithm": variant.algorithm_section(),
        "train": {"output_dir": str(output_dir), "seed": cfg.seed, "max_steps": rl.steps,
                  "learning_rate": rl.learning_rate, "lr_scheduler": "constant",
                  "rollout_prompts": rl.rollout_prompts, "group_size": rl.group_size,
                  "temperature": rl.temperature, "max_completion_length": rl.max_completion_length,
                  "max_prompt_length": None, "use_cpu": True, "micro_batch_size": rl.micro_batch_size},
        "model": {"trainable_layers": rl.trainable_layers},
        "log": {"report_to": ["none"], "progress": False, "jsonl": True},
        "checkpoint": {"save_steps": 0},
    }, list(variant.overrides)))  # a variant's own training keys (`resrl/train.learning_rate=3e-5`)


@dataclass
class RunRecord:
    """One algorithm's RL run and its evaluation (from this process or a worker's result.json)."""

    metrics: list[dict]  # the trainer's per-step log
    eval: EvalResult
    rl_seconds: float
    eval_seconds: float
    resrl_mode: str | None


def train_and_evaluate(cfg: DemoConfig, algo: str, task: ChainAdditionTask, log_path: Path,
                       display: Display | None = None) -> RunRecord:
    """RL for `algo` from OUT/warm_start (resrl.train), save its model to OUT/<run>/model, evaluate
    it on the held-out split. The same code runs in the demo process (workers = 1) and in a worker."""
    from datasets import Dataset

    from resrl.train import run_training

    reward = get_demo_task(cfg.task_name).reward

    out = Path(cfg.out)
    source = reusable_training(cfg, algo)
    if source is not None:  # the same training finished in another experiment (the grid's dev phase)
        return evaluate_reused(cfg, algo, task, source, log_path, display)
    here = run_dir(out, algo)
    if (here / TRAINED_FILE).is_file() and (here / "model").is_dir():  # kept by run_methods(resume=True)
        if display is not None:
            display.say(f"RL {algo}: trained before (OUT/{here.name}/{TRAINED_FILE}); its evaluation resumes")
        return _evaluate_saved(cfg, algo, task, here / "model", json.loads((here / TRAINED_FILE).read_text()),
                               log_path, display)
    rl_rows = [{"prompt": p.prompt, "answer": p.answer}
               for p in task.train_problems(cfg.rl.steps * cfg.rl.rollout_prompts, stream="rl")]
    t1 = time.perf_counter()
    bar = display.start(f"RL {algo}", total=cfg.rl.steps) if display is not None else None

    def on_log(entry: dict) -> None:
        if display is not None:
            display.update(bar, completed=entry.get("step", 0), info=rl_info(entry))

    with _quiet(log_path):
        result = run_training(train_config(cfg, algo, here), model=str(out / "warm_start"),
                              tokenizer=None, train_dataset=Dataset.from_list(rl_rows), reward_fn=reward,
                              on_log=on_log, save_final=False)
        result.model.save_pretrained(here / "model")
        result.tokenizer.save_pretrained(here / "model")  # a model directory `resrl eval` loads
        # the evaluation's records name the model they score: the saved one, as a resumed run loads it
        result.model.config.name_or_path = str(here / "model")
    rl_seconds = display.done(bar) if display is not None else time.perf_counter() - t1
    # the training is done: a run killed from here on (its evaluation) resumes without training again
    write_json_atomic(here / TRAINED_FILE, {"metrics": result.metrics, "rl_seconds": rl_seconds,
                                           "resrl_mode": result.resrl_mode})
    t2 = time.perf_counter()
    res = _evaluate(display, algo, result.model, result.tokenizer, test=eval_problems(task, cfg), cfg=cfg,
                    log_path=log_path)
    return RunRecord(result.metrics, res, rl_seconds, time.perf_counter() - t2, result.resrl_mode)


# config keys that do not change a method's training: where it is written, which methods run beside
# it, and how and on which split it is evaluated
NOT_TRAINING = ("out", "algorithms", "eval", "eval_split", "reuse_training")


def reusable_training(cfg, algo: str) -> Path | None:
    """The run directory of `algo` in `cfg.reuse_training` (an earlier experiment's OUT) when its
    training is this one's: the run finished there (result.json), both experiments have the same task,
    seed, budgets and every other training setting (their configs without NOT_TRAINING), the same
    train config (`train_config`, output directory aside) and the same start (OUT/warm_start resolves
    to the same model). None otherwise (or when `cfg` has no `reuse_training`): the method trains.

    The RL rows depend only on the task, its seed and the budget, and each run seeds itself, so the
    same code would train the same model; reusing it saves the whole RL run (the grid's first seed)."""
    from resrl.experiments.layout import HANDOFF_FILE, RESULT_FILE, config_to_dict, read_handoff

    src_out = getattr(cfg, "reuse_training", None)
    if not src_out:
        return None
    src_out = Path(src_out)
    if not (src_out / HANDOFF_FILE).is_file():
        raise InputError(f"reuse_training {str(src_out)!r}: not an experiment's output directory (no {HANDOFF_FILE})")
    handoff = read_handoff(src_out)
    src = run_dir(src_out, algo)
    if handoff["task"] != cfg.task_name or algo not in handoff["config"].get("algorithms", ()):
        return None
    if not (src / RESULT_FILE).is_file() or not (src / "model").is_dir() or not (src / "train_config.json").is_file():
        return None

    def training(d: dict) -> dict:
        return {k: v for k, v in d.items() if k not in NOT_TRAINING}

    if training(handoff["config"]) != training(config_to_dict(cfg)):
        return None

    def trained(d: dict) -> dict:  # the run's train config, where it is written aside
        return {**d, "train": {k: v for k, v in d["train"].items() if k != "output_dir"}}

    if trained(json.loads((src / "train_config.json").read_text())) != trained(json.loads(
            json.dumps(train_config(cfg, algo, src).to_dict(), default=str))):
        return None
    if (src_out / "warm_start").resolve() != (Path(cfg.out) / "warm_start").resolve():
        return None
    return src


def evaluate_reused(cfg, algo: str, task, source: Path, log_path: Path, display: Display | None) -> RunRecord:
    """`algo`'s run from `source` (`reusable_training`): OUT/<run>/model links to its model,
    metrics.jsonl is its training log, and the model is evaluated on this experiment's split."""
    here = run_dir(cfg.out, algo)
    here.mkdir(parents=True, exist_ok=True)
    for name in ("metrics.jsonl", "train_config.json"):
        if (source / name).is_file():
            shutil.copyfile(source / name, here / name)
    (here / "reused_from").write_text(str(source.resolve()) + "\n")
    link = here / "model"
    if link.is_symlink() or link.is_file():
        link.unlink()
    elif link.is_dir():
        shutil.rmtree(link)
    link.symlink_to((source / "model").resolve(), target_is_directory=True)
    done = json.loads((source / "result.json").read_text())
    done = {k: done[k] for k in ("metrics", "rl_seconds", "resrl_mode")}
    write_json_atomic(here / TRAINED_FILE, done)  # killed while evaluating: its evaluation records are kept
    if display is not None:
        display.say(f"RL {algo}: training reused from {source} (same training settings and start)")
    return _evaluate_saved(cfg, algo, task, link, done, log_path, display)


def _evaluate_saved(cfg, algo: str, task, model_dir: Path, done: dict, log_path: Path,
                    display: Display | None) -> RunRecord:
    """The RunRecord of a trained model saved in `model_dir`, its training's `done` (metrics,
    rl_seconds, resrl_mode) and its evaluation (which resumes from its records in OUT/eval/<run>)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    t2 = time.perf_counter()
    with _quiet(log_path):
        tokenizer = AutoTokenizer.from_pretrained(Path(cfg.out) / "warm_start")
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    res = _evaluate(display, algo, model, tokenizer, test=eval_problems(task, cfg), cfg=cfg, log_path=log_path)
    return RunRecord(done["metrics"], res, done["rl_seconds"], time.perf_counter() - t2, done["resrl_mode"])


def eval_problems(task, cfg: DemoConfig) -> list:
    """The problems every policy is evaluated on: the held-out split, or with cfg.eval_split = "dev"
    the dev split of as many problems (disjoint from the held-out one)."""
    if cfg.eval_split == "test":
        return task.test
    if cfg.eval_split == "dev":
        return task.dev_split(len(task.test))
    raise InputError(f"eval_split must be 'test' or 'dev', got {cfg.eval_split!r}")


def _tiny_config(cfg: DemoConfig):
    from resrl.models.tiny import TinyModelConfig

    return TinyModelConfig(hidden_size=cfg.hidden_size, num_hidden_layers=cfg.num_layers,
                           alphabet=get_demo_task(cfg.task_name).alphabet, seed=cfg.seed)


def eval_dir(out: str | Path, policy: str) -> Path:
    """Where a policy's evaluation records go: OUT/eval/<policy> (greedy/ and sampled/ runs)."""
    return Path(out) / "eval" / run_dir_name(policy).replace(" ", "-")


def _evaluate(display: Display | None, policy, model, tokenizer, test, cfg: DemoConfig, log_path: Path) -> EvalResult:
    n = cfg.eval.n
    bar = None
    if display is not None:
        bar = display.start(f"evaluate {policy}", total=len(test) * (1 + n), info=f"greedy + {n} samples/problem")

    with _quiet(log_path):
        res = evaluate(model, tokenizer, test, cfg.eval, eval_dir(cfg.out, policy),
                       scorer=get_demo_task(cfg.task_name).reward,
                       on_progress=None if bar is None else (lambda done: display.update(bar, completed=done)))
    if bar is not None:
        display.done(bar, info=eval_info(res, n))
    return res


def _algorithm_names():
    from resrl.core.registry import ALGORITHMS

    return set(ALGORITHMS)


def config(task, quick: bool = False) -> DemoConfig:
    """The task's own settings (`DemoTask.config`), full or --quick."""
    return task.config(quick=quick)


def config_from_args(task, args) -> DemoConfig:
    """`resrl demo`'s shared options (--out, --algorithms, --seed, --threads, --eval-split, --rl-steps,
    --lr, --eval-samples) over the task's settings."""
    cfg = config(task, quick=args.quick)
    cfg = replace(cfg, out=args.out, seed=args.seed, threads=args.threads, eval_split=getattr(args, "eval_split", "test"))
    if args.algorithms is not None:
        cfg = replace(cfg, algorithms=tuple(a.strip() for a in args.algorithms.split(",") if a.strip()))
    if args.rl_steps is not None:
        if args.rl_steps < 1:
            raise InputError(f"--rl-steps must be >= 1, got {args.rl_steps}")
        cfg = replace(cfg, rl=replace(cfg.rl, steps=args.rl_steps))
    if args.lr is not None:
        if not args.lr > 0:
            raise InputError(f"--lr must be > 0, got {args.lr}")
        cfg = replace(cfg, rl=replace(cfg.rl, learning_rate=args.lr))
    if args.eval_samples is not None:
        if args.eval_samples < 1:
            raise InputError(f"--eval-samples must be >= 1, got {args.eval_samples}")
        cfg = replace(cfg, eval=replace(cfg.eval, n=args.eval_samples, ks=None))
    if getattr(args, "reuse_training", None):
        if not hasattr(cfg, "reuse_training"):
            raise InputError(f"--reuse-training: task {cfg.task_name!r} trains each seed from its own warm start; "
                             "only tasks that start from a shared pretrained model reuse runs")
        cfg = replace(cfg, reuse_training=args.reuse_training)
    return cfg


def config_from_dict(d: dict) -> DemoConfig:
    """A DemoConfig from its handoff dict (`resrl.experiments.layout`): the `task` section is the
    demo task's own config type."""
    return _from_dict(DemoConfig, d, sections={"task": get_demo_task(d["task_name"]).config_type})


def run_one(cfg: DemoConfig, algo: str, inputs: dict, display: Display | None = None,
            log_path: Path | None = None) -> dict:
    """One method's RL run and evaluation (`train_and_evaluate`) as a result dict; the evaluation's
    own records are in OUT/eval/<run>. The worker protocol's `run_one`."""
    log_path = log_path or run_dir(cfg.out, algo) / "demo.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    record = train_and_evaluate(cfg, algo, build_task(cfg), log_path, display)
    return {"metrics": record.metrics, "rl_seconds": record.rl_seconds, "eval_seconds": record.eval_seconds,
            "resrl_mode": record.resrl_mode}


def read_record(out: str | Path, algo: str, result: dict) -> RunRecord:
    """A run's RunRecord from its result dict and the evaluator's summaries in OUT/eval/<run>."""
    d = eval_dir(out, algo)
    ev = EvalResult.from_summaries(json.loads((d / "greedy" / "summary.json").read_text()),
                                   json.loads((d / "sampled" / "summary.json").read_text()))
    return RunRecord(result["metrics"], ev, result["rl_seconds"], result["eval_seconds"], result["resrl_mode"])


def _follow_metrics(display: Display, bar, path: Path, seen: dict, algo: str, steps: int) -> None:
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return
    if lines and len(lines) != seen.get(algo):
        seen[algo] = len(lines)
        try:
            entry = json.loads(lines[-1])
        except ValueError:  # a line being written
            return
        done = entry.get("step", len(lines))
        display.update(bar, completed=done, info=rl_info(entry) + ("  evaluating" if done >= steps else ""))


def check_methods(cfg, workers: int | None) -> int:
    """Before anything runs: every method is a registry algorithm whose variant settings make a valid
    training config, `workers` (None: `method_workers`) is >= 1; returns the workers to use (at most
    one per method) and sets this process's torch threads (process-wide: the demo is its own process)."""
    import torch

    unknown = [a for a in cfg.algorithms if a.split("/")[0] not in _algorithm_names()]
    if unknown or not cfg.algorithms:
        raise InputError(f"--algorithms: unknown {unknown} (choose from {sorted(_algorithm_names())}, "
                         "optionally with /key=value settings)")
    for algo in cfg.algorithms:  # a bad variant setting fails here
        train_config(cfg, algo, Path(cfg.out) / run_dir_name(algo))
    workers = method_workers(cfg) if workers is None else workers
    if workers < 1:
        raise InputError(f"--workers must be >= 1, got {workers}")
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    return min(workers, len(cfg.algorithms))



def run_demo(cfg: DemoConfig, workers: int | None = None) -> dict:
    """Run everything; returns the summary written to `out/summary.json`.

    workers: processes for the RL runs (None: `method_workers`). With 1 every phase runs in this
    process, one after the other. With more, once the warm start is saved, each algorithm's RL run
    and its evaluation is a worker process (`resrl.experiments.workers`, one torch thread each, at most
    `workers` at once) while this process evaluates the warm start and runs the ω analysis. Each
    run has its own seed and starts from the saved warm start, so every number is the same either
    way (tested bit for bit); only the timings differ."""
    from resrl.models.tiny import build_tiny_model

    workers = check_methods(cfg, workers)
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
    summary: dict = {"config": jsonable(asdict(cfg)), "results": {}, "timings": timings,
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

        t1 = time.perf_counter()
        bars, seen = {}, {}

        def say(line: str) -> None:
            """The job runner's lines become phases: a bar per run on a terminal, start/end lines in a log."""
            name, _, rest = line.partition(": ")
            algo = name[3:] if name.startswith("RL ") else None
            if algo in cfg.algorithms and rest.startswith("started"):
                bars[algo] = display.start(f"RL + evaluate {algo}", total=cfg.rl.steps, info="worker process")
            elif algo in cfg.algorithms and rest.startswith("done") and algo in bars:
                display.done(bars[algo], info=eval_info(read_record(out, algo, read_result(out, algo)).eval,
                                                        cfg.eval.n))
            else:
                display.say(line)

        def on_poll() -> None:
            """On a terminal, each worker's bar follows its run's metrics.jsonl."""
            if display.live:
                for algo, bar in list(bars.items()):
                    _follow_metrics(display, bar, run_dir(out, algo) / "metrics.jsonl", seen, algo, cfg.rl.steps)

        def one(cfg_: DemoConfig, algo: str, inputs: dict) -> dict:  # in this process: its bars, its log
            return run_one(cfg_, algo, inputs, display=display, log_path=log_path)

        results = run_methods(out, cfg.task_name, cfg, cfg.algorithms, one, workers, say=say, on_poll=on_poll,
                              while_waiting=warm_start_and_omega)
        records = {algo: read_record(out, algo, results[algo]) for algo in cfg.algorithms}
        if workers > 1:
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
    (out / "summary.json").write_text(json.dumps(jsonable(summary), indent=1))
    print_table(console, evals)
    console.print(f"\n[bold]done in {timings['total']:.0f} s.[/bold] Outputs in {out}/:")
    for f in files:
        console.print(f"  {f}")
    console.print(f"  {out / 'summary.json'}")
    return summary


run = run_demo  # the experiment kind's one-seed entry (resrl.experiments.kinds)

__all__ = ["run", "run_demo", "config", "config_from_args", "run_one", "train_and_evaluate", "train_config", "config_from_dict", "check_methods",
           "eval_problems", "eval_dir", "RunRecord"]
