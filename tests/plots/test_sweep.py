"""Sweep figures: scripts/plot.py (its main, in this process) on a fake sweep
(tests/sweep_fixture.py) writes every panel and the heatmap; the metric-vs-length panel draws
the trivial baseline and the position-draw spread."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from helpers import assert_pdf, assert_png, load_script
from lengen.aggregate import aggregate
from lengen.plots import plot_metric_vs_length
from sweep_fixture import make_sweep, write_run


@pytest.fixture(scope="module")
def plotted(tmp_path_factory) -> Path:
    """The fake sweep with scripts/plot.py run on it (once for the module, in this process:
    the figures, not the process, are tested here)."""
    sweep = make_sweep(tmp_path_factory.mktemp("plots") / "sweep")
    # a second task: the PE × task heatmap has two columns
    write_run(sweep, "alibi_reverse_seed0", accuracy={4: 0.9, 8: 0.4},
              overrides={"data.name": "reverse"})  # fmt: skip
    assert load_script("plot").main([str(sweep)]) == 0
    return sweep


def test_sweep_plot_writes_a_png_per_panel(plotted):
    # the default metric is exact match
    assert_png(plotted / "extrapolation_exact_match_copy_decoder_len4.png")


def test_sweep_plot_writes_a_pdf_per_panel(plotted):
    assert_pdf(plotted / "extrapolation_exact_match_copy_decoder_len4.pdf")


def test_sweep_plot_writes_the_heatmap(plotted):
    assert_png(plotted / "heatmap_exact_match.png")
    assert_pdf(plotted / "heatmap_exact_match.pdf")


@pytest.fixture
def panel(tmp_path):
    """The metric-vs-length axes of two seeds whose rows carry a baseline (0.5 at length 4,
    0.45 at 8 on average) and a spread over position draws at length 8 (0.02 and 0.04)."""
    for seed in (0, 1):
        fields = {
            4: {"baseline_accuracy": 0.5},
            8: {"baseline_accuracy": 0.5 - seed / 10}
            | {"position_draws": 4, "accuracy_draw_std": 0.02 * (seed + 1)},
        }
        write_run(tmp_path, f"s{seed}", seed=seed, accuracy={4: 1.0, 8: 0.8}, row_fields=fields)
    fig = plot_metric_vs_length(aggregate(tmp_path, metric="accuracy").rows)
    yield fig.axes[0]
    import matplotlib.pyplot as plt

    plt.close(fig)


def test_sweep_figure_draws_the_baseline_per_length_grey_dashed(panel):
    (line,) = [line for line in panel.lines if line.get_label().startswith("baseline")]
    assert (line.get_color(), line.get_linestyle()) == ("grey", "--")
    assert list(line.get_xdata()) == [4, 8]
    assert list(line.get_ydata()) == pytest.approx([0.5, 0.45])


def test_sweep_figure_draws_the_position_draw_spread_as_error_bars(panel):
    (bars,) = panel.containers
    (segments,) = [collection.get_segments() for collection in bars.lines[2]]
    # one bar, at length 8: mean 0.8 ± the seed mean of the draw std, 0.03
    ((x_low, low), (x_high, high)) = segments[0]
    assert (x_low, x_high, low, high) == pytest.approx((8, 8, 0.77, 0.83))


@pytest.fixture(scope="module")
def one_column(tmp_path_factory) -> Path:
    """The fake sweep (one task, model, training length), one run re-evaluated under the tag
    ``near``, with scripts/plot.py run on it untagged (once for the module)."""
    sweep = make_sweep(tmp_path_factory.mktemp("one_column") / "sweep")
    extra = {"overrides": [], "tag": "near"}
    write_run(
        sweep, "alibi_seed0", accuracy={8: 0.4}, results_file="results.near.json", extra=extra
    )
    assert load_script("plot").main([str(sweep)]) == 0
    return sweep


def test_a_one_column_sweep_gets_its_heatmap(one_column):
    # the common first sweep (one task, model, training length) is promised a heatmap too
    assert_png(one_column / "heatmap_exact_match.png")


def test_tagged_figures_are_named_by_their_tag_and_leave_the_runs_own_alone(one_column, tmp_path):
    sweep = shutil.copytree(one_column, tmp_path / "sweep")  # the module's copy stays as plotted
    own = sweep / "extrapolation_exact_match_copy_decoder_len4.png"
    before = own.read_bytes()
    assert load_script("plot").main([str(sweep), "--tag", "near"]) == 0
    assert_png(sweep / "extrapolation_exact_match_copy_decoder_len4.near.png")
    assert own.read_bytes() == before
