"""What a sweep figure shows on real sweeps (issue #33 items 1–3): short line names and a
renaming file, bounded sizes with the legend outside the axes, the seeds themselves with few
seeds, CI bands inside [0, 1], lines at 0 apart, runs that did not learn drawn apart, the
length-extension methods compared; and plot.py's refusals (a read-only folder, a bad --labels
file) in one line. plot.py and aggregate.py are called in this process
(tests/script_fixture.py), but for the read-only folder: a process of its own sees it read-only."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from helpers import ROOT, assert_png, load_script
from lengen.aggregate import aggregate
from lengen.plots.names import line_names
from lengen.plots.sweep import plot_metric_vs_length
from script_fixture import call_main
from sweep_fixture import read_only, write_run

PLOT = [sys.executable, str(ROOT / "scripts" / "plot.py")]


@pytest.fixture
def plot(capsys):
    """``plot.py arguments…`` in this process -> (returncode, stdout, stderr)."""
    main = load_script("plot").main
    return lambda *arguments: call_main(main, arguments, capsys)


@pytest.fixture
def close_figures():
    yield
    import matplotlib.pyplot as plt

    plt.close("all")


# -- a mixed sweep: names, sizes, legend -------------------------------------------------------
def mixed_sweep(folder: Path) -> Path:
    """RoPE at two bases × two model sizes whose layer count changes with the width, and ALiBi:
    five configurations of one table, one seed each."""
    for base in (500, 10000):
        for width, layers in ((64, 2), (128, 4)):
            overrides = {"pe.base": base, "model.d_model": width, "model.n_layers": layers}
            write_run(folder, f"rope_{base}_{width}", pe="rope", accuracy={4: 1.0, 8: 0.3},
                      overrides=overrides)  # fmt: skip
    write_run(folder, "alibi", pe="alibi", accuracy={4: 1.0, 8: 0.6},
              overrides={"model.d_model": 64, "model.n_layers": 2})  # fmt: skip
    return folder


@pytest.fixture
def mixed(tmp_path):
    return aggregate(mixed_sweep(tmp_path / "mixed"), metric="accuracy").rows


def test_line_names_drop_the_component_prefix(mixed):
    assert "rope [base=500, d_model=64]" in line_names(mixed).values()


def test_line_names_show_one_of_keys_that_change_together(mixed):
    # n_layers follows d_model in this sweep: it adds nothing to a name
    assert not any("n_layers" in name for name in line_names(mixed).values())


def test_line_names_are_cut_to_the_limit(tmp_path):
    from lengen.plots.names import NAME_LIMIT

    long = {"model.option": "x" * 80}  # its name uncut: 'rope [option=xxx…]', 95 characters
    write_run(tmp_path, "a", pe="rope", accuracy={4: 1.0, 8: 0.5}, overrides=long)
    write_run(tmp_path, "b", pe="rope", accuracy={4: 1.0, 8: 0.5})
    names = line_names(aggregate(tmp_path).rows)
    assert max(map(len, names.values())) <= NAME_LIMIT


def test_a_rename_replaces_an_automatic_name(mixed):
    names = line_names(mixed, {"rope [base=500, d_model=64]": "RoPE 500, small"})
    assert "RoPE 500, small" in names.values()


def test_a_mixed_sweep_figure_has_a_bounded_size(mixed, close_figures):
    fig = plot_metric_vs_length(mixed)
    width, height = fig.get_size_inches()
    assert width <= 6.4 and height <= 9.0


def test_the_legend_sits_below_the_axes(mixed, close_figures):
    fig = plot_metric_vs_length(mixed)
    fig.canvas.draw()
    legend = fig.legends[0].get_window_extent()
    assert legend.y1 <= fig.axes[0].get_window_extent().y0


def test_labels_file_renames_a_line_in_the_figures(tmp_path, plot):
    folder = mixed_sweep(tmp_path / "mixed")
    labels = tmp_path / "labels.yaml"
    labels.write_text("'rope [base=500, d_model=64]': RoPE 500 small\n")
    done = plot(folder, "--labels", labels, "--metric", "accuracy")
    assert done.returncode == 0, done.stderr
    assert "--labels" not in done.stderr  # the name matched a line
    assert_png(folder / "extrapolation_accuracy_copy_decoder_len4.png")


def test_a_labels_name_that_matches_no_line_is_reported(tmp_path, plot):
    folder = mixed_sweep(tmp_path / "mixed")
    (labels := tmp_path / "labels.yaml").write_text("'rope [base=50]': RoPE 50\n")
    done = plot(folder, "--labels", labels)
    assert "warning: --labels: no line is named 'rope [base=50]'" in done.stderr


def test_a_labels_file_that_is_not_a_mapping_is_refused_in_one_line(tmp_path, plot):
    folder = mixed_sweep(tmp_path / "mixed")
    (labels := tmp_path / "labels.yaml").write_text("- a list\n")
    done = plot(folder, "--labels", labels)
    assert (done.returncode, done.stderr.count("\n")) == (2, 1)
    assert done.stderr.startswith(f"error: --labels {labels}: must map")
    assert not list(folder.glob("*.png"))


# -- few seeds, bands, zeros, runs that did not learn ------------------------------------------
def sweep_of(folder: Path, values: dict[str, list[dict[int, float]]]) -> list[dict]:
    """Rows of a sweep with runs ``{pe: [accuracy by length, one per seed]}``."""
    for pe, seeds in values.items():
        for seed, accuracy in enumerate(seeds):
            write_run(folder, f"{pe}{seed}", pe=pe, seed=seed, accuracy=accuracy)
    return aggregate(folder, metric="accuracy").rows


def test_two_seeds_are_drawn_not_a_band(tmp_path, close_figures):
    rows = sweep_of(tmp_path, {"rope": [{4: 1.0, 8: 0.9}, {4: 1.0, 8: 0.1}]})
    ax = plot_metric_vs_length(rows).axes[0]
    assert not ax.collections  # no fill_between
    seed_lines = [line for line in ax.lines if line.get_linewidth() < 1]
    assert sorted(round(line.get_ydata()[-1], 2) for line in seed_lines) == [0.1, 0.9]


def test_seeds_or_band_is_decided_per_line(tmp_path, close_figures):
    # compared sweeps: five seeds of ALiBi get a band, two of RoPE their seeds
    five, two = [{4: 1.0, 8: 0.5 + i / 20} for i in range(5)], [{4: 1.0, 8: 0.1}, {4: 1.0, 8: 0.3}]
    ax = plot_metric_vs_length(sweep_of(tmp_path, {"alibi": five, "rope": two})).axes[0]
    assert len(ax.collections) == 1
    assert len([line for line in ax.lines if line.get_linewidth() < 1]) == 2


def test_a_band_stays_inside_zero_and_one(tmp_path, close_figures):
    # five seeds at 0.98–1.0 and 0–0.4: the t-interval leaves [0, 1] at both lengths
    seeds = [{4: 1.0, 8: 0.0}] * 3 + [{4: 0.98, 8: 0.4}] * 2
    rows = sweep_of(tmp_path, {"rope": seeds})
    assert min(r["ci95_low"] for r in rows) < 0 and max(r["ci95_high"] for r in rows) > 1
    (band,) = plot_metric_vs_length(rows).axes[0].collections
    y = np.concatenate([path.vertices[:, 1] for path in band.get_paths()])
    assert y.min() >= 0.0 and y.max() <= 1.0


def test_lines_at_zero_stand_apart(tmp_path, close_figures):
    rows = sweep_of(tmp_path, {pe: [{4: 1.0, 8: 0.0}] for pe in ("alibi", "rope", "nope")})
    ax = plot_metric_vs_length(rows).axes[0]
    means = [line for line in ax.lines if line.get_label()[:1] not in ("_", "")]
    at_eight = {line.get_xdata()[-1] for line in means if line.get_label().split()[0] in
                ("alibi", "rope", "nope")}  # fmt: skip
    assert len(at_eight) == 3


def test_the_baseline_is_drawn_above_the_lines(tmp_path, close_figures):
    for seed in (0, 1):
        write_run(tmp_path, f"s{seed}", seed=seed, accuracy={4: 1.0, 8: 0.0},
                  row_fields={8: {"baseline_accuracy": 0.0}})  # fmt: skip
    ax = plot_metric_vs_length(aggregate(tmp_path, metric="accuracy").rows).axes[0]
    (baseline,) = [line for line in ax.lines if line.get_label().startswith("baseline")]
    assert baseline.get_zorder() > max(
        line.get_zorder() for line in ax.lines if line is not baseline
    )


def test_a_configuration_that_did_not_learn_is_drawn_faint_and_hollow(tmp_path, close_figures):
    rows = sweep_of(tmp_path, {"rope": [{4: 0.5, 8: 0.1}], "alibi": [{4: 1.0, 8: 0.5}]})
    ax = plot_metric_vs_length(rows).axes[0]
    (rope,) = [line for line in ax.lines if line.get_label().startswith("rope")]
    (alibi,) = [line for line in ax.lines if line.get_label().startswith("alibi")]
    assert (rope.get_alpha(), rope.get_markerfacecolor()) == (0.55, "white")
    assert alibi.get_alpha() == 1.0


def test_a_configuration_that_did_not_learn_says_so_in_the_legend(tmp_path, close_figures):
    rows = sweep_of(tmp_path, {"rope": [{4: 0.5, 8: 0.1}], "alibi": [{4: 1.0, 8: 0.5}]})
    fig = plot_metric_vs_length(rows)
    texts = [text.get_text() for text in fig.legends[0].get_texts()]
    assert "rope (did not learn)" in texts and "alibi" in texts


# -- length-extension methods ------------------------------------------------------------------
@pytest.fixture
def extended(tmp_path):
    """Two RoPE seeds with re-evaluations under YaRN ×4 and PI ×4, and an ALiBi run without."""
    for seed in (0, 1):
        write_run(tmp_path / "s", f"rope{seed}", pe="rope", seed=seed, accuracy={4: 1.0, 8: 0.2})
        for tag, method, value in (("y4", "yarn", 0.9), ("p4", "pi", 0.5)):
            extra = {"overrides": [f"pe.scaling={method}", "pe.scaling_factor=4"], "tag": tag}
            write_run(tmp_path / "s", f"rope{seed}", pe="rope", seed=seed,
                      accuracy={4: 1.0, 8: value}, results_file=f"results.{tag}.json",
                      extra=extra)  # fmt: skip
    write_run(tmp_path / "s", "alibi0", pe="alibi", accuracy={4: 1.0, 8: 0.6})
    return tmp_path / "s"


def test_extension_rows_compare_the_methods_in_order(extended):
    from lengen.aggregate.extension import extension_rows

    rows = extension_rows(aggregate(extended, metric="accuracy"))
    at_eight = [(row["method"], row["mean"]) for row in rows if row["length"] == 8]
    assert at_eight == [("none", 0.2), ("PI ×4", 0.5), ("YaRN ×4", 0.9)]


def test_aggregate_writes_the_extension_table(extended, capsys):
    from lengen.aggregate import main

    done = call_main(main, [extended], capsys)
    assert done.returncode == 0, done.stderr
    text = (extended / "extension.md").read_text()
    assert "| rope · YaRN ×4 | – | 2 |" in text and "alibi" not in text


def test_plot_draws_the_extension_figure(extended, plot):
    assert plot(extended).returncode == 0
    assert_png(extended / "extension_exact_match_copy_decoder_len4.png")


# -- a read-only folder ------------------------------------------------------------------------
def test_a_read_only_folder_is_refused_in_one_line_naming_the_way_out(tmp_path):
    folder = mixed_sweep(tmp_path / "mixed")
    done = subprocess.run(read_only(folder, [*PLOT, str(folder)]), capture_output=True, text=True,
                          timeout=180)  # fmt: skip
    assert (done.returncode, done.stderr.count("\n")) == (2, 1), done.stderr
    assert done.stderr.startswith(f"error: {folder} is not writable")
    assert "--out DIR" in done.stderr
