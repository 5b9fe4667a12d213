"""Multi-seed demo: one demo process per seed (in parallel, one torch thread each, resumable), then
per policy the mean and 95 % interval of every metric over seeds, and paired differences against
a baseline (GRPO) on the same seeds.

The unit of replication is the seed: a seed fixes the tiny model's initialisation, the warm start,
the held-out split, the RL prompts and the sampling. Every policy of one seed is evaluated on that
seed's held-out split, so a per-seed difference (algorithm − GRPO) compares like with like; the
interval is Student's t over seeds (`resrl.statistics`), which is honest about how few seeds there
are (with 3 seeds, t = 4.30).

    aggregate_seeds(per_seed)            {policy: {metric: {mean, low, high, std, n}}}
    paired_differences(per_seed, "grpo") {policy: {metric: {mean, low, high, std, n, wins}}}
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Sequence

from resrl.statistics import mean_interval, paired_difference

# per_seed: {seed: {policy: {metric: float}}}
PerSeed = dict


def metrics_of(result: dict) -> dict[str, float]:
    """Flat metrics of one policy's entry in a demo summary.json: greedy, Avg@n, Pass@k."""
    out = {"greedy": float(result["greedy"]), "avg": float(result["avg"])}
    for k, v in result.get("pass_at", {}).items():
        out[f"pass@{k}"] = float(v)
    return out


def per_seed_metrics(summaries: dict[int, dict]) -> PerSeed:
    """{seed: summary.json} -> {seed: {policy: {metric: value}}}."""
    return {seed: {policy: metrics_of(r) for policy, r in s["results"].items()} for seed, s in summaries.items()}


def aggregate_seeds(per_seed: PerSeed) -> dict[str, dict[str, dict]]:
    """Mean and 95 % t-interval over seeds for every (policy, metric) present in every seed."""
    seeds = sorted(per_seed)
    if not seeds:
        raise ValueError("aggregate_seeds: no seeds")
    policies = [p for p in per_seed[seeds[0]] if all(p in per_seed[s] for s in seeds)]
    out = {}
    for p in policies:
        metrics = [m for m in per_seed[seeds[0]][p] if all(m in per_seed[s][p] for s in seeds)]
        out[p] = {m: mean_interval([per_seed[s][p][m] for s in seeds]) for m in metrics}
    return out


def paired_differences(per_seed: PerSeed, baseline: str = "grpo") -> dict[str, dict[str, dict]]:
    """For every policy other than `baseline`: mean and 95 % t-interval of (policy − baseline) over
    seeds, per metric, plus the number of seeds where the policy is better ("wins")."""
    seeds = sorted(per_seed)
    if not seeds or not all(baseline in per_seed[s] for s in seeds):
        return {}
    out = {}
    for p in per_seed[seeds[0]]:
        if p == baseline or not all(p in per_seed[s] for s in seeds):
            continue
        metrics = [m for m in per_seed[seeds[0]][p] if all(m in per_seed[s][p] and m in per_seed[s][baseline]
                                                            for s in seeds)]
        out[p] = {m: paired_difference([per_seed[s][p][m] for s in seeds], [per_seed[s][baseline][m] for s in seeds])
                  for m in metrics}
    return out


def parse_seeds(text: str) -> list[int]:
    """"0,1,2" or "0-4" -> [0, 1, 2] / [0, 1, 2, 3, 4]; ValueError otherwise."""
    seeds: list[int] = []
    for part in str(text).split(","):
        part = part.strip()
        if not part:
            continue
        try:
            if "-" in part[1:]:
                a, b = part.split("-", 1)
                seeds.extend(range(int(a), int(b) + 1))
            else:
                seeds.append(int(part))
        except ValueError:
            raise ValueError(f"--seeds: cannot read {part!r} (use e.g. 0,1,2 or 0-4)") from None
    if not seeds or len(set(seeds)) != len(seeds) or min(seeds) < 0:
        raise ValueError(f"--seeds: need distinct seeds >= 0, got {text!r}")
    return seeds


def seed_dir(out: str | Path, seed: int) -> Path:
    return Path(out) / f"seed-{seed}"


def run_seeds(out: str | Path, seeds: Sequence[int], demo_args: Sequence[str], workers: int,
              poll_s: float = 1.0) -> dict[int, dict]:
    """Run `resrl demo --seed S --out OUT/seed-S <demo_args>` for every seed whose summary.json is
    missing, at most `workers` at a time (each its own process with one torch thread), and return
    {seed: summary}. A finished seed is never rerun (resume by running the same command again)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    todo = [s for s in seeds if not (seed_dir(out, s) / "summary.json").is_file()]
    done_before = [s for s in seeds if s not in todo]
    if done_before:
        print(f"seeds already done (kept): {done_before}", flush=True)
    running: dict[int, tuple[subprocess.Popen, object]] = {}
    failed: dict[int, int] = {}
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    t0 = time.time()
    while todo or running:
        while todo and len(running) < max(1, workers):
            s = todo.pop(0)
            d = seed_dir(out, s)
            d.mkdir(parents=True, exist_ok=True)
            log = open(d / "console.log", "w")
            cmd = [sys.executable, "-m", "resrl.cli", "demo", "--seed", str(s), "--out", str(d), "--threads", "1",
                   *demo_args]
            running[s] = (subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env), log)
            print(f"seed {s}: started (log {d / 'console.log'})", flush=True)
        time.sleep(poll_s)
        for s in list(running):
            proc, log = running[s]
            if proc.poll() is not None:
                log.close()
                del running[s]
                if proc.returncode == 0 and (seed_dir(out, s) / "summary.json").is_file():
                    print(f"seed {s}: done ({time.time() - t0:.0f} s since start)", flush=True)
                else:
                    failed[s] = proc.returncode
                    print(f"seed {s}: FAILED (exit {proc.returncode}); see {seed_dir(out, s) / 'console.log'}",
                          flush=True)
    if failed:
        raise RuntimeError(f"demo seeds failed: {failed}; rerun the same command to retry them")
    return {s: json.loads((seed_dir(out, s) / "summary.json").read_text()) for s in seeds}


def write_multiseed(out: str | Path, summaries: dict[int, dict], baseline: str = "grpo") -> list[Path]:
    """multiseed.json, multiseed.md and passk_seeds.png (Pass@k mean and interval per policy)."""
    out = Path(out)
    per_seed = per_seed_metrics(summaries)
    agg = aggregate_seeds(per_seed)
    diffs = paired_differences(per_seed, baseline)
    seeds = sorted(summaries)
    (out / "multiseed.json").write_text(json.dumps(
        {"seeds": seeds, "per_seed": {str(s): v for s, v in per_seed.items()}, "aggregate": agg,
         "paired_vs_" + baseline: diffs}, indent=1, default=lambda x: None))

    def cell(d):
        if d["n"] < 2:
            return f"{d['mean']:.3f}"
        return f"{d['mean']:.3f} [{d['low']:.3f}, {d['high']:.3f}]"

    first = next(iter(agg.values()))
    metrics = ["greedy", "avg"] + sorted((m for m in first if m.startswith("pass@")), key=lambda m: int(m[5:]))
    names = {"greedy": "greedy", "avg": "Avg@n"}
    lines = [f"# Demo over {len(seeds)} seeds ({', '.join(map(str, seeds))})", "",
             "Mean over seeds and 95 % Student-t interval over seeds (each seed: its own model initialisation, "
             "warm start, held-out split and sampling; every policy of a seed is evaluated on that seed's split).", "",
             "| policy | " + " | ".join(names.get(m, m.replace("pass@", "Pass@")) for m in metrics) + " |",
             "|---|" + "---|" * len(metrics)]
    for p, d in agg.items():
        lines.append(f"| {p} | " + " | ".join(cell(d[m]) for m in metrics if m in d) + " |")
    if diffs:
        lines += ["", f"Paired difference against {baseline} (same seed), mean [95 % interval], and the number of "
                  f"seeds where the policy is higher:", "",
                  "| policy − " + baseline + " | " + " | ".join(names.get(m, m.replace("pass@", "Pass@")) for m in metrics)
                  + " |", "|---|" + "---|" * len(metrics)]
        for p, d in diffs.items():
            lines.append(f"| {p} | " + " | ".join(
                f"{cell(d[m])} ({d[m]['wins']}/{d[m]['n']})" for m in metrics if m in d) + " |")
    (out / "multiseed.md").write_text("\n".join(lines) + "\n")

    from resrl.eval.plots import plot_passk  # the evaluator's Pass@k plotter, with bands

    summaries = []
    for p, d in agg.items():
        ks = sorted(int(m[5:]) for m in d if m.startswith("pass@"))
        m = {"pass@k": {str(k): d[f"pass@{k}"]["mean"] for k in ks}}
        if len(seeds) > 1:
            m["pass@k_low"] = {str(k): d[f"pass@{k}"]["low"] for k in ks}
            m["pass@k_high"] = {str(k): d[f"pass@{k}"]["high"] for k in ks}
        summaries.append({"benchmarks": {"held-out split": m}})
    plot_passk(summaries, list(agg), out / "passk_seeds.png",
               title=f"Pass@k, mean and 95 % interval over {len(seeds)} seeds")
    return [out / "multiseed.md", out / "multiseed.json", out / "passk_seeds.png"]


__all__ = ["metrics_of", "per_seed_metrics", "aggregate_seeds", "paired_differences", "parse_seeds", "seed_dir",
           "run_seeds", "write_multiseed"]
