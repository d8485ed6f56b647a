"""A run's figures as a paper uses them: PDF beside PNG at the configured dpi, axes named after
their metric, plain perplexity ticks, error bars over position draws, a loss band, attention
maps with a colour bar, the shift check drawn."""

from __future__ import annotations

import struct

import numpy as np
import pytest
import torch

from helpers import compose_train
from lengen.plots.attention import attention_maps_figure
from lengen.plots.common import pyplot, wrap_title
from lengen.plots.pe import plot_pe_analysis
from lengen.plots.run import (
    binned_loss,
    extrapolation_figure,
    loss_by_position_figure,
    plot_depth_heatmap,
    plot_extrapolation,
    plot_loss_by_position,
)


def task_results(**row_extra) -> dict:
    """results.json of a task run at three lengths, training length 8."""
    rows = [
        {
            "length": length,
            "accuracy": accuracy,
            "exact_match": accuracy / 2,
            "loss": 1.0,
            "ppl": 2.7,
            "chance_accuracy": 0.1,
            "baseline_accuracy": 0.2,
            "baseline_exact_match": 0.0,
            **row_extra,
        }
        for length, accuracy in ((8, 0.9), (16, 0.6), (32, 0.3))
    ]
    label = "copy · decoder · pe=rope (layout=half) · greedy · seed 0 · tag yarn"
    return {"eval": rows, "train_len": 8, "label": label, "learned": None}


def text_results(ppl=(10.25, 10.31, 10.6)) -> dict:
    rows = [
        {"length": length, "accuracy": None, "exact_match": None, "loss": 2.3, "ppl": value}
        for length, value in zip((16, 32, 64), ppl, strict=True)
    ]
    return {"eval": rows, "train_len": 16, "label": "text · decoder · pe=alibi", "learned": None}


def position_report(lengths=(16, 64), train_len=16) -> dict:
    generator = np.random.default_rng(0)
    return {
        "protocol": "nonoverlap",
        "train_len": train_len,
        "lengths": {
            str(length): {
                "stride": length,
                "loss": (3 + generator.normal(0, 0.3, length)).tolist(),
                "count": [32] * length,
            }
            for length in lengths
        },
    }


def depth_report() -> dict:
    rows = [
        {"length": length, "depth_bin": b, "exact_match": 1.0 - b / 4, "accuracy": 1.0}
        for length in (8, 16)
        for b in range(4)
    ]
    return {
        "task": "passkey",
        "protocol": "teacher_forced",
        "bins": 4,
        "train_lengths": [4, 8],
        "rows": rows,
    }


def png_size(path) -> tuple[int, int]:
    header = path.read_bytes()[:24]  # signature (8), IHDR length + type (8), width, height
    assert header[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", header[16:24])


@pytest.fixture
def closing():
    """Figures built by a test, closed after it."""
    figures = []
    yield figures.append
    for figure in figures:
        pyplot().close(figure)


WRITERS = {
    "extrapolation": lambda path, dpi=None: plot_extrapolation(task_results(), path, dpi=dpi),
    "loss_by_position": lambda path, dpi=None: plot_loss_by_position(
        position_report(), path, dpi=dpi
    ),
    "accuracy_by_depth": lambda path, dpi=None: plot_depth_heatmap(depth_report(), path, dpi=dpi),
}


@pytest.mark.parametrize("name", sorted(WRITERS))
def test_a_pdf_is_written_beside_the_png(tmp_path, name):
    WRITERS[name](tmp_path / f"{name}.png", dpi=50)  # any dpi: the PDF's presence is tested
    assert png_size(tmp_path / f"{name}.png")[0] > 0
    assert (tmp_path / f"{name}.pdf").read_bytes()[:5] == b"%PDF-"


@pytest.mark.parametrize("name", sorted(WRITERS))
def test_dpi_sets_the_png_pixel_size(tmp_path, name):
    WRITERS[name](tmp_path / "low.png", dpi=100)
    WRITERS[name](tmp_path / "high.png", dpi=200)
    (low_width, low_height), (high_width, high_height) = (
        png_size(tmp_path / "low.png"),
        png_size(tmp_path / "high.png"),
    )
    # text extents round differently at each dpi, so a tight bounding box scales only roughly
    assert high_width / low_width == pytest.approx(2, rel=0.1)
    assert high_height / low_height == pytest.approx(2, rel=0.1)


def test_no_temporary_files_are_left_behind(tmp_path):
    plot_extrapolation(task_results(), tmp_path / "extrapolation.tag.png")
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "extrapolation.tag.pdf",
        "extrapolation.tag.png",
    ]


def test_the_y_axis_names_both_task_metrics(closing):
    figure = extrapolation_figure(task_results())
    closing(figure)
    assert figure.axes[0].get_ylabel() == "per-token accuracy / exact match"


def test_the_x_axis_of_a_task_run_counts_input_symbols(closing):
    figure = extrapolation_figure(task_results())
    closing(figure)
    assert figure.axes[0].get_xlabel() == "evaluation length (input symbols)"


def test_the_x_axis_of_a_grid_run_is_the_side(closing):
    results = task_results()
    for row in results["eval"]:
        row["grid_shape"] = [row["length"]] * 2
    figure = extrapolation_figure(results)
    closing(figure)
    assert figure.axes[0].get_xlabel() == "evaluation side (cells)"
    assert "training side (8)" in figure.axes[0].get_legend_handles_labels()[1]


def test_the_y_axis_names_perplexity_for_text_runs(closing):
    figure = extrapolation_figure(text_results())
    closing(figure)
    assert figure.axes[0].get_ylabel() == "perplexity"


@pytest.mark.parametrize("ppl", [(10.25, 10.31, 10.6), (10.25, 40.0, 2300.0)])
def test_perplexity_tick_labels_are_plain_decimals(closing, ppl):
    figure = extrapolation_figure(text_results(ppl))
    closing(figure)
    figure.canvas.draw()
    axis = figure.axes[0].yaxis
    labels = [t.get_text() for t in axis.get_ticklabels() + axis.get_ticklabels(minor=True)]
    shown = [label for label in labels if label]
    assert len(shown) >= 2
    for label in shown:
        assert "10^" not in label and "times" not in label and "×" not in label, label
        float(label)  # plain decimals parse as numbers


def test_long_labels_wrap_at_the_separators():
    label = "copy · decoder · pe=rope (layout=half, yarn) · greedy · seed 0 · tag yarn"
    wrapped = wrap_title(label, width=40)
    assert max(len(line) for line in wrapped.split("\n")) <= 40
    assert wrapped.replace("\n", " · ") == label


def test_the_title_is_the_run_label(closing):
    figure = extrapolation_figure(task_results())
    closing(figure)
    title = figure.axes[0].get_title().replace("\n", " · ")
    assert title == task_results()["label"]


def test_position_draw_spread_is_drawn_as_error_bars(closing):
    from matplotlib.container import ErrorbarContainer

    results = task_results(accuracy_draw_std=0.05, exact_match_draw_std=0.02, position_draws=10)
    figure = extrapolation_figure(results)
    closing(figure)
    bars = [c for c in figure.axes[0].containers if isinstance(c, ErrorbarContainer)]
    assert len(bars) == 2


def test_single_draw_rows_have_no_error_bars(closing):
    figure = extrapolation_figure(task_results())
    closing(figure)
    assert figure.axes[0].containers == []


def test_loss_band_is_the_standard_error_of_the_position_means():
    centres, means, stderrs = binned_loss([1.0, 2.0, 3.0, 4.0], [1, 1, 1, 1], bins=1)
    assert centres.tolist() == [1.5] and means.tolist() == [2.5]
    assert stderrs[0] == pytest.approx(np.std([1, 2, 3, 4], ddof=1) / 2)


def test_loss_by_position_draws_one_band_per_length(closing):
    from matplotlib.collections import PolyCollection

    figure = loss_by_position_figure(position_report(lengths=(16, 32, 64)))
    closing(figure)
    bands = [c for c in figure.axes[0].collections if isinstance(c, PolyCollection)]
    assert len(bands) == 3


def test_attention_maps_have_a_colour_bar(closing):
    weights = torch.softmax(torch.randn(1, 2, 12, 12), dim=-1)  # (B, H, Tq, Tk)
    figure = attention_maps_figure([weights, weights], ["0", "1"], 12, 4)
    closing(figure)
    colour_bars = [ax for ax in figure.axes if getattr(ax, "_colorbar", None) is not None]
    assert len(colour_bars) == 1 and len(figure.axes) == 2 * 2 + 1


def test_attention_maps_label_token_indices(closing):
    weights = torch.softmax(torch.randn(1, 1, 12, 12), dim=-1)
    figure = attention_maps_figure([weights], ["0"], 12, 4)
    closing(figure)
    figure.canvas.draw()
    ax = figure.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    assert [t.get_text() for t in ax.get_yticklabels() if t.get_text()]


def test_attention_maps_mark_the_training_length(closing):
    weights = torch.softmax(torch.randn(1, 1, 12, 12), dim=-1)
    figure = attention_maps_figure([weights], ["0"], 12, 4, train_tokens=9)
    closing(figure)
    lines = figure.axes[0].get_lines()
    assert (8.5, 8.5) in [tuple(line.get_xdata()) for line in lines]  # keys 0-8 seen
    assert (8.5, 8.5) in [tuple(line.get_ydata()) for line in lines]  # queries 0-8 seen


def test_attention_maps_within_the_training_length_have_no_mark(closing):
    weights = torch.softmax(torch.randn(1, 1, 12, 12), dim=-1)
    figure = attention_maps_figure([weights], ["0"], 12, 12, train_tokens=12)
    closing(figure)
    assert figure.axes[0].get_lines() == []


def test_pe_analysis_draws_the_shift_check(tmp_path):
    report = plot_pe_analysis(tmp_path, "sinusoidal", length=16, dim=8, formats=("png", "pdf"))
    assert png_size(tmp_path / "pe_sinusoidal_shift_check.png")[0] > 0
    assert (tmp_path / "pe_sinusoidal_shift_check.pdf").read_bytes()[:5] == b"%PDF-"
    assert tmp_path / "pe_sinusoidal_shift_check.png" in report["paths"]


def test_shift_errors_peak_at_the_printed_check():
    from lengen.pe import sinusoidal_table
    from lengen.pe.analysis import check_shift_rotation
    from lengen.plots.pe import shift_errors

    table = sinusoidal_table(24, 8, 10000.0)
    errors = shift_errors(table)
    assert errors.shape == (23,)
    assert errors.max().item() == pytest.approx(check_shift_rotation(table))


def test_a_run_writes_its_figure_at_eval_plot_dpi(tmp_path, single_thread):
    import json

    from lengen.train import run

    # the attention diagnostics' figures are not compared: not drawn
    cfg = compose_train("data.len=4", "eval.lengths=[4,8]", "model.d_model=32", "eval.plot_dpi=40",
                        "eval.diagnostics=false")  # fmt: skip
    run(cfg, run_dir=tmp_path)
    results = json.loads((tmp_path / "results.json").read_text())
    plot_extrapolation(results, tmp_path / "again" / "extrapolation.png", dpi=40)
    assert png_size(tmp_path / "extrapolation.png") == png_size(
        tmp_path / "again" / "extrapolation.png"
    )


def test_a_run_writes_every_figure_in_eval_plot_formats_only(tmp_path, single_thread):
    from lengen.train import run

    cfg = compose_train(
        "data.len=4", "eval.lengths=[4,8]", "model.d_model=32", "eval.plot_formats=[svg]"
    )
    run(cfg, run_dir=tmp_path)
    figures = {p.suffix for p in tmp_path.iterdir() if p.suffix in (".png", ".pdf", ".svg")}
    names = {p.stem for p in tmp_path.glob("*.svg")}
    assert figures == {".svg"}
    assert {"extrapolation", "accuracy_by_position"} <= names
    assert any(name.startswith("attention_diagnostics") for name in names)


# -- attention on a grid (issue #33 item 5) ----------------------------------------------------
@pytest.fixture
def grid_attention():
    """A 4×4 grid and two readout slots (positions −1), one layer of two heads: from every
    query, head 0 puts all its weight on cell (1, 2), head 1 spreads it evenly over the cells."""
    import torch

    from lengen.data.layout import grid_coordinates

    positions = torch.cat([grid_coordinates((4, 4)), torch.full((2, 2), -1)])  # (18, 2)
    weights = torch.zeros(1, 2, 18, 18)
    weights[0, 0, :, 1 * 4 + 2] = 1.0
    weights[0, 1, :, :16] = 1 / 16
    return [weights], positions


def test_grid_queries_are_the_centre_the_corner_and_a_readout_slot(grid_attention):
    from lengen.plots.attention import grid_queries

    _, positions = grid_attention
    assert grid_queries(positions) == [
        (2 * 4 + 2, "query at cell (2, 2)"),
        (0, "query at cell (0, 0)"),
        (16, "first readout slot"),
    ]


def test_grid_attention_is_drawn_at_the_cells_it_lands_on(grid_attention):
    import numpy as np

    from lengen.plots.attention import grid_attention_maps_figure

    recorded, positions = grid_attention
    fig = grid_attention_maps_figure(recorded, ["0"], positions, 4, 2)
    first = fig.axes[0].images[0].get_array()  # layer 0, centre query, head 0: a 4×4 image
    expected = np.zeros((4, 4))
    expected[1, 2] = 1.0
    assert np.asarray(first) == pytest.approx(expected)


def test_grid_attention_marks_the_training_grid_in_cells(grid_attention):
    from lengen.plots.attention import grid_attention_maps_figure

    recorded, positions = grid_attention
    fig = grid_attention_maps_figure(recorded, ["0"], positions, 4, 2)
    (box,) = fig.axes[0].patches
    assert (box.get_width(), box.get_height()) == (2, 2)
