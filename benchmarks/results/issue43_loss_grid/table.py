"""docs/results.md's two tables of the loss grid (issue 43), from the files beside this script.

    python benchmarks/results/issue43_loss_grid/table.py

What `resrl demo --grid ... --seeds 0,1,2` wrote (the command: docs/results.md, "Policy losses with
GRPO's and ResRL's advantages"):
    dev.json        every (method, learning rate) scored on the dev split; the chosen rate per method
    multiseed.json  the held-out values of every policy on every seed

Printed: the dev table (each rate's dev Avg@8, the chosen one in bold) and the held-out table: per
(algorithm, policy loss) the chosen rate, greedy, Avg@16 and Pass@16 (mean [95 % Student-t interval]
over the seeds) and the paired differences (same seed) against plain GRPO and, for the ResRL rows,
against plain ResRL — computed with resrl.statistics, the functions the demo's multiseed.md uses,
and checked against the differences with GRPO the demo wrote into multiseed.json.
tests/test_results_tables.py checks that docs/results.md holds exactly these tables.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from resrl.statistics import mean_interval, paired_difference

HERE = Path(__file__).resolve().parent
NAMES = {"grpo": "GRPO", "resrl": "ResRL"}


def parse(label: str) -> tuple[str, str, str | None]:
    """'resrl/train.update_prompts=4/loss.policy_loss=sapo/train.learning_rate=5e-5' -> (resrl, sapo, 5e-5)."""
    name, *pairs = label.split("/")
    keys = dict(p.split("=", 1) for p in pairs)
    return name, keys.get("loss.policy_loss", "clipped-surrogate"), keys.get("train.learning_rate")


def num(x: float, sign: bool = False) -> str:
    """3 decimals (4 where 3 would print a signed zero), a true minus sign."""
    text = f"{x:+.3f}" if sign else f"{x:.3f}"
    if x != 0 and float(text) == 0:
        text = f"{x:+.4f}"
    return text.replace("-", "−")


def cell(d: dict) -> str:
    return f"{num(d['mean'])} [{num(d['low'])}, {num(d['high'])}]"


def diff(d: dict) -> str:
    return f"{num(d['mean'], True)} [{num(d['low'], True)}, {num(d['high'], True)}] ({d['wins']}/{d['n']})"


def dev_table() -> list[str]:
    dev = json.loads((HERE / "dev.json").read_text())
    metric = dev["metric"]
    rates = [p["settings"]["train.learning_rate"] for p in next(iter(dev["methods"].values()))["points"]]
    lines = ["| algorithm | policy loss | " + " | ".join(rates) + " |", "|---|---|" + "---|" * len(rates)]
    for method, d in dev["methods"].items():
        algo, loss, _ = parse(method)
        chosen = d["chosen"]["train.learning_rate"]
        scores = {p["settings"]["train.learning_rate"]: p[metric] for p in d["points"]}
        lines.append(f"| {NAMES[algo]} | {loss} | " + " | ".join(
            f"**{num(scores[r])}**" if r == chosen else num(scores[r]) for r in rates) + " |")
    return lines


def held_out_table() -> list[str]:
    ms = json.loads((HERE / "multiseed.json").read_text())
    seeds = [str(s) for s in ms["seeds"]]
    policies = list(ms["aggregate"])

    def values(policy: str, metric: str) -> list[float]:
        return [ms["per_seed"][s][policy][metric] for s in seeds]

    top = max((m for m in ms["per_seed"][seeds[0]]["warm start"] if m.startswith("pass@")), key=lambda m: int(m[5:]))
    k = top[5:]
    grpo = next(p for p in policies if p != "warm start" and parse(p)[:2] == ("grpo", "clipped-surrogate"))
    resrl = next(p for p in policies if p != "warm start" and parse(p)[:2] == ("resrl", "clipped-surrogate"))
    demo_paired = ms[f"paired_vs_{grpo}"]
    lines = [f"| algorithm | policy loss | lr | greedy | Avg@{k} | Pass@{k} | Δ greedy vs GRPO | Δ Avg@{k} vs GRPO | "
             f"Δ Avg@{k} vs ResRL |", "|---|---|---|---|---|---|---|---|---|"]
    for p in policies:
        if p == "warm start":
            row = ["warm start", "", ""]
        else:
            algo, loss, lr = parse(p)
            row = [NAMES[algo], loss, lr]
        row += [cell(mean_interval(values(p, m))) for m in ("greedy", "avg", top)]
        if p == grpo:
            row += ["(baseline)", "(baseline)"]
        else:
            dg, da = (paired_difference(values(p, m), values(grpo, m)) for m in ("greedy", "avg"))
            for mine, metric in ((dg, "greedy"), (da, "avg")):  # the demo's own numbers (multiseed.md)
                theirs = demo_paired[p][metric]
                assert all(math.isclose(mine[x], theirs[x], abs_tol=1e-12) for x in ("mean", "low", "high")), (p, metric)
            row += [diff(dg), diff(da)]
        if p == resrl:
            row.append("(baseline)")
        elif p != "warm start" and parse(p)[0] == "resrl":
            row.append(diff(paired_difference(values(p, "avg"), values(resrl, "avg"))))
        else:
            row.append("")
        lines.append("| " + " | ".join(row) + " |")
    return lines


def main() -> None:
    print("\n".join(dev_table()))
    print()
    print("\n".join(held_out_table()))


if __name__ == "__main__":
    main()
