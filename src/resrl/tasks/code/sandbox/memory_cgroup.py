"""Per-item memory cgroups for the code sandbox: the layer that bounds ALL of an item's processes
together (RLIMIT_AS is per process).

`memory_cgroup_base()` finds what this machine offers, once per process: cgroup v2 with the memory
controller delegated to a directory we can create (`memory.max`), else a writable cgroup v1
memory hierarchy (`memory.limit_in_bytes`), else None (RLIMIT_AS only; logged once). Under it,
this process keeps one directory (`resrl-sandbox-<pid>`, removed at exit; those of dead
processes are removed when the next one starts) and `item_cgroup()` makes one cgroup per item.
The harness (`code_harness`) moves itself into the item's cgroup before anything runs (through a
`cgroup.procs` descriptor the parent opens: the cgroup file system is not mounted inside) and reads
its OOM-kill counter (`memory.events` / `memory.oom_control`) around each test, so a record says
which layer stopped a test: `memory_limit: "cgroup"` or `"rlimit_as"`.
"""

from __future__ import annotations

import atexit
import functools
import logging
import os
import threading
import time

logger = logging.getLogger(__name__)


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def _write(path: str, text: str) -> bool:
    try:
        with open(path, "w") as f:
            f.write(text)
        return True
    except OSError:
        return False


@functools.lru_cache(maxsize=1)
def memory_cgroup_base() -> tuple[str, str] | None:
    """(kind, directory) under which item memory cgroups are made, or None when this machine
    offers none we may use: cgroup v2 with the memory controller delegated to a directory we can
    create, else a writable cgroup v1 memory hierarchy. The directory is this process's own."""
    own_v2 = next((line[3:].strip() for line in _read("/proc/self/cgroup").splitlines() if line.startswith("0::")), "/")
    for mount in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
        ctrl = os.path.join(mount, own_v2.lstrip("/"), "cgroup.controllers")
        if "memory" not in _read(ctrl).split():
            continue
        _remove_stale_bases(os.path.dirname(ctrl))
        base = os.path.join(os.path.dirname(ctrl), f"resrl-sandbox-{os.getpid()}")
        try:
            os.makedirs(base, exist_ok=True)
        except OSError:
            continue
        if _write(os.path.join(base, "cgroup.subtree_control"), "+memory"):
            return "v2", base
        try:
            os.rmdir(base)
        except OSError:
            pass
    v1 = "/sys/fs/cgroup/memory"
    if os.path.isfile(os.path.join(v1, "memory.limit_in_bytes")):
        _remove_stale_bases(v1)
        base = os.path.join(v1, f"resrl-sandbox-{os.getpid()}")
        try:
            os.makedirs(base, exist_ok=True)
            if os.path.isfile(os.path.join(base, "memory.limit_in_bytes")):
                return "v1", base
        except OSError:
            pass
    logger.warning("code sandbox: no memory cgroup here (no delegated cgroup v2 memory controller, no writable "
                   "v1 hierarchy): an item's memory is bounded by RLIMIT_AS per process only")
    return None


_PENDING: list[str] = []
_LOCK = threading.Lock()


def item_cgroup(limit: int, name: str) -> dict | None:
    """A fresh memory cgroup `name` for one item, limited to `limit` bytes for all of its processes
    together, or None when the machine offers none: {"kind", "procs", "events", "limit", "path"}."""
    found = memory_cgroup_base()
    if found is None:
        return None
    kind, base = found
    path = os.path.join(base, name)
    try:
        os.mkdir(path)
    except FileExistsError:
        pass
    except OSError:
        return None
    if kind == "v2":
        ok = _write(os.path.join(path, "memory.max"), str(limit))
        _write(os.path.join(path, "memory.swap.max"), "0")
        events = os.path.join(path, "memory.events")
    else:
        ok = _write(os.path.join(path, "memory.limit_in_bytes"), str(limit))
        _write(os.path.join(path, "memory.memsw.limit_in_bytes"), str(limit))  # no swap escape (if swap accounting)
        events = os.path.join(path, "memory.oom_control")
    if not ok:
        _remove_cgroup(path)
        return None
    return {"kind": kind, "procs": os.path.join(path, "cgroup.procs"), "events": events, "limit": limit, "path": path}


def _remove_cgroup(path: str) -> bool:
    try:
        os.rmdir(path)
        return True
    except FileNotFoundError:
        return True
    except OSError:  # processes still exiting: retried later
        return False


def release(path: str) -> None:
    """The item is over: remove its cgroup now, or later once its processes are gone."""
    with _LOCK:
        _PENDING.append(path)
    sweep()


def sweep() -> None:
    """Remove the released cgroups whose processes are gone."""
    with _LOCK:
        _PENDING[:] = [p for p in _PENDING if not _remove_cgroup(p)]


def _remove_stale_bases(parent: str) -> None:
    """Directories left by sandboxing processes that died without their exit hook (SIGKILL): removed
    when their process is gone and no task is left in them."""
    try:
        names = os.listdir(parent)
    except OSError:
        return
    for name in names:
        pid = name.rpartition("-")[2]
        if not name.startswith("resrl-sandbox-") or not pid.isdigit() or os.path.exists(f"/proc/{pid}"):
            continue
        base = os.path.join(parent, name)
        try:
            for item in os.listdir(base):
                if os.path.isdir(os.path.join(base, item)):
                    _remove_cgroup(os.path.join(base, item))
        except OSError:
            pass
        _remove_cgroup(base)


@atexit.register
def _remove_at_exit() -> None:
    """The released item cgroups once their processes are gone (a few ms after a SIGKILL), then this
    process's own directory."""
    if memory_cgroup_base.cache_info().currsize == 0:
        return
    found = memory_cgroup_base()
    if found is None or not found[1].endswith(f"-{os.getpid()}"):  # none, or a fork of the process that made it
        return
    deadline = time.monotonic() + 2.0
    while _PENDING and time.monotonic() < deadline:
        sweep()
        time.sleep(0.02)
    _remove_cgroup(found[1])


__all__ = ["memory_cgroup_base", "item_cgroup", "release", "sweep"]
