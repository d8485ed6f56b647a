"""The PE × setup heatmap names what its "–" cells mean: a configuration not run in that column."""

from __future__ import annotations

from lengen.aggregate import aggregate
from lengen.plots import plot_extrapolation_heatmap
from lengen.plots.common import pyplot
from sweep_fixture import write_run


def test_a_cell_not_run_is_explained_in_the_title(tmp_path):
    write_run(tmp_path, "alibi_copy", pe="alibi", accuracy={4: 1.0, 8: 0.5})
    write_run(tmp_path, "rope_copy", pe="rope", accuracy={4: 1.0, 8: 0.4})
    write_run(tmp_path, "alibi_reverse", pe="alibi", accuracy={4: 1.0, 8: 0.3},
              overrides={"data.name": "reverse"})  # fmt: skip
    figure = plot_extrapolation_heatmap(aggregate(tmp_path, metric="accuracy").rows)
    assert "– not run" in figure.axes[0].get_title()
    pyplot().close(figure)
