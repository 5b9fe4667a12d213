"""How an experiment shows its phases: rich progress bars on a terminal, one plain line per phase
start and end otherwise (a log file, CI, `nohup`), so a redirected run is never silent for minutes.

    display = Display(console)                 # console.is_terminal picks the mode
    with display:
        bar = display.start("warm start", total=1000)
        display.update(bar, completed=10, info="loss 0.5")   # a bar on a terminal; nothing in a log
        display.done(bar, info="150 steps")                  # "[  81.0 s] warm start: done in 80.2 s  150 steps"

Both modes are safe to call from a second thread (the demo polls its worker processes from one).
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass
class _Phase:
    name: str
    total: float
    started: float
    task_id: int | None = None  # the rich task on a terminal


class Display:
    """Phases of a run. `live` None: bars when `console.is_terminal`, lines otherwise."""

    def __init__(self, console, live: bool | None = None):
        self.console = console
        self.live = console.is_terminal if live is None else live
        self.t0 = time.perf_counter()
        self._lock = threading.Lock()
        self._progress = None

    def __enter__(self) -> "Display":
        if self.live:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._progress = Progress(TextColumn("[bold]{task.description:<30}"), BarColumn(bar_width=24),
                                      MofNCompleteColumn(), TextColumn("{task.fields[info]}"), TimeElapsedColumn(),
                                      console=self.console, redirect_stdout=False, redirect_stderr=False)
            self._progress.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self._progress is not None:
            self._progress.__exit__(*exc)
            self._progress = None

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def say(self, message: str) -> None:
        """One line: above the bars on a terminal, with the time since the start in a log."""
        with self._lock:
            if self.live:
                self.console.print(message, markup=False, highlight=False)
            else:
                self.console.print(f"[{self.elapsed():7.1f} s] {message}", markup=False, highlight=False,
                                   soft_wrap=True)
                self.console.file.flush()

    def start(self, name: str, total: float, info: str = "") -> _Phase:
        phase = _Phase(name, total, time.perf_counter())
        if self.live:
            phase.task_id = self._progress.add_task(name, total=total, info=info)
        else:
            self.say(f"{name}: start" + (f" ({info})" if info else ""))
        return phase

    def update(self, phase: _Phase, completed: float | None = None, info: str | None = None,
               total: float | None = None) -> None:
        if total is not None:
            phase.total = total
        if self.live:
            fields = {} if info is None else {"info": info}
            self._progress.update(phase.task_id, completed=completed, total=total, **fields)

    def done(self, phase: _Phase, info: str = "") -> float:
        """Mark the phase finished; returns its seconds."""
        seconds = time.perf_counter() - phase.started
        if self.live:
            fields = {"info": info} if info else {}
            self._progress.update(phase.task_id, completed=phase.total, **fields)
        else:
            self.say(f"{phase.name}: done in {seconds:.1f} s" + (f"  {info}" if info else ""))
        return seconds




# -- the console, and what the bars and tables say ---------------------------------------------------

def console():
    """The experiment's console: rich, on stdout."""
    import sys

    from rich.console import Console

    return Console(file=sys.stdout)


@contextlib.contextmanager
def quiet(log_path: Path):
    """Send what TRL / transformers print (per-step dicts, warnings) to a log file, keep our console."""
    import logging
    import warnings

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


def header(exp, workers: int) -> None:
    """The experiment's first lines: what it trains, on which split, how its runs go."""
    cfg, task = exp.cfg, exp.task
    exp.display.console.rule(f"[bold]ResRL demo: {task.title} on {exp.kind.title_model} (offline, CPU)")
    split = "held-out" if cfg.eval_split == "test" else "dev"
    task_line = task.description(cfg.task)
    exp.display.console.print(f"task: {task_line}; evaluated on the {split} split; RL runs: {len(cfg.algorithms)}, "
                              + ("one after the other" if workers == 1 else f"{workers} worker processes"),
                              markup=False, highlight=False)


def split_title(cfg) -> str:
    return "held-out split" if cfg.eval_split == "test" else "dev split"


def rl_info(entry: dict) -> str:
    """A trainer log entry as the RL bar's text: reward (and ResRL's mean ω)."""
    acc = entry.get("accuracy", entry.get("reward_mean"))
    info = f"reward {acc:.2f}" if acc is not None else ""
    if "resrl/omega_mean" in entry:
        info += f"  ω̄ {entry['resrl/omega_mean']:.2f}"
    return info


def eval_info(entry) -> str:
    """A policy's summary entry (or an EvalResult) as the evaluation bar's closing text."""
    if not isinstance(entry, dict):
        entry = entry.to_dict()
    n = max(map(int, entry["pass_at"]))
    return f"greedy {entry['greedy']:.0%}  Avg@{n} {entry['avg']:.0%}"


def follow_metrics(display: Display, bar, path: Path, seen: dict, algo: str, steps: int) -> None:
    """A worker's bar follows its run's metrics.jsonl (its last logged step)."""
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


def print_table(console, results: dict, title: str = "held-out split") -> None:
    """{policy: summary entry} as a rich table on `console`: greedy, Avg@n, Pass@k."""
    from rich.table import Table

    ks = sorted(map(int, next(iter(results.values()))["pass_at"]))
    n = max(ks)
    table = Table(title=title)
    for col in ["policy", "greedy", f"Avg@{n}"] + [f"Pass@{k}" for k in ks]:
        table.add_column(col, justify="right" if col != "policy" else "left")
    for name, r in results.items():
        table.add_row(name, f"{r['greedy']:.3f}", f"{r['avg']:.3f}", *[f"{r['pass_at'][str(k)]:.3f}" for k in ks])
    console.print(table)


__all__ = ["Display", "console", "quiet", "header", "split_title", "rl_info", "eval_info", "follow_metrics", "print_table"]
