"""Per-phase wall time and peak accelerator memory of each optimiser step (`log.phase_times`).

Off by default, and then free: `PhaseTimer.phase(name)` returns one shared null context. On, every
optimiser step logs (averaged by TRL over a logging window like every other metric):

    time/step_s                   the whole step (first micro-batch to after the optimiser step)
    time/generation_s             generation and rewards (TRL's generate-and-score), exclusive of
    time/old_logps_s              no-grad forwards of the policy (TRL's old-log-prob pass, ResRL's extra pass)
    time/weights_s                token advantages: ResRL's weights, or the algorithm's advantages
    time/forward_backward_s       the training forward + backward (what remains of training_step)
    time/other_s                  the rest of the step: optimiser, scheduler, gradient clipping
    memory/<phase>_peak_gib       peak allocated CUDA memory within each phase (CUDA only)

Times are exclusive: a phase nested in another (an old-log-prob pass inside generation) is
subtracted from its parent. On CUDA every boundary synchronises the device, so the times are the
kernels' and not their launch (this costs a little: it is a measuring mode, off in real runs).
"""

from __future__ import annotations

import contextlib
import time

import torch

PHASES = ("generation", "old_logps", "weights", "forward_backward")
_NULL = contextlib.nullcontext()
GIB = 1024 ** 3


class _Frame:
    __slots__ = ("name", "start", "children", "peak")

    def __init__(self, name: str, start: float):
        self.name, self.start, self.children, self.peak = name, start, 0.0, 0


class PhaseTimer:
    """Exclusive wall time and peak CUDA memory per phase, summed over one optimiser step."""

    def __init__(self, enabled: bool, device: torch.device | str | None = None):
        self.enabled = bool(enabled)
        self.cuda = self.enabled and torch.device(device or "cpu").type == "cuda" and torch.cuda.is_available()
        self._stack: list[_Frame] = []
        self._open_step: _Frame | None = None
        self.totals: dict[str, float] = {}
        self.peaks: dict[str, int] = {}

    # ---- phases ----------------------------------------------------------------------------------

    def phase(self, name: str):
        """A context timing `name` (a null context when off)."""
        return self._phase(name) if self.enabled else _NULL

    def _sync_peak(self) -> int:
        if not self.cuda:
            return 0
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated()

    def _reset_peak(self) -> None:
        if self.cuda:
            torch.cuda.reset_peak_memory_stats()

    def _enter(self, name: str) -> _Frame:
        peak = self._sync_peak()
        if self._stack:  # the parent's running peak so far, before the counter is reset for the child
            self._stack[-1].peak = max(self._stack[-1].peak, peak)
        elif self._open_step is not None:
            self._open_step.peak = max(self._open_step.peak, peak)
        self._reset_peak()
        frame = _Frame(name, time.perf_counter())
        self._stack.append(frame)
        return frame

    def _exit(self, frame: _Frame) -> None:
        peak = self._sync_peak()
        elapsed = time.perf_counter() - frame.start
        self._stack.pop()
        frame.peak = max(frame.peak, peak)
        self.totals[frame.name] = self.totals.get(frame.name, 0.0) + elapsed - frame.children
        self.peaks[frame.name] = max(self.peaks.get(frame.name, 0), frame.peak)
        parent = self._stack[-1] if self._stack else self._open_step
        if parent is not None:
            parent.children += elapsed if self._stack else 0.0
            parent.peak = max(parent.peak, frame.peak)
        self._reset_peak()

    @contextlib.contextmanager
    def _phase(self, name: str):
        frame = self._enter(name)
        try:
            yield
        finally:
            self._exit(frame)

    # ---- optimiser steps -------------------------------------------------------------------------

    def begin_step(self) -> None:
        if not self.enabled:
            return
        self._sync_peak()
        self._reset_peak()
        self.totals, self.peaks = {}, {}
        self._open_step = _Frame("step", time.perf_counter())

    def end_step(self, sink: dict) -> None:
        """Append this step's times (and CUDA peaks) to a metrics sink (name -> list)."""
        if not self.enabled or self._open_step is None:
            return
        peak = self._sync_peak()
        step = self._open_step
        self._open_step = None
        total = time.perf_counter() - step.start
        sink["time/step_s"].append(total)
        for name in PHASES:
            sink[f"time/{name}_s"].append(self.totals.get(name, 0.0))
        sink["time/other_s"].append(max(0.0, total - sum(self.totals.values())))
        if self.cuda:
            sink["memory/step_peak_gib"].append(max(step.peak, peak, *self.peaks.values(), 0) / GIB)
            for name in PHASES:
                if name in self.peaks:
                    sink[f"memory/{name}_peak_gib"].append(self.peaks[name] / GIB)
