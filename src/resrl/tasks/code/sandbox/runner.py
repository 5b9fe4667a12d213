"""Run untrusted Python programs against test inputs, one fresh sandboxed process per item.

`run_job(job, limits, slot)` starts the harness (`code_harness`, which documents what happens
inside) in a sandbox and returns the per-test records it streams back. The sandbox (`detect_isolation`):

| layer | how | what it guarantees |
|---|---|---|
| bubblewrap | `bwrap`: pivot_root into a new root; new user (non-root callers), pid, net, mount, IPC and UTS namespaces; `--die-with-parent`, `--new-session`, no_new_privs | the program sees the interpreter and the standard library only (read-only; every site-packages masked: no resrl package data, no home, no working directory, no data set or tests file); no network; its own SysV IPC / POSIX message queues / abstract unix sockets; a fresh /tmp and /dev/shm; all of its processes die with the item (pid 1 of its namespace is the harness) |
| seccomp | a libseccomp filter (`seccomp_filter`, via `bwrap --seccomp`) | no keyrings (they are per uid and outlive processes), no ptrace / process_vm_*, no unshare / setns / mount / chroot, no bpf / perf / io_uring / module or kexec calls |
| uid | as root: the harness drops to a fresh unprivileged uid per item (bubblewrap keeps CAP_SETUID for that step only); as a user: the user's uid, mapped in the user namespace | RLIMIT_NPROC binds (the kernel counts the item's processes only); nothing owned by others is writable; the harness is non-dumpable |
| memory cgroup | one cgroup per item, v2 `memory.max` or v1 `memory.limit_in_bytes` (`memory_cgroup`), joined through a descriptor, when the machine offers one | all of the item's processes together stay within `cgroup_memory_mb` |
| rlimits | address space, file size, open files, processes, CPU time per test, no core files | memory / disk / fork bombs fail inside the item |
| parent | wall deadline, the whole sandbox SIGKILLed, results capped, scrubbed environment | a hang or a flood costs at most the deadline; no inherited secrets |

Without bubblewrap (not installed, no user namespaces, no libseccomp) programs are REFUSED: every
item fails with the reason, logged once. `RESRL_CODE_SANDBOX=weak` accepts the older, weaker path
instead (`unshare` + chroot + the uid drop, `legacy`), with a loud warning naming what it does not
hold (docs/tasks/code.md, "Isolation").
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
import sysconfig
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from resrl.tasks.code.sandbox import memory_cgroup, seccomp_filter
from resrl.tasks.code.sandbox.memory_cgroup import memory_cgroup_base

logger = logging.getLogger(__name__)

HARNESS = Path(__file__).with_name("code_harness.py")
_HARNESS_MODULES = ("code_values", "code_harness", "code_harness_modes")  # in import order
_SCRUBBED_PATH = "/usr/local/bin:/usr/bin:/bin"

SANDBOX_ENV = "RESRL_CODE_SANDBOX"  # "" or "bwrap": bubblewrap or refuse; "weak": accept the legacy path
WEAK_RISKS = ("the program can reach the resrl package data and site-packages of the interpreter's prefix, "
              "shares the host's kernel keyrings (as a non-root user also its SysV IPC), and as a non-root user "
              "runs as root of a user namespace behind a plain chroot, which it can leave")


@dataclass(frozen=True)
class SandboxLimits:
    """Resource limits of one item (each test case runs in a fork of the item's harness).

    memory_mb      RLIMIT_AS of every process of the item (address space, not resident memory)
    file_size_mb   RLIMIT_FSIZE: largest file a process may write (a bigger write kills it, SIGXFSZ);
                   raised to the item's output cap when that is larger (stdout is such a file)
    open_files     RLIMIT_NOFILE
    processes      RLIMIT_NPROC for the sandbox uid: the harness, the test and what the test forks
    output_kb      stdout kept per test (more fails the test) and per stream of the harness; an
                   item whose expected outputs are larger gets twice its largest (`run_tests`)
    tmpfs_mb       size of the item's /tmp and of its /dev/shm
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
    """What the machine allows (found once per process by `detect_isolation`).

    backend         "bwrap" (bubblewrap + seccomp), "legacy" (RESRL_CODE_SANDBOX=weak: unshare + chroot),
                    or "refused" (no sandbox: every item fails with `refusal`)"""

    unshare_prefix: list[str] = field(default_factory=list)  # legacy: argv prefix, [] = no namespaces
    namespaces: list[str] = field(default_factory=list)      # e.g. ["user", "pid", "net", "mount", "ipc", "uts"]
    drop_uid: bool = False                                   # root: setuid to a sandbox uid
    notes: list[str] = field(default_factory=list)
    backend: str = "legacy"
    bwrap: str | None = None
    refusal: str | None = None


@dataclass
class JobOutcome:
    """Raw harness output for one item: per-test records (dicts from the harness), in test order."""

    records: list[dict] = field(default_factory=list)
    layers: dict = field(default_factory=dict)
    timed_out: bool = False         # the item's wall deadline passed (the harness was killed)
    stopped_early: bool = False     # the caller's `on_record` asked to stop
    error: str | None = None        # harness crash / launch failure / refusal
    seconds: float = 0.0


_ISOLATION: Isolation | None = None
_ISOLATION_LOCK = threading.Lock()


def sandbox_python() -> str:
    """The interpreter programs run on: the base installation of this one (a venv's python without
    the venv: with -S nothing but the standard library is on its path)."""
    base = getattr(sys, "_base_executable", None) or sys.executable
    return os.path.realpath(base if os.path.exists(base) else sys.executable)


def _probe(prefix: list[str]) -> bool:
    try:
        out = subprocess.run([*prefix, sandbox_python(), "-I", "-S", "-c", "import os; print(os.getpid())"],
                             capture_output=True, timeout=30, env={"PATH": _SCRUBBED_PATH})
    except (OSError, subprocess.SubprocessError):
        return False
    return out.returncode == 0 and out.stdout.strip() == b"1"


def _probe_bwrap(bwrap: str) -> str | None:
    """None when a program starts under the full bubblewrap command, else why not."""
    fd = seccomp_filter.filter_fd()
    try:
        argv = [*_bwrap_argv(bwrap, 1 << 20, fd), sandbox_python(), "-I", "-S", "-c",
                "import os; print(os.getpid(), open('/proc/self/status').read().count('Seccomp:\\t2'))"]
        out = subprocess.run(argv, capture_output=True, timeout=30, env={"PATH": _SCRUBBED_PATH}, pass_fds=(fd,))
    except (OSError, subprocess.SubprocessError) as exc:
        return f"bubblewrap does not start ({exc})"
    finally:
        os.close(fd)
    if out.returncode != 0 or out.stdout.split() != [b"1", b"1"]:
        err = out.stderr.decode("utf-8", "replace").strip()[-300:]
        return f"bubblewrap cannot create the sandbox here (exit {out.returncode}: {err or out.stdout[-100:]!r})"
    return None


def detect_isolation(refresh: bool = False) -> Isolation:
    """The sandbox this machine allows (module docstring): bubblewrap with the seccomp filter, else
    refused, or the legacy path when RESRL_CODE_SANDBOX=weak accepts it."""
    global _ISOLATION
    with _ISOLATION_LOCK:
        if _ISOLATION is not None and not refresh:
            return _ISOLATION
        mode = os.environ.get(SANDBOX_ENV, "").strip().lower()
        if mode not in ("", "bwrap", "weak"):
            logger.warning("code sandbox: %s=%r is not one of 'bwrap', 'weak'; using bubblewrap", SANDBOX_ENV, mode)
            mode = ""
        bwrap = shutil.which("bwrap", path=_SCRUBBED_PATH)
        why = None
        if not sys.platform.startswith("linux"):
            why = f"bubblewrap needs Linux (this is {sys.platform})"
        elif bwrap is None:
            why = "bubblewrap is not installed (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap)"
        elif seccomp_filter.filter_bpf() is None:
            why = f"no seccomp filter: {seccomp_filter.unavailable_reason()} (pip install pyseccomp; apt-get install libseccomp2)"
        else:
            why = _probe_bwrap(bwrap)
        if why is None and mode != "weak":
            iso = Isolation(backend="bwrap", bwrap=bwrap, drop_uid=os.geteuid() == 0,
                            namespaces=(["user"] if os.geteuid() != 0 else []) + ["pid", "net", "mount", "ipc", "uts"])
        elif mode == "weak":
            iso = _legacy_isolation()
            logger.warning("code sandbox: %s=weak: programs run on the legacy path (%s%s); its risks: %s. "
                           "Install bubblewrap and unset %s for the full sandbox.", SANDBOX_ENV,
                           " + ".join(iso.namespaces) or "no namespaces", ", uid drop" if iso.drop_uid else "",
                           WEAK_RISKS, SANDBOX_ENV)
        else:
            iso = Isolation(backend="refused", refusal=(
                f"code sandbox unavailable: {why}. Programs are refused (every item scores 0) rather than run "
                f"with weaker isolation; set {SANDBOX_ENV}=weak to accept the legacy sandbox, whose risks are: "
                f"{WEAK_RISKS}"))
            logger.error("%s", iso.refusal)
        for note in iso.notes:
            logger.warning("code sandbox: %s", note)
        _ISOLATION = iso
        return iso


def _legacy_isolation() -> Isolation:
    """The older path (RESRL_CODE_SANDBOX=weak): `unshare` namespaces, a chroot built by the harness,
    the uid drop as root."""
    iso = Isolation(backend="legacy")
    unshare = shutil.which("unshare", path=_SCRUBBED_PATH)
    base = ["--net", "--pid", "--fork", "--mount", "--ipc", "--kill-child"]
    if unshare is None:
        iso.notes.append("no `unshare` binary: no network, pid or mount namespace")
    elif os.geteuid() == 0 and _probe([unshare, *base]):
        iso.unshare_prefix = [unshare, *base]
        iso.namespaces = ["net", "pid", "mount", "ipc"]
    elif _probe([unshare, "--user", "--map-root-user", *base]):
        iso.unshare_prefix = [unshare, "--user", "--map-root-user", *base]
        iso.namespaces = ["user", "net", "pid", "mount", "ipc"]
    else:
        iso.notes.append("`unshare` cannot create namespaces here (no user namespaces?): the program "
                         "has the network, sees the host's processes and files readable by its uid")
    iso.drop_uid = os.geteuid() == 0
    if not iso.drop_uid:
        iso.notes.append("not root: the program keeps this uid, and RLIMIT_NPROC counts all of its processes")
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


# The harness starts from the job memfd: its three modules are code objects compiled here once
# (marshal), so no file of resrl needs to be visible inside, and nothing is compiled per item.
_BOOT = ("import marshal, os, sys\n"
         "fd = int(sys.argv[1]); n = int.from_bytes(os.pread(fd, 8, 0), 'little')\n"
         "for name, code in marshal.loads(os.pread(fd, n, 24)):\n"
         "    m = type(sys)(name); m.__file__ = '<resrl-sandbox>/' + name + '.py'; sys.modules[name] = m\n"
         "    exec(code, m.__dict__)\n"
         "sys.modules['code_harness'].run()\n")


@functools.lru_cache(maxsize=1)
def _harness_code() -> bytes:
    mods = []
    for name in _HARNESS_MODULES:
        path = HARNESS.with_name(name + ".py")
        mods.append((name, compile(path.read_text(encoding="utf-8"), f"<resrl-sandbox>/{name}.py", "exec",
                                   dont_inherit=True)))
    return marshal.dumps(mods)


def _job_memfd(full: dict, blobs: list[bytes], test: bytes | None = None) -> int:
    """The item's job as one anonymous file: three sizes (8 bytes each: the harness's code, the
    offset and the size of the job header), the harness's code, the inputs back to back, the check
    program (`test`, check mode), then the job header, which holds the offsets of the inputs and of
    the check program: the harness reads one input at a time, never all, and never the check
    program: only the judge process reads that (`code_harness_modes.run_check`), after the process
    that runs the program was forked, so no process holding the program ever held the asserts."""
    code = _harness_code()
    pos = 24 + len(code)
    at = []
    for b in blobs:
        at.append((pos, len(b)))
        pos += len(b)
    header = {**full, "inputs_at": at}
    if test is not None:
        header["test_at"] = (pos, len(test))
        pos += len(test)
    header = marshal.dumps(header)
    fd = os.memfd_create("resrl-job", os.MFD_CLOEXEC)
    try:
        with os.fdopen(os.dup(fd), "wb") as f:
            f.write(len(code).to_bytes(8, "little") + pos.to_bytes(8, "little") + len(header).to_bytes(8, "little"))
            f.write(code)
            for b in blobs:
                f.write(b)
            if test is not None:
                f.write(test)
            f.write(header)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _stdlib_dirs() -> list[str]:
    """The directories of the sandbox interpreter: its prefixes (binary, shared library, standard
    library)."""
    dirs = {os.path.realpath(p) for p in (sys.base_prefix, sys.base_exec_prefix)}
    exe_dir = os.path.dirname(sandbox_python())
    if not any(exe_dir == d or exe_dir.startswith(d + os.sep) for d in dirs):
        dirs.add(exe_dir)
    return sorted(dirs - {"/", "/tmp"})


def _site_dirs(visible: list[str]) -> list[str]:
    """Every site-packages / dist-packages directory inside `visible`: masked with an empty tmpfs,
    so that nothing installed (resrl's package data included) is readable inside."""
    found = set()
    for top in visible:
        for lib in ("lib", "lib64", "lib32", "local/lib", "local/lib64"):
            libdir = os.path.join(top, lib)
            try:
                names = os.listdir(libdir)
            except OSError:
                continue
            for name in names:
                if not name.startswith("python"):
                    continue
                for sub in ("site-packages", "dist-packages"):
                    path = os.path.join(libdir, name, sub)
                    if os.path.isdir(path) and not os.path.islink(path):
                        found.add(os.path.realpath(path))
    for p in sys.path + [sysconfig.get_paths().get("purelib", ""), sysconfig.get_paths().get("platlib", "")]:
        real = os.path.realpath(p) if p else ""
        if real and os.path.isdir(real) and real.endswith(("site-packages", "dist-packages")):
            found.add(real)
    return sorted(p for p in found if any(p == v or p.startswith(v + os.sep) for v in visible))


_SYSTEM_DIRS = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin")


@functools.lru_cache(maxsize=1)
def _bwrap_static() -> tuple[list[str], list[str]]:
    """(the fixed part of the bubblewrap command, the directories it shows read-only)."""
    root = os.geteuid() == 0
    argv = (["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"] if root  # for the harness's drop to the item's uid
            else ["--unshare-user", "--disable-userns"])
    argv += ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--hostname", "sandbox",
             "--die-with-parent", "--new-session", "--as-pid-1", "--clearenv",
             "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "LANG", "C.UTF-8", "--setenv", "HOME", "/tmp",
             "--setenv", "PYTHONHASHSEED", "0"]
    shown = []
    for d in _SYSTEM_DIRS:
        if os.path.islink(d):
            argv += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            argv += ["--ro-bind", d, d]
            shown.append(d)
    made: set[str] = set()
    for d in _stdlib_dirs():
        if not any(d == v or d.startswith(v + os.sep) for v in shown):
            # its parents, made on the sandbox's own root: searchable by the sandbox uid (bubblewrap
            # would copy the host's modes, and /root is 0700)
            parts = d.split(os.sep)[1:-1]
            for k in range(1, len(parts) + 1):
                parent = os.sep + os.sep.join(parts[:k])
                if parent not in made:
                    argv += ["--perms", "0755", "--dir", parent]
                    made.add(parent)
            argv += ["--ro-bind", d, d]
            shown.append(d)
    for d in _site_dirs(shown):
        argv += ["--tmpfs", d]
    argv += ["--proc", "/proc", "--dev", "/dev", "--chdir", "/tmp"]
    return argv, shown


def _bwrap_argv(bwrap: str, tmpfs_bytes: int, seccomp_fd: int) -> list[str]:
    static, _ = _bwrap_static()
    size = str(int(tmpfs_bytes))
    return [bwrap, *static, "--perms", "1777", "--size", size, "--tmpfs", "/tmp",
            "--perms", "1777", "--size", size, "--tmpfs", "/dev/shm", "--seccomp", str(seccomp_fd)]


def sandbox_visible_dirs() -> list[str]:
    """Host directories a program sees (read-only) under bubblewrap; every site-packages inside them is masked."""
    _, shown = _bwrap_static()
    return list(shown)


def masked_dirs() -> list[str]:
    """site-packages / dist-packages directories hidden under an empty tmpfs inside the sandbox."""
    return _site_dirs(sandbox_visible_dirs())


def _encode_inputs(job: dict) -> list[bytes]:
    if job["mode"] == "stdio":
        return [x.encode("utf-8", "surrogatepass") for x in job["inputs"]]
    if job["mode"] in ("call", "fn"):
        return [marshal.dumps(a) for a in job["inputs"]]
    return []


def run_job(job: dict, limits: SandboxLimits, *, test_timeout_s: float, total_timeout_s: float,
            slot: int = 0, on_record: Callable[[dict], bool] | None = None) -> JobOutcome:
    """Run one item in the sandbox. `job`: {"code", "mode": "stdio"|"call"|"fn"|"check", "inputs",
    "fn_name"?, "output_cap_bytes"?}. `on_record(record) -> bool` sees each test's record as it
    arrives; False stops the item (the rest count as not run). Never raises for anything the program does."""
    iso = detect_isolation()
    start = time.perf_counter()
    outcome = JobOutcome()
    if iso.backend == "refused":
        outcome.error = iso.refusal
        outcome.layers = {"sandbox": "refused", "refused": True}
        return outcome
    legacy = iso.backend == "legacy"
    tmp, slot_lock = _item_dir(slot) if legacy else (None, None)
    read_fd, write_fd = os.pipe()
    fds: list[int] = []
    proc = None
    cgroup = None
    try:
        uid = sandbox_uid(slot) if iso.drop_uid else None
        out_cap = max(limits.output_kb << 10, int(job.get("output_cap_bytes") or 0))
        tmpfs_bytes = limits.tmpfs_mb << 20
        blobs = _encode_inputs(job)
        # stdout is a file of the harness's, and so are the tests' stdin copies: room for both
        file_size = max(limits.file_size_mb << 20, out_cap + 1, max(map(len, blobs), default=0) + 1)
        # the check program (expected values in its asserts) stays out of the header the harness loads
        full = {k: v for k, v in job.items() if k not in ("inputs", "test")}
        test = job["test"].encode("utf-8", "surrogatepass") if job["mode"] == "check" else None
        full.update({"uid": uid, "allow_root": _allow_root(), "sandbox": iso.backend,
                     "test_timeout_s": float(test_timeout_s), "total_timeout_s": float(total_timeout_s),
                     "output_cap_bytes": out_cap, "tmpfs_bytes": tmpfs_bytes,
                     "limits": {"memory_bytes": limits.memory_mb << 20,
                                "file_size_bytes": file_size,
                                "open_files": limits.open_files, "processes": limits.processes,
                                "output_bytes": limits.output_kb << 10}})
        if not legacy:
            full["visible"] = sandbox_visible_dirs()
        if legacy:
            full.update({"mount": "mount" in iso.namespaces, "root_mountpoint": os.path.join(tmp, "root"),
                         "item_dir": tmp, "expose": _stdlib_dirs(), "mask": _site_dirs(_stdlib_dirs())})
        cgroup = memory_cgroup.item_cgroup((limits.cgroup_memory_mb or limits.memory_mb) << 20,
                                           f"item-{uid if uid is not None else os.getpid()}-{next(_CGROUP_SEQ)}") \
            if limits.use_cgroup else None
        if cgroup is not None:
            try:
                procs_fd = os.open(cgroup["procs"], os.O_WRONLY | os.O_CLOEXEC)
                fds.append(procs_fd)
                events_fd = os.open(cgroup["events"], os.O_RDONLY | os.O_CLOEXEC)
                fds.append(events_fd)
                full["cgroup"] = {"kind": cgroup["kind"], "limit": cgroup["limit"], "procs_fd": procs_fd,
                                  "events_fd": events_fd, "name": os.path.basename(cgroup["path"])}
            except OSError:
                full["cgroup"] = None
        job_fd = _job_memfd(full, blobs, test)
        fds.append(job_fd)
        harness = [sandbox_python(), "-I", "-S", "-B", "-c", _BOOT, str(job_fd), str(write_fd)]
        if legacy:
            argv = [*iso.unshare_prefix, *harness]
        else:
            seccomp_fd = seccomp_filter.filter_fd()
            fds.append(seccomp_fd)
            argv = [*_bwrap_argv(iso.bwrap, tmpfs_bytes, seccomp_fd), *harness]
        env = {"PATH": _SCRUBBED_PATH, "LANG": "C.UTF-8", "HOME": tmp or "/tmp", "PYTHONHASHSEED": "0"}
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    pass_fds=(write_fd, *fds), cwd=tmp or "/", env=env, start_new_session=True)
        except OSError as exc:
            outcome.error = f"cannot start the sandbox: {exc}"
            return outcome
        finally:
            os.close(write_fd)
            for fd in fds:
                os.close(fd)
            fds.clear()
        deadline = time.monotonic() + total_timeout_s + limits.startup_s
        expected = 1 if job["mode"] == "check" else len(job["inputs"])
        _pump(proc, read_fd, limits, deadline, outcome, on_record, expected, out_cap)
    finally:
        for fd in fds:
            os.close(fd)
        if proc is not None:
            _kill_group(proc)
        if cgroup is not None:
            memory_cgroup.release(cgroup["path"])
        os.close(read_fd)
        if legacy:
            _release_item_dir(tmp, slot_lock)
        outcome.seconds = time.perf_counter() - start
    return outcome


# Legacy path: one directory per (process, slot), reused item after item: with the mount namespace the
# harness writes nothing into it (it only holds an empty mount point), which saves a mkdtemp + rmtree
# per item. A second concurrent user of the same slot gets a fresh directory.
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
    for name in ("work",):  # left by the harness when it ran without a mount namespace
        if os.path.lexists(os.path.join(path, name)):
            shutil.rmtree(os.path.join(path, name), ignore_errors=True)
    lock.release()


@atexit.register
def _remove_slot_dirs() -> None:
    for (pid, _), (path, _) in list(_SLOT_DIRS.items()):
        if pid == os.getpid():
            shutil.rmtree(path, ignore_errors=True)


def _pump(proc, read_fd: int, limits: SandboxLimits, deadline: float, outcome: JobOutcome, on_record,
          expected: int, out_cap: int) -> None:
    """Read results / stdout / stderr until every test has reported (the namespaces' teardown is
    not waited for), the harness closes them, the deadline passes, or `on_record` says stop.

    A result is a JSON line, followed by `raw` bytes when the line says so (`code_harness._send`):
    stdout, or the JSON of a function call's return value, up to the item's output cap."""
    cap = limits.output_kb << 10
    # a line: error texts (capped by the harness), or a function-level item's encoded return value
    # (ASCII JSON, escaped once more: at most 2 bytes a byte)
    line_cap = 2 * out_cap + 65536
    raw_cap = out_cap + 4096
    sel = selectors.DefaultSelector()
    buffers = {proc.stdout.fileno(): bytearray(), proc.stderr.fileno(): bytearray(), read_fd: bytearray()}
    for fd in buffers:
        os.set_blocking(fd, False)
        sel.register(fd, selectors.EVENT_READ)
    open_fds = set(buffers)
    pending: list = []  # a record line whose raw bytes are still arriving
    try:
        while open_fds:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                outcome.timed_out = True
                return
            for key, _ in sel.select(timeout=remaining):
                fd = key.fd
                try:
                    chunk = os.read(fd, 1 << 20)
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
                while True:
                    if not pending:
                        cut = buf.find(b"\n")
                        if cut < 0:
                            if len(buf) > line_cap:
                                outcome.error = "sandbox result line over the size limit"
                                return
                            break
                        try:
                            record = json.loads(bytes(buf[:cut]))
                        except (json.JSONDecodeError, RecursionError):
                            outcome.error = "malformed sandbox result line"
                            return
                        del buf[:cut + 1]
                        if not isinstance(record, dict):
                            outcome.error = "malformed sandbox result line"
                            return
                        size = record.get("raw", 0)
                        if not isinstance(size, int) or not 0 <= size <= raw_cap:
                            outcome.error = "sandbox result over the size limit"
                            return
                        pending.append(record)
                    record = pending[0]
                    size = record.pop("raw", 0)
                    if len(buf) < size:
                        record["raw"] = size
                        break
                    pending.clear()
                    if "i" in record:
                        record.setdefault("stdout", "")
                    if size:
                        text = bytes(buf[:size]).decode("utf-8", "replace")
                        del buf[:size]
                        record["ret" if record.get("ret") is True else "stdout"] = text
                    if not _take_record(record, outcome, on_record):
                        outcome.stopped_early = len(outcome.records) < expected
                        return
                    if len(outcome.records) >= expected:
                        return
    finally:
        sel.close()
        if (len(outcome.records) < expected and outcome.error is None and not outcome.timed_out
                and not outcome.stopped_early):  # the harness ended early: say how (it has exited)
            try:
                proc.wait(timeout=max(0.0, min(1.0, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                pass
            err = bytes(buffers[proc.stderr.fileno()]).decode("utf-8", "replace").strip()
            outcome.error = (f"the sandbox harness stopped after {len(outcome.records)} of {expected} tests "
                             f"(exit status {proc.returncode})" + (f": {err[-300:]}" if err else ""))


_WARNED: set[str] = set()


def _take_record(record: dict, outcome: JobOutcome, on_record) -> bool:
    if "layers" in record:
        outcome.layers = record["layers"]
        notes = [outcome.layers.get(k) for k in ("chroot_error", "uid_error")]
        if outcome.layers.get("refused"):
            notes.append(f"programs are refused: root without a uid drop cannot bound their processes "
                         f"(install bubblewrap, or set {ALLOW_ROOT_ENV}=1 to run them anyway)")
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
           "reap_dying", "memory_cgroup_base", "HARNESS", "SANDBOX_ENV", "sandbox_python", "sandbox_visible_dirs",
           "masked_dirs"]
