"""A small process pool that runs one call per worker with a hard wall-clock timeout per item.

Why not `multiprocessing.Pool` or `concurrent.futures`: neither can stop one stuck task. A
Math-Verify call on `9^{9^{9^{9}}}` can sit inside a C big-integer loop where its own
`signal.alarm` timeout never fires (the handler only runs between bytecodes), and a sympy
recursion can kill the interpreter outright. Here every worker owns a pipe and handles one item
at a time; the parent tracks a deadline per busy worker, SIGKILLs a worker that overruns and
starts a fresh one, so a pathological item costs at most `timeout_s` and never blocks the caller.

Workers are created lazily on the first `map` and reused across calls (training scores every
step). On Linux they are forked from the caller after the modules named in `preload` have been
imported there, so a respawn after a kill costs milliseconds, not a fresh `import sympy`. Fork
(not spawn/forkserver) also means the caller's `__main__` is never re-imported, so scripts
without an `if __name__ == "__main__"` guard work. The workers only run pure-Python code (no
torch, no tokenizers), which is what makes forking a threaded parent safe here. Elsewhere (macOS,
Windows) the "spawn" method is used and the usual main-guard rule of multiprocessing applies.

The function and its arguments must be picklable (module-level functions).
"""

from __future__ import annotations

import importlib
import multiprocessing as mp
import threading
import time
import traceback
import weakref
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any, Callable, Sequence


@dataclass
class CallResult:
    """Outcome of one isolated call. Exactly one of value / timed_out / error describes it."""

    value: Any = None
    timed_out: bool = False
    error: str | None = None  # exception text, or "worker crashed (exit code ...)"
    seconds: float = 0.0


def _worker_main(conn: Connection, fn: Callable, preload: Sequence[str] = ()) -> None:
    """Worker loop: receive (key, args), send (key, ok, value_or_error, seconds) until EOF/None.

    Imports `preload` first and then says "ready", so that import time (spawn start method)
    never counts against an item's timeout."""
    for name in preload:
        importlib.import_module(name)
    conn.send("ready")
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError, KeyboardInterrupt):  # parent gone: exit quietly
            return
        if msg is None:
            return
        key, args = msg
        start = time.perf_counter()
        try:
            out = (key, True, fn(*args), time.perf_counter() - start)
        except BaseException as exc:  # noqa: BLE001 - report everything, the worker must survive
            tb = traceback.format_exception_only(type(exc), exc)[-1].strip()
            out = (key, False, tb[:500], time.perf_counter() - start)
        try:
            conn.send(out)
        except Exception as exc:  # unpicklable result: report it instead of dying
            conn.send((key, False, f"unpicklable result: {exc!r}"[:500], out[3]))


class _Worker:
    STARTUP_TIMEOUT_S = 120.0  # a fresh interpreter importing sympy on a busy machine

    def __init__(self, ctx, fn: Callable, preload: Sequence[str] = ()) -> None:
        parent, child = ctx.Pipe(duplex=True)
        self.conn = parent
        self.proc = ctx.Process(target=_worker_main, args=(child, fn, tuple(preload)), daemon=True)
        self.proc.start()
        child.close()
        try:
            ready = parent.poll(self.STARTUP_TIMEOUT_S) and parent.recv() == "ready"
        except (EOFError, OSError):
            ready = False
        if not ready:
            self.kill()
            raise RuntimeError(f"IsolatedPool: a worker process failed to start (exit code {self.proc.exitcode})")
        self.key: int | None = None  # item in flight
        self.deadline = 0.0
        self.started = 0.0

    def kill(self) -> None:
        try:
            self.conn.close()
        except OSError:
            pass
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(timeout=5)


def _default_context():
    import sys

    fork_ok = sys.platform.startswith("linux") and "fork" in mp.get_all_start_methods()
    return mp.get_context("fork" if fork_ok else "spawn")


class IsolatedPool:
    """Run `fn(*args)` for many argument tuples in worker processes, each with a wall timeout.

    pool = IsolatedPool(fn, timeout_s=5.0, num_workers=2, preload=["math_verify"])
    results = pool.map([(a1, b1), (a2, b2)])   # list[CallResult], in input order
    pool.close()                               # or use as a context manager

    `stats` counts timeouts, crashes and respawns over the pool's life. Thread-safe: concurrent
    `map` calls are serialised.
    """

    def __init__(self, fn: Callable, timeout_s: float = 5.0, num_workers: int = 2,
                 preload: Sequence[str] = (), mp_context=None) -> None:
        if not (isinstance(timeout_s, (int, float)) and timeout_s > 0):
            raise ValueError(f"IsolatedPool: timeout_s must be a positive number, got {timeout_s!r}")
        if not (isinstance(num_workers, int) and num_workers >= 1):
            raise ValueError(f"IsolatedPool: num_workers must be a positive int, got {num_workers!r}")
        self.fn = fn
        self.timeout_s = float(timeout_s)
        self.num_workers = num_workers
        self.preload = list(preload)
        self._ctx = mp_context
        self._workers: list[_Worker] = []
        self._lock = threading.Lock()
        self._closed = False
        self.stats = {"timeouts": 0, "crashes": 0, "respawns": 0, "calls": 0}
        self._finalizer = weakref.finalize(self, IsolatedPool._shutdown, self._workers)

    # ---- lifecycle -------------------------------------------------------------------------
    def _context(self):
        if self._ctx is None:
            self._ctx = _default_context()
        if self._ctx.get_start_method() == "fork":
            # imported once here, inherited by every forked (and re-forked) worker
            for name in self.preload:
                importlib.import_module(name)
        return self._ctx

    def _spawn(self) -> _Worker:
        return _Worker(self._context(), self.fn, self.preload)

    def _ensure_workers(self) -> None:
        while len(self._workers) < self.num_workers:
            self._workers.append(self._spawn())

    def _replace(self, worker: _Worker) -> None:
        worker.kill()
        self._workers[self._workers.index(worker)] = self._spawn()
        self.stats["respawns"] += 1

    @staticmethod
    def _shutdown(workers: list[_Worker]) -> None:
        for w in workers:
            try:
                w.conn.send(None)
            except (OSError, ValueError):
                pass
        for w in workers:
            w.proc.join(timeout=0.5)
            w.kill()
        workers.clear()

    def close(self) -> None:
        """Stop all workers. The pool can be used again afterwards (workers respawn lazily)."""
        with self._lock:
            IsolatedPool._shutdown(self._workers)

    def __enter__(self) -> "IsolatedPool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---- work ------------------------------------------------------------------------------
    def map(self, arg_tuples: Sequence[tuple]) -> list[CallResult]:
        """Run every item; return one CallResult per item, in order. Never raises for an item."""
        with self._lock:
            try:
                return self._map(list(arg_tuples))
            except BaseException:
                # interrupted (e.g. Ctrl-C): workers still busy hold stale items; replace them
                for w in list(self._workers):
                    if w.key is not None:
                        w.key = None
                        self._replace(w)
                raise

    def start(self) -> None:
        """Start the workers now instead of at the first `map` (e.g. before the caller starts
        threads or loads a large model, so that the forks are small and clean)."""
        with self._lock:
            self._ensure_workers()

    def _map(self, items: list[tuple]) -> list[CallResult]:
        results: list[CallResult | None] = [None] * len(items)
        if not items:
            return []
        self._ensure_workers()
        pending = list(range(len(items)))[::-1]  # stack; pop() gives the lowest index first
        while pending or any(w.key is not None for w in self._workers):
            # hand one item to every idle worker
            for w in list(self._workers):
                if w.key is None and pending:
                    key = pending.pop()
                    try:
                        w.conn.send((key, tuple(items[key])))
                    except (OSError, ValueError, BrokenPipeError):  # died while idle: respawn, retry
                        pending.append(key)
                        self.stats["crashes"] += 1
                        self._replace(w)
                        continue
                    w.key, w.started = key, time.perf_counter()
                    w.deadline = w.started + self.timeout_s
            busy = [w for w in self._workers if w.key is not None]
            if not busy:
                continue
            now = time.perf_counter()
            wait_s = max(0.0, min(w.deadline for w in busy) - now)
            ready = wait([w.conn for w in busy], timeout=wait_s)
            for w in busy:
                if w.conn in ready:
                    self._collect(w, results)
            now = time.perf_counter()
            for w in [w for w in self._workers if w.key is not None and now >= w.deadline]:
                results[w.key] = CallResult(timed_out=True, error=f"timed out after {self.timeout_s:g} s",
                                            seconds=now - w.started)
                self.stats["timeouts"] += 1
                w.key = None
                self._replace(w)
        self.stats["calls"] += len(items)
        return results  # type: ignore[return-value]

    def _collect(self, w: _Worker, results: list) -> None:
        key = w.key
        try:
            got_key, ok, value, seconds = w.conn.recv()
        except (EOFError, OSError):  # the worker died mid-item (segfault, os._exit, OOM kill)
            w.proc.join(timeout=1)
            results[key] = CallResult(error=f"worker crashed (exit code {w.proc.exitcode})",
                                      seconds=time.perf_counter() - w.started)
            self.stats["crashes"] += 1
            w.key = None
            self._replace(w)
            return
        if got_key != key:  # cannot happen with one item per worker; fail loudly if it does
            raise RuntimeError(f"IsolatedPool: worker answered item {got_key}, expected {key}")
        results[key] = CallResult(value=value, seconds=seconds) if ok else CallResult(error=value, seconds=seconds)
        w.key = None


def worker_pids(pool: IsolatedPool) -> list[int]:
    """Process ids of the live workers (for tests and diagnostics)."""
    return [w.proc.pid for w in pool._workers if w.proc.pid is not None and w.proc.is_alive()]


__all__ = ["CallResult", "IsolatedPool", "worker_pids"]
