"""The two test modes of the sandbox harness whose verdict a program cannot forge (imported by
`code_harness`, inside the sandbox, before the chroot; stdlib only).

fn: function-level tests (EvalPlus style). One forked child loads the program once and calls the
    entry point on every input in turn (a fresh copy of the arguments each time), writing one line
    per input on a pipe: `<i> ok <encoded return value>` or `<i> error <text>`. The harness gives
    each input its own wall deadline (from the previous line), kills the child's group on a
    timeout, a crash, an over-long line or a line for another input, scores that input as failed
    and forks a new child at the next input. The harness only forwards the encoded values; the
    parent decodes them into builtin data and compares them with expected outputs that never enter
    the sandbox. A program that writes lines of its own can only report values, which is what
    returning them does: it cannot pass without producing the expected outputs.

check: an assert-based test program `check(candidate)`, run in a JUDGE process that never runs
    the program's code; `candidate` there is a proxy that sends the arguments (marshal) to a
    CANDIDATE process holding the program and gets back the return value as exact-builtin data
    (`code_values`), or the name of the exception it raised. The verdict is the judge writing b"P"
    on a pipe the candidate process never had, after `check` returned, and then exiting 0; anything
    else (no record, a second byte, a signal, a non-zero exit, a timeout) is a failure. The judge
    is non-dumpable, so the candidate process (same uid) cannot ptrace it, read its memory or open
    its fds through /proc; it can only kill or stop it, which fails the test.

    The check program holds the expected values (`assert candidate(x) == expected`), so it must never be
    in the candidate's address space: the program could find the asserts there (gc, the frames
    above it, /proc/self/mem) and return the expected values without solving anything. It is not in
    the job header the harness loads (`runner._job_memfd` puts it beside the inputs); the candidate
    is forked first, from a harness that never read it, and closes the job memfd; only then is the
    judge forked, and the judge alone reads it. The judge's stdout / stderr are files made after
    the candidate's fork (a check program that prints what it expects, or a warning, reaches
    nobody the candidate can read), like its verdict pipe.
"""

import marshal
import math
import os
import resource
import select
import sys
import time

import code_harness as h

_MAX_LINE_EXTRA = 256


def _exc_text(exc):
    """`Type: message` of an exception, on one line, without trusting the exception's methods."""
    try:
        name = type(exc).__name__
        name = name if type(name) is str else "Exception"
    except BaseException:  # noqa: BLE001
        name = "Exception"
    try:
        msg = BaseException.__str__(exc)
    except BaseException:  # noqa: BLE001
        msg = ""
    return (name + (": " + msg if msg else "")).replace("\n", " ")[:300]


def _redirect(out_fd, err_fd):
    null = os.open("/dev/null", os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null if out_fd is None else out_fd, 1)
    os.dup2(err_fd, 2)
    os.close(null)


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _find_entry(scope, name):
    fn = scope.get(name)
    if not callable(fn):
        raise NameError(f"the program defines no function {name!r}")
    return fn


def _load(ctx):
    scope = {"__name__": "solution", "__builtins__": __builtins__,
             "__file__": os.path.join(ctx["work"], "solution.py")}
    sys.argv = ["solution.py"]
    exec(ctx["code_obj"], scope)
    return _find_entry(scope, ctx["job"]["entry_point"])


# ---- fn ------------------------------------------------------------------------------------------
def _fn_child(ctx, start, n, w_fd, cpu_s, close):
    try:
        os.setpgid(0, 0)
        for fd in close:
            os.close(fd)
        os.chdir(ctx["work"])
        _redirect(None, ctx["err_fd"])  # EvalPlus swallows the program's output: it is not the verdict
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
        encode = ctx["values"].encode
        try:
            fn = _load(ctx)
        except BaseException as exc:  # noqa: BLE001 - every input fails with the load error
            msg = ("the program failed to load: " + _exc_text(exc)).encode("utf-8", "replace")
            for i in range(start, n):
                _write_all(w_fd, b"%d error %s\n" % (i, msg))
            return
        _write_all(w_fd, b"L\n")
        job = ctx["job"]
        for i in range(start, n):
            try:
                line = b"%d ok %s\n" % (i, encode(fn(*h._input_value(job, i))).encode("ascii"))
            except BaseException as exc:  # noqa: BLE001 - SystemExit, KeyboardInterrupt... fail this input
                line = b"%d error %s\n" % (i, _exc_text(exc).encode("utf-8", "replace"))
            _write_all(w_fd, line)
    finally:
        os._exit(0)


def _stopped(pid):
    """SIGKILL the child's group and reap it; (exit description, signal number or None)."""
    try:
        os.killpg(pid, h._SIGKILL)
    except OSError:
        pass
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        return f"killed by {h._SIGNAL_NAMES.get(sig, f'signal {sig}')}", sig
    return f"exit status {os.WEXITSTATUS(status)}", None


def _memory_note(ctx, oom_before, record, err=""):
    h.note_memory(ctx["oom"], oom_before, record, err)


def run_fn(ctx):
    job = ctx["job"]
    n = len(job["inputs_at"])
    max_line = ctx["out_cap"] + _MAX_LINE_EXTRA
    test_timeout, deadline = ctx["test_timeout"], ctx["deadline"]
    i = 0
    while i < n:
        now = time.monotonic()
        if now >= deadline:
            for j in range(i, n):
                h._send(ctx["result_fd"], {"i": j, "status": "timeout", "seconds": 0.0,
                                           "error": "not run: the item's time budget was used up"})
            return
        h._rewind((ctx["err_fd"],))
        r_fd, w_fd = os.pipe()
        oom_before = h.oom_kills(ctx["oom"])
        cpu_s = int(deadline - now) + 1
        try:
            pid = os.fork()
        except OSError as exc:
            os.close(r_fd)
            os.close(w_fd)
            h._send(ctx["result_fd"], {"i": i, "status": "error", "error": f"fork failed: {exc}", "seconds": 0.0})
            h._sweep(ctx["kill_all"])
            i += 1
            continue
        if pid == 0:
            close = [r_fd, ctx["result_fd"], ctx["out_fd"]] + ([ctx["oom"]] if ctx["oom"] is not None else [])
            _fn_child(ctx, i, n, w_fd, cpu_s, close)
        os.close(w_fd)
        try:
            i = _collect_fn(ctx, pid, r_fd, i, n, max_line, test_timeout, deadline, oom_before)
        finally:
            os.close(r_fd)
            h._sweep(ctx["kill_all"])


def _collect_fn(ctx, pid, r_fd, i, n, max_line, test_timeout, deadline, oom_before):
    """Read one child's lines; returns the next input to run (a new child starts there)."""
    start = last = time.monotonic()
    input_deadline = min(start + test_timeout, deadline)
    loaded = False
    buf = bytearray()
    out = []

    def flush():
        for rec in out:
            h._send(ctx["result_fd"], rec)
        out.clear()

    def fail(status, error):
        flush()
        how, sig = _stopped(pid)
        record = {"i": i, "status": status, "seconds": round(time.monotonic() - last, 4), "error": error}
        if status == "error" and "{how}" in error:
            record["error"] = error.replace("{how}", how)
            if sig == h._SIGXCPU:
                record["status"] = "timeout"
            err = h._read_tail(ctx["err_fd"], 600).decode("utf-8", "replace").strip()
            if err:
                record["error"] += ": " + err[-300:]
        _memory_note(ctx, oom_before, record)
        h._send(ctx["result_fd"], record)
        return i + 1

    while True:
        now = time.monotonic()
        if now >= input_deadline:
            if not loaded:  # a program that does not load in time would not on a restart either
                first = i
                i = fail("timeout", f"loading the program took over {min(test_timeout, max(0.0, deadline - last)):.3g} s")
                for j in range(i, n):
                    h._send(ctx["result_fd"], {"i": j, "status": "timeout", "seconds": 0.0,
                                               "error": f"not run: the program did not load in time (input {first})"})
                return n
            return fail("timeout", f"input {i} took over {min(test_timeout, max(0.0, deadline - last)):.3g} s")
        ready, _, _ = select.select([r_fd], [], [], input_deadline - now)
        if not ready:
            continue
        chunk = os.read(r_fd, 1 << 16)
        if not chunk:  # the child closed the pipe: finished, crashed or exited
            if i >= n:
                flush()
                _stopped(pid)
                return i
            return fail("error", f"the program stopped during input {i} ({{how}})")
        searched = len(buf)
        buf += chunk
        pos = 0
        while True:
            cut = buf.find(b"\n", max(pos, searched))
            if cut < 0:
                break
            line = bytes(buf[pos:cut])
            pos = searched = cut + 1
            now = time.monotonic()
            if line == b"L" and not loaded:
                loaded = True
                last = now
                input_deadline = min(now + test_timeout, deadline)
                continue
            head, _, rest = line.partition(b" ")
            status, _, payload = rest.partition(b" ")
            if i >= n or head != b"%d" % i or status not in (b"ok", b"error"):
                return fail("error", f"unexpected output on the result channel during input {i}")
            record = {"i": i, "seconds": round(now - last, 4)}
            if status == b"ok":
                record["status"] = "ok"
                record["ret"] = payload.decode("ascii", "replace")
            else:
                record["status"] = "error"
                record["error"] = payload.decode("utf-8", "replace")
                _memory_note(ctx, oom_before, record)
            out.append(record)
            i += 1
            last = now
            loaded = True
            input_deadline = min(now + test_timeout, deadline)
        del buf[:pos]
        flush()
        if i >= n:  # every input answered: the child need not linger
            _stopped(pid)
            return i
        if len(buf) > max_line:
            return fail("output_limit", f"return value of input {i} over {ctx['out_cap']} bytes")


# ---- check ---------------------------------------------------------------------------------------
def _read_exact(fd, n):
    chunks = []
    while n:
        data = os.read(fd, min(n, 1 << 20))
        if not data:
            return None
        chunks.append(data)
        n -= len(data)
    return b"".join(chunks)


def _enter_child(ctx, close, cpu_s, out_fd, err_fd):
    """The set-up both forked processes of a check run share: own process group, only their own
    pipe ends, the work directory, their own captured stdout/stderr and their CPU limit."""
    os.setpgid(0, 0)
    for fd in close:
        os.close(fd)
    os.chdir(ctx["work"])
    _redirect(out_fd, err_fd)
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))


def _candidate(ctx, req_r, resp_w, cpu_s, close):
    """The process that holds the program: answers calls until the judge closes the pipe. Forked
    before anything of the check program entered the harness (module docstring)."""
    try:
        _enter_child(ctx, close, cpu_s, ctx["out_fd"], ctx["err_fd"])
        encode = ctx["values"].encode
        try:
            fn, load_error = _load(ctx), None
        except BaseException as exc:  # noqa: BLE001
            fn, load_error = None, ("the program failed to load: " + _exc_text(exc)).encode("utf-8", "replace")
        while True:
            head = _read_exact(req_r, 4)
            if head is None:
                return
            blob = _read_exact(req_r, int.from_bytes(head, "big"))
            if blob is None:
                return
            if load_error is not None:
                kind, payload = b"e", load_error
            else:
                try:
                    args, kwargs = marshal.loads(blob)
                    kind, payload = b"o", encode(fn(*args, **kwargs)).encode("ascii")
                except BaseException as exc:  # noqa: BLE001
                    kind, payload = b"e", _exc_text(exc).encode("utf-8", "replace")
            _write_all(resp_w, kind + len(payload).to_bytes(4, "big") + payload)
    finally:
        os._exit(0)


class CandidateError(Exception):
    """The program raised (or failed to load) during a call from the check program."""


def _read_test(job):
    """The check program's text, from the job memfd (the judge's only copy: module docstring)."""
    offset, size = job["test_at"]
    chunks = []
    while size:
        data = os.pread(job["job_fd"], min(size, 1 << 20), offset)
        if not data:
            break
        chunks.append(data)
        offset += len(data)
        size -= len(data)
    return b"".join(chunks).decode("utf-8", "surrogatepass")


def _judge(ctx, req_w, resp_r, verdict_w, out_fd, err_fd, cpu_s, close):
    """Runs the check program; never runs the program's code. It reads the check program itself,
    after the candidate's fork: nothing the candidate shares memory with ever held it."""
    status = 1
    try:
        h._not_dumpable()
        _enter_child(ctx, close, cpu_s, out_fd, err_fd)
        job = ctx["job"]
        try:
            source = _read_test(job)
        finally:
            os.close(job["job_fd"])
        try:
            test_obj = compile(source, "test.py", "exec")
        except BaseException as exc:  # noqa: BLE001 - the data's test program is broken
            _write_all(2, ("the test program does not compile: " + _exc_text(exc)).encode("utf-8", "replace"))
            os._exit(1)
        try:
            prompt_obj = compile(job["prompt"], "prompt.py", "exec") if job.get("prompt") else None
        except BaseException:  # noqa: BLE001
            prompt_obj = None
        decode, cap = ctx["values"].decode, ctx["out_cap"]

        def candidate(*args, **kwargs):
            try:
                blob = marshal.dumps((args, kwargs))
            except ValueError:
                raise TypeError("the check program passed an argument that is not plain data") from None
            _write_all(req_w, len(blob).to_bytes(4, "big") + blob)
            head = _read_exact(resp_r, 5)
            if head is None:
                raise CandidateError("the program's process ended")
            size = int.from_bytes(head[1:], "big")
            if size > cap:
                raise CandidateError(f"return value over {cap} bytes")
            payload = _read_exact(resp_r, size)
            if payload is None:
                raise CandidateError("the program's process ended")
            if head[:1] == b"o":
                return decode(payload.decode("ascii"))
            raise CandidateError(payload.decode("utf-8", "replace"))

        scope = {"__name__": "__main__", "__builtins__": __builtins__}
        if prompt_obj is not None:  # helpers the test uses (HumanEval/38's encode_cyclic, /32's poly)
            try:
                exec(prompt_obj, scope)
            except Exception:  # noqa: BLE001 - a prompt that does not run alone
                pass
        exec(test_obj, scope)
        scope[ctx["job"]["entry_point"]] = candidate
        check = scope.get("check")
        if not callable(check):
            raise NameError("the test program defines no check(candidate)")
        check(candidate)
        _write_all(verdict_w, b"P")
        status = 0
    except BaseException:  # noqa: BLE001
        import traceback

        try:
            traceback.print_exc()
        except BaseException:  # noqa: BLE001
            pass
        status = 1
    finally:
        os._exit(status)


def run_check(ctx):
    job = ctx["job"]
    now = time.monotonic()
    limit = min(ctx["test_timeout"], max(0.0, ctx["deadline"] - now))
    # The wall clock decides; the CPU limit is a backstop at least a second past it. int(limit) + 1
    # was not: with limit a little under a second (the item's deadline already running) the CPU
    # limit was 1 s from the candidate's fork, which the wall clock starts after, so a looping
    # candidate could die of SIGXCPU first and its judge report an error instead of a timeout.
    cpu_s = math.ceil(limit) + 1
    h._rewind((ctx["out_fd"], ctx["err_fd"]))
    oom_before = h.oom_kills(ctx["oom"])
    extra = [ctx["oom"]] if ctx["oom"] is not None else []
    req_r, req_w = os.pipe()
    resp_r, resp_w = os.pipe()
    start = time.monotonic()
    try:
        cand = os.fork()
    except OSError as exc:
        for fd in (req_r, req_w, resp_r, resp_w):
            os.close(fd)
        h._send(ctx["result_fd"], {"i": 0, "status": "error", "error": f"fork failed: {exc}", "seconds": 0.0})
        return
    if cand == 0:
        _candidate(ctx, req_r, resp_w, cpu_s, [req_w, resp_r, ctx["result_fd"], job["job_fd"]] + extra)
    os.close(req_r)
    os.close(resp_w)
    # made after the candidate's fork: it never holds the verdict pipe or the judge's output files
    verdict_r, verdict_w = os.pipe()
    judge_out, judge_err = os.memfd_create("judge-out"), os.memfd_create("judge-err")  # anonymous: no name to open
    try:
        judge = os.fork()
    except OSError as exc:
        for fd in (req_w, resp_r, verdict_r, verdict_w, judge_out, judge_err):
            os.close(fd)
        h._sweep(ctx["kill_all"])
        h._send(ctx["result_fd"], {"i": 0, "status": "error", "error": f"fork failed: {exc}", "seconds": 0.0})
        return
    if judge == 0:
        _judge(ctx, req_w, resp_r, verdict_w, judge_out, judge_err, cpu_s,
               [verdict_r, ctx["result_fd"], ctx["out_fd"], ctx["err_fd"]] + extra)
    for fd in (req_w, resp_r, verdict_w):
        os.close(fd)
    try:
        status, timed_out = h._wait(judge, limit)
        try:
            os.killpg(cand, h._SIGKILL)
        except OSError:
            pass
        cand_status = None
        try:
            _, cand_status = os.waitpid(cand, 0)
        except ChildProcessError:
            pass
        h._sweep(ctx["kill_all"])
        os.set_blocking(verdict_r, False)
        try:
            verdict = os.read(verdict_r, 16)
        except BlockingIOError:
            verdict = b""
    finally:
        os.close(verdict_r)
    seconds = time.monotonic() - start
    try:  # the judge's traceback (a failed assert, the candidate's exception), else the program's stderr
        err = (h._read_tail(judge_err, 1000) or h._read_tail(ctx["err_fd"], 1000)).decode("utf-8", "replace")
    finally:
        os.close(judge_out)
        os.close(judge_err)
    out, _ = h._read_head(ctx["out_fd"], 2000)
    record = {"i": 0, "seconds": round(seconds, 4), "stdout": out.decode("utf-8", "replace")}
    cand_sig = os.WTERMSIG(cand_status) if cand_status is not None and os.WIFSIGNALED(cand_status) else None
    if timed_out:
        record.update(status="timeout", error=f"timed out after {limit:.3g} s")
    elif cand_sig == h._SIGXCPU:  # the candidate used up its CPU time: the judge saw it vanish
        record.update(status="timeout", error=f"the program used over {cpu_s} s of CPU time")
    elif os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        record.update(status="timeout" if sig == h._SIGXCPU else "error",
                      error=f"the check program was killed by {h._SIGNAL_NAMES.get(sig, f'signal {sig}')}")
    elif os.WEXITSTATUS(status) != 0 or verdict != b"P":
        record.update(status="error", error=(err[-500:].strip() or "check(candidate) did not return"))
    else:
        record["status"] = "ok"
    _memory_note(ctx, oom_before, record, err)
    h._send(ctx["result_fd"], record)
