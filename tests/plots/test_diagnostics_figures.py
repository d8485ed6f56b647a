"""Figures of why a run extrapolates as it does: attention diagnostics and accuracy by answer
position per run, and per configuration over seeds in a sweep (``scripts/plot.py``); their
numbers as DataFrames (``lengen.aggregate.diagnostics``)."""

from __future__ import annotations

import json

import pytest

from lengen.aggregate.diagnostics import (
    attention_over_seeds,
    depth_over_seeds,
    load_diagnostics,
    position_frame,
    write_sweep_diagnostics,
)
from lengen.aggregate.load import load_runs
from lengen.plots.attention import attention_diagnostics_figure, plot_attention_diagnostics
from lengen.plots.run import plot_position_heatmap
from sweep_fixture import write_run


def diagnostics_section(sink: dict[int, float], heads: int = 2) -> dict:
    """An ``attention_diagnostics`` section: two layers, ``sink`` mass per length, training
    length 4."""
    lengths = {}
    for length, mass in sink.items():
        stats = {"entropy": [1.0] * heads, "entropy_normalized": [0.5] * heads,
                 "max_weight": [0.4] * heads, "sink_mass": [mass] * heads,
                 "bucket_mass": [[0.5, 0.25, 0.25]] * heads}  # fmt: skip
        lengths[str(length)] = {"tokens": 2 * length + 1, "layers": {"0": stats, "1": stats}}
    return {"samples": 4, "layers": ["0", "1"], "train_len": 4, "lengths": lengths,
            "buckets": ["0", "1", "2–3"], "statistics": list(stats), "skipped": []}  # fmt: skip


def position_section() -> dict:
    by_length = {"4": {"accuracy": [1.0] * 4, "scored": 8, "bin_width": 1},
                 "8": {"accuracy": [1.0] * 4 + [0.2] * 4, "scored": 8, "bin_width": 1}}  # fmt: skip
    return {"train_len": 4, "protocols": {"teacher_forced": by_length}}


def test_run_diagnostics_figure_has_a_panel_per_layer_and_statistic():
    figure = attention_diagnostics_figure(diagnostics_section({4: 0.3, 8: 0.6}))
    assert len(figure.axes) == 2 * 4  # statistics named once, above their column


def test_run_diagnostics_figures_are_written_as_png_and_pdf(tmp_path):
    paths = plot_attention_diagnostics(diagnostics_section({4: 0.3, 8: 0.6}), tmp_path / "diag")
    assert sorted(p.name for p in paths) == ["diag.pdf", "diag.png", "diag_distance.pdf",
                                             "diag_distance.png"]  # fmt: skip


def test_position_heatmap_is_written_as_png_and_pdf(tmp_path):
    paths = plot_position_heatmap(position_section(), tmp_path / "accuracy_by_position")
    assert all(path.stat().st_size > 0 for path in paths) and len(paths) == 2


def test_position_frame_has_a_row_per_length_and_position():
    frame = position_frame(position_section())
    assert list(frame.groupby("length").size()) == [4, 8]


def write_diagnosed_sweep(folder):
    """Two seeds of ALiBi with attention diagnostics and passkey-style depth reports."""
    for seed, sink in ((0, 0.2), (1, 0.4)):
        run_dir = write_run(folder, f"alibi_s{seed}", seed=seed, accuracy={4: 1.0, 8: 0.5},
                            extra={"attention_diagnostics": diagnostics_section({4: sink, 8: sink})})  # fmt: skip
        rows = [{"length": length, "depth_bin": b, "depth_low": b / 2, "depth_high": (b + 1) / 2,
                 "n_examples": 10, "accuracy": 1.0, "exact_match": float(seed == b)}
                for length in (4, 8) for b in (0, 1)]  # fmt: skip
        (run_dir / "accuracy_by_depth.json").write_text(json.dumps({"rows": rows}))


def test_sweep_attention_is_averaged_over_heads_layers_and_seeds(tmp_path):
    write_diagnosed_sweep(tmp_path)
    table = attention_over_seeds(load_diagnostics(tmp_path).attention)
    sink = table[(table.statistic == "sink_mass") & (table.length == 8)]
    assert sink["mean"].tolist() == pytest.approx([0.3])


def test_sweep_depth_grid_is_averaged_over_seeds(tmp_path):
    write_diagnosed_sweep(tmp_path)
    table = depth_over_seeds(load_diagnostics(tmp_path).depth)
    assert table["exact_match"].tolist() == pytest.approx([0.5] * 4)


def test_sweep_diagnostics_write_figures_and_the_depth_table(tmp_path):
    write_diagnosed_sweep(tmp_path / "sweep")
    runs = load_runs(tmp_path / "sweep", None, 0.9)
    names = {path.name for path in write_sweep_diagnostics(runs, tmp_path / "out")}
    expected = {"attention_diagnostics_copy_decoder_len4.png", "accuracy_by_depth.csv"}
    expected |= {"attention_diagnostics_copy_decoder_len4.pdf"}
    depth = {name for name in names if name.startswith("depth_copy_decoder_len4_alibi_")}
    assert expected <= names and len(depth) == 2  # PNG and PDF of the one configuration


def test_plot_script_draws_the_sweep_diagnostics(tmp_path, capsys):
    from helpers import load_script

    write_diagnosed_sweep(tmp_path)
    assert load_script("plot").main([str(tmp_path)]) == 0
    assert (tmp_path / "attention_diagnostics_copy_decoder_len4.pdf").is_file()


def test_a_sweep_without_diagnostics_draws_none(tmp_path):
    write_run(tmp_path / "sweep", "alibi_s0", accuracy={4: 1.0, 8: 0.5})
    assert write_sweep_diagnostics(load_runs(tmp_path / "sweep", None, 0.9), tmp_path) == []
