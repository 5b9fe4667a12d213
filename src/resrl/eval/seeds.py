"""Aggregation over seeds (pure functions): per policy the mean and 95 % Student-t interval of every
metric over seeds, paired differences against a baseline on the same seeds, seed-list parsing.
Used by `resrl demo --seeds` and `resrl compare`.

    per_seed = {seed: {policy: {metric: value}}}
    aggregate_seeds(per_seed)            {policy: {metric: {mean, low, high, std, n}}}
    paired_differences(per_seed, "grpo") {policy: {metric: {mean, low, high, std, n, wins}}}
"""

from __future__ import annotations

from resrl.statistics import mean_interval, paired_difference

PerSeed = dict


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


def passk_band_summaries(agg: dict, panel: str) -> list[dict]:
    """Aggregated Pass@k per policy as `resrl.eval.plots.plot_passk` summaries (mean line, interval band
    when there are several seeds), one panel named `panel`."""
    out = []
    for d in agg.values():
        ks = sorted(int(m[5:]) for m in d if m.startswith("pass@"))
        m = {"pass@k": {str(k): d[f"pass@{k}"]["mean"] for k in ks}}
        if all(d[f"pass@{k}"]["n"] > 1 for k in ks):
            m["pass@k_low"] = {str(k): d[f"pass@{k}"]["low"] for k in ks}
            m["pass@k_high"] = {str(k): d[f"pass@{k}"]["high"] for k in ks}
        out.append({"benchmarks": {panel: m}})
    return out


__all__ = ["aggregate_seeds", "paired_differences", "parse_seeds", "passk_band_summaries"]
