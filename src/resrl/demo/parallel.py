"""The demo's RL runs as parallel worker processes (`resrl demo --workers N`, default min(CPUs, runs)).

After the warm start is saved, every algorithm's RL run and its evaluation is one job of the
project's job runner (`resrl.eval.jobs.run_jobs`): a process `resrl demo --out OUT --worker-run
ALGO` with one torch thread that reads the demo's settings from OUT/demo_config.json, trains from
OUT/warm_start, evaluates, and writes OUT/<run>/result.json. Meanwhile the demo process evaluates
the warm start and runs the ω analysis, and (on a terminal) moves each run's bar from its
metrics.jsonl.

Why the numbers equal the one-process run's: each RL run seeds itself (train.seed) and loads the
warm start from disk in both modes, the evaluation draws one random stream per (seed, problem,
sample), and every worker runs the same number of torch threads as the one-process demo.
`tests/test_demo.py` checks summary.json bit for bit.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import asdict, fields
from pathlib import Path

from resrl.demo.display import Display
from resrl.demo.evaluate import EvalResult
from resrl.data.synthetic import ChainAdditionConfig
from resrl.demo.pipeline import (DemoConfig, RLConfig, RunRecord, _jsonable, eval_dir, eval_info, rl_info,
                                 run_dir_name, train_and_evaluate)
from resrl.demo.warmstart import WarmStartConfig
from resrl.eval.runner import EvalConfig

CONFIG_FILE = "demo_config.json"  # OUT/demo_config.json: the settings every worker reads
RESULT_FILE = "result.json"       # OUT/<run>/result.json: a worker's metrics and timings (its done-marker)
WORKER_LOG = "worker.log"         # OUT/<run>/worker.log: the worker's stdout and stderr

_SECTIONS = {"task": ChainAdditionConfig, "warm": WarmStartConfig, "rl": RLConfig, "eval": EvalConfig}
# (the "task" section's type is the demo task's `config_type`: resrl.demo.tasks)


def config_to_dict(cfg: DemoConfig) -> dict:
    return _jsonable(asdict(cfg))


def config_from_dict(d: dict) -> DemoConfig:
    """The inverse of `config_to_dict` (JSON lists back to the tuples the dataclasses hold)."""
    from resrl.demo.tasks import get_demo_task

    sections = {**_SECTIONS, "task": get_demo_task(d["task_name"]).config_type}
    kwargs = {}
    for f in fields(DemoConfig):
        value = d[f.name]
        if f.name in sections:
            value = sections[f.name](**{k: tuple(v) if isinstance(v, list) else v for k, v in value.items()})
        elif isinstance(value, list):
            value = tuple(value)
        kwargs[f.name] = value
    return DemoConfig(**kwargs)


def read_record(out: Path, algo: str) -> RunRecord:
    """A worker's RunRecord from OUT/<run>/result.json and the evaluator's summaries in OUT/eval."""
    data = json.loads((out / run_dir_name(algo) / RESULT_FILE).read_text())
    d = eval_dir(out, algo)
    result = EvalResult.from_summaries(json.loads((d / "greedy" / "summary.json").read_text()),
                                       json.loads((d / "sampled" / "summary.json").read_text()))
    return RunRecord(data["metrics"], result, data["rl_seconds"], data["eval_seconds"], data["resrl_mode"])


def run_workers(cfg: DemoConfig, workers: int, display: Display, while_waiting=None,
                poll_s: float = 0.25) -> dict[str, RunRecord]:
    """Every algorithm's RL run + evaluation as a worker process, at most `workers` at once;
    `while_waiting()` runs in this thread meanwhile. Returns {algorithm: RunRecord} in
    cfg.algorithms order. Raises RuntimeError naming failed runs and their logs."""
    from resrl.eval.jobs import Job, Step, run_jobs

    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / CONFIG_FILE).write_text(json.dumps(config_to_dict(cfg), indent=1))
    jobs, bars, seen = [], {}, {}
    for algo in cfg.algorithms:
        run = out / run_dir_name(algo)
        run.mkdir(parents=True, exist_ok=True)
        for stale in (RESULT_FILE, WORKER_LOG, "metrics.jsonl", "demo.log"):  # a new warm start: nothing to resume
            (run / stale).unlink(missing_ok=True)
        jobs.append(Job(f"RL {algo}", [Step(["demo", "--out", str(out), "--worker-run", algo], run / RESULT_FILE)],
                        run / WORKER_LOG))

    def say(line: str) -> None:
        """The runner's lines become phases: a bar per run on a terminal, start/end lines in a log."""
        name, _, rest = line.partition(": ")
        algo = name[3:] if name.startswith("RL ") else None
        if algo in cfg.algorithms and rest.startswith("started"):
            bars[algo] = display.start(f"RL + evaluate {algo}", total=cfg.rl.steps, info="worker process")
        elif algo in cfg.algorithms and rest.startswith("done") and algo in bars:
            display.done(bars[algo], info=eval_info(read_record(out, algo).eval, cfg.eval.n))
        else:
            display.say(line)

    def on_poll() -> None:
        if not display.live:
            return
        for algo, bar in list(bars.items()):
            path = out / run_dir_name(algo) / "metrics.jsonl"
            try:
                lines = path.read_text().splitlines()
            except OSError:
                continue
            if len(lines) != seen.get(algo) and lines:
                seen[algo] = len(lines)
                try:
                    entry = json.loads(lines[-1])
                except ValueError:  # a line being written
                    continue
                done = entry.get("step", len(lines))
                display.update(bar, completed=done,
                               info=rl_info(entry) + ("  evaluating" if done >= cfg.rl.steps else ""))

    failure: list[BaseException] = []

    def runner() -> None:
        try:
            run_jobs(jobs, workers, poll_s=poll_s, say=say, on_poll=on_poll)
        except BaseException as exc:  # re-raised in the calling thread
            failure.append(exc)

    thread = threading.Thread(target=runner, name="demo-workers", daemon=True)
    thread.start()
    try:
        if while_waiting is not None:
            while_waiting()
    finally:
        thread.join()
    if failure:
        raise failure[0]
    return {algo: read_record(out, algo) for algo in cfg.algorithms}


def worker_main(out: str | Path, algo: str) -> int:
    """`resrl demo --out OUT --worker-run ALGO`: one RL run + evaluation with OUT's settings."""
    import torch

    from resrl.demo.tasks import build_task

    out = Path(out)
    cfg = config_from_dict(json.loads((out / CONFIG_FILE).read_text()))
    if algo not in cfg.algorithms:
        raise ValueError(f"--worker-run {algo!r}: not one of {list(cfg.algorithms)} in {out / CONFIG_FILE}")
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    task = build_task(cfg)
    run = out / run_dir_name(algo)
    t0 = time.perf_counter()
    record = train_and_evaluate(cfg, algo, task, run / "demo.log")
    print(f"RL {algo}: {record.rl_seconds:.1f} s, evaluation {record.eval_seconds:.1f} s "
          f"({time.perf_counter() - t0:.1f} s)", flush=True)
    tmp = run / (RESULT_FILE + ".tmp")  # written whole, then renamed: its existence means done
    tmp.write_text(json.dumps({"metrics": record.metrics, "rl_seconds": record.rl_seconds,
                               "eval_seconds": record.eval_seconds, "resrl_mode": record.resrl_mode}))
    tmp.replace(run / RESULT_FILE)
    return 0


__all__ = ["CONFIG_FILE", "RESULT_FILE", "WORKER_LOG", "config_to_dict", "config_from_dict", "read_record",
           "run_workers", "worker_main"]
