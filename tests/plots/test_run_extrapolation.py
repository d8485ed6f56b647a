"""A run's extrapolation figure where per-token accuracy equals exact match (a task solved at
every length): both lines stay visible, accuracy wide and hollow beneath exact match."""

from __future__ import annotations

from lengen.plots.common import pyplot
from lengen.plots.run import extrapolation_figure


def test_equal_accuracy_and_exact_match_are_both_visible():
    rows = [{"length": n, "accuracy": 1.0, "exact_match": 1.0, "loss": 0.0} for n in (8, 16)]
    figure = extrapolation_figure({"eval": rows, "train_len": 8, "label": "solved"})
    lines = {line.get_label(): line for line in figure.axes[0].get_lines()}
    accuracy, exact = lines["per-token accuracy"], lines["exact match"]
    assert accuracy.get_markerfacecolor() == "white"
    assert accuracy.get_markersize() > exact.get_markersize()
    assert accuracy.get_linewidth() > exact.get_linewidth()
    pyplot().close(figure)
