"""The demo's training-curve figure (`resrl.demo.plots.plot_training_curves`)."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("n_runs,keys", [(5, 7), (4, 6)])  # 7 panels leave a free slot, 6 do not
def test_one_legend_for_the_figure_that_names_every_run(n_runs, keys, tmp_path, monkeypatch):
    """A legend in every panel hid the curves (five long run labels over each plot): the figure has
    one legend, in the first empty panel or below the panels, naming each run once."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    from resrl.demo.plots import CURVES, plot_training_curves

    saved = []
    real_savefig = Figure.savefig
    monkeypatch.setattr(Figure, "savefig", lambda self, *a, **k: (saved.append(self), real_savefig(self, *a, **k))[1])
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
