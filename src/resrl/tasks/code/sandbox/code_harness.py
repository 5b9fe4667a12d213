"""The program that runs INSIDE the code sandbox (started by `resrl.tasks.code.sandbox.runner`). Standalone:
it imports nothing from resrl and only builtin / C modules (plus ctypes for prctl and, on the
legacy path, mount(2)). It starts once per item as `python -I -S -B -c BOOT JOB_FD RESULT_FD`, its
code and its job read from one memfd the parent wrote (`runner._job_memfd`): no file of resrl is
visible inside. Normally it runs under bubblewrap (`runner`: pivot_root into a root of read-only
system directories and the standard library, new user / pid / net / mount / IPC / UTS namespaces,
the seccomp filter of `seccomp_filter`), as pid 1 of its pid namespace.

What it does, in order:

1. reads the job (marshal: code, test mode, offsets of the inputs in the memfd, limits, sandbox uid),
   closes every other inherited descriptor and clears its environment down to PATH / LANG / HOME /
   TMPDIR / PYTHONHASHSEED;
2. joins the item's memory cgroup through a descriptor the parent opened (`cgroup.procs`);
3. legacy path only (`RESRL_CODE_SANDBOX=weak`, no bubblewrap): builds a minimal root in a mount
   namespace and chroots into it (`_build_root`);
4. as root, drops to the item's sandbox uid (a fresh unprivileged uid per item: RLIMIT_NPROC binds,
   which it does not for uid 0); sets the rlimits; becomes non-dumpable (the program, same uid,
   cannot ptrace it or open /proc/<harness>/fd);
5. per test case: copies the test's input from the job memfd into a fresh memfd (one input in memory
   at a time, whatever the number of tests: the program's address space does not shrink with it),
   forks a child in its own process group with stdin on that memfd, stdout / stderr on anonymous
   capture files, a CPU-time limit and the result pipe closed; the child runs the program
   (stdin/stdout, a function call, or a `check(candidate)` program). The harness waits with the
   per-test wall timeout, kills the child's group, then `kill(-1, SIGKILL)`: as pid 1 that reaches
   every process left in the namespace, so nothing a test started lives on into the next test;
6. sends one JSON line per test on the result pipe (status, the tail of stderr), followed by the
   raw bytes of stdout / the return value's JSON when there are any (`"raw": n`). Expected outputs
   never enter this process: the parent compares them. Nor does a check program (the asserts of a
   HumanEval-style test hold the expected values): it lies in the job memfd outside the header,
   and only the judge process reads it, after the process that runs the program was forked
   (`code_harness_modes`), so the program cannot find it in its own memory.
"""

import marshal
import os
import resource
import select
import sys
import time

# Imports are kept to builtin / C modules: this file runs once per item, and `json`, `signal` or
# `site` (this runs with -S) would each add milliseconds to every item (they pull in re and enum).
_SIGKILL, _SIGXCPU, _SIGXFSZ = 9, 24, 25
_SIGNAL_NAMES = {6: "SIGABRT", 7: "SIGBUS", 9: "SIGKILL", 11: "SIGSEGV", 15: "SIGTERM", 24: "SIGXCPU", 25: "SIGXFSZ"}

_ENV_KEYS_KEPT = ("PATH", "LANG", "HOME", "TMPDIR", "PYTHONHASHSEED")
_HERE = os.path.dirname(os.path.abspath(__file__))
# LiveCodeBench's evaluation process allows integers of up to 50,000 digits in str() / int()
# (`sys.set_int_max_str_digits(50000)` in lcb_runner/evaluation/compute_code_generation_metrics.py)
INT_MAX_STR_DIGITS = 50000


def _join_cgroup(cg, layers):
    """Move this process (and so every process it forks) into the item's memory cgroup, made by the
    parent, through the `cgroup.procs` descriptor the parent opened (the cgroup file system is not
    mounted inside); keep the read-only descriptor of its OOM counter. Returns that descriptor, or
    None without a cgroup."""
    if not cg:
        return None
    events = cg["events_fd"]
    try:
        try:
            os.write(cg["procs_fd"], b"0")  # 0 = the writer itself (v1 and v2)
        finally:
            os.close(cg["procs_fd"])
        with open("/proc/self/cgroup") as f:  # check that the move happened (the layer is reported only then)
            joined = "/" + cg["name"] in f.read()
    except OSError as exc:
        layers["cgroup_error"] = f"cannot join the memory cgroup: {exc}"[:200]
        os.close(events)
        return None
    if not joined:
        os.close(events)
        layers["cgroup_error"] = "the move into the memory cgroup did not take effect"
        return None
    layers["cgroup"] = cg["kind"]
    layers["cgroup_memory_bytes"] = cg["limit"]
    return events


def note_memory(oom, before, record, err=""):
    """Say in the record which layer stopped the test for memory, if one did: the cgroup's OOM
    killer (its counter moved during the test) or RLIMIT_AS (a MemoryError)."""
    if oom_kills(oom) > before:
        record["memory_limit"] = "cgroup"
        if record.get("status") != "ok":
            record["error"] = "killed by the item's memory limit (cgroup): " + str(record.get("error", ""))
    elif "MemoryError" in err or "MemoryError" in str(record.get("error", "")):
        record["memory_limit"] = "rlimit_as"


def oom_kills(fd):
    """The cgroup's OOM-kill count (`oom_kill N` in memory.events / memory.oom_control)."""
    if fd is None:
        return 0
    try:
        text = os.pread(fd, 4096, 0).decode()
    except OSError:
        return 0
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "oom_kill":
            return int(parts[1])
    return 0


_ESCAPES = {i: "\\u%04x" % i for i in range(32)}
_ESCAPES.update({ord('"'): '\\"', ord("\\"): "\\\\"})
_ESCAPES.update({ord("\n"): "\\n", ord("\t"): "\\t", ord("\r"): "\\r"})


def _json(value):
    """JSON text of a flat record (str / int / float / bool / None / list / dict), without `json`."""
    if isinstance(value, str):
        return '"' + value.translate(_ESCAPES) + '"'
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return repr(value) if value == value and value not in (float("inf"), float("-inf")) else "null"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_json(v) for v in value) + "]"
    return "{" + ",".join(_json(str(k)) + ":" + _json(v) for k, v in value.items()) + "}"


def _send(fd, obj, raw=b""):
    """One record: a JSON line, then `raw` (stdout, an encoded return value) as bytes, announced by
    its length in the line (`"raw": n`): no escaping, whatever its size."""
    if raw:
        obj["raw"] = len(raw)
    _write(fd, (_json(obj) + "\n").encode("utf-8", "replace"))
    if raw:
        _write(fd, raw)


def _write(fd, data):
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _libc():
    import ctypes

    return ctypes, ctypes.CDLL(None, use_errno=True)


_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 1, 2, 4, 32, 4096, 16384, 1 << 18


def _mount(libc_pair, source, target, fstype, flags, data=None):
    ctypes, libc = libc_pair
    rc = libc.mount(source.encode() if source else None, target.encode(), fstype.encode() if fstype else None,
                    flags, data.encode() if data else None)
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {source} on {target}: {os.strerror(err)}")


def _closed_ancestor(path):
    """The highest ancestor of `path` that a stranger (the sandbox uid) cannot traverse, or None."""
    current = ""
    for part in os.path.abspath(path).split("/")[1:-1]:
        current += "/" + part
        try:
            if not os.stat(current).st_mode & 0o001:
                return current
        except OSError:
            return None
    return None


_SYSTEM_DIRS = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc")
_DEVICES = ("null", "zero", "full", "random", "urandom")


def _bind_readonly(lib, src, dst):
    _mount(lib, src, dst, None, _MS_BIND | _MS_REC)
    _mount(lib, None, dst, None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID)


def _build_root(job, layers):
    """A minimal root filesystem, then chroot into it (module docstring, step 2). Returns /tmp."""
    lib = _libc()
    _mount(lib, None, "/", None, _MS_REC | _MS_PRIVATE)  # nothing mounted here reaches the host
    root = job["root_mountpoint"]
    _mount(lib, "tmpfs", root, "tmpfs", _MS_NOSUID | _MS_NODEV, "size=256k,mode=0755")
    wanted = [d for d in _SYSTEM_DIRS if os.path.lexists(d)]
    wanted += sorted({os.path.realpath(p) for p in job.get("expose", []) if os.path.isdir(p)})
    bound = []
    for d in wanted:
        target = root + d
        if os.path.islink(d):  # merged /usr: /lib -> usr/lib, keep it a link
            os.symlink(os.readlink(d), target)
            continue
        if any(d == b or d.startswith(b + "/") for b in bound):
            continue  # already visible through a parent
        os.makedirs(target, 0o755, exist_ok=True)
        _bind_readonly(lib, d, target)
        bound.append(d)
    for d in job.get("mask", []):  # site-packages: an empty tmpfs over each
        if os.path.isdir(root + d):
            _mount(lib, "tmpfs", root + d, "tmpfs", _MS_NOSUID | _MS_NODEV | _MS_RDONLY, "size=4k,mode=0755")
    os.makedirs(root + "/dev", 0o755)
    for name in _DEVICES:
        if os.path.exists("/dev/" + name):
            open(root + "/dev/" + name, "w").close()
            _mount(lib, "/dev/" + name, root + "/dev/" + name, None, _MS_BIND)
    size = f"size={int(job['tmpfs_bytes'])}"
    for d in ("/tmp", "/dev/shm"):
        os.makedirs(root + d, 0o755, exist_ok=True)
        _mount(lib, "tmpfs", root + d, "tmpfs", _MS_NOSUID | _MS_NODEV, f"{size},mode=1777")
    if layers["pidns"]:  # a fresh /proc shows only this namespace's processes
        os.makedirs(root + "/proc", 0o555)
        _mount(lib, "proc", root + "/proc", "proc", _MS_NOSUID | _MS_NODEV)
    os.chroot(root)
    os.chdir("/")
    layers["chroot"] = True
    layers["visible"] = bound
    return "/tmp"


def _not_dumpable():
    """prctl(PR_SET_DUMPABLE, 0): a program running as this uid cannot ptrace the harness or open
    /proc/<harness>/fd (the result pipe). Dropping root does this too; this covers the non-root case."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)
    except Exception:  # noqa: BLE001 - best effort; reported nowhere because it never fails on Linux
        pass


def _in_private_netns():
    try:
        with open("/proc/self/net/dev") as f:
            names = [line.split(":")[0].strip() for line in f.readlines()[2:]]
    except OSError:
        return False
    return names == ["lo"]


def _count_tasks(uid):
    """Processes + threads of `uid` on this host (what RLIMIT_NPROC counts)."""
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
        except OSError:
            continue
        if fields.get("Uid", "").split()[:1] == [str(uid)]:
            total += int(fields.get("Threads", "1").strip() or 1)
    return total


def _set_limits(job):
    lim = job["limits"]
    processes = lim["processes"]
    if os.geteuid() != 0 and job.get("sandbox") != "bwrap":
        # legacy path, no uid of our own and no user namespace: RLIMIT_NPROC counts every task of
        # this user, the trainer's too. (In bubblewrap's user namespace the kernel counts the
        # processes of this uid in that namespace only: the item's.)
        processes += _count_tasks(os.getuid())
    pairs = [
        (resource.RLIMIT_AS, lim["memory_bytes"]),
        (resource.RLIMIT_FSIZE, lim["file_size_bytes"]),
        (resource.RLIMIT_NOFILE, lim["open_files"]),
        (resource.RLIMIT_NPROC, processes),
        (resource.RLIMIT_CORE, 0),
    ]
    for which, value in pairs:
        if value is None:
            continue
        resource.setrlimit(which, (int(value), int(value)))


def _drop_privileges(uid, work):
    if uid is None:
        return False
    os.chown(work, uid, uid)
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)
    return True


def _capture_files(base, count):
    """Anonymous files (no name the program could delete or swap) that receive each test's
    stdout, stderr and return value; reused from test to test."""
    fds = []
    for _ in range(count):
        try:
            fd = os.open(base, os.O_TMPFILE | os.O_RDWR, 0o600)
        except (AttributeError, OSError):  # no O_TMPFILE: a named file, unlinked at once
            path = os.path.join(base, f".capture-{os.getpid()}-{len(fds)}")
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
            os.unlink(path)
        fds.append(fd)
    return fds


def _rewind(fds):
    for fd in fds:
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)


def _child(job, i, code_obj, work, stdin_fd, result_fd, cpu_s, out_fd, err_fd, ret_fd):
    """Runs in the forked test child; never returns."""
    status = 1
    try:
        os.setpgid(0, 0)
        os.close(result_fd)
        args = _input_value(job, i) if job["mode"] == "call" else None
        os.close(job["job_fd"])
        os.chdir(work)
        os.dup2(stdin_fd, 0)
        os.close(stdin_fd)
        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)
        os.close(out_fd)
        os.close(err_fd)
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
        mode = job["mode"]
        name = "__main__" if mode == "stdio" else "solution"
        scope = {"__name__": name, "__builtins__": __builtins__, "__file__": os.path.join(work, "solution.py")}
        sys.argv = ["solution.py"]
        try:
            for obj in code_obj if isinstance(code_obj, tuple) else (code_obj,):
                exec(obj, scope)
            if mode == "call":
                fn = _find_function(scope, job["fn_name"])
                value = fn(*args)
                import json  # only in the test child of a function-call item

                text = json.dumps(value, default=_not_json)
                data = memoryview(text.encode())
                while data:
                    data = data[os.write(ret_fd, data):]
            status = 0
        except SystemExit as exc:
            code = exc.code
            status = 0 if code is None or code == 0 else (code if isinstance(code, int) else 1)
        except BaseException:
            import traceback

            traceback.print_exc()
            status = 1
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except BaseException:
            status = status or 1
    finally:
        os._exit(status & 0xFF if status else 0)


def _input_bytes(job, i):
    """Input i as bytes, read from the job memfd (the harness keeps only the offsets)."""
    offset, size = job["inputs_at"][i]
    return os.pread(job["job_fd"], size, offset) if size else b""


def _input_value(job, i):
    """Input i of a function-call / function-level item: its arguments, marshalled by the parent."""
    return marshal.loads(_input_bytes(job, i))


def _stdin_for(job, i):
    """A fresh memfd holding input i, at offset 0 (the test's stdin): copied by the kernel from the
    job memfd, so that the harness never holds more than one input, and only while it is copied."""
    fd = os.memfd_create("stdin")
    if job["mode"] == "stdio":
        offset, size = job["inputs_at"][i]
        done = 0
        while done < size:
            try:
                n = os.copy_file_range(job["job_fd"], fd, size - done, offset + done)
            except OSError:
                n = os.write(fd, os.pread(job["job_fd"], min(size - done, 1 << 20), offset + done))
            if n <= 0:
                break
            done += n
        os.lseek(fd, 0, os.SEEK_SET)
    return fd


class _Quitter:
    """`exit` / `quit` as the `site` module defines them (the harness runs with -S, which skips it):
    a program that ends with `exit()` runs as it does under LiveCodeBench, whose process has them."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"Use {self.name}() or Ctrl-D (i.e. EOF) to exit"

    def __call__(self, code=None):
        try:
            sys.stdin.close()
        except BaseException:  # noqa: BLE001
            pass
        raise SystemExit(code)


def _install_site_builtins():
    import builtins

    for name in ("exit", "quit"):
        if not hasattr(builtins, name):
            setattr(builtins, name, _Quitter(name))
    if hasattr(sys, "set_int_max_str_digits"):
        sys.set_int_max_str_digits(INT_MAX_STR_DIGITS)


def _not_json(value):
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    raise TypeError(f"return value of type {type(value).__name__} is not JSON-serialisable")


def _find_function(scope, name):
    cls = scope.get("Solution")
    if isinstance(cls, type) and hasattr(cls, name):
        return getattr(cls(), name)
    fn = scope.get(name)
    if not callable(fn):
        raise NameError(f"the program defines no function {name!r} (nor Solution.{name})")
    return fn


def _read_head(fd, limit):
    data = os.pread(fd, limit + 1, 0)
    return data[:limit], len(data) > limit


def _read_tail(fd, limit):
    size = os.fstat(fd).st_size
    return os.pread(fd, limit, max(0, size - limit))


def _wait(pid, timeout_s):
    """(exit status as from waitpid, timed_out)."""
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pidfd = None
    deadline = time.monotonic() + timeout_s
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        if pidfd is not None:
            select.select([pidfd], [], [], remaining)
        got, status = os.waitpid(pid, os.WNOHANG)
        if got == pid:
            if pidfd is not None:
                os.close(pidfd)
            return status, False
        if pidfd is None:
            time.sleep(min(0.002, remaining))
    try:
        os.killpg(pid, _SIGKILL)
    except OSError:
        pass
    _, status = os.waitpid(pid, 0)
    if pidfd is not None:
        os.close(pidfd)
    return status, True


def _sweep(kill_all):
    """Kill every other process this item can signal, then reap what was re-parented to us, so
    nothing a test started outlives it. kill(-1) reaches only this item's processes: as pid 1 it is
    namespace-scoped, and without a pid namespace the sandbox uid is private to this item."""
    if kill_all:
        try:
            os.kill(-1, _SIGKILL)
        except OSError:
            pass
        while True:
            try:
                os.waitpid(-1, 0)
            except ChildProcessError:
                return


def run():
    """Entry point of the sandbox: `python -I -S -B -c BOOT JOB_FD RESULT_FD` (BOOT: `runner._BOOT`)."""
    status = main(int(sys.argv[1]), int(sys.argv[2]))
    os._exit(status)  # everything went out through os.write; skip the interpreter's finalisation


def load_job(job_fd):
    """The job header (marshal, after the harness's own code) of the job memfd (`runner._job_memfd`)."""
    head = os.pread(job_fd, 24, 0)
    offset, size = int.from_bytes(head[8:16], "little"), int.from_bytes(head[16:], "little")
    job = marshal.loads(os.pread(job_fd, size, offset))
    job["job_fd"] = job_fd
    return job


def _close_inherited(keep):
    """Close every descriptor but stdin/stdout/stderr and `keep`: whatever a launcher left open
    (bubblewrap's own, a directory of the host) must not reach the program."""
    try:
        fds = [int(x) for x in os.listdir("/proc/self/fd")]
    except OSError:
        fds = list(range(3, 1024))
    for fd in fds:
        if fd > 2 and fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass


def main(job_fd, result_fd):
    job = load_job(job_fd)
    cg = job.get("cgroup")
    _close_inherited({job_fd, result_fd} | ({cg["procs_fd"], cg["events_fd"]} if cg else set()))
    for key in list(os.environ):
        if key not in _ENV_KEYS_KEPT:
            del os.environ[key]
    layers = {"sandbox": job.get("sandbox", "none"), "pidns": os.getpid() == 1, "netns": _in_private_netns(),
              "chroot": job.get("sandbox") == "bwrap", "uid": None}
    values = None
    if job["mode"] in ("fn", "check"):  # loaded by BOOT from the job memfd, beside this module
        import code_values as values
        import code_harness_modes  # noqa: F401 (run_fn / run_check below)
    oom = _join_cgroup(cg, layers)
    if job.get("sandbox") == "bwrap":
        base = "/tmp"
        layers["seccomp"] = _seccomp_mode() == 2
        layers["visible"] = job.get("visible", [])
    else:
        base = job["item_dir"]
        if job.get("mount"):
            try:
                base = _build_root(job, layers)
            except OSError as exc:  # keep going with the layers that did hold, and say which failed
                layers["chroot_error"] = str(exc)[:200]
                base = job["item_dir"]
    uid = job.get("uid")
    if uid is not None and not layers["chroot"]:
        closed = [p for p in job.get("expose", []) if _closed_ancestor(p)]
        if closed:  # the interpreter would be unreachable after the drop: stay, and say so
            layers["uid_error"] = f"interpreter directories not reachable by another uid: {closed[:2]}"
            uid = None
    os.chmod(base, 0o1777 if layers["chroot"] else 0o711)
    work = os.path.join(base, "work")
    os.mkdir(work, 0o700)
    os.environ["HOME"] = os.environ["TMPDIR"] = work
    out_fd, err_fd, ret_fd = _capture_files(base, 3)
    try:
        layers["uid"] = uid if _drop_privileges(uid, work) else os.getuid()
    except OSError as exc:  # e.g. the uid is not mapped in this user namespace
        layers["uid_error"] = f"cannot drop to uid {uid}: {exc}"[:200]
        layers["uid"] = os.getuid()
        uid = None
    _set_limits(job)
    _not_dumpable()
    os.chdir(work)
    refuse = job.get("uid") is not None and uid is None and os.geteuid() == 0 and not job.get("allow_root")
    layers["refused"] = refuse
    _send(result_fd, {"layers": layers})
    n = len(job["inputs_at"]) if job["mode"] != "check" else 1
    if refuse:  # as root RLIMIT_NPROC does not bind: a fork bomb would reach the whole machine
        msg = ("refused: the sandbox could not drop root here (" + layers.get("uid_error", "?")
               + "), so it could not bound the program's processes; install bubblewrap, or set "
               "RESRL_CODE_SANDBOX_ALLOW_ROOT=1 to run anyway")
        for i in range(n):
            _send(result_fd, {"i": i, "status": "error", "error": msg, "seconds": 0.0})
        return 0

    _install_site_builtins()
    source = job["code"]
    try:
        code_obj = compile(source, os.path.join(work, "solution.py"), "exec")
        if job.get("prelude"):  # e.g. LiveCodeBench's imports: run first, in the program's namespace
            code_obj = (compile(job["prelude"], "<prelude>", "exec"), code_obj)
    except BaseException as exc:  # SyntaxError, ValueError (null bytes), RecursionError, MemoryError
        msg = f"{type(exc).__name__}: {exc}"[:500]
        for i in range(n):
            _send(result_fd, {"i": i, "status": "error", "error": msg, "seconds": 0.0})
        return 0
    test_timeout = float(job["test_timeout_s"])
    cpu_s = int(test_timeout) + 1
    out_cap = int(job["output_cap_bytes"])
    deadline = time.monotonic() + float(job["total_timeout_s"])
    kill_all = layers["pidns"] or uid is not None
    sys.stdout.flush()
    sys.stderr.flush()
    ctx = {"job": job, "code_obj": code_obj, "work": work, "result_fd": result_fd, "out_fd": out_fd,
           "err_fd": err_fd, "test_timeout": test_timeout, "deadline": deadline, "kill_all": kill_all,
           "out_cap": out_cap, "values": values, "oom": oom}
    if job["mode"] in ("fn", "check"):
        import code_harness_modes as modes

        (modes.run_fn if job["mode"] == "fn" else modes.run_check)(ctx)
        return 0
    for i in range(n):
        remaining = deadline - time.monotonic()
        if remaining <= 0:  # the item's time budget is spent: the rest count as timed out
            _send(result_fd, {"i": i, "status": "timeout", "seconds": 0.0,
                              "error": "not run: the item's time budget was used up"})
            continue
        _rewind((out_fd, err_fd, ret_fd))
        try:
            os.mkdir(work, 0o700)  # the previous test may have deleted its directory
        except OSError:
            pass
        stdin_fd = _stdin_for(job, i)
        start = time.monotonic()
        oom_before = oom_kills(oom)
        try:
            pid = os.fork()
        except OSError as exc:
            os.close(stdin_fd)
            _send(result_fd, {"i": i, "status": "error", "error": f"fork failed: {exc}", "seconds": 0.0})
            _sweep(kill_all)
            continue
        if pid == 0:
            if oom is not None:
                os.close(oom)
            _child(job, i, code_obj, work, stdin_fd, result_fd, cpu_s, out_fd, err_fd, ret_fd)
        os.close(stdin_fd)
        status, timed_out = _wait(pid, min(test_timeout, remaining))
        seconds = time.monotonic() - start
        _sweep(kill_all)
        out, capped = _read_head(out_fd, out_cap)
        err = _read_tail(err_fd, 1000).decode("utf-8", "replace")
        record = {"i": i, "seconds": round(seconds, 4)}
        raw = out
        if timed_out:
            record.update(status="timeout", error=f"timed out after {min(test_timeout, remaining):.3g} s")
        elif os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            name = _SIGNAL_NAMES.get(sig, f"signal {sig}")
            kind = {_SIGXCPU: "timeout", _SIGXFSZ: "output_limit"}.get(sig, "error")
            record.update(status=kind, error=f"killed by {name}" + (": " + err[-300:] if err else ""))
        elif capped:  # before the exit status: a write past RLIMIT_FSIZE fails the program with EFBIG
            record.update(status="output_limit", error=f"output over {out_cap} bytes")
        elif os.WEXITSTATUS(status) != 0:
            record.update(status="error", error=(err[-500:] or f"exit status {os.WEXITSTATUS(status)}"))
        else:
            record["status"] = "ok"
            if job["mode"] == "call":
                ret, ret_capped = _read_head(ret_fd, out_cap)
                if ret_capped:
                    record.update(status="output_limit", error=f"return value over {out_cap} bytes")
                else:
                    raw = ret
                    record["ret"] = True  # the raw bytes are the return value's JSON
        note_memory(oom, oom_before, record, err)
        if record["status"] != "ok" and job["mode"] == "call":
            raw = b""
        _send(result_fd, record, raw[:4096] if record["status"] != "ok" else raw)
    return 0


def _seccomp_mode():
    """`Seccomp:` of /proc/self/status (2 = a filter is loaded)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Seccomp:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return -1
