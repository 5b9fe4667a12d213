"""The experiments' training plots (their Pass@k figures are drawn by the evaluator's `resrl.eval.plots.plot_passk`)."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

# logged metric -> names it may carry in a training run's per-step metrics (first found is used)
CURVES = {
    "reward (accuracy)": ("reward_mean", "reward", "accuracy"),
    "response length (tokens)": ("response_length", "completions/mean_length"),
    "entropy (nats / token)": ("entropy",),
    "gradient norm (before clipping)": ("grad_norm",),
    "ResRL: mean ω of negative tokens": ("resrl/omega_mean", "omega_mean"),
    "ResRL: fraction down-weighted": ("resrl/frac_downweighted", "frac_downweighted"),
    "ResRL: effective rank k": ("resrl/effective_rank", "effective_rank"),
}


def _series(metrics: Sequence[dict], names: Sequence[str]):
    for name in names:
        pts = [(m["step"], m[name]) for m in metrics if name in m and m[name] is not None]
        if pts:
            steps, vals = zip(*pts)
            return np.asarray(steps, dtype=float), np.asarray(vals, dtype=float)
    return None


def _smooth(y: np.ndarray, window: int) -> np.ndarray:
    if window <= 1 or len(y) < window:
        return y
    kernel = np.ones(window) / window
    head = np.array([y[: i + 1].mean() for i in range(window - 1)])
    return np.concatenate([head, np.convolve(y, kernel, mode="valid")])


def plot_training_curves(runs: dict[str, Sequence[dict]], path: str | Path, smooth: int = 9) -> list[str]:
    """runs: algorithm -> per-step metrics (each with "step"). Panels whose metric no run logged are
    left out. Raw values faint, a moving average (window `smooth`) on top. Returns panel titles."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [(title, names) for title, names in CURVES.items()
              if any(_series(m, names) is not None for m in runs.values())]
    if not panels:
        raise ValueError("plot_training_curves: no known metric in any run")
    cols = 4 if len(panels) > 6 else 3
    rows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 3.2 * rows), squeeze=False)
    colors = {name: f"C{i}" for i, name in enumerate(runs)}
    lines = {}  # one legend for the figure: a legend in every panel hid the curves
    for ax, (title, names) in zip(axes.flat, panels):
        for algo, metrics in runs.items():
            s = _series(metrics, names)
            if s is None:
                continue
            x, y = s
            ax.plot(x, y, color=colors[algo], alpha=0.25, linewidth=0.8)
            lines[algo], = ax.plot(x, _smooth(y, smooth), color=colors[algo], linewidth=1.8, label=algo)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("RL step")
        ax.grid(alpha=0.3)
    free = list(axes.flat)[len(panels):]
    for ax in free:
        ax.axis("off")
    if free:  # in the first empty panel
        free[0].legend(lines.values(), lines.keys(), loc="center", fontsize=9, frameon=False)
        fig.tight_layout()
    else:  # below the panels
        fig.legend(lines.values(), lines.keys(), loc="lower center", fontsize=9, frameon=False,
                   ncol=min(len(lines), 3))
        fig.tight_layout(rect=(0, 0.06 * ((len(lines) + 2) // 3) / rows, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [t for t, _ in panels]


def plot_training_success(runs: dict, path) -> None:
    """The step-layout kind's runs: training success and invalid-format rate per generation round."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for algo, r in runs.items():
        x = list(range(1, len(r["rounds"]) + 1))
        axes[0].plot(x, [v["success"] for v in r["rounds"]], marker="o", ms=3, label=algo)
        axes[1].plot(x, [v["invalid_format_rate"] for v in r["rounds"]], marker="o", ms=3, label=algo)
    axes[0].set(title="training success per round", xlabel="generation round", ylabel="success", ylim=(0, 1))
    axes[1].set(title="invalid-format rate per round", xlabel="round", ylabel="rate", ylim=(0, 1))
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
