"""Run untrusted Python programs against test inputs, one fresh sandboxed process per item.

`run_job(job, limits, slot)` starts `python -I -S -B -c BOOT` running `code_harness` (see that module for what happens
inside) and returns the per-test records it streams back. The layers, outermost first:

| layer | how | what it guarantees |
|---|---|---|
| namespaces | `unshare --net --pid --fork --mount --kill-child` (root), else `unshare --user --map-root-user ...` | no network (only a down loopback); the item's processes see only each other, and all of them die with the harness (pid 1); mounts stay private |
| filesystem | a tmpfs root with read-only binds of /usr, /lib*, /bin, /sbin, /etc and the interpreter's directories (prefix, stdlib, site-packages), then `chroot` | home directories, data sets (with their expected outputs), the repository and the working directory are invisible; /tmp and /dev/shm are small fresh tmpfs that vanish with the item |
| uid | `setuid` to a fresh unprivileged uid per item (root only) | RLIMIT_NPROC binds (it does not for root); nothing owned by others is writable; the harness is non-dumpable (no ptrace) |
| memory cgroup | one cgroup per item, v2 `memory.max` or v1 `memory.limit_in_bytes` (`memory_cgroup`), when the machine offers one | all of the item's processes together stay within `cgroup_memory_mb`: the kernel OOM-kills inside the item |
| rlimits | address space, file size, open files, processes, CPU time per test, no core files | memory / disk / fork bombs fail inside the item |
| parent | wall deadline, whole process group SIGKILLed, stdout / stderr / results capped, scrubbed environment, temp directory removed | a hang or a flood costs at most the deadline; no inherited secrets |

Which layers held is detected at run time (`detect_isolation()`, and the harness reports what it
applied on each item); a missing one is logged once, never silently assumed.
"""

from __future__ import annotations

import atexit
import functools
import itertools
import json
import logging
import marshal
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from resrl.tasks.code.sandbox import memory_cgroup
from resrl.tasks.code.sandbox.memory_cgroup import memory_cgroup_base

logger = logging.getLogger(__name__)

HARNESS = Path(__file__).with_name("code_harness.py")
_SCRUBBED_PATH = "/usr/local/bin:/usr/bin:/bin"


@dataclass(frozen=True)
class SandboxLimits:
    """Resource limits of one item (each test case runs in a fork of the item's harness).

    memory_mb      RLIMIT_AS of every process of the item (address space, not resident memory)
    file_size_mb   RLIMIT_FSIZE: largest file a process may write (a bigger write kills it, SIGXFSZ)
    open_files     RLIMIT_NOFILE
    processes      RLIMIT_NPROC for the sandbox uid: the harness, the test and what the test forks
    output_kb      stdout kept per test (more fails the test) and per stream of the harness
    tmpfs_mb       size of the item's /tmp and /dev/shm (the /tmp also holds the tests' stdin files:
                   their size is added to it)
    startup_s      wall-time allowance for the interpreter start, on top of the tests' time
    cgroup_memory_mb  memory of all the item's processes together, in its cgroup (None: memory_mb)
    use_cgroup     put the item in a memory cgroup when the machine offers one (`memory_cgroup`)
    """

    memory_mb: int = 1024
    file_size_mb: int = 16
    open_files: int = 64
    processes: int = 32
    output_kb: int = 1024
    tmpfs_mb: int = 64
    startup_s: float = 5.0
    cgroup_memory_mb: int | None = None  # all processes of the item together (cgroup); None = memory_mb
    use_cgroup: bool = True


@dataclass
class Isolation:
    """What the machine allows (found once per process by `detect_isolation`)."""

    unshare_prefix: list[str] = field(default_factory=list)  # argv prefix, [] = no namespaces
    namespaces: list[str] = field(default_factory=list)      # e.g. ["net", "pid", "mount"]
    drop_uid: bool = False                                   # root: setuid to a sandbox uid
    notes: list[str] = field(default_factory=list)


@dataclass
class JobOutcome:
    """Raw harness output for one item: per-test records (dicts from the harness), in test order."""

    records: list[dict] = field(default_factory=list)
    layers: dict = field(default_factory=dict)
    timed_out: bool = False         # the item's wall deadline passed (the harness was killed)
    stopped_early: bool = False     # the caller's `on_record` asked to stop
    error: str | None = None        # harness crash / launch failure
    seconds: float = 0.0


_ISOLATION: Isolation | None = None
_ISOLATION_LOCK = threading.Lock()


def _probe(prefix: list[str]) -> bool:
    try:
        out = subprocess.run([*prefix, sys.executable, "-I", "-S", "-c", "import os; print(os.getpid())"],
                             capture_output=True, timeout=30, env={"PATH": _SCRUBBED_PATH})
    except (OSError, subprocess.SubprocessError):
        return False
    return out.returncode == 0 and out.stdout.strip() == b"1"


def detect_isolation(refresh: bool = False) -> Isolation:
    """Which namespaces `unshare` can create here, and whether to drop to a sandbox uid."""
    global _ISOLATION
    with _ISOLATION_LOCK:
        if _ISOLATION is not None and not refresh:
            return _ISOLATION
        iso = Isolation()
        unshare = shutil.which("unshare", path=_SCRUBBED_PATH)
        base = ["--net", "--pid", "--fork", "--mount", "--kill-child"]
        if unshare is None:
            iso.notes.append("no `unshare` binary: no network, pid or mount namespace")
        elif os.geteuid() == 0 and _probe([unshare, *base]):
            iso.unshare_prefix = [unshare, *base]
            iso.namespaces = ["net", "pid", "mount"]
        elif _probe([unshare, "--user", "--map-root-user", *base]):
            iso.unshare_prefix = [unshare, "--user", "--map-root-user", *base]
            iso.namespaces = ["user", "net", "pid", "mount"]
        else:
            iso.notes.append("`unshare` cannot create namespaces here (no user namespaces?): the program "
                             "has the network, sees the host's processes and files readable by its uid")
        iso.drop_uid = os.geteuid() == 0
        if not iso.drop_uid:
            iso.notes.append("not root: the program keeps this uid, and RLIMIT_NPROC counts all of its processes")
        for note in iso.notes:
            logger.warning("code sandbox: %s", note)
        _ISOLATION = iso
        return iso


ALLOW_ROOT_ENV = "RESRL_CODE_SANDBOX_ALLOW_ROOT"


def _allow_root() -> bool:
    """Opt-in to run programs as root when the uid drop fails (then nothing bounds their processes)."""
    return os.environ.get(ALLOW_ROOT_ENV, "") == "1"


# Sandbox uids: every item gets the next uid of this process's block of 256, so an item never
# shares RLIMIT_NPROC with the still-dying processes of the items before it (their exit is not
# waited for), and the no-pid-namespace sweep (kill(-1) as that uid) reaches only this item.
UID_BLOCK = 256
_UID_LOCK = threading.Lock()
_uid_seq = 0


def _mapped(lo: int, hi: int) -> bool:
    """Whether uids [lo, hi) are all mapped in this user namespace (containers may map only 65536)."""
    try:
        with open("/proc/self/uid_map") as f:
            ranges = [tuple(map(int, line.split())) for line in f if line.strip()]
    except OSError:
        return True
    return any(inside <= lo and hi <= inside + length for inside, _, length in ranges)


@functools.lru_cache(maxsize=1)
def sandbox_uid_range() -> tuple[int, int]:
    """[first, last) uids this project's sandboxes use on this machine."""
    for base, span in ((1_000_000, 1 << 20), (40_000, 20_000)):
        if _mapped(base, base + span):
            return base, base + span
    return 1_000_000, 1_000_000 + (1 << 20)  # nothing fits: setuid fails and the harness reports it


def sandbox_uid(slot: int = 0) -> int:
    """A fresh unprivileged uid for the next item: this process's block (by pid), next in rotation.
    (`slot` is kept for callers that think in slots; the rotation already separates items.)"""
    global _uid_seq
    lo, hi = sandbox_uid_range()
    blocks = (hi - lo) // UID_BLOCK
    with _UID_LOCK:
        _uid_seq += 1
        seq = _uid_seq
    return lo + (os.getpid() % blocks) * UID_BLOCK + seq % UID_BLOCK


_HARNESS_BOOT = "import sys; sys.path.insert(0, sys.argv[1]); import code_harness; del sys.path[0]; code_harness.run()"


def _harness_command() -> list[str]:
    """`python -I -S -B -c BOOT DIR`: -I ignores PYTHON* variables and the user site, -S skips `site`
    (the harness sets sys.path itself), -B writes no bytecode. Importing the harness as a module
    (rather than running the file) reuses its cached bytecode: a few ms less per item."""
    _ensure_harness_bytecode()
    return [sys.executable, "-I", "-S", "-B", "-c", _HARNESS_BOOT, str(HARNESS.parent)]


@functools.lru_cache(maxsize=1)
def _ensure_harness_bytecode() -> None:
    import py_compile

    try:
        py_compile.compile(str(HARNESS), doraise=True)  # no-op cost when up to date; may be read-only
    except (OSError, py_compile.PyCompileError):
        pass


def _prefixes() -> set[str]:
    return {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)}


def _import_path() -> list[str]:
    """The import path programs get: the caller's sys.path entries that belong to the interpreter
    (stdlib, lib-dynload, site-packages). The current directory, a repository's src/ or tests/ and
    anything else a script put there are left out — they may hold data with the expected outputs."""
    prefixes = _prefixes()
    keep = []
    for p in sys.path:
        if not p or not os.path.isabs(p):
            continue
        real = os.path.realpath(p)
        parts = set(real.split(os.sep))
        if any(real == q or real.startswith(q + os.sep) for q in prefixes) or parts & {"site-packages", "dist-packages"}:
            keep.append(p)
    return keep


def _interpreter_dirs() -> list[str]:
    """Directories bind-mounted (read-only) into the sandbox's root: the interpreter's prefixes and
    the import path above."""
    dirs = _prefixes() | {os.path.realpath(p) for p in _import_path() if os.path.isdir(p)}
    return sorted(dirs - {"/", "/tmp"})


def run_job(job: dict, limits: SandboxLimits, *, test_timeout_s: float, total_timeout_s: float,
            slot: int = 0, on_record: Callable[[dict], bool] | None = None) -> JobOutcome:
    """Run one item in the sandbox. `job`: {"code", "mode": "stdio"|"call"|"check", "inputs",
    "fn_name"?}. `on_record(record) -> bool` sees each test's record as it arrives; False stops the
    item (the rest count as not run). Never raises for anything the program does."""
    iso = detect_isolation()
    start = time.perf_counter()
    outcome = JobOutcome()
    tmp, slot_lock = _item_dir(slot)
    read_fd, write_fd = os.pipe()
    proc = None
    cgroup = None
    try:
        uid = sandbox_uid(slot) if iso.drop_uid else None
        full = {**job, "uid": uid, "mount": "mount" in iso.namespaces, "allow_root": _allow_root(),
                "root_mountpoint": os.path.join(tmp, "root"), "expose": _interpreter_dirs(),
                "test_timeout_s": float(test_timeout_s), "total_timeout_s": float(total_timeout_s),
                # the test inputs live on the item's /tmp too (stdin files): room for them on top of tmpfs_mb
                "tmpfs_bytes": (limits.tmpfs_mb << 20) + _stdin_bytes(job),
                "limits": {"memory_bytes": limits.memory_mb << 20, "file_size_bytes": limits.file_size_mb << 20,
                           "open_files": limits.open_files, "processes": limits.processes,
                           "output_bytes": limits.output_kb << 10}}
        full["sys_path"] = _import_path()
        cgroup = memory_cgroup.item_cgroup((limits.cgroup_memory_mb or limits.memory_mb) << 20,
                                           f"item-{uid if uid is not None else os.getpid()}-{next(_CGROUP_SEQ)}") \
            if limits.use_cgroup else None
        full["cgroup"] = cgroup and {k: cgroup[k] for k in ("kind", "procs", "events", "limit")}
        job_path = os.path.join(tmp, "job.marshal")
        with open(job_path, "wb") as f:
            marshal.dump(full, f)
        argv = [*iso.unshare_prefix, *_harness_command(), job_path, str(write_fd)]
        env = {"PATH": _SCRUBBED_PATH, "LANG": "C.UTF-8", "HOME": tmp, "PYTHONHASHSEED": "0"}
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    pass_fds=(write_fd,), cwd=tmp, env=env, start_new_session=True)
        except OSError as exc:
            outcome.error = f"cannot start the sandbox: {exc}"
            return outcome
        finally:
            os.close(write_fd)
        deadline = time.monotonic() + total_timeout_s + limits.startup_s
        expected = 1 if job["mode"] == "check" else len(job["inputs"])
        _pump(proc, read_fd, limits, deadline, outcome, on_record, expected, int(job.get("value_cap_bytes") or 0))
    finally:
        if proc is not None:
            _kill_group(proc)
        if cgroup is not None:
            memory_cgroup.release(cgroup["path"])
        os.close(read_fd)
        _release_item_dir(tmp, slot_lock)
        outcome.seconds = time.perf_counter() - start
    return outcome


def _stdin_bytes(job: dict) -> int:
    """Bytes the harness writes as stdin files for a stdin/stdout item (with a page of slack each)."""
    if job.get("mode") != "stdio":
        return 0
    return sum(len(x.encode("utf-8", "surrogatepass")) + 4096 for x in job["inputs"])


# One directory per (process, slot), reused item after item: with the mount namespace the harness
# writes nothing into it (it only holds the job file and an empty mount point), which saves a
# mkdtemp + rmtree per item. A second concurrent user of the same slot gets a fresh directory.
_SLOT_DIRS: dict[tuple[int, int], tuple[str, threading.Lock]] = {}
_CGROUP_SEQ = itertools.count()
_SLOT_DIRS_LOCK = threading.Lock()


def _item_dir(slot: int) -> tuple[str, threading.Lock | None]:
    key = (os.getpid(), slot)
    with _SLOT_DIRS_LOCK:
        entry = _SLOT_DIRS.get(key)
        if entry is None or not os.path.isdir(os.path.join(entry[0], "root")):
            path = tempfile.mkdtemp(prefix=f"resrl-code-{os.getpid()}-{slot}-")
            os.mkdir(os.path.join(path, "root"))
            entry = _SLOT_DIRS[key] = (path, threading.Lock())
    path, lock = entry
    if lock.acquire(blocking=False):
        return path, lock
    path = tempfile.mkdtemp(prefix="resrl-code-")
    os.mkdir(os.path.join(path, "root"))
    return path, None


def _release_item_dir(path: str, lock: threading.Lock | None) -> None:
    if lock is None:
        shutil.rmtree(path, ignore_errors=True)
        return
    for name in ("inputs", "work"):  # left by the harness when it ran without a mount namespace
        if os.path.lexists(os.path.join(path, name)):
            shutil.rmtree(os.path.join(path, name), ignore_errors=True)
    lock.release()


@atexit.register
def _remove_slot_dirs() -> None:
    for (pid, _), (path, _) in list(_SLOT_DIRS.items()):
        if pid == os.getpid():
            shutil.rmtree(path, ignore_errors=True)


def _pump(proc, read_fd: int, limits: SandboxLimits, deadline: float, outcome: JobOutcome, on_record,
          expected: int, value_cap: int = 0) -> None:
    """Read results / stdout / stderr until every test has reported (the namespaces' teardown is
    not waited for), the harness closes them, the deadline passes, or `on_record` says stop."""
    cap = limits.output_kb << 10
    # one result line: stdout (JSON-escaped: at most 6 bytes a byte) and error text, or an encoded
    # return value (ASCII JSON, escaped again: at most 2 bytes a byte)
    record_cap = max(cap * 6, value_cap * 2) + 8192
    sel = selectors.DefaultSelector()
    buffers = {proc.stdout.fileno(): bytearray(), proc.stderr.fileno(): bytearray(), read_fd: bytearray()}
    for fd in buffers:
        os.set_blocking(fd, False)
        sel.register(fd, selectors.EVENT_READ)
    open_fds = set(buffers)
    try:
        while open_fds:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                outcome.timed_out = True
                return
            for key, _ in sel.select(timeout=remaining):
                fd = key.fd
                try:
                    chunk = os.read(fd, 65536)
                except BlockingIOError:
                    continue
                if not chunk:
                    sel.unregister(fd)
                    open_fds.discard(fd)
                    continue
                buf = buffers[fd]
                if fd != read_fd:  # the harness's own output: keep the first `cap` bytes
                    buf += chunk[: max(0, cap - len(buf))]
                    continue
                buf += chunk
                if b"\n" not in chunk:  # a long line still arriving: scan only what is new
                    if len(buf) > record_cap:
                        outcome.error = "sandbox result line over the size limit"
                        return
                    continue
                while b"\n" in buf:
                    line, _, rest = bytes(buf).partition(b"\n")
                    buf[:] = rest
                    if not _take_record(line, outcome, on_record):
                        outcome.stopped_early = len(outcome.records) < expected
                        return
                    if len(outcome.records) >= expected:
                        return
                if len(buf) > record_cap:
                    outcome.error = "sandbox result line over the size limit"
                    return
    finally:
        sel.close()
        if len(outcome.records) < expected and outcome.error is None and not outcome.timed_out:
            try:
                proc.wait(timeout=max(0.0, min(1.0, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                pass
            err = bytes(buffers[proc.stderr.fileno()]).decode("utf-8", "replace").strip()
            if not outcome.stopped_early:
                outcome.error = (f"the sandbox harness stopped after {len(outcome.records)} of {expected} tests "
                                 f"(exit status {proc.returncode})" + (f": {err[-300:]}" if err else ""))


_WARNED: set[str] = set()


def _take_record(line: bytes, outcome: JobOutcome, on_record) -> bool:
    try:
        record = json.loads(line)
    except json.JSONDecodeError:
        outcome.error = "malformed sandbox result line"
        return False
    if "layers" in record:
        outcome.layers = record["layers"]
        notes = [outcome.layers.get(k) for k in ("chroot_error", "uid_error")]
        if outcome.layers.get("refused"):
            notes.append(f"programs are refused: root without a uid drop cannot bound their processes "
                         f"(set {ALLOW_ROOT_ENV}=1 to run them anyway)")
        for note in notes:
            if note and note not in _WARNED:  # once per process: it repeats on every item
                _WARNED.add(note)
                logger.warning("code sandbox: %s", note)
        return True
    outcome.records.append(record)
    return True if on_record is None else bool(on_record(record))


_DYING: list = []  # killed item processes whose exit (namespace teardown) has not been reaped yet
_DYING_LOCK = threading.Lock()


def _kill_group(proc) -> None:
    """SIGKILL the item's whole process group (unshare, the harness, anything left in the group;
    the pid namespace takes every other process of the item with its pid 1). The exit itself —
    tearing down the namespaces takes milliseconds — is reaped later, off the item's clock."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()
    with _DYING_LOCK:
        _DYING.append(proc)
        _DYING[:] = [p for p in _DYING if p.poll() is None]


def reap_dying(timeout_s: float = 10.0) -> int:
    """Wait for killed items to finish exiting; returns how many are still not gone."""
    deadline = time.monotonic() + timeout_s
    with _DYING_LOCK:
        for p in list(_DYING):
            try:
                p.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                continue
        _DYING[:] = [p for p in _DYING if p.poll() is None]
        left = len(_DYING)
    memory_cgroup.sweep()
    return left


__all__ = ["SandboxLimits", "Isolation", "JobOutcome", "detect_isolation", "run_job", "sandbox_uid", "sandbox_uid_range",
           "reap_dying", "memory_cgroup_base", "HARNESS"]
