"""pe-analysis' waveform figure draws the integer samples of a pair whose period is a few
positions (ω = 1: wavelength 6.3), where lines between samples alone look like a jagged error."""

from __future__ import annotations

import lengen.plots.pe as pe_plots
from lengen.plots.common import pyplot


def test_the_fastest_pair_shows_its_samples_and_a_slow_pair_does_not(monkeypatch, tmp_path):
    figures = {}

    def keep(fig, stem, *args, **kwargs):
        figures[stem.name] = fig
        return []

    monkeypatch.setattr(pe_plots, "save_figure", keep)
    pe_plots.plot_pe_analysis(tmp_path, "sinusoidal", length=32, dim=16, formats=("png",))
    fast, *_, slow = figures["pe_sinusoidal_waveforms"].axes
    assert {line.get_marker() for line in fast.get_lines()} == {"."}
    assert {line.get_marker() for line in slow.get_lines()} == {"None"}
    for fig in figures.values():
        pyplot().close(fig)
