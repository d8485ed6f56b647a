"""The shared look of the figures (one style per encoding) and how they are saved."""

from __future__ import annotations

from lengen.plots import PE_STYLES, pe_style


def test_pe_colours_are_distinct_for_the_first_slice():
    colours = [PE_STYLES[name][0] for name in ("nope", "sinusoidal", "learned", "alibi", "rope")]
    assert len(set(colours)) == 5


def test_pe_colours_are_distinct_for_the_schedules_and_what_they_are_compared_with():
    colours = [PE_STYLES[name][0] for name in ("nope", "rope", "rnope", "rnope_swa", "irope")]
    assert len(set(colours)) == 5


def test_pe_colours_are_distinct_for_each_home_ground_comparison():
    # the recipes of docs/reproductions.md (f), (g), (h)
    for names in (("fox", "path", "stick_breaking", "rope", "nope"), ("pope", "rope")):
        assert len({PE_STYLES[name][0] for name in names}) == len(names), names


def test_unknown_pe_gets_a_deterministic_style():
    assert pe_style("my_new_pe") == pe_style("my_new_pe")


def _figure():
    from lengen.plots.common import pyplot

    fig, ax = pyplot().subplots()
    ax.plot([1, 2, 3], [3, 1, 2])
    return fig


def test_save_figure_writes_each_format_it_is_asked_for(tmp_path):
    from lengen.plots.common import save_figure

    paths = save_figure(_figure(), tmp_path / "extrapolation", formats=("png", "pdf"))
    heads = [path.read_bytes()[:4] for path in paths]
    assert heads == [b"\x89PNG", b"%PDF"]


def test_save_figure_leaves_only_the_figures(tmp_path):
    from lengen.plots.common import save_figure

    save_figure(_figure(), tmp_path / "extrapolation")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["extrapolation.pdf", "extrapolation.png"]


def test_save_figure_syncs_each_file_to_disk(tmp_path, monkeypatch):
    # a power cut after the rename must not leave an empty figure (lengen.atomic)
    import os
    import stat

    from lengen.plots.common import save_figure

    synced, real = [], os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(os.fstat(fd).st_mode) or real(fd))
    save_figure(_figure(), tmp_path / "extrapolation")
    assert sum(stat.S_ISREG(mode) for mode in synced) == 2
