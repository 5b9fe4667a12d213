"""The experiments' one worker protocol: each method's run of an experiment, in this process or as
worker processes of the job runner (`resrl.experiments.jobs.run_jobs`).

    results = run_methods(out, task_name, cfg, labels, run_one, workers, inputs=...)

With workers = 1 every `run_one(cfg, label, inputs)` runs here, one after the other. With more,
the experiment's config and shared inputs are written to OUT/experiment.json (`layout.write_handoff`)
and each label is one job `python -m resrl.experiments.workers OUT LABEL`: a process with one torch
thread that reads the handoff, calls the experiment's own `run_one` (`worker_main`) and writes
OUT/<run>/result.json (its done-marker), its output in OUT/<run>/worker.log. Meanwhile this
process runs `while_waiting()` (e.g. the warm start's own evaluation).

Either way each run's result is written to OUT/<run>/result.json and read back from there, so both
modes hand the experiment the same values. Why the numbers do not depend on the mode: each run seeds
itself (train.seed, its evaluation's seeds), loads its start from disk, and every process runs the
same number of torch threads (tests/test_demo.py checks summary.json bit for bit).
"""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path
from typing import Callable, Sequence

from resrl.experiments.layout import (RESULT_FILE, TRAINED_FILE, WORKER_LOG, read_handoff, read_result, run_dir,
                                      write_handoff, write_result)

# run_one(cfg, label, inputs) -> a JSON-able result dict
RunOne = Callable[[object, str, dict], dict]


def run_methods(out: str | Path, task_name: str, cfg, labels: Sequence[str], run_one: RunOne, workers: int, *,
                inputs: dict | None = None, say: Callable[[str], None] | None = None,
                on_poll: Callable[[], None] | None = None, while_waiting: Callable[[], None] | None = None,
                poll_s: float = 0.25, resume: bool = False, on_discard: Callable[[str], None] | None = None
                ) -> dict[str, dict]:
    """{label: result} for every label, in `labels` order (see the module docstring). Raises
    RuntimeError naming the failed runs and their logs once the others have finished.

    By default a new run replaces an old one (a new start: nothing to resume): the results, logs and
    checkpoints of earlier runs in OUT are removed first. With `resume`, when OUT/experiment.json is
    an earlier call's with the same task, config and inputs, a run whose result.json is there is kept
    and not rerun, one with only its trained.json (killed while evaluating) keeps its training and
    evaluation records (its `run_one` evaluates the saved model), and any other keeps its checkpoints
    and log (killed while training: its `run_one` resumes from the newest checkpoint).
    `on_discard(label)` is called for each run that is neither kept nor trained (e.g. to remove its
    evaluation records)."""
    from resrl.experiments.jobs import Job, Step, run_jobs
    from resrl.experiments.layout import HANDOFF_FILE

    out = Path(out)
    inputs = dict(inputs or {})
    if say is None:
        say = print
    keep, trained, same = set(), set(), False
    if resume and (out / HANDOFF_FILE).is_file():
        same = same_experiment(read_handoff(out), task_name, cfg, inputs)
        if same:
            keep = {label for label in labels if (run_dir(out, label) / RESULT_FILE).is_file()}
            # killed after its training, during its evaluation: run_one finds the model and evaluates it
            trained = {label for label in labels
                       if label not in keep and (run_dir(out, label) / TRAINED_FILE).is_file()}
    for label in labels:
        if label in keep or label in trained:
            continue
        here = run_dir(out, label)
        for stale in (RESULT_FILE, TRAINED_FILE, WORKER_LOG):
            (here / stale).unlink(missing_ok=True)
        if not same:  # another experiment's training: its log and checkpoints are not this run's to resume
            (here / "metrics.jsonl").unlink(missing_ok=True)
            for checkpoint in here.glob("checkpoint-*"):
                shutil.rmtree(checkpoint, ignore_errors=True)
        if on_discard is not None:
            on_discard(label)
    if keep:
        say(f"already done (kept): {', '.join(label for label in labels if label in keep)}")
    if trained:
        say(f"trained, evaluation resumes (kept): {', '.join(label for label in labels if label in trained)}")
    write_handoff(out, task_name, cfg, inputs)
    todo = [label for label in labels if label not in keep]
    if workers <= 1:
        if while_waiting is not None:
            while_waiting()
        for label in todo:
            write_result(out, label, run_one(cfg, label, inputs))
        return {label: read_result(out, label) for label in labels}

    jobs = [Job(f"RL {label}", [Step([str(out), label], run_dir(out, label) / RESULT_FILE, module=__name__)],
                run_dir(out, label) / WORKER_LOG)
            for label in todo]
    failure: list[BaseException] = []

    def runner() -> None:
        try:
            run_jobs(jobs, workers, poll_s=poll_s, say=say, on_poll=on_poll)
        except BaseException as exc:  # re-raised in the calling thread
            failure.append(exc)

    thread = threading.Thread(target=runner, name="experiment-workers", daemon=True)
    thread.start()
    try:
        if while_waiting is not None:
            while_waiting()
    finally:
        thread.join()
    if failure:
        raise failure[0]
    return {label: read_result(out, label) for label in labels}


def same_experiment(before: dict, task_name: str, cfg, inputs: dict) -> bool:
    """Whether an earlier handoff (OUT/experiment.json) is this experiment: same task, config and
    inputs, the list of methods aside (each run seeds itself: a method added to the list, e.g. a new
    grid point, leaves the finished runs valid). A config key (at any depth of the config's sections)
    that the earlier run's code did not have yet counts as equal when this config holds its default: a
    new setting at its default changes nothing that run did."""
    from resrl.experiments.layout import config_to_dict

    def runs_alike(config: dict) -> dict:  # which methods run beside a run does not change it
        return {k: v for k, v in config.items() if k != "algorithms"}

    return (before.get("task") == task_name
            and runs_alike(_with_new_defaults(before.get("config", {}), cfg)) == runs_alike(config_to_dict(cfg))
            and before.get("inputs", {}) == json.loads(json.dumps(inputs)))


def _with_new_defaults(old: dict, cfg) -> dict:
    """`old` (a config as JSON) with every field of the dataclass `cfg` that it lacks filled in from
    `cfg` where `cfg` holds that field's default; nested dataclass sections alike."""
    import dataclasses

    from resrl.experiments.layout import jsonable

    out = dict(old)
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if f.name in out:
            if dataclasses.is_dataclass(value) and isinstance(out[f.name], dict):
                out[f.name] = _with_new_defaults(out[f.name], value)
            continue
        default = f.default if f.default is not dataclasses.MISSING else (
            f.default_factory() if f.default_factory is not dataclasses.MISSING else dataclasses.MISSING)
        if default is not dataclasses.MISSING and jsonable(default) == jsonable(value):
            out[f.name] = jsonable(value)
    return out


def worker_main(out: str | Path, label: str) -> int:
    """`python -m resrl.experiments.workers OUT LABEL`: one run of the experiment in OUT (its handoff)."""
    import torch

    from resrl.demo.tasks import get_demo_task
    from resrl.experiments.kinds import handoff_config, kind_of
    from resrl.experiments.method import run_one

    out = Path(out)
    handoff = read_handoff(out)
    task = get_demo_task(handoff["task"])
    cfg = handoff_config(task, handoff["config"])
    if label not in cfg.algorithms:
        raise ValueError(f"worker {label!r}: not one of the methods {list(cfg.algorithms)} in {out}")
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    write_result(out, label, run_one(cfg, label, handoff["inputs"], kind_of(task)))
    return 0


__all__ = ["run_methods", "same_experiment", "worker_main"]


if __name__ == "__main__":  # a worker process of `run_methods`: python -m resrl.experiments.workers OUT LABEL
    import sys

    sys.exit(worker_main(*sys.argv[1:]))
