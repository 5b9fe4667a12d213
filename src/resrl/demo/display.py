"""How the demo shows its phases: rich progress bars on a terminal, one plain line per phase
start and end otherwise (a log file, CI, `nohup`), so a redirected run is never silent for minutes.

    display = Display(console)                 # console.is_terminal picks the mode
    with display:
        bar = display.start("warm start", total=1000)
        display.update(bar, completed=10, info="loss 0.5")   # a bar on a terminal; nothing in a log
        display.done(bar, info="150 steps")                  # "[  81.0 s] warm start: done in 80.2 s  150 steps"

Both modes are safe to call from a second thread (the demo polls its worker processes from one).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass


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


__all__ = ["Display"]


# -- what the demo's bars and tables say ------------------------------------------------------------

def rl_info(entry: dict) -> str:
    """A trainer log entry as the RL bar's text: reward (and ResRL's mean ω)."""
    acc = entry.get("accuracy", entry.get("reward_mean"))
    info = f"reward {acc:.2f}" if acc is not None else ""
    if "resrl/omega_mean" in entry:
        info += f"  ω̄ {entry['resrl/omega_mean']:.2f}"
    return info


def eval_info(res, n: int) -> str:
    """An EvalResult as the evaluation bar's closing text."""
    return f"greedy {res.greedy:.0%}  Avg@{n} {res.avg:.0%}"


def print_table(console, evals: dict) -> None:
    """{policy: EvalResult} as a rich table on `console`: greedy, Avg@n, Pass@k."""
    from rich.table import Table

    ks = sorted(next(iter(evals.values())).pass_at)
    n = max(ks)
    table = Table(title="held-out split")
    for col in ["policy", "greedy", f"Avg@{n}"] + [f"Pass@{k}" for k in ks]:
        table.add_column(col, justify="right" if col != "policy" else "left")
    for name, r in evals.items():
        table.add_row(name, f"{r.greedy:.3f}", f"{r.avg:.3f}", *[f"{r.pass_at[k]:.3f}" for k in ks])
    console.print(table)
