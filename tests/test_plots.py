"""Figures: sweep plots from a fake sweep (tests/sweep_fixture.py) and the PE-math checks."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from lengen.pe import sinusoidal_table
from lengen.plots import (
    PE_STYLES,
    check_shift_rotation,
    main,
    pe_style,
    shift_rotation_matrix,
)
from sweep_fixture import make_sweep

pytestmark = pytest.mark.usefixtures("single_thread")  # tiny tensors: threads only add latency
ROOT = Path(__file__).resolve().parents[1]
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def assert_png(path: Path) -> None:
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE, path
    assert len(data) > 10_000, f"{path}: only {len(data)} bytes"


def assert_pdf(path: Path) -> None:
    data = path.read_bytes()
    assert data[:5] == b"%PDF-" and b"%%EOF" in data[-64:], path
    assert len(data) > 2_000, f"{path}: only {len(data)} bytes"


@pytest.fixture(scope="module")
def plotted(tmp_path_factory) -> Path:
    """The fake sweep with scripts/plot.py run on it (once for the module)."""
    sweep = make_sweep(tmp_path_factory.mktemp("plots") / "sweep")
    completed = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "plot.py"), str(sweep)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    return sweep


def test_sweep_plot_writes_a_png_per_panel(plotted):
    assert_png(plotted / "extrapolation_accuracy_copy_decoder_len4.png")


def test_sweep_plot_writes_a_pdf_per_panel(plotted):
    assert_pdf(plotted / "extrapolation_accuracy_copy_decoder_len4.pdf")


def test_sweep_plot_writes_the_heatmap(plotted):
    assert_png(plotted / "heatmap_accuracy.png")
    assert_pdf(plotted / "heatmap_accuracy.pdf")


def test_pe_analysis_writes_every_figure(tmp_path, capsys):
    assert main(["pe-analysis", "--length", "32", "--dim", "16", "--out", str(tmp_path)]) == 0
    for name in ("sinusoidal_matrix", "sinusoidal_waveforms", "sinusoidal_similarity"):
        assert_png(tmp_path / f"pe_{name}.png")
    assert_pdf(tmp_path / "pe_rope_relative_score.pdf")
    assert "max error" in capsys.readouterr().out


def test_shift_rotation_holds_for_the_sinusoidal_table():
    assert check_shift_rotation(sinusoidal_table(128, 64), base=10000.0) < 1e-5


def test_shift_rotation_fails_for_a_corrupted_table():
    table = sinusoidal_table(128, 64)
    table[:, [2, 3]] = table[:, [3, 2]]  # sin and cos of one frequency swapped
    assert check_shift_rotation(table, base=10000.0) > 0.5


def test_shift_rotation_fails_for_the_wrong_base():
    assert check_shift_rotation(sinusoidal_table(128, 64, base=100.0), base=10000.0) > 0.5


def test_shift_rotation_matrix_rotates_a_pair_by_hand():
    # one frequency ω = 0.5, shift 2: angle 1, so (sin 0, cos 0) = (0, 1) -> (sin 1, cos 1)
    rotated = shift_rotation_matrix(2, [0.5]) @ torch.tensor([0.0, 1.0], dtype=torch.float64)
    expected = torch.tensor([math.sin(1.0), math.cos(1.0)], dtype=torch.float64)
    torch.testing.assert_close(rotated, expected)


def test_pe_colours_are_distinct_for_the_first_slice():
    colours = [PE_STYLES[name][0] for name in ("nope", "sinusoidal", "learned", "alibi", "rope")]
    assert len(set(colours)) == 5


def test_unknown_pe_gets_a_deterministic_style():
    assert pe_style("my_new_pe") == pe_style("my_new_pe")
