"""The experiments' one job runner: chains of CLI commands in parallel worker processes, resumably.

A job is a list of steps; a step is a command line (argv of `python -m MODULE`, `resrl.cli` unless
it names another) and a file whose existence means the step is done. Steps of a job run in order; a finished step is
skipped, so running the same jobs again resumes where they stopped. At most `workers` jobs run at
once, each in its own process with one torch/OpenMP thread (on a small machine more threads per
process only contend).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence


def available_cpus() -> int:
    """The CPUs this process may run on (its affinity mask where the platform has one). The one CPU
    count of the experiments: every default number of workers comes from it."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def default_workers(jobs: int, quick: bool = False) -> int:
    """Processes at once when `--workers` is not given: min(CPUs, jobs); 1 with --quick, whose runs
    take about a second each, less than a worker process takes to start (importing torch,
    transformers and TRL: measured ~5 s of CPU)."""
    return 1 if quick else max(1, min(available_cpus(), jobs))


@dataclass
class Step:
    args: list[str]      # arguments of `python -m <module>`
    done: Path           # exists when the step has finished
    module: str = "resrl.cli"  # the module run (`resrl.experiments.workers`: one method's run)


@dataclass
class Job:
    name: str
    steps: list[Step]
    log: Path            # stdout + stderr of every step, appended


def run_jobs(jobs: Sequence[Job], workers: int, poll_s: float = 1.0, say: Callable[[str], None] | None = None,
             on_poll: Callable[[], None] | None = None) -> None:
    """Run every unfinished step of every job (see the module docstring). Raises RuntimeError naming
    the failed jobs (with their logs) after every other job has finished.

    say(line) receives the progress lines (a job started / done / failed; default: print);
    on_poll() is called every poll_s while jobs run (e.g. to read their progress files)."""
    if say is None:
        def say(line: str) -> None:
            print(line, flush=True)

    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    pending = [(job, [s for s in job.steps if not s.done.exists()]) for job in jobs]
    done_before = [job.name for job, steps in pending if not steps]
    if done_before:
        say(f"already done (kept): {', '.join(done_before)}")
    queue = [(job, steps) for job, steps in pending if steps]
    running: dict[str, tuple[Job, list[Step], subprocess.Popen, object]] = {}
    started: dict[str, float] = {}
    failed: dict[str, str] = {}
    t0 = time.time()

    def start(job: Job, steps: list[Step]) -> None:
        job.log.parent.mkdir(parents=True, exist_ok=True)
        log = open(job.log, "a")
        cmd = [sys.executable, "-m", steps[0].module, *steps[0].args]
        log.write(f"$ {' '.join(cmd)}\n")
        log.flush()
        running[job.name] = (job, steps, subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env), log)

    while queue or running:
        while queue and len(running) < max(1, workers):
            job, steps = queue.pop(0)
            say(f"{job.name}: started (log {job.log})")
            started[job.name] = time.time()
            start(job, steps)
        time.sleep(poll_s)
        if on_poll is not None:
            on_poll()
        for name in list(running):
            job, steps, proc, log = running[name]
            if proc.poll() is None:
                continue
            log.close()
            del running[name]
            if proc.returncode != 0 or not steps[0].done.exists():
                failed[name] = f"exit {proc.returncode}, see {job.log}"
                say(f"{name}: FAILED ({failed[name]})")
            elif len(steps) > 1:
                start(job, steps[1:])
            else:
                now = time.time()
                say(f"{name}: done in {now - started[name]:.0f} s ({now - t0:.0f} s since start)")
    if failed:  # in the jobs' own order, whichever finished first
        in_order = {job.name: failed[job.name] for job, _ in pending if job.name in failed}
        raise RuntimeError(f"jobs failed: {in_order}; rerun the same command to retry them")


__all__ = ["Step", "Job", "run_jobs", "available_cpus", "default_workers"]
