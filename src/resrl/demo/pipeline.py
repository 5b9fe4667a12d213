"""The demo's building blocks: its config, one algorithm's RL run and evaluation
(`train_and_evaluate`), the ω analysis helpers, plots and tables. `resrl.demo.run.run_demo` puts
them together (in this process, or with the RL runs in worker processes: `resrl.demo.parallel`).
"""

from __future__ import annotations

from resrl.errors import InputError

import contextlib
import sys
import time
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path

from resrl.data.synthetic import ChainAdditionConfig, ChainAdditionTask
from resrl.demo.display import Display
from resrl.demo.evaluate import EvalResult, demo_eval_config, evaluate
from resrl.eval.runner import EvalConfig
from resrl.demo.warmstart import WarmStartConfig

from resrl.demo.config import DEFAULT_ALGORITHMS, DemoConfig, RLConfig  # noqa: F401  (their home; re-exported here)


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


def run_dir_name(label: str) -> str:
    """A variant label as one directory name (`resrl/resrl.rank=4` -> `resrl+resrl.rank=4`)."""
    from resrl.train.variants import parse_variant

    return parse_variant(label).dir_name


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
                  "max_prompt_length": None, "use_cpu": True},
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

    from resrl.demo.tasks import get_demo_task
    from resrl.train import run_training

    reward = get_demo_task(cfg.task_name).reward

    out = Path(cfg.out)
    rl_rows = [{"prompt": p.prompt, "answer": p.answer}
               for p in task.train_problems(cfg.rl.steps * cfg.rl.rollout_prompts, stream="rl")]
    t1 = time.perf_counter()
    bar = display.start(f"RL {algo}", total=cfg.rl.steps) if display is not None else None

    def on_log(entry: dict) -> None:
        if display is not None:
            display.update(bar, completed=entry.get("step", 0), info=rl_info(entry))

    with _quiet(log_path):
        result = run_training(train_config(cfg, algo, out / run_dir_name(algo)), model=str(out / "warm_start"),
                              tokenizer=None, train_dataset=Dataset.from_list(rl_rows), reward_fn=reward,
                              on_log=on_log, save_final=False)
        result.model.save_pretrained(out / run_dir_name(algo) / "model")
    rl_seconds = display.done(bar) if display is not None else time.perf_counter() - t1
    t2 = time.perf_counter()
    res = _evaluate(display, algo, result.model, result.tokenizer, test=eval_problems(task, cfg), cfg=cfg,
                    log_path=log_path)
    return RunRecord(result.metrics, res, rl_seconds, time.perf_counter() - t2, result.resrl_mode)


def eval_problems(task, cfg: DemoConfig) -> list:
    """The problems every policy is evaluated on: the held-out split, or with cfg.eval_split = "dev"
    the dev split of as many problems (disjoint from the held-out one)."""
    if cfg.eval_split == "test":
        return task.test
    if cfg.eval_split == "dev":
        return task.dev_split(len(task.test))
    raise InputError(f"eval_split must be 'test' or 'dev', got {cfg.eval_split!r}")


def rl_info(entry: dict) -> str:
    """A trainer log entry as the RL bar's text: reward (and ResRL's mean ω)."""
    acc = entry.get("accuracy", entry.get("reward_mean"))
    info = f"reward {acc:.2f}" if acc is not None else ""
    if "resrl/omega_mean" in entry:
        info += f"  ω̄ {entry['resrl/omega_mean']:.2f}"
    return info


def _tiny_config(cfg: DemoConfig):
    from resrl.demo.tasks import get_demo_task
    from resrl.models.tiny import TinyModelConfig

    return TinyModelConfig(hidden_size=cfg.hidden_size, num_hidden_layers=cfg.num_layers,
                           alphabet=get_demo_task(cfg.task_name).alphabet, seed=cfg.seed)


def eval_dir(out: str | Path, policy: str) -> Path:
    """Where a policy's evaluation records go: OUT/eval/<policy> (greedy/ and sampled/ runs)."""
    return Path(out) / "eval" / run_dir_name(policy).replace(" ", "-")


def eval_info(res: EvalResult, n: int) -> str:
    return f"greedy {res.greedy:.0%}  Avg@{n} {res.avg:.0%}"


def _evaluate(display: Display | None, policy, model, tokenizer, test, cfg: DemoConfig, log_path: Path) -> EvalResult:
    n = cfg.eval.n
    bar = None
    if display is not None:
        bar = display.start(f"evaluate {policy}", total=len(test) * (1 + n), info=f"greedy + {n} samples/problem")
    from resrl.demo.tasks import get_demo_task

    with _quiet(log_path):
        res = evaluate(model, tokenizer, test, cfg.eval, eval_dir(cfg.out, policy),
                       scorer=get_demo_task(cfg.task_name).reward,
                       on_progress=None if bar is None else (lambda done: display.update(bar, completed=done)))
    if bar is not None:
        display.done(bar, info=eval_info(res, n))
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
