"""Each method's settings chosen on a dev split: a grid of values (`--grid KEY=V1,V2,...`), the
choice by one dev metric (`choose_on_dev`), and its report (dev.md, dev.json, dev_grid.png).
`resrl demo --grid` and `resrl compare --grid` both choose with these; the held-out split never
takes part in the choice.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

from resrl.errors import InputError


def parse_grid(items: list[str]) -> list[dict[str, str]]:
    """["k1=a,b", "k2=x,y"] -> every point of the product, [{k1: a, k2: x}, ...] (values as written)."""
    keys, values = [], []
    for item in items:
        key, eq, raw = item.partition("=")
        vals = [v.strip() for v in raw.split(",") if v.strip()]
        if not eq or not key.strip() or not vals:
            raise InputError(f"--grid {item!r}: expected KEY=V1,V2,... (e.g. train.learning_rate=1e-5,3e-5)")
        if key.strip() in keys:
            raise InputError(f"--grid: {key.strip()!r} given twice")
        keys.append(key.strip())
        values.append(vals)
    return [dict(zip(keys, point)) for point in itertools.product(*values)]


def choose_on_dev(dev_scores: dict[str, list[tuple[dict, float]]]) -> dict[str, dict]:
    """{method: [(grid point, dev score), ...]} -> {method: the point with the highest dev score}
    (the first such point on a tie: the grid's order)."""
    chosen = {}
    for method, scored in dev_scores.items():
        best = max(range(len(scored)), key=lambda i: (scored[i][1], -i))
        chosen[method] = scored[best][0]
    return chosen


def check_disjoint(dev_specs: list[str], test_specs: list[str], data_dir: str | None = None) -> None:
    """InputError when the dev and held-out data share a prompt (by its text)."""
    from resrl.tasks.data import load_benchmarks

    def prompts(specs):
        out = {}
        for name, problems in load_benchmarks(specs, data_dir=data_dir).items():
            for p in problems:
                text = p.prompt if isinstance(p.prompt, str) else json.dumps(p.prompt, sort_keys=True)
                out.setdefault(" ".join(text.split()), f"{name}:{p.id}")
        return out

    dev, test = prompts(dev_specs), prompts(test_specs)
    shared = sorted(set(dev) & set(test))
    if shared:
        raise InputError(f"--dev-data and --data share {len(shared)} prompt(s) (e.g. {dev[shared[0]]} = "
                         f"{test[shared[0]]}): the dev split must be disjoint from the held-out one")


def write_dev_report(out: Path, dev_scores: dict, chosen: dict, metric: str, dev_data: list[str],
                     seed: int) -> list[Path]:
    """dev.json, dev.md (every grid point's dev score per method, the chosen one marked) and
    dev_grid.png (the dev curve of each method)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "dev.json").write_text(json.dumps({
        "metric": metric, "dev_data": dev_data, "seed": seed,
        "methods": {m: {"chosen": chosen[m], "points": [{"settings": pt, metric: v} for pt, v in scored]}
                    for m, scored in dev_scores.items()}}, indent=1))
    keys = list(next(iter(chosen.values())))
    lines = [f"# Settings chosen on the dev split ({' '.join(dev_data)}, seed {seed}, by {metric})", "",
             "| method | " + " | ".join(keys) + f" | dev {metric} |", "|---|" + "---|" * (len(keys) + 1)]
    for m, scored in dev_scores.items():
        for pt, v in scored:
            mark = " **(chosen)**" if pt == chosen[m] else ""
            lines.append(f"| {m} | " + " | ".join(pt[k] for k in keys) + f" | {v:.3f}{mark} |")
    (out / "dev.md").write_text("\n".join(lines) + "\n")
    png = plot_dev_grid(dev_scores, chosen, metric, out / "dev_grid.png")
    return [out / "dev.md", out / "dev.json", png]


def plot_dev_grid(dev_scores: dict, chosen: dict, metric: str, path: Path) -> Path:
    """Dev score against the grid point per method (a log axis for one positive numeric key spanning
    10x or more, as learning rates do); the chosen point circled."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    first = next(iter(dev_scores.values()))
    keys = list(first[0][0])
    try:
        xs = [float(pt[keys[0]]) for pt, _ in first] if len(keys) == 1 else None
    except ValueError:
        xs = None
    fig, ax = plt.subplots(figsize=(6, 4))
    for m, scored in dev_scores.items():
        x = [float(pt[keys[0]]) for pt, _ in scored] if xs is not None else list(range(len(scored)))
        ax.plot(x, [v for _, v in scored], marker="o", label=m)
        i = next(i for i, (pt, _) in enumerate(scored) if pt == chosen[m])
        ax.scatter([x[i]], [scored[i][1]], s=160, facecolors="none", edgecolors="black")
    if xs is not None:
        if min(xs) > 0 and max(xs) / min(xs) > 9.9:  # (3e-4 / 3e-5 is 9.999... in floating point)
            ax.set_xscale("log")
        ax.set_xlabel(keys[0])
    else:
        ax.set_xticks(range(len(first)), ["\n".join(f"{k}={v}" for k, v in pt.items()) for pt, _ in first], fontsize=7)
    ax.set_ylabel(f"dev {metric}")
    ax.set_title("each method's settings chosen on the dev split (circled)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


__all__ = ["parse_grid", "choose_on_dev", "check_disjoint", "write_dev_report", "plot_dev_grid"]
