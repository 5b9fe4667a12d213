"""Throughput of the sandboxed code reward against a bare `subprocess.run` of the same programs,
and on HumanEval+ against a bare in-process loop.

    python benchmarks/bench_code_reward.py [--items 40] [--workers 2] [--rounds 3]
    python benchmarks/bench_code_reward.py --humanevalplus [--workers 2]

--humanevalplus: the 164 canonical solutions on HumanEval+'s base inputs (1,570 calls) and plus
inputs (122,683 calls), once through `CodeExecutor` (one sandboxed process per problem, all its
inputs batched into one forked child with a deadline per input, `--workers` problems at a time,
return values compared in the parent) and once as a bare loop in this process (exec the solution,
call it on a fresh copy of each input, the same comparison, no isolation, one core). Items = calls.
The expected outputs come from the cache (`resrl.tasks.code.humanevalplus`; computed first if missing).

For each program kind, the same N items (each program made unique with a comment, so the cache
never answers) run twice on `--workers` threads: once through `CodeExecutor` (fresh namespaces,
chroot, uid drop, rlimits, one fork per test case) and once as a bare `subprocess.run([python,
file], input=...)` per test case with the output compared in the parent — no isolation at all.
The rounds interleave the two, and the table shows the median round. "ms/item" is wall time ×
workers / items: the cost of one item on one worker.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

from resrl.tasks.code.reward import CodeExecutor, normalize_output  # noqa: E402
from resrl.tasks.code.sandbox.runner import detect_isolation  # noqa: E402

KINDS = {
    # name: (program, tests)
    "trivial (1 test)": ("print(int(input()) * 2)\n", {"inputs": ["21\n"], "outputs": ["42"]}),
    "trivial (10 tests)": ("print(int(input()) * 2)\n",
                           {"inputs": [f"{i}\n" for i in range(10)], "outputs": [str(2 * i) for i in range(10)]}),
    "CPU-heavy (1 test; ~0.2 s)": ("n = int(input())\nprint(sum(i * i % 7 for i in range(n)))\n",
                                   {"inputs": ["1000000\n"], "outputs": [str(sum(i * i % 7 for i in range(1000000)))]}),
    "imports (1 test)": ("import collections, heapq, itertools, fractions, decimal, json\n"
                         "print(json.dumps(sorted(collections.Counter(input()).items())))\n",
                         {"inputs": ["abca\n"], "outputs": ['[["a", 2], ["b", 1], ["c", 1]]']}),
    # HumanEval's shape: the judge runs check(candidate), the program answers its calls in another process;
    # bare = one `python file` of program + check program + check(entry point)
    "check program (5 asserts)": ("def add(a, b):\n    return a + b\n",
                                  {"entry_point": "add", "test": "def check(candidate):\n" + "".join(
                                      f"    assert candidate({i}, {i}) == {2 * i}\n" for i in range(5))}),
}


def bare_item(path: str, tests: dict, timeout_s: float) -> bool:
    if "test" in tests:  # a check program: appended to the program's file (run_bare); passes on exit 0
        try:
            return subprocess.run([sys.executable, path], capture_output=True, timeout=timeout_s).returncode == 0
        except subprocess.TimeoutExpired:
            return False
    ok = True
    for inp, out in zip(tests["inputs"], tests["outputs"]):
        try:
            proc = subprocess.run([sys.executable, path], input=inp.encode(), capture_output=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return False
        ok = ok and proc.returncode == 0 and normalize_output(proc.stdout.decode()) == normalize_output(out)
    return ok


def run_bare(programs: list[str], tests: dict, workers: int, tmp: str) -> tuple[float, int]:
    paths = []
    for i, code in enumerate(programs):
        path = os.path.join(tmp, f"p{i}.py")
        with open(path, "w") as f:
            f.write(code)
            if "test" in tests:
                f.write(f"\n{tests['test']}\ncheck({tests['entry_point']})\n")
        paths.append(path)
    start = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        passed = sum(pool.map(lambda p: bare_item(p, tests, 10.0), paths))
    return time.perf_counter() - start, passed


def run_sandbox(programs: list[str], tests: dict, workers: int) -> tuple[float, int]:
    with CodeExecutor(num_workers=workers, timeout_s=10.0) as ex:
        start = time.perf_counter()
        results = ex.run_many([(code, tests) for code in programs])
        seconds = time.perf_counter() - start
    return seconds, sum(r.passed for r in results)


def humanevalplus_rows(workers: int):
    from resrl.tasks.code.humanevalplus import expected_outputs, load_rows, tests_for

    rows = load_rows()
    outs = expected_outputs(rows, num_workers=workers)
    parts = {}
    for part in ("base", "plus"):
        items = []
        for r in rows:
            t = tests_for(r, outs[r["task_id"]], plus=False)
            if part == "plus":
                t = {**t, "inputs": r["plus_input"], "outputs": outs[r["task_id"]]["plus"]}
            items.append((r, t))
        parts[part] = items
    return parts


def bare_humanevalplus(items) -> tuple[float, int, int]:
    """(seconds, calls, calls that matched): exec each canonical solution here, call it on a copy of
    every input, compare as the sandboxed path does."""
    import marshal

    from resrl.tasks.code.reward import expected_values, fn_output_matches, parse_tests

    parsed = [(r, parse_tests(t)) for r, t in items]
    for _, t in parsed:
        expected_values(t)  # decoded before the clock starts, as the sandboxed path does at parse time
    start = time.perf_counter()
    calls = matched = 0
    for r, t in parsed:
        scope: dict = {}
        exec(r["prompt"] + r["canonical_solution"], scope)
        fn = scope[r["entry_point"]]
        want = t["_expected"]
        for i, args in enumerate(t["inputs"]):
            got = fn(*marshal.loads(marshal.dumps(args)))
            matched += fn_output_matches(got, want[i], t["atol"], t.get("oracle"), args)
            calls += 1
    return time.perf_counter() - start, calls, matched


def sandbox_humanevalplus(items, workers: int) -> tuple[float, int, int]:
    from resrl.tasks.code.reward import parse_tests

    parsed = [(r["canonical_solution"], parse_tests(t)) for r, t in items]
    with CodeExecutor(num_workers=workers, timeout_s=30.0, stop_on_failure=False) as ex:
        start = time.perf_counter()
        results = ex.run_many(parsed)
        seconds = time.perf_counter() - start
    calls = sum(r.num_tests for r in results)
    failed = [(r0["task_id"], res.error) for (r0, _), res in zip(items, results) if not res.passed]
    assert not failed, failed[:3]
    return seconds, calls, sum(round(r.fraction * r.num_tests) for r in results)


def main_humanevalplus(workers: int) -> int:
    import platform

    iso = detect_isolation()
    print(f"HumanEval+ canonical solutions; isolation: namespaces {iso.namespaces or 'none'}, uid drop {iso.drop_uid}; "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; sandbox on {workers} workers; "
          f"python {platform.python_version()}")
    parts = humanevalplus_rows(workers)
    print("\n| inputs | calls | bare in-process items/s | sandbox items/s | sandbox / bare | bare s | sandbox s |")
    print("|---|---|---|---|---|---|---|")
    for part, items in parts.items():
        bs, bcalls, bok = bare_humanevalplus(items)
        xs, xcalls, xok = sandbox_humanevalplus(items, workers)
        assert bcalls == xcalls and bok == xok == bcalls, (part, bcalls, bok, xcalls, xok)
        print(f"| {part} | {bcalls} | {bcalls / bs:.0f} | {xcalls / xs:.0f} | {bs / xs:.2f}x | {bs:.1f} | {xs:.1f} |",
              flush=True)
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--items", type=int, default=40)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--kinds", default=",".join(KINDS), help="comma-separated subset of: " + ", ".join(KINDS))
    ap.add_argument("--humanevalplus", action="store_true", help="HumanEval+ base and plus instead (see above)")
    args = ap.parse_args(argv)
    if args.humanevalplus:
        return main_humanevalplus(args.workers)
    iso = detect_isolation()
    print(f"isolation: namespaces {iso.namespaces or 'none'}, uid drop {iso.drop_uid}; {os.cpu_count()} CPUs; "
          f"{args.items} items x {args.rounds} rounds on {args.workers} workers; python {sys.version.split()[0]}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for kind in [k.strip() for k in args.kinds.split(",") if k.strip()]:
            code, tests = KINDS[kind]
            bare_s, box_s = [], []
            for r in range(args.rounds):
                programs = [f"{code}# item {r}-{i}\n" for i in range(args.items)]  # unique: no cache hits
                s, passed = run_bare(programs, tests, args.workers, tmp)
                assert passed == args.items, f"bare run of {kind}: {passed}/{args.items} passed"
                bare_s.append(s)
                s, passed = run_sandbox(programs, tests, args.workers)
                assert passed == args.items, f"sandboxed run of {kind}: {passed}/{args.items} passed"
                box_s.append(s)
            b, x = statistics.median(bare_s), statistics.median(box_s)
            per = lambda s: s * args.workers / args.items * 1e3  # noqa: E731
            rows.append((kind, args.items / b, args.items / x, per(b), per(x), per(x) - per(b), x / b))
    print()
    print("| program | bare items/s | sandbox items/s | bare ms/item | sandbox ms/item | overhead ms/item | sandbox / bare |")
    print("|---|---|---|---|---|---|---|")
    for kind, bi, xi, bm, xm, over, ratio in rows:
        print(f"| {kind} | {bi:.1f} | {xi:.1f} | {bm:.1f} | {xm:.1f} | {over:+.1f} | {ratio:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
