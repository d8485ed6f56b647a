"""The loss-by-position figure keeps its legend below the axes: inside (lower right) it covered
the long lengths' last bins."""

from __future__ import annotations

from lengen.plots.common import pyplot
from lengen.plots.run import loss_by_position_figure


def test_the_legend_is_outside_the_axes():
    lengths = {str(n): {"stride": n, "loss": [3.0] * n, "count": [4] * n} for n in (16, 64)}
    figure = loss_by_position_figure(
        {"protocol": "nonoverlap", "train_len": 16, "lengths": lengths}
    )
    assert figure.axes[0].get_legend() is None and len(figure.legends) == 1
    pyplot().close(figure)
