"""Pass@k curves (log2 k on x), one panel per benchmark, one line per run (paper Figures 2-3)."""

from __future__ import annotations

from resrl.errors import InputError

import json
import math
from pathlib import Path
from typing import Sequence


def load_summary(run_dir: str | Path) -> dict:
    """summary.json of an evaluation output directory (or the file itself)."""
    path = Path(run_dir)
    path = path / "summary.json" if path.is_dir() else path
    if not path.is_file():
        raise InputError(f"{run_dir}: no summary.json (is it the --out directory of `resrl eval`?)")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not valid JSON ({exc})") from None


def plot_passk(summaries: Sequence[dict], labels: Sequence[str], out_png: str | Path,
               title: str | None = None) -> Path:
    """Overlay the Pass@k curves of several runs; panels: every benchmark (in first-seen order)
    plus "average" when a run has more than one benchmark. A run whose metrics also hold
    "pass@k_low" / "pass@k_high" ({k: value}, e.g. an interval over seeds) gets a shaded band.
    Returns the PNG path."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display needed
    import matplotlib.pyplot as plt

    if len(summaries) != len(labels):
        raise ValueError(f"plot_passk: {len(summaries)} runs but {len(labels)} labels")
    panels: list[str] = []
    for s in summaries:
        for name in s["benchmarks"]:
            if name not in panels:
                panels.append(name)
    if any(len(s["benchmarks"]) > 1 for s in summaries):
        panels.append("average")
    cols = min(4, len(panels))
    rows = math.ceil(len(panels) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.4 * rows), squeeze=False)
    kmax = 1
    for ax, panel in zip(axes.flat, panels):
        ymax = 0.0
        for s, label in zip(summaries, labels):
            m = s["overall"] if panel == "average" else s["benchmarks"].get(panel)
            if not m:
                continue
            ks = sorted(int(k) for k in m["pass@k"])
            kmax = max(kmax, ks[-1])
            ys = [100 * m["pass@k"][str(k)] for k in ks]
            ymax = max(ymax, *ys)
            marks = [i for i, k in enumerate(ks) if k & (k - 1) == 0 or k == ks[-1]]  # powers of two, n
            line, = ax.plot(ks, ys, marker="o", markersize=4, markevery=marks, label=label)
            if "pass@k_low" in m and "pass@k_high" in m:
                low = [100 * m["pass@k_low"][str(k)] for k in ks]
                high = [100 * m["pass@k_high"][str(k)] for k in ks]
                ax.fill_between(ks, low, high, color=line.get_color(), alpha=0.15, linewidth=0)
                ymax = max(ymax, *high)
        ax.set_ylim(0, min(100.0, max(5.0, 1.1 * ymax + 1)))  # start at 0: gaps between runs read true
        ax.set_xscale("log", base=2)
        ticks = [2 ** i for i in range(int(math.log2(kmax)) + 1)]
        ax.set_xticks(ticks, [str(t) for t in ticks])
        ax.set_title(panel)
        ax.set_xlabel("k")
        ax.set_ylabel("Pass@k (%)")
        ax.grid(True, alpha=0.3)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    handles, names = axes.flat[0].get_legend_handles_labels()
    width, height, bottom = 4.2 * cols, 3.4 * rows, 0.0
    if len(labels) > 1 or labels[0]:
        # as many columns as the longest label lets fit (a label is ~0.075 in a character plus its
        # marker), the figure widened for one that does not fit alone and heightened for the rows:
        # long labels (method/key=value/...) under a single panel were cut off at the edges
        entry = 0.7 + 0.075 * max(len(n) for n in names)
        width = max(width, entry + 0.4)
        ncol = max(1, min(len(names), 6, int(width // entry)))
        legend_in = 0.24 * math.ceil(len(names) / ncol) + 0.1
        height += legend_in
        bottom = legend_in / height
        fig.set_size_inches(width, height)
        fig.legend(handles, names, loc="lower center", ncol=ncol, frameon=False)
    if title:
        fig.suptitle(title)
    fig.tight_layout(rect=(0, bottom, 1, 1))
    out_png = Path(out_png)
    out_png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out_png, dpi=120)
    plt.close(fig)
    return out_png


def plot_runs(run_dirs: Sequence[str | Path], out_png: str | Path, labels: Sequence[str] | None = None,
              title: str | None = None) -> Path:
    """`resrl plot-passk`: overlay the runs in several evaluation directories."""
    if not run_dirs:
        raise InputError("plot-passk: give at least one run directory")
    if labels is None:
        labels = [Path(d).name or str(d) for d in run_dirs]
    if len(labels) != len(run_dirs):
        raise InputError(f"plot-passk: {len(run_dirs)} run directories but {len(labels)} labels")
    return plot_passk([load_summary(d) for d in run_dirs], labels, out_png, title=title)


__all__ = ["load_summary", "plot_passk", "plot_runs"]
