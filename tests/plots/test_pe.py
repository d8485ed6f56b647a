"""The encodings' own figures (``plot.py pe-analysis``)."""

from __future__ import annotations

import pytest

from helpers import assert_pdf, assert_png, load_script

pytestmark = pytest.mark.usefixtures("single_thread")  # tiny tensors: threads only add latency
main = load_script("plot").main


def test_pe_analysis_writes_every_figure(tmp_path, capsys):
    assert main(["pe-analysis", "--length", "32", "--dim", "16", "--out", str(tmp_path)]) == 0
    for name in ("sinusoidal_matrix", "sinusoidal_waveforms", "sinusoidal_similarity"):
        assert_png(tmp_path / f"pe_{name}.png")
    assert_pdf(tmp_path / "pe_rope_relative_score.pdf")
    assert "max error" in capsys.readouterr().out
