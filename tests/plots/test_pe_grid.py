"""The encodings' own figures on a 2-D grid (``plot.py pe-analysis --grid HxW``)."""

from __future__ import annotations

import pytest

from helpers import assert_pdf, assert_png, load_script
from lengen.plots.pe import plot_pe_grid_analysis

pytestmark = pytest.mark.usefixtures("single_thread")
main = load_script("plot").main


def test_grid_analysis_writes_every_figure(tmp_path, capsys):
    argv = ["pe-analysis", "--grid", "6x6", "--dim", "16", "--out", str(tmp_path)]
    assert main(argv) == 0
    for name in ("sinusoidal_similarity", "rope_scores", "alibi_distance"):
        assert_png(tmp_path / f"pe_grid_{name}.png")
        assert_pdf(tmp_path / f"pe_grid_{name}.pdf")
    out = capsys.readouterr().out
    assert "axial RoPE on a 6x6 grid" in out and "RoPE-Mixed (init)" in out


def test_grid_analysis_reports_the_offset_only_property(tmp_path):
    report = plot_pe_grid_analysis(tmp_path, "rope", (8, 8), 16, formats=("png",))
    assert report["grid_rope_offset_error"] < 1e-4  # fp32 rounding of the rotated vectors
    assert min(report["grid_rope_axis_dependence"]) > 1e-3  # both axes matter


def test_grid_analysis_offset_check_fails_for_a_rotation_by_absolute_cell(tmp_path):
    # the check can fail: a rotation by the product of the coordinates is not offset-only
    from lengen.pe import apply_rope
    from lengen.pe.analysis import grid_offset_error

    def by_product(x, positions):
        return apply_rope(x, (positions[:, 0] * positions[:, 1]).float(), 100.0)

    assert grid_offset_error(by_product, 16, (8, 8)) > 1e-2


@pytest.mark.parametrize("grid", ["16", "4x", "axb", "1x5"])
def test_bad_grid_is_refused_in_one_line(tmp_path, capsys, grid):
    assert main(["pe-analysis", "--grid", grid, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --grid must be HxW") and err.count("\n") == 1


def test_grid_only_encodings_need_grid(tmp_path, capsys):
    assert main(["pe-analysis", "--pe", "alibi", "--out", str(tmp_path)]) == 2
    assert "--grid" in capsys.readouterr().err


# -- how the grid panels are coloured and ticked (issue #33 item 5) ----------------------------
@pytest.fixture
def grid_figures(tmp_path, monkeypatch):
    """{figure name: the Figure} of ``plot_pe_grid_analysis`` on a 16×16 grid, not saved."""
    import lengen.plots.pe as pe_plots

    figures = {}

    def keep(fig, stem, formats=("png", "pdf"), dpi=None):
        figures[stem.name] = fig
        return []

    monkeypatch.setattr(pe_plots, "save_figure", keep)
    plot_pe_grid_analysis(tmp_path, "all", (16, 16), 16)
    yield figures
    import matplotlib.pyplot as plt

    plt.close("all")


def test_sinusoidal_similarity_is_coloured_over_its_own_range(grid_figures):
    (image,) = grid_figures["pe_grid_sinusoidal_similarity"].axes[0].images
    values = image.get_array()
    assert image.get_clim() == pytest.approx((values.min(), values.max()))


def test_panels_that_compare_share_one_colour_scale(grid_figures):
    for name in ("pe_grid_alibi_distance", "pe_grid_rope_scores"):
        axes = [ax for ax in grid_figures[name].axes if ax.images]
        assert len({ax.images[0].get_clim() for ax in axes}) == 1, name


def test_grid_cells_get_integer_ticks(grid_figures):
    ax = grid_figures["pe_grid_alibi_distance"].axes[0]
    ticks = [*ax.get_xticks(), *ax.get_yticks()]
    assert all(float(tick).is_integer() for tick in ticks)
