"""Every figure lengen draws (matplotlib, no display needed), and only figures.

``plots.run``: one run's figures (metric vs length, accuracy by depth, loss by position);
``plots.attention``: attention maps, distances and diagnostics; ``plots.redraw``: a run's
figures drawn again from its json; ``plots.sweep``: an aggregated sweep's (``plots.names``: what its
lines are called; ``plots.sweep_diagnostics``: its attention and depth figures); ``plots.pe``: the
encodings' own; ``plots.common``: the shared look; ``plots.guard``: the guard every figure of a
run goes through (a failure is a note in results.json, never the results). The command line
is ``scripts/plot.py``.
"""

from lengen.plots.attention import plot_attention_distance, plot_attention_maps
from lengen.plots.common import OKABE_ITO, PAPER_RC, PE_STYLES, length_axis, pe_style, save_figure
from lengen.plots.pe import plot_pe_analysis
from lengen.plots.run import (
    plot_depth_heatmap,
    plot_extrapolation,
    plot_loss_by_position,
)
from lengen.plots.sweep import (
    extrapolation_means,
    plot_extrapolation_heatmap,
    plot_metric_vs_length,
    plot_sweep,
)

__all__ = [
    "OKABE_ITO",
    "PAPER_RC",
    "PE_STYLES",
    "extrapolation_means",
    "length_axis",
    "pe_style",
    "plot_attention_distance",
    "plot_attention_maps",
    "plot_depth_heatmap",
    "plot_extrapolation",
    "plot_extrapolation_heatmap",
    "plot_loss_by_position",
    "plot_metric_vs_length",
    "plot_pe_analysis",
    "plot_sweep",
    "save_figure",
]
