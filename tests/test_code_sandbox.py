"""Hostile programs in the code sandbox: each is contained, the test process is unharmed, and no
process of the item survives it. Limits are tight on purpose (2 shared cores): 1 s per test,
256 MB address space, 16 processes."""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import time
import uuid
from pathlib import Path

import pytest

from resrl.tasks.code.reward import run_tests
from resrl.tasks.code.sandbox.runner import (UID_BLOCK, SandboxLimits, detect_isolation, reap_dying, sandbox_uid,
                                             sandbox_uid_range)

TIGHT = SandboxLimits(memory_mb=256, file_size_mb=1, open_files=32, processes=16, output_kb=64, tmpfs_mb=8,
                      startup_s=10.0)
ECHO_TESTS = {"inputs": ["1\n", "2\n", "3\n"], "outputs": ["2", "4", "6"]}
ISO = detect_isolation()
needs_netns = pytest.mark.skipif("net" not in ISO.namespaces, reason="no network namespace on this machine")
needs_pidns = pytest.mark.skipif("pid" not in ISO.namespaces, reason="no pid namespace on this machine")
needs_mountns = pytest.mark.skipif("mount" not in ISO.namespaces, reason="no mount namespace on this machine")


def run(code: str, tests: dict = ECHO_TESTS, timeout_s: float = 1.0, **kw):
    return run_tests(code, tests, timeout_s, limits=TIGHT, **kw)


def sandbox_pids() -> list[int]:
    """Live processes running as a sandbox uid of this test process's block (`sandbox_uid`: each process
    draws its items' uids from its own block of UID_BLOCK, by pid). Another process's sandboxes — another
    pytest-xdist worker's, another job's on the machine — are not this test's to find."""
    first, hi = sandbox_uid_range()
    lo = first + (os.getpid() % ((hi - first) // UID_BLOCK)) * UID_BLOCK
    hi = lo + UID_BLOCK
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            status = Path(f"/proc/{entry}/status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        uid = fields.get("Uid", "").split()[:1]
        if uid and lo <= int(uid[0]) < hi and "Z" not in fields.get("State", ""):
            found.append(int(entry))
    return found


def assert_nothing_left():
    assert reap_dying(timeout_s=10.0) == 0
    deadline = time.monotonic() + 5
    while sandbox_pids() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sandbox_pids() == []


def assert_still_works():
    res = run("print(int(input()) * 2)")
    assert res.passed, res.error


def test_honest_program_passes_and_layers_are_reported():
    res = run("print(int(input()) * 2)")
    assert res.passed and res.fraction == 1.0 and res.statuses == ["pass"] * 3
    assert res.layers["netns"] == ("net" in ISO.namespaces)
    assert res.layers["pidns"] == ("pid" in ISO.namespaces)
    if os.geteuid() == 0:
        lo, hi = sandbox_uid_range()
        assert lo <= res.layers["uid"] < hi


def test_every_rlimit_is_applied():
    code = ("import resource as r\n"
            "names = ['RLIMIT_CPU', 'RLIMIT_AS', 'RLIMIT_FSIZE', 'RLIMIT_NOFILE', 'RLIMIT_NPROC', 'RLIMIT_CORE']\n"
            "print(' '.join(str(r.getrlimit(getattr(r, n))[0]) for n in names))\n")
    want = f"2 {256 << 20} {1 << 20} 32 16 0"  # CPU: ceil(1 s per test) + 1
    assert run(code, tests={"inputs": [""], "outputs": [want]}).passed


def test_infinite_loop_times_out_within_the_limit():
    start = time.perf_counter()
    res = run("while True:\n    pass\n", timeout_s=0.5)
    assert not res.passed and res.timed_out and res.statuses[0] == "timeout"
    assert time.perf_counter() - start < 0.5 * 3 + 5  # three tests at most, plus start-up
    assert_nothing_left()


def test_infinite_loop_binary_reward_stops_at_the_first_failure():
    start = time.perf_counter()
    res = run("while True:\n    pass\n", timeout_s=0.5, stop_on_failure=True)
    assert res.statuses == ["timeout", "not_run", "not_run"] and res.fraction == 0.0
    assert time.perf_counter() - start < 0.5 + 5


def test_fork_bomb_is_contained():
    res = run("import os\nwhile True:\n    os.fork()\n", tests={"inputs": ["1\n"], "outputs": ["2"]})
    assert not res.passed
    assert_nothing_left()
    assert_still_works()


def test_process_limit_binds():
    # a gentle check of what the fork bomb relies on: at most `processes` (16) live processes per
    # sandbox uid, although the harness started as root (for root RLIMIT_NPROC alone does not bind)
    code = ("import os, time\n"
            "made = 0\n"
            "for _ in range(40):\n"
            "    try:\n"
            "        if os.fork() == 0:\n"
            "            time.sleep(3)\n"
            "            os._exit(0)\n"
            "        made += 1\n"
            "    except OSError:\n"
            "        break\n"
            "print(made < 16)\n")
    res = run(code, tests={"inputs": [""], "outputs": ["True"]}, timeout_s=2.0)
    assert res.passed, res.error
    assert_nothing_left()


def test_memory_bomb_is_contained():
    res = run("x = bytearray(1 << 34)\nprint(len(x))\n", tests={"inputs": ["1\n"], "outputs": ["2"]})
    assert not res.passed and "MemoryError" in res.error
    res = run("chunks = []\nwhile True:\n    chunks.append(bytearray(1 << 24))\n",
              tests={"inputs": ["1\n"], "outputs": ["2"]})
    assert not res.passed and res.statuses[0] in ("error", "timeout")
    assert_still_works()


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_huge_output_is_capped(stream):
    res = run(f"import sys\nwhile True:\n    sys.{stream}.write('x' * 10000)\n",
              tests={"inputs": ["1\n"], "outputs": ["2"]})
    assert not res.passed and res.statuses[0] in ("output_limit", "error")
    assert len(res.error) < 2000  # only a capped tail of the output comes back
    assert_nothing_left()


@needs_mountns
def test_writes_outside_the_work_dir_do_not_reach_the_host(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("intact")
    name = f"resrl-sandbox-escape-{uuid.uuid4().hex}"
    targets = [str(victim), str(tmp_path / "new.txt"), f"/tmp/{name}", f"/dev/shm/{name}",
               str(Path(__file__).resolve().parent / name), f"/etc/{name}"]
    code = ("import os\n"
            f"for path in {targets!r}:\n"
            "    try:\n"
            "        with open(path, 'w') as f:\n"
            "            f.write('pwned')\n"
            "    except OSError:\n"
            "        pass\n"
            "print(int(input()) * 2)\n")
    res = run(code)
    assert res.passed  # /tmp inside is a private tmpfs: writing there is allowed and vanishes
    assert victim.read_text() == "intact"
    for path in targets[1:]:
        assert not os.path.exists(path), path


@needs_mountns
def test_data_files_and_the_repository_are_invisible(tmp_path):
    data = tmp_path / "train.jsonl"
    data.write_text('{"expected": "SECRET-OUTPUT"}\n')
    data.chmod(0o644)
    tmp_path.chmod(0o755)
    paths = [str(data), str(Path(__file__).resolve()), str(Path(__file__).resolve().parents[1] / "README.md")]
    code = ("seen = []\n"
            f"for path in {paths!r}:\n"
            "    try:\n"
            "        seen.append(open(path).read()[:20])\n"
            "    except OSError:\n"
            "        pass\n"
            "input()\n"
            "print(len(seen))\n")
    res = run(code, tests={"inputs": ["1\n"], "outputs": ["0"]})
    assert res.passed, res.error
    assert not any("/work" in d or str(tmp_path) in d for d in res.layers["visible"] if "site-packages" not in d
                   and ".venv" not in d)


def test_environment_secrets_are_not_inherited(monkeypatch):
    monkeypatch.setenv("RESRL_TEST_SECRET", "hunter2")
    code = ("import os\n"
            "leak = os.environ.get('RESRL_TEST_SECRET')\n"
            "try:\n"
            "    leak = leak or ('hunter2' in open('/proc/self/environ').read() and 'hunter2')\n"
            "except OSError:\n"
            "    pass\n"
            "input()\n"
            "print(leak)\n")
    res = run(code, tests={"inputs": ["1\n"], "outputs": ["None"]})
    assert res.passed, res.error


@needs_netns
def test_no_network_connection_reaches_the_host():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(0.1)
    port = server.getsockname()[1]
    code = ("import socket\n"
            "try:\n"
            f"    socket.create_connection(('127.0.0.1', {port}), timeout=0.5)\n"
            "    print('connected')\n"
            "except OSError:\n"
            "    print('blocked')\n")
    try:
        res = run(code, tests={"inputs": [""], "outputs": ["blocked"]})
        assert res.passed, res.error
        with pytest.raises(socket.timeout):
            server.accept()
    finally:
        server.close()


def test_killing_the_parent_harms_nobody():
    code = ("import os, signal\n"
            "for pid in (os.getppid(), 1, -1):\n"
            "    try:\n"
            "        os.kill(pid, signal.SIGKILL)\n"
            "    except OSError:\n"
            "        pass\n"
            "print(int(input()) * 2)\n")
    res = run(code)
    assert os.getpid() > 0  # still here
    assert res.fraction in (0.0, 1.0 / 3, 2.0 / 3, 1.0)  # an outcome, whatever the program did
    assert_nothing_left()
    assert_still_works()


@needs_pidns
def test_background_process_does_not_outlive_the_item():
    # each test first checks whether the daemon the previous test left is still alive, then leaves
    # a new one (setsid + double fork: it escapes the test's process group)
    code = ("import os, time\n"
            "try:\n"
            "    pid = int(open('/tmp/daemon.pid').read())\n"
            "    os.kill(pid, 0)\n"
            "    state = 'alive'\n"
            "except (OSError, ValueError):\n"
            "    state = 'clean'\n"
            "if os.fork() == 0:\n"
            "    os.setsid()\n"
            "    if os.fork() == 0:\n"
            "        open('/tmp/daemon.pid', 'w').write(str(os.getpid()))\n"
            "        time.sleep(60)\n"
            "    os._exit(0)\n"
            "time.sleep(0.2)\n"
            "input()\n"
            "print(state)\n")
    res = run(code, tests={"inputs": ["1\n", "2\n"], "outputs": ["clean", "clean"]})
    assert res.passed, res.error
    assert_nothing_left()


def test_deleting_files_in_the_work_dir_does_not_break_later_tests():
    code = ("import os, shutil\n"
            "for root in ('.', '..', '/tmp'):\n"
            "    for name in os.listdir(root):\n"
            "        path = os.path.join(root, name)\n"
            "        try:\n"
            "            shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)\n"
            "        except OSError:\n"
            "            pass\n"
            "print(int(input()) * 2)\n")
    res = run(code)
    assert res.passed, res.error  # the inputs of tests 2 and 3 were out of its reach
    assert_still_works()


def test_deep_recursion_with_a_raised_limit_crashes_only_the_item():
    # recursion in C (the JSON encoder on a deeply nested list) overflows the C stack: SIGSEGV
    crash = ("import sys, json\n"
             "sys.setrecursionlimit(10 ** 7)\n"
             "x = []\n"
             "for _ in range(200000):\n"
             "    x = [x]\n"
             "print(json.dumps(x)[:1])\n")
    res = run(crash, tests={"inputs": ["1\n"], "outputs": ["2"]})
    assert not res.passed and res.statuses == ["error"] and "SIGSEGV" in res.error
    # Python-level recursion (frames on the heap since 3.11) runs into the time or memory limit
    deep = ("import sys\n"
            "sys.setrecursionlimit(10 ** 7)\n"
            "def f(n):\n"
            "    return f(n + 1) + 1\n"
            "f(0)\n")
    res = run(deep, tests={"inputs": ["1\n"], "outputs": ["2"]}, timeout_s=1.0)
    assert not res.passed and res.statuses[0] in ("error", "timeout")
    assert_still_works()


FALLBACKS = {
    "no namespaces": dict(unshare_prefix=[], namespaces=[]),
    "user namespace": dict(unshare_prefix=["--user", "--map-root-user", "--net", "--pid", "--fork", "--mount",
                                           "--kill-child"], namespaces=["user", "net", "pid", "mount"]),
}


@pytest.mark.parametrize("name", sorted(FALLBACKS))
def test_fallback_isolation_modes_still_score_and_time_out(monkeypatch, name):
    """The code paths taken on machines without namespaces (or without root) keep working; the
    harness reports which layers it could not apply instead of failing."""
    import shutil

    from resrl.tasks.code.sandbox import runner as sandbox

    spec = dict(FALLBACKS[name])
    if spec["unshare_prefix"]:
        unshare = shutil.which("unshare")
        if unshare is None or not sandbox._probe([unshare, *spec["unshare_prefix"]]):
            pytest.skip("user namespaces are not available here")
        spec["unshare_prefix"] = [unshare, *spec["unshare_prefix"]]
    monkeypatch.setattr(sandbox, "_ISOLATION", sandbox.Isolation(drop_uid=False, **spec))
    res = run("print(int(input()) * 2)")
    assert res.passed, res.error
    assert res.layers["pidns"] == ("pid" in spec["namespaces"]) and res.layers["chroot"] == bool(spec["namespaces"])
    res = run("while True:\n    pass\n", timeout_s=0.3, total_timeout_s=0.5)
    assert res.statuses == ["timeout"] * 3 and res.timed_out  # the third never started: budget spent


NON_ROOT_SCRIPT = """
import json, threading
from resrl.tasks.code.sandbox import runner as sb
from resrl.tasks.code.reward import run_tests
if WEAKEST:
    sb._ISOLATION = sb.Isolation(unshare_prefix=[], namespaces=[], drop_uid=False)
ev = threading.Event()
for _ in range(40):  # a busy user: RLIMIT_NPROC counts these threads too
    threading.Thread(target=ev.wait, daemon=True).start()
limits = sb.SandboxLimits(memory_mb=256, processes=16, tmpfs_mb=8)
echo = {"inputs": ["1\\n", "2\\n"], "outputs": ["2", "4"]}
honest = run_tests("print(int(input()) * 2)", echo, 1.0, limits=limits)
bomb = run_tests("import os\\nwhile True:\\n    os.fork()\\n", echo, 1.0, limits=limits)
print(json.dumps({"honest": honest.passed, "bomb": bomb.statuses, "layers": honest.layers,
                  "iso": sb.detect_isolation().namespaces}))
"""


def _system_python_for_nobody():
    import shutil

    src = Path(__file__).resolve().parents[1] / "src"
    python = shutil.which("python3", path="/usr/bin:/bin")
    if os.geteuid() != 0 or shutil.which("setpriv") is None or python is None:
        return None, src
    path = src
    while path != path.parent:  # nobody must be able to reach the sources
        if not path.stat().st_mode & 0o001:
            return None, src
        path = path.parent
    return python, src


@pytest.mark.parametrize("weakest", [False, True], ids=["user-namespace", "no-namespaces"])
def test_non_root_user_is_contained_too(weakest):
    """As an ordinary user (nobody, the system python): the user-namespace path, and the weakest
    path (no namespaces at all), with a user that already runs 40 threads."""
    import json
    import subprocess

    python, src = _system_python_for_nobody()
    if python is None:
        pytest.skip("needs root, setpriv, a system python3 and sources readable by others")
    import shutil
    import tempfile

    home = Path(tempfile.mkdtemp(prefix="resrl-nobody-"))  # pytest's tmp_path is closed to others
    try:
        home.chmod(0o777)
        try:  # the seccomp binding, for the system python (a one-file package)
            import pyseccomp

            shutil.copy(pyseccomp.__file__, home / "pyseccomp.py")
        except ImportError:
            pass
        script = home / "nobody.py"
        script.write_text(f"WEAKEST = {weakest}\n" + NON_ROOT_SCRIPT)
        script.chmod(0o644)
        proc = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "env", "-i",
                               "PATH=/usr/bin:/bin", f"PYTHONPATH={src}:{home}", f"HOME={home}", python, str(script)],
                              capture_output=True, text=True, timeout=120, cwd=home)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["honest"] is True, out
    assert "pass" not in out["bomb"], out
    if not weakest and "user" in out["iso"]:
        assert out["layers"]["netns"] and out["layers"]["pidns"] and out["layers"]["chroot"]


@pytest.mark.skipif(os.geteuid() != 0, reason="the uid drop is a root-only layer")
def test_root_without_a_uid_drop_refuses_unless_allowed(monkeypatch):
    """Root, no namespaces, and an interpreter other uids cannot reach (a pyenv under /root): the
    harness cannot drop root, so RLIMIT_NPROC would not bind — it refuses to run programs."""
    from resrl.tasks.code.sandbox import code_harness, runner as sandbox

    closed = [d for d in sandbox._stdlib_dirs() if code_harness._closed_ancestor(d)]
    if not closed:
        pytest.skip("the interpreter is reachable by other uids here: the uid drop works without a chroot")
    monkeypatch.setattr(sandbox, "_ISOLATION", sandbox.Isolation(drop_uid=True))
    res = run("print(int(input()) * 2)")
    assert not res.passed and res.layers["refused"] and "refused" in res.error
    monkeypatch.setenv(sandbox.ALLOW_ROOT_ENV, "1")
    res = run("print(int(input()) * 2)")
    assert res.passed and res.layers["uid"] == 0 and not res.layers["refused"]


def test_back_to_back_items_do_not_share_a_process_budget():
    """An item's processes are killed, not waited for: the next item must not inherit their count
    against RLIMIT_NPROC (each item gets a uid of its own)."""
    from resrl.tasks.code.reward import CodeExecutor

    limits = SandboxLimits(memory_mb=256, processes=3, tmpfs_mb=8)  # the harness, one test, one spare
    items = [(f"print(int(input()) * 2)  # {i}\n", {"inputs": ["1\n"], "outputs": ["2"]}) for i in range(40)]
    with CodeExecutor(num_workers=2, timeout_s=2.0, limits=limits) as ex:
        results = ex.run_many(items)
    assert [r.error for r in results if not r.passed] == []


# ---- the memory cap: which layer binds --------------------------------------------------------
from resrl.tasks.code.sandbox.runner import memory_cgroup_base, run_job  # noqa: E402

CHILDREN_ALLOCATE = """import os, time
n, mb = 6, 200
pids = []
for _ in range(n):
    pid = os.fork()
    if pid == 0:
        try:
            b = bytearray(mb << 20)
            for k in range(0, len(b), 4096):
                b[k] = 1  # touch every page: resident, not just reserved
            time.sleep(1.5)
            os._exit(0)
        except MemoryError:
            os._exit(3)
    pids.append(pid)
ok = 0
for pid in pids:
    _, st = os.waitpid(pid, 0)
    ok += os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0
print(ok * mb)
"""
MEMORY = SandboxLimits(memory_mb=256, cgroup_memory_mb=256, processes=16, output_kb=64, tmpfs_mb=8, startup_s=10.0)


def _one(code: str, limits: SandboxLimits) -> tuple[dict, dict]:
    outcome = run_job({"code": code, "mode": "stdio", "inputs": [""]}, limits, test_timeout_s=8.0, total_timeout_s=8.0)
    assert len(outcome.records) == 1, outcome.error
    return outcome.records[0], outcome.layers


def test_rlimit_as_refuses_one_big_allocation():
    record, _ = _one("b = bytearray(4 << 30)\nprint('allocated')\n", MEMORY)
    assert record["status"] == "error" and "MemoryError" in record["error"]
    assert record["memory_limit"] == "rlimit_as" and record["stdout"] == ""


def test_rlimit_as_alone_lets_children_exceed_the_item_budget():
    """The measurement behind the cgroup layer: RLIMIT_AS is per process, so 6 children of 200 MB
    each (1.2 GB resident together) all succeed under a 256 MB limit."""
    record, layers = _one(CHILDREN_ALLOCATE, dataclasses.replace(MEMORY, use_cgroup=False))
    assert "cgroup" not in layers
    assert record["status"] == "ok" and record["stdout"].strip() == "1200" and "memory_limit" not in record


@pytest.mark.skipif(memory_cgroup_base() is None, reason="no usable memory cgroup (v2 delegation or v1) here")
def test_cgroup_bounds_the_item_total_and_says_so():
    record, layers = _one(CHILDREN_ALLOCATE, MEMORY)
    assert layers["cgroup"] in ("v1", "v2") and layers["cgroup_memory_bytes"] == 256 << 20
    assert record["memory_limit"] == "cgroup"  # the cgroup's OOM counter moved during the test
    assert int(record["stdout"].strip() or 0) < 1200
    res = run_tests(CHILDREN_ALLOCATE, {"inputs": [""], "outputs": ["1200"]}, 8.0, limits=MEMORY)
    assert not res.passed and res.memory_limit == "cgroup"
    assert_nothing_left()


def test_the_leftover_check_sees_this_process_sandboxes_only():
    """`sandbox_pids` finds a process of this process's next sandbox uid (so a leftover is found), and
    not one of another block's uid (another xdist worker's items run beside these tests)."""
    import subprocess
    import sys

    if os.geteuid() != 0:
        pytest.skip("sandbox uids are set only by root")
    mine, (first, hi) = sandbox_uid(), sandbox_uid_range()
    other = first + ((mine - first) // UID_BLOCK + 1) % ((hi - first) // UID_BLOCK) * UID_BLOCK
    procs = [subprocess.Popen([sys.executable, "-c", f"import os, time; os.setuid({uid}); time.sleep(30)"])
             for uid in (mine, other)]
    try:
        deadline = time.monotonic() + 10
        while procs[0].pid not in sandbox_pids() and time.monotonic() < deadline:
            time.sleep(0.05)
        found = sandbox_pids()
        assert procs[0].pid in found and procs[1].pid not in found
    finally:
        for p in procs:
            p.kill()
            p.wait()


# ---- verdicts as LiveCodeBench's testing_util gives them (issue 52) ------------------------------------
@pytest.mark.parametrize("ending", ["exit()", "exit(0)", "quit()"])
def test_exit_without_the_prelude_ends_the_program_as_under_livecodebench(ending):
    """CodeForces / CodeContests / APPS rows have no LiveCodeBench prelude; LiveCodeBench's process has
    `site`'s exit() and quit(), so a program ending with them is judged on its output (the harness runs
    with -S, which used to make this a NameError)."""
    res = run(f"print(int(input()) * 2)\n{ending}\nprint('never')\n")
    assert res.passed, res.error


def test_integers_up_to_livecodebench_digit_limit():
    """LiveCodeBench raises Python's 4,300-digit limit on int <-> str to 50,000 digits."""
    big = {"inputs": ["5000\n"], "outputs": ["1" + "0" * 5000]}
    assert run("print(10 ** int(input()))\n", tests=big).passed
    over = {"inputs": ["60000\n"], "outputs": ["1" + "0" * 60000]}
    res = run("print(10 ** int(input()))\n", tests=over)
    assert not res.passed and "ValueError" in res.error  # over LiveCodeBench's limit too
    call = {"fn_name": "f", "inputs": [[4999]], "outputs": [10 ** 4999 + 1], "compare": "exact"}
    assert run("def f(k):\n    return 10 ** k + 1\n", tests=call).passed


def test_an_answer_over_one_mebibyte_is_judged():
    """LiveCodeBench has no output cap; here the cap is twice the largest expected output (at least
    SandboxLimits.output_kb), so a right answer of 1.5 MiB passes and a flood still fails."""
    n = 3 * (1 << 19)
    tests = {"inputs": [f"{n}\n"], "outputs": ["7" * n]}
    res = run("print('7' * int(input()))\n", tests=tests)
    assert res.passed, res.error
    res = run("print('7' * (10 * int(input())))\n", tests=tests)
    assert not res.passed and res.statuses == ["output_limit"]


def test_the_item_time_budget_is_livecodebenchs(monkeypatch):
    """The default total time of an item is LiveCodeBench's global timeout, (t + 1) * n + 5 s
    (check_correctness), not min(t * n, 60 + t), which failed 12 tests of 5.6 s at t = 6."""
    from resrl.tasks.code import reward

    seen = {}

    def fake_run_job(job, limits, *, test_timeout_s, total_timeout_s, slot=0, on_record=None):
        seen["total"] = total_timeout_s
        from resrl.tasks.code.sandbox.runner import JobOutcome

        return JobOutcome()

    monkeypatch.setattr(reward, "run_job", fake_run_job)
    reward.run_tests("print(1)", {"inputs": ["x"] * 12, "outputs": ["1"] * 12}, 6.0)
    assert seen["total"] == (6.0 + 1) * 12 + 5 > 12 * 5.6


def test_a_failing_item_does_not_wait_for_its_harness(monkeypatch):
    """stop_on_failure: the parent stops reading at the first failed test and kills the sandbox; it used
    to wait up to 1 s for the still-running harness first."""
    import subprocess

    waits = []
    real_wait = subprocess.Popen.wait

    def spy(self, timeout=None):
        waits.append(timeout)
        return real_wait(self, timeout)

    monkeypatch.setattr(subprocess.Popen, "wait", spy)
    res = run("import time\nif input() == '1':\n    print(0)\nelse:\n    time.sleep(0.9)\n", stop_on_failure=True)
    assert res.statuses[0] == "wrong" and res.statuses[1:] == ["not_run", "not_run"]
    assert waits == []


def test_the_programs_memory_does_not_shrink_with_the_number_of_tests():
    """25 inputs of 4 MB under a 160 MB address-space limit: a program that allocates 100 MB passes every
    test. The harness used to hold every input (the forked test inherited them all: 100 MB gone)."""
    size = 4 << 20
    inputs = [f"{k} " + "1" * size + "\n" for k in range(25)]
    tests = {"inputs": inputs, "outputs": [str(k) for k in range(25)]}
    limits = dataclasses.replace(TIGHT, memory_mb=160, cgroup_memory_mb=400, tmpfs_mb=8)
    code = ("import sys\nblock = bytearray(100 << 20)\nk = sys.stdin.buffer.read(16).split()[0]\n"
            "print(int(k))\n")
    res = run_tests(code, tests, 5.0, limits=limits)
    assert res.passed, res.error


def test_without_bubblewrap_programs_are_refused_unless_the_weak_path_is_accepted(monkeypatch, caplog):
    """No silent fallback (issue 52): without bubblewrap every item fails with the reason and the flag that
    accepts the risk; RESRL_CODE_SANDBOX=weak runs the legacy path, warning once with its risks."""
    import logging
    import shutil

    from resrl.tasks.code.sandbox import runner as sb

    real_which = shutil.which
    monkeypatch.setattr(sb.shutil, "which", lambda name, path=None: None if name == "bwrap" else real_which(name, path=path))
    monkeypatch.setattr(sb, "_ISOLATION", None)
    monkeypatch.delenv(sb.SANDBOX_ENV, raising=False)
    with caplog.at_level(logging.WARNING, logger="resrl.tasks.code.sandbox.runner"):
        iso = sb.detect_isolation(refresh=True)
    assert iso.backend == "refused" and "bubblewrap is not installed" in iso.refusal
    assert "RESRL_CODE_SANDBOX=weak" in iso.refusal and any("refused" in r.getMessage() for r in caplog.records)
    res = run("print(int(input()) * 2)")
    assert not res.passed and res.statuses == ["not_run"] * 3 and "bubblewrap is not installed" in res.error
    monkeypatch.setenv(sb.SANDBOX_ENV, "weak")
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="resrl.tasks.code.sandbox.runner"):
        iso = sb.detect_isolation(refresh=True)
    assert iso.backend == "legacy"
    assert any("weak" in r.getMessage() and "keyrings" in r.getMessage() for r in caplog.records)
    res = run("print(int(input()) * 2)")
    assert res.passed and res.layers["sandbox"] == "legacy", res.error


def test_every_site_packages_the_sandbox_shows_is_empty_inside():
    """resrl installed into the interpreter's own prefix (a `sudo pip install`, a conda base) would sit in
    a site-packages of a directory the sandbox shows: each is masked by an empty tmpfs, so neither resrl's
    package data nor any installed package is readable inside (only the standard library is)."""
    import sys

    from resrl.tasks.code.sandbox.runner import detect_isolation, masked_dirs, sandbox_visible_dirs

    if detect_isolation().backend != "bwrap":
        pytest.skip("no bubblewrap sandbox here")
    masked = masked_dirs()
    base_site = [d for d in masked if d.startswith(os.path.realpath(sys.base_prefix) + os.sep)]
    assert base_site, (masked, sandbox_visible_dirs())  # the base interpreter's own site-packages is one
    assert any(os.listdir(d) for d in masked)  # ...and it is not empty on the host
    code = (f"import os, json\nprint(json.dumps([os.listdir(d) for d in {masked!r}]))\n"
            "import email, json, sqlite3\n")
    res = run(code, tests={"inputs": [""], "outputs": [json.dumps([[] for _ in masked])]})
    assert res.passed, res.error


def test_the_seccomp_filter_denies_what_it_lists():
    """Inside, each of these fails with EPERM from the filter (ptrace(TRACEME), which would otherwise
    succeed; a new user namespace, which would otherwise grant capabilities; the keyrings, chroot, mount,
    bpf), and clone3 with ENOSYS, while an ordinary fork still works."""
    from resrl.tasks.code.sandbox.runner import detect_isolation

    if detect_isolation().backend != "bwrap":
        pytest.skip("no bubblewrap sandbox here")
    code = ("import ctypes, errno, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
            "def err(rc):\n    return errno.errorcode.get(ctypes.get_errno(), '?') if rc == -1 else 'ok'\n"
            "out = [err(libc.ptrace(0, 0, None, None)), err(libc.unshare(0x10000000)),\n"
            "       err(libc.syscall(250, 0, 0)), err(libc.chroot(b'/tmp')),\n"
            "       err(libc.mount(b'none', b'/tmp', b'tmpfs', 0, None)), err(libc.syscall(321, 0, None, 0)),\n"
            "       err(libc.syscall(435, None, 0))]\n"
            "pid = os.fork()\nif pid == 0:\n    os._exit(7)\n"
            "out.append(str(os.WEXITSTATUS(os.waitpid(pid, 0)[1])))\nprint(' '.join(out))\n")
    res = run(code, tests={"inputs": [""], "outputs": ["EPERM EPERM EPERM EPERM EPERM EPERM ENOSYS 7"]})
    assert res.passed, res.error
