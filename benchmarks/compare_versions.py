"""The same benchmark on two versions of the code, in one run: is a change as fast as what it replaces?

    python benchmarks/compare_versions.py --before /path/to/old-checkout --after . --rounds 3 \
        --json out.json -- benchmarks/bench_smollm2_step.py --model /tmp/smollm2-135m \
        --micro-batch 8 --trainable-layers 8 --steps 2 --repeats 1

Each side runs its own checkout's copy of the benchmark script with its own `src/` first on
PYTHONPATH (both in this interpreter's environment: the two versions must share their
dependencies), one torch thread, and writes the script's `--json` (a `summary` of
{variant: {"median_s": {column: seconds}}}, as benchmarks/bench_smollm2_step.py and bench_step.py
write it). In every round the two sides run at the same time, each pinned to its own core, and the
cores are swapped from one round to the next, so both meet the same machine (memory bandwidth,
another job's load) and neither always has the better core. Per variant and column: the median over
rounds of each side's median, and after / before (< 1: the change is faster). The ratio is the
result; the seconds are this machine's, at that moment.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def run_side(tree: Path, script_args: list[str], core: int | None, json_path: Path, log_path: Path) -> subprocess.Popen:
    """Start the benchmark of checkout `tree` (its script, its src/), pinned to `core` where possible."""
    env = {**os.environ, "PYTHONPATH": str(tree / "src"), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, str(tree / script_args[0]), *script_args[1:], "--json", str(json_path)]
    if core is not None and hasattr(os, "sched_setaffinity"):
        def pin() -> None:
            os.sched_setaffinity(0, {core})
    else:
        pin = None
    return subprocess.Popen(cmd, cwd=tree, env=env, stdout=log_path.open("w"), stderr=subprocess.STDOUT,
                            preexec_fn=pin)


def compare(before: list[dict], after: list[dict]) -> dict:
    """{variant: {column: {"before_s", "after_s", "ratio"}}} from the rounds' summaries of each side:
    the median over rounds of each side's median, for the variants and columns both sides report."""
    out = {}
    for variant in before[0]:
        if not all(variant in s for s in before + after):
            continue
        cols = {}
        for col in before[0][variant]["median_s"]:
            b = statistics.median(s[variant]["median_s"][col] for s in before)
            a = statistics.median(s[variant]["median_s"][col] for s in after)
            cols[col] = {"before_s": b, "after_s": a, "ratio": a / b if b else None}
        out[variant] = cols
    return out


def table(result: dict, column: str = "step") -> str:
    lines = [f"| variant | before ({column}, s) | after ({column}, s) | after / before |", "|---|---|---|---|"]
    for variant, cols in result.items():
        c = cols[column]
        ratio = f"{c['ratio']:.3f}" if c["ratio"] is not None else "—"
        lines.append(f"| {variant} | {c['before_s']:.2f} | {c['after_s']:.2f} | {ratio} |")
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--before", type=Path, required=True, help="checkout of the code before the change")
    p.add_argument("--after", type=Path, required=True, help="checkout of the code after it")
    p.add_argument("--rounds", type=int, default=3, help="rounds of the two sides side by side (cores swapped)")
    p.add_argument("--json", type=Path, default=None, help="write every round's summaries and the comparison here")
    p.add_argument("script", nargs=argparse.REMAINDER, help="-- SCRIPT [ARGS]: the benchmark, relative to a checkout")
    args = p.parse_args()
    script = args.script[1:] if args.script[:1] == ["--"] else args.script
    if not script:
        p.error("name the benchmark after --")
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    cores = sorted(os.sched_getaffinity(0))[:2] if hasattr(os, "sched_getaffinity") else []
    rounds: dict[str, list[dict]] = {"before": [], "after": []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            t0 = time.time()
            procs = {}
            for i, side in enumerate(("before", "after")):
                core = cores[(i + r) % len(cores)] if len(cores) >= 2 else None
                procs[side] = (run_side(trees[side], script, core, Path(tmp) / f"{side}-{r}.json",
                                        Path(tmp) / f"{side}-{r}.log"), core)
            for side, (proc, core) in procs.items():
                if proc.wait() != 0:
                    sys.stderr.write((Path(tmp) / f"{side}-{r}.log").read_text()[-3000:])
                    raise SystemExit(f"compare_versions: the {side} side failed in round {r}")
                rounds[side].append(json.loads((Path(tmp) / f"{side}-{r}.json").read_text())["summary"])
            print(f"round {r + 1}/{args.rounds}: {time.time() - t0:.0f} s "
                  f"(before on core {procs['before'][1]}, after on core {procs['after'][1]})", flush=True)
    result = compare(rounds["before"], rounds["after"])
    text = table(result)
    print(text)
    if args.json:
        args.json.write_text(json.dumps({"command": sys.argv, "trees": {k: str(v) for k, v in trees.items()},
                                         "rounds": rounds, "comparison": result, "table": text}, indent=1))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
