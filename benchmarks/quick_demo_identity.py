"""`resrl demo --quick` for every demo task, and a comparison of two such sets of runs.

Issue 44's refactor (one experiment pipeline) must not move a single number: run this at the
commit before it and at the commit after it, on the same machine, then compare.

    python benchmarks/quick_demo_identity.py run OUT_DIR [--tasks math,code,...]
    python benchmarks/quick_demo_identity.py compare BEFORE_DIR AFTER_DIR [--md FILE] [--tasks math,code,...]

`run` calls `python -m resrl.cli demo --task T --quick --out OUT_DIR/T` for each task (the
installed or PYTHONPATH resrl: point PYTHONPATH at another checkout's src/ to run that one).
`compare` checks, per task: summary.json with the timings (and the fields that name where or how
fast it ran) removed, its config apart; every method's `resrl train` config as it trained
(*/train_config.json, where it wrote and where its rows file lay removed); every evaluation record
(eval/**/samples.jsonl, timing fields removed) and every training log (*/metrics.jsonl, timing
fields removed); a checkout's own path in a record (a code sandbox's traceback) is replaced by
`<checkout>`. It prints one line per task and file kind, and exits 1 on any difference.

The experiment's config in summary.json is listed, not compared: its keys are how a version writes the
experiment down (issue 53 made it a `resrl train` config plus start, eval and task sections), and
what it sets is compared where it acts: each method's training config, its training log, its
evaluation records and every number of summary.json.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

TASKS = ("math", "math-hard", "code", "code-stdin", "tools", "agents", "webshop", "smollm2-arithmetic")
# fields that say where or how fast a run went, not what it computed
VOLATILE = {"timings", "workers", "rl_seconds", "eval_seconds", "out", "model_dir", "reuse_training",
            "runtime", "train_runtime", "train_samples_per_second", "train_steps_per_second", "step_seconds",
            "total_flos", "seconds", "elapsed", "time", "model"}


# where the checkout lies, in a traceback a record keeps (a sandboxed program's error names the harness file)
CHECKOUT = re.compile(r'File "[^"]*?/src/resrl/')


def _strip(obj, keys=VOLATILE):
    """Recursively drop VOLATILE keys and every key ending in _seconds / _s; a checkout's path in a
    traceback is cut to src/resrl/ (two checkouts differ there, not in what they computed)."""
    if isinstance(obj, dict):
        return {k: _strip(v, keys) for k, v in obj.items()
                if k not in keys and not k.endswith(("_seconds", "_time", "_per_second"))}
    if isinstance(obj, list):
        return [_strip(v, keys) for v in obj]
    if isinstance(obj, str):
        return CHECKOUT.sub('File "src/resrl/', obj)
    return obj


def _config_diff(before: dict, after: dict, prefix: str = "") -> tuple[list[str], list[str]]:
    """(keys only `after` has, keys whose values differ or that only `before` has), dotted. A key added
    to a config (a new setting) is reported, not a difference: the numbers are what must not move."""
    added, changed = [], []
    for key in sorted(set(before) | set(after)):
        name = prefix + key
        if key not in before:
            added.append(name)
        elif key not in after:
            changed.append(name)
        elif isinstance(before[key], dict) and isinstance(after[key], dict):
            a, c = _config_diff(before[key], after[key], name + ".")
            added += a
            changed += c
        elif before[key] != after[key]:
            changed.append(name)
    return added, changed


def run(out: Path, tasks) -> int:
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    failed = []
    for task in tasks:
        t0 = time.time()
        with open(out / f"{task}.log", "w") as log:
            rc = subprocess.call([sys.executable, "-m", "resrl.cli", "demo", "--task", task, "--quick",
                                  "--out", str(out / task)], stdout=log, stderr=subprocess.STDOUT, env=env)
        print(f"{task}: exit {rc} in {time.time() - t0:.0f} s", flush=True)
        if rc:
            failed.append(task)
    return 1 if failed else 0


# a code sandbox's traceback names the file of the checkout that ran it (.../src/resrl/tasks/code/...):
# where the checkout lies, not what it computed
_CHECKOUT = re.compile(r"[^\s\"']*/src/resrl/")
# and the judge's own frame in a program's traceback names where the harness file lies and its line
# (issue 52 runs it from a sandbox path, `<resrl-sandbox>/code_harness.py`): not what the program did
_HARNESS_FRAME = re.compile(r'File \\?"[^"]*code_harness\.py\\?", line \d+')  # (inside a JSON string: \")


def _jsonl(path: Path) -> list:
    return [_strip(json.loads(_HARNESS_FRAME.sub("File <harness>", _CHECKOUT.sub("<checkout>/src/resrl/", line))))
            for line in path.read_text().splitlines() if line.strip()]


def _train_config(path: Path) -> dict:
    """A method's train_config.json without where it wrote (train.output_dir) and where its rows file lay
    (data.train: an earlier version handed the rows in memory, a later one writes them to OUT first)."""
    config = json.loads(path.read_text())
    config.get("train", {}).pop("output_dir", None)
    config.get("data", {}).pop("train", None)
    return config


def _dotted(config: dict, key: str):
    """config's value at a dotted key ("generation.max_logp_diff")."""
    for part in key.split("."):
        config = config[part]
    return config


def compare(before: Path, after: Path, md: Path | None, tasks=TASKS) -> int:
    rows, bad = [], 0
    for task in tasks:
        b, a = before / task, after / task
        if not (b / "summary.json").is_file() or not (a / "summary.json").is_file():
            rows.append((task, "summary.json", "missing"))
            bad += 1
            continue
        sb, sa = (_strip(json.loads((d / "summary.json").read_text())) for d in (b, a))
        added, changed = _config_diff(sb.pop("config"), sa.pop("config"))
        same = sb == sa
        rows.append((task, "summary.json", ("identical" if same else "DIFFERENT") + " (its config apart)"
                     + (f"; config keys added: {', '.join(added)}" if added else "")
                     + (f"; config keys changed or removed: {', '.join(changed)}" if changed else "")))
        bad += not same
        configs_b = sorted(p.relative_to(b) for p in b.glob("*/train_config.json"))
        if configs_b != sorted(p.relative_to(a) for p in a.glob("*/train_config.json")):
            rows.append((task, "*/train_config.json", "DIFFERENT file sets"))
            bad += 1
        else:
            diff, unset = [], set()
            for f in configs_b:
                cb, ca = _train_config(b / f), _train_config(a / f)
                added, changed = _config_diff(cb, ca)
                # a key the later version adds, left unset (None: the feature off), trains the same
                unset |= {k for k in added if _dotted(ca, k) is None}
                if changed or any(_dotted(ca, k) is not None for k in added):
                    diff.append(str(f))
            rows.append((task, "*/train_config.json", f"{len(configs_b)} files: "
                         + ("identical" if not diff else "DIFFERENT " + ", ".join(diff))
                         + (f"; keys added, unset: {', '.join(sorted(unset))}" if unset else "")))
            bad += bool(diff)
        for pattern in ("eval/**/samples.jsonl", "*/metrics.jsonl"):
            files_b = sorted(p.relative_to(b) for p in b.glob(pattern))
            files_a = sorted(p.relative_to(a) for p in a.glob(pattern))
            if files_b != files_a:
                rows.append((task, pattern, f"DIFFERENT file sets: {files_b} vs {files_a}"))
                bad += 1
                continue
            diff = [str(f) for f in files_b if _jsonl(b / f) != _jsonl(a / f)]
            lines = sum(len((b / f).read_text().splitlines()) for f in files_b)
            rows.append((task, pattern, f"{len(files_b)} files, {lines} lines: "
                         + ("identical" if not diff else "DIFFERENT " + ", ".join(diff))))
            bad += bool(diff)
    text = "| task | what | before vs after |\n|---|---|---|\n" + "".join(f"| {t} | {w} | {r} |\n" for t, w, r in rows)
    print(text)
    if md is not None:
        md.write_text(text)
    return 1 if bad else 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("out", type=Path)
    r.add_argument("--tasks", default=",".join(TASKS))
    c = sub.add_parser("compare")
    c.add_argument("before", type=Path)
    c.add_argument("after", type=Path)
    c.add_argument("--md", type=Path, default=None)
    c.add_argument("--tasks", default=",".join(TASKS))
    args = p.parse_args()
    if args.cmd == "run":
        return run(args.out, [t for t in args.tasks.split(",") if t])
    return compare(args.before, args.after, args.md, [t for t in args.tasks.split(",") if t])


if __name__ == "__main__":
    sys.exit(main())
