"""The training-length marks on attention maps show on every colour of the map: black on a white
edge (white alone vanished on viridis' yellow, where attention is strongest)."""

from __future__ import annotations

import matplotlib.colors
import torch

from lengen.data.layout import grid_coordinates
from lengen.plots.attention import attention_maps_figure, grid_attention_maps_figure
from lengen.plots.common import pyplot


def is_black_on_white(artist, colour) -> bool:
    (stroke,) = artist.get_path_effects()
    foreground = matplotlib.colors.to_hex(stroke._gc["foreground"])
    return matplotlib.colors.to_hex(colour) == "#000000" and foreground == "#ffffff"


def test_attention_map_marks_are_black_on_a_white_edge():
    weights = torch.softmax(torch.randn(1, 1, 12, 12), dim=-1)  # (B, H, Tq, Tk)
    figure = attention_maps_figure([weights], ["0"], 12, 4, train_tokens=9)
    lines = figure.axes[0].get_lines()
    assert len(lines) == 2 and all(is_black_on_white(line, line.get_color()) for line in lines)
    pyplot().close(figure)


def test_the_training_grid_box_is_black_on_a_white_edge():
    positions = grid_coordinates((4, 4))  # (16, 2)
    weights = torch.softmax(torch.randn(1, 1, 16, 16), dim=-1)
    figure = grid_attention_maps_figure([weights], ["0"], positions, 4, 2)
    (box,) = figure.axes[0].patches
    assert is_black_on_white(box, box.get_edgecolor())
    pyplot().close(figure)
