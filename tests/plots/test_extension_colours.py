"""The length-extension figure (plots.sweep.plot_extension) colours lines by method; where every
line has the same method (eval.py's sliding32 on every PE) it colours them by PE instead, so the
encodings are not all drawn in one colour."""

from __future__ import annotations

import matplotlib.colors
import pytest

import lengen.plots.sweep as sweep
from lengen.plots.common import pe_style


def extension_row(pe: str, method: str, length: int) -> dict:
    return {"task": "wikitext2", "model": "decoder", "train_len": 128, "protocol": "sliding",
            "metric": "ppl", "pe": pe, "method": method, "base_hash": pe, "config_hash": pe,
            "settings": "", "length": length, "in_distribution": length <= 128, "n_seeds": 2,
            "mean": 90.0, "ci95_low": None, "ci95_high": None, "_seed_values": [],
            "n_not_learned": 0, "_n_learned": 2, "draw_std": None, "baseline": None}  # fmt: skip


@pytest.fixture
def drawn(monkeypatch, tmp_path):
    """plot_extension on rows -> {line label: colour} of the figure it would save."""
    figures = []
    monkeypatch.setattr(sweep, "save_figure", lambda fig, *args, **kw: figures.append(fig) or [])

    def draw(rows):
        sweep.plot_extension(rows, tmp_path)
        (figure,) = figures
        lines = figure.axes[0].get_lines()
        return {line.get_label(): matplotlib.colors.to_hex(line.get_color()) for line in lines}

    return draw


def test_one_method_for_every_pe_is_coloured_by_pe(drawn):
    rows = [extension_row(pe, "sliding32", n) for pe in ("alibi", "rope") for n in (128, 256)]
    colours = drawn(rows)
    assert colours["alibi · sliding32"] == pe_style("alibi")[0].lower()
    assert colours["rope · sliding32"] == pe_style("rope")[0].lower()


def test_several_pes_and_methods_are_coloured_by_pe(drawn):
    rows = [extension_row(pe, method, n) for pe in ("alibi", "rope")
            for method in ("none", "dense") for n in (128, 256)]  # fmt: skip
    colours = drawn(rows)
    assert colours["rope · none"] == colours["rope · dense"] == pe_style("rope")[0].lower()
    assert colours["alibi · dense"] == pe_style("alibi")[0].lower()


def test_a_method_without_its_own_colour_is_never_black():
    # black is the run's own evaluation (method none)
    for method in ("dense", "sparse", "tag1", "tag2", "long", "short", "x", "y"):
        colour, _, _ = sweep._method_style({"method": method, "pe": "rope"})
        assert matplotlib.colors.to_hex(colour) != "#000000", method
