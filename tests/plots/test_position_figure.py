"""The accuracy-by-answer-position heatmap (plots.run.position_figure) of a task that scores only
some answer positions (flip-flop scores the symbol after a read): unscored cells are missing in a
named neutral colour, never values, never-scored positions draw no stripes, and the training
marker shows on every colour."""

from __future__ import annotations

import matplotlib.colors
import numpy as np
import pytest

from lengen.plots.common import MISSING_COLOUR, pyplot
from lengen.plots.run import position_figure


def flip_flop_section() -> dict:
    """Training length 4 (answers of 4 positions), evaluation at 4 and 8; odd positions are
    instructions, never scored; position 2 at length 8 holds a 0.0 written for 0 tokens."""
    by_length = {
        "4": {"accuracy": [None, 1.0, None, 0.9], "scored": [0, 8, 0, 8], "bin_width": 1},
        "8": {
            "accuracy": [None, 1.0, 0.0, 0.5, None, 0.4, None, 0.1],
            "scored": [0, 8, 0, 8, 0, 8, 0, 8],
            "bin_width": 1,
        },  # fmt: skip
    }
    return {"train_len": 4, "protocols": {"teacher_forced": by_length}}


@pytest.fixture
def figure():
    fig = position_figure(flip_flop_section())
    yield fig
    pyplot().close(fig)


def heatmap(fig):
    return fig.axes[0].images[0]


def test_positions_never_scored_draw_no_column(figure):
    assert heatmap(figure).get_array().shape == (2, 4)  # positions 1, 3, 5, 7


def test_a_position_with_no_scored_tokens_is_missing_not_a_value(figure):
    mask = np.ma.getmaskarray(heatmap(figure).get_array())
    assert mask.tolist() == [[False, False, True, True], [False, False, False, False]]


def test_missing_cells_are_a_neutral_colour_named_in_the_legend(figure):
    bad = heatmap(figure).get_cmap().get_bad()
    assert matplotlib.colors.to_hex(bad) == MISSING_COLOUR
    (legend,) = figure.legends
    assert any(text.get_text().startswith("no score") for text in legend.get_texts())


def test_ticks_name_the_true_positions(figure):
    labels = [tick.get_text() for tick in figure.axes[0].get_xticklabels()]
    assert labels and set(labels) <= {"1", "3", "5", "7"}


def test_training_marker_is_black_on_a_white_edge(figure):
    (line,) = figure.axes[0].get_lines()
    assert line.get_xdata()[0] == pytest.approx(1.5)  # after positions 1 and 3
    assert matplotlib.colors.to_hex(line.get_color()) == "#000000"
    (stroke,) = line.get_path_effects()
    assert matplotlib.colors.to_hex(stroke._gc["foreground"]) == "#ffffff"


def test_a_figure_with_every_cell_scored_names_no_missing_colour():
    by_length = {"4": {"accuracy": [0.9], "scored": 8, "bin_width": 1},
                 "8": {"accuracy": [0.5], "scored": 8, "bin_width": 1}}  # fmt: skip
    fig = position_figure({"train_len": 4, "protocols": {"teacher_forced": by_length}})
    assert not fig.legends  # one answer token (indirect indexing): nothing missing, no marker
    pyplot().close(fig)
