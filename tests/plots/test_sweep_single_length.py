"""A sweep panel evaluated at one length only (a hyperparameter search at the training length):
its points stand at that length with room around them, and its baseline, one point, is drawn."""

from __future__ import annotations

import pytest

from lengen.aggregate import aggregate
from lengen.plots import plot_metric_vs_length
from lengen.plots.common import pyplot
from sweep_fixture import write_run


@pytest.fixture
def axes(tmp_path):
    fields = {4: {"baseline_accuracy": 0.1}}
    for pe in ("alibi", "rope", "nope"):
        write_run(tmp_path, pe, pe=pe, accuracy={4: 0.5}, row_fields=fields)
    rows = aggregate(tmp_path, metric="accuracy").rows
    figure = plot_metric_vs_length(rows)
    yield figure.axes[0]
    pyplot().close(figure)


def test_one_length_is_drawn_with_a_quarter_of_it_either_side(axes):
    assert axes.get_xlim() == pytest.approx((3.0, 5.0))


def test_a_baseline_of_one_point_has_a_marker(axes):
    (baseline,) = [line for line in axes.get_lines() if line.get_label().startswith("baseline")]
    assert baseline.get_marker() not in (None, "None", "")


def test_variants_of_one_pe_at_one_length_have_distinct_markers(tmp_path):
    for layers in (2, 4, 8):
        write_run(tmp_path, f"nope{layers}", pe="nope", accuracy={4: 0.5},
                  overrides={"model.n_layers": layers})  # fmt: skip
    figure = plot_metric_vs_length(aggregate(tmp_path, metric="accuracy").rows)
    markers = [line.get_marker() for line in figure.axes[0].get_lines()
               if line.get_label().startswith("nope")]  # fmt: skip
    assert len(markers) == len(set(markers)) == 3  # points only: a line style would not show
    pyplot().close(figure)
