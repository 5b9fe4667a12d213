"""Environments stepped in worker processes, bounded per step; a failing worker never takes the
trainer down.

    pool = EnvPool(factory, num_workers=4, step_timeout_s=60)   # factory(prompt, **options) -> Environment
    first = pool.reset(prompts)              # env ids 0..n−1, one per prompt: EnvReply per env
    replies = pool.step(ids, texts)          # one step of each named env
    pool.close()

An `EnvReply` is `ok` with `value` (reset / active step: the step-level prompt `messages` and the
`anchor`; step: `reward`, `done`, `info`) or not ok with `error`, the reason the environment's
trajectory ended:

    env_error: ...        the environment raised (it must not, on model text): that env ends
    env_step_timeout      a call ran longer than step_timeout_s: its worker is killed
    env_worker_crashed    the worker process died during the call (segfault, os._exit, OOM kill)
    env_worker_lost       the env lived on a killed worker and could not be rebuilt
    env_ended             the env had already ended on one of the reasons above

Env i lives on worker i mod num_workers. When a worker is killed (timeout) or dies, only the env
whose call failed ends; the worker is restarted and its other envs are rebuilt there by replaying
their reset and past actions (environments are deterministic given the prompt and the actions, as
GiGPO's groups assume anyway). `reset(prompts)` builds each env with `factory(prompt, **options)`
and calls `env.reset()` (no argument: the factory has the game). The factory must be picklable (a module-level function), because
workers start with `spawn` by default (no inherited CUDA / tokenizer threads).
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import pickle
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

logger = logging.getLogger(__name__)

ERROR_LIMIT = 500  # characters of an environment's exception message kept
IN_FLIGHT = 4  # requests sent to a worker before its first reply is read (EnvPool._run: no pipe deadlock)


class EnvPoolStartError(RuntimeError):
    """No worker of this pool ever started: the first one exited before it was ready. That is the
    setup's fault (the factory's module does not import in a fresh process, or a script starts the
    pool outside `if __name__ == "__main__":` under spawn), never an environment's: scoring every
    episode 0 instead would hide it, so the caller gets this one error."""


@dataclass
class EnvReply:
    ok: bool
    value: dict = field(default_factory=dict)
    error: str | None = None


def _plain(info: dict) -> dict:
    """The picklable part of an info dict (bounded strings)."""
    out = {}
    for k, v in dict(info or {}).items():
        if isinstance(v, str):
            v = v[:ERROR_LIMIT]
        try:
            pickle.dumps(v)
        except Exception:  # noqa: BLE001 - an unpicklable info entry is dropped, not fatal
            v = repr(v)[:ERROR_LIMIT]
        out[str(k)] = v
    return out


def _step_view(env) -> dict:
    return {"messages": list(env.step_prompt()), "anchor": str(env.anchor())}


def _worker_main(conn, factory, options) -> None:
    envs: dict[int, Any] = {}
    conn.send(("ready", None))  # imports are done: the step timeout starts counting from here
    while True:
        try:
            cmd, eid, arg = conn.recv()
        except (EOFError, OSError):
            return
        if cmd == "exit":
            return
        try:
            if cmd == "reset":
                env = factory(arg, **options)  # the factory gets the game; reset() starts it
                env.reset()
                envs[eid] = env
                out = _step_view(env)
            elif cmd == "step":
                env = envs[eid]
                r = env.step(arg)
                out = {"reward": float(r.reward), "done": bool(r.done), "info": _plain(r.info)}
                if not r.done:
                    out.update(_step_view(env))
            elif cmd == "final":
                out = {"reward": float(envs[eid].final_reward())}
            elif cmd == "close":
                envs.pop(eid, None)
                out = {}
            else:
                raise ValueError(f"unknown command {cmd!r}")
            conn.send(("ok", out))
        except Exception as exc:  # noqa: BLE001 - the environment's fault, reported, never fatal
            envs.pop(eid, None)
            conn.send(("error", f"env_error: {type(exc).__name__}: {exc}"[:ERROR_LIMIT]))


class EnvPool:
    """See the module docstring. factory(prompt, **options) -> resrl.envs.base.Environment."""

    def __init__(self, factory: Callable[..., Any], num_workers: int = 2, step_timeout_s: float = 60.0,
                 options: dict | None = None, start_method: str = "spawn", startup_timeout_s: float = 300.0) -> None:
        if num_workers < 1:
            raise ValueError(f"EnvPool: num_workers must be >= 1, got {num_workers}")
        if not step_timeout_s > 0:
            raise ValueError(f"EnvPool: step_timeout_s must be > 0, got {step_timeout_s}")
        self.factory, self.options = factory, dict(options or {})
        self.num_workers, self.step_timeout_s = num_workers, float(step_timeout_s)
        self.startup_timeout_s = float(startup_timeout_s)
        self._ctx = mp.get_context(start_method)
        self._workers: list = [None] * num_workers   # (process, connection)
        self._history: dict[int, tuple[Any, list[str]]] = {}  # env id -> (prompt, actions taken)
        self._ended: dict[int, str] = {}
        self.restarts = 0
        self._ever_ready = False  # a worker of this pool got ready once: later start failures are crashes

    # ---- workers --------------------------------------------------------------------------------

    def _start(self, w: int) -> None:
        parent, child = self._ctx.Pipe()
        proc = self._ctx.Process(target=_worker_main, args=(child, self.factory, self.options), daemon=True)
        proc.start()
        child.close()
        self._workers[w] = (proc, parent)
        # a worker first imports the factory's module (seconds for a heavy engine): wait for it apart
        # from the per-call timeout; a worker that never gets ready reads as crashed on its first call
        try:
            ready = parent.poll(self.startup_timeout_s) and parent.recv()[0] == "ready"
        except (EOFError, OSError):
            ready = False
        if ready:
            self._ever_ready = True
            return
        proc.join(timeout=1.0)
        if proc.exitcode is not None and not self._ever_ready:
            self._workers[w] = None
            raise EnvPoolStartError(
                f"EnvPool: worker {w} exited with code {proc.exitcode} before it was ready, and no worker of "
                f"this pool ever started. Each worker is a fresh {self._ctx.get_start_method()!r} process that "
                f"imports the factory {getattr(self.factory, '__module__', '?')}:"
                f"{getattr(self.factory, '__qualname__', self.factory)!r} and the launching script's main module "
                f"(the worker's traceback is above): start training or evaluation from a script under "
                f"`if __name__ == \"__main__\":`, and check that the factory's module imports on its own.")
        logger.warning("EnvPool: worker %d was not ready after %.0f s (exit code %s)", w,
                       self.startup_timeout_s, proc.exitcode)

    def _kill(self, w: int) -> None:
        entry = self._workers[w]
        self._workers[w] = None
        if entry is None:
            return
        proc, conn = entry
        try:
            conn.close()
        except OSError:
            pass
        if proc.is_alive():
            proc.kill()
        proc.join(timeout=5)

    def worker_pids(self) -> list[int | None]:
        return [e[0].pid if e is not None else None for e in self._workers]

    def _conn(self, w: int):
        if self._workers[w] is None:
            self._start(w)
        return self._workers[w][1]

    def _send(self, w: int, msg) -> bool:
        try:
            self._conn(w).send(msg)
            return True
        except (OSError, BrokenPipeError, ValueError):
            return False

    def _recv(self, w: int, timeout: float) -> tuple[str, Any]:
        proc, conn = self._workers[w]
        try:
            if conn.poll(timeout):
                return conn.recv()
        except (EOFError, OSError):
            return "crash", None
        return ("crash", None) if not proc.is_alive() else ("timeout", None)

    # ---- requests -------------------------------------------------------------------------------

    def _record(self, eid: int, cmd: str, arg) -> None:
        if cmd == "reset":
            self._history[eid] = (arg, [])
        elif cmd == "step":
            self._history[eid][1].append(arg)

    def _restart_and_replay(self, w: int) -> None:
        """A fresh worker w; every live env it hosted is rebuilt by replaying reset + actions."""
        self._kill(w)
        self._start(w)
        self.restarts += 1
        for eid in sorted(self._history):
            if eid % self.num_workers != w or eid in self._ended:
                continue
            prompt, actions = self._history[eid]
            for cmd, arg in [("reset", prompt)] + [("step", a) for a in actions]:
                status = self._recv_after_send(w, (cmd, eid, arg))
                if status[0] != "ok":
                    self._ended[eid] = "env_worker_lost"
                    logger.warning("EnvPool: env %d could not be rebuilt on worker %d (%s)", eid, w, status[0])
                    if status[0] in ("timeout", "crash"):
                        self._kill(w)
                        self._start(w)
                    break

    def _recv_after_send(self, w: int, msg) -> tuple[str, Any]:
        if not self._send(w, msg):
            return "crash", None
        return self._recv(w, self.step_timeout_s)

    def _run(self, requests: Sequence[tuple[int, str, Any]]) -> list[EnvReply]:
        """Every request answered, in order per worker. At most IN_FLIGHT requests are sent to a worker
        before its first unread reply is read: a worker blocked writing replies into a full pipe stops
        reading, so a parent that sent its whole queue first (a 480-goal evaluation's resets) blocked
        writing too, and both waited forever. Workers still run in parallel, IN_FLIGHT requests ahead."""
        replies: list[EnvReply | None] = [None] * len(requests)
        queued: dict[int, deque[int]] = {}
        for i, (eid, _, _) in enumerate(requests):
            if eid in self._ended:
                replies[i] = EnvReply(False, error="env_ended")
            else:
                queued.setdefault(eid % self.num_workers, deque()).append(i)
        sent: dict[int, deque[int]] = {w: deque() for w in queued}  # sent, reply not read yet

        def send_more(w: int) -> None:
            while queued[w] and len(sent[w]) < IN_FLIGHT:
                i = queued[w].popleft()
                eid, cmd, arg = requests[i]
                if eid in self._ended:  # ended by a failed replay after its worker was restarted
                    replies[i] = EnvReply(False, error=self._ended[eid])
                    continue
                sent[w].append(i)
                if not self._send(w, (cmd, eid, arg)):
                    return  # the worker died: this request's reply reads as a crash below

        for w in queued:
            if self._workers[w] is not None and not self._workers[w][0].is_alive():
                logger.warning("EnvPool: worker %d died between calls; restarting it", w)
                self._restart_and_replay(w)
            send_more(w)
        while any(sent.values()):
            for w in [w for w in sent if sent[w]]:  # one reply from each busy worker in turn
                i = sent[w].popleft()
                eid, cmd, arg = requests[i]
                status, value = self._recv(w, self.step_timeout_s)
                if status == "ok":
                    self._record(eid, cmd, arg)
                    replies[i] = EnvReply(True, value)
                else:
                    reason = value if status == "error" else (
                        "env_step_timeout" if status == "timeout" else "env_worker_crashed")
                    self._ended[eid] = reason
                    replies[i] = EnvReply(False, error=reason)
                    logger.warning("EnvPool: env %d (%s) ended: %s", eid, cmd, reason)
                    if status in ("timeout", "crash"):
                        # the requests sent after it went to the dead worker: send them again to the
                        # fresh one, which first rebuilds the worker's live envs by replay
                        self._restart_and_replay(w)
                        queued[w].extendleft(reversed(sent[w]))
                        sent[w].clear()
                send_more(w)
        return [r if r is not None else EnvReply(False, error="env_ended") for r in replies]

    # ---- public API -----------------------------------------------------------------------------

    def reset(self, prompts: Sequence[Any]) -> list[EnvReply]:
        """Start one env per prompt (ids 0..n−1), dropping the previous ones."""
        self.close_envs()
        return self._run([(i, "reset", p) for i, p in enumerate(prompts)])

    def step(self, ids: Sequence[int], texts: Sequence[str]) -> list[EnvReply]:
        if len(ids) != len(texts):
            raise ValueError(f"EnvPool.step: {len(ids)} ids for {len(texts)} texts")
        return self._run([(int(i), "step", str(t)) for i, t in zip(ids, texts)])

    def final_reward(self, ids: Sequence[int]) -> list[EnvReply]:
        return self._run([(int(i), "final", None) for i in ids])

    def close_envs(self) -> None:
        ids = [i for i in self._history if i not in self._ended]
        if ids and any(e is not None for e in self._workers):
            self._run([(i, "close", None) for i in ids])
        self._history.clear()
        self._ended.clear()

    def close(self) -> None:
        for w in range(self.num_workers):
            entry = self._workers[w]
            if entry is not None:
                try:
                    entry[1].send(("exit", -1, None))
                except (OSError, BrokenPipeError):
                    pass
                entry[0].join(timeout=2)
            self._kill(w)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):  # best effort; close() is the contract
        try:
            self.close()
        except Exception:  # noqa: BLE001
            pass


__all__ = ["EnvPool", "EnvPoolStartError", "EnvReply"]
