"""Throughput of the sandboxed code reward against a bare `subprocess.run` of the same programs.

    python benchmarks/bench_code_reward.py [--items 40] [--workers 2] [--rounds 3]

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

from resrl.rewards.code import CodeExecutor, normalize_output  # noqa: E402
from resrl.rewards.sandbox import detect_isolation  # noqa: E402

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
}


def bare_item(path: str, tests: dict, timeout_s: float) -> bool:
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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--items", type=int, default=40)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--kinds", default=",".join(KINDS), help="comma-separated subset of: " + ", ".join(KINDS))
    args = ap.parse_args(argv)
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
