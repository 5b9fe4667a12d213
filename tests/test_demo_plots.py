"""The demo's figures: training curves (`resrl.experiments.present.plots.plot_training_curves`) and Pass@k
(`resrl.eval.plots.plot_passk`)."""

from __future__ import annotations

import pytest


@pytest.fixture
def saved(monkeypatch) -> list:
    """The figures saved during the test (matplotlib's Agg backend), in order, to inspect after the plot
    function has closed them."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    figures = []
    real_savefig = Figure.savefig
    monkeypatch.setattr(Figure, "savefig", lambda self, *a, **k: (figures.append(self), real_savefig(self, *a, **k))[1])
    return figures


@pytest.mark.parametrize("n_runs,keys", [(5, 7), (4, 6)])  # 7 panels leave a free slot, 6 do not
def test_one_legend_for_the_figure_that_names_every_run(n_runs, keys, tmp_path, saved):
    """A legend in every panel hid the curves (five long run labels over each plot): the figure has
    one legend, in the first empty panel or below the panels, naming each run once."""
    from resrl.experiments.present.plots import CURVES, plot_training_curves

    metrics = [names[0] for _, names in list(CURVES.items())[:keys]]
    runs = {f"algo-{r}/train.learning_rate=1e-4": [{"step": s, **{m: s * (r + 1.0) for m in metrics}}
                                                  for s in range(1, 6)] for r in range(n_runs)}
    titles = plot_training_curves(runs, tmp_path / "training.png")
    assert len(titles) == keys and (tmp_path / "training.png").stat().st_size > 0
    (fig,) = saved
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None] + list(fig.legends)
    assert len(legends) == 1
    assert [t.get_text() for t in legends[0].get_texts()] == list(runs)
    panels = [ax for ax in fig.axes if ax.get_title()]
    assert len(panels) == keys and all(ax.get_legend() is None for ax in panels)


def test_a_pass_at_k_legend_of_long_labels_fits_in_the_figure(tmp_path, saved):
    """Five method labels with their settings (resrl/resrl.pos_scale=1.0/train.learning_rate=3e-5)
    under one panel: the legend stays inside the saved figure, below the panel, not cut at its edges."""
    from resrl.eval.plots import plot_passk

    labels = ["warm start", "grpo/train.learning_rate=1e-4", "resrl/train.learning_rate=3e-5",
              "resrl/resrl.pos_scale=1.0/train.learning_rate=3e-5",
              "resrl/resrl.hidden_alignment=token/train.learning_rate=1e-4"]
    runs = [{"benchmarks": {"held-out": {"pass@k": {str(k): 0.1 * i + 0.02 * k for k in (1, 2, 4, 8, 16)}}},
             "overall": {}} for i in range(len(labels))]
    plot_passk(runs, labels, tmp_path / "passk.png", title="Pass@k")
    (fig,) = saved
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(fig).get_renderer()  # (the pyplot canvas is gone once the figure is closed)
    box, (legend,) = fig.bbox, fig.legends
    lb = legend.get_window_extent(renderer)
    assert box.x0 <= lb.x0 and lb.x1 <= box.x1 and box.y0 <= lb.y0 and lb.y1 <= box.y1
    assert lb.y1 <= fig.axes[0].get_window_extent(renderer).y0  # below the panel, not over it
    assert [t.get_text() for t in legend.get_texts()] == labels
