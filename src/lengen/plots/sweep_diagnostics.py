"""Figures of a sweep's attention diagnostics and retrieval depth grids over seeds
(``lengen.aggregate.diagnostics`` computes the tables and writes the files): attention statistics
against the evaluation length per configuration, and exact match by length × answer depth."""

from __future__ import annotations

from lengen.plots.common import FIGURE_WIDTH, PAPER_RC, length_axis, pe_style, pyplot

#: the diagnostics a sweep figure draws, in order, with their axis labels
SWEEP_DIAGNOSTICS = {
    "entropy_normalized": "entropy / log(keys seen)",
    "max_weight": "largest weight",
    "sink_mass": "mass on the first token",
}


def diagnostics_vs_length_figure(table, labels: dict, title: str, train_len: int, unit=None):
    """Per attention statistic (panels side by side, sharing the [0, 1] y axis), its mean over
    layers, heads and seeds against the evaluation length, one line per configuration (colour
    and marker = PE, as in every figure); the training length dashed; ``FIGURE_WIDTH`` wide,
    the legend below. ``table``: ``lengen.aggregate.diagnostics.attention_over_seeds`` rows of
    one task, model and training length; ``labels``: config_hash -> line name; ``unit``: what
    a length counts (``lengen.results.length_unit``; default input symbols)."""
    import math

    plt = pyplot()
    lengths = sorted(int(n) for n in table["length"].unique())
    with plt.rc_context(PAPER_RC):
        fig, axes = plt.subplots(1, len(SWEEP_DIAGNOSTICS), figsize=(FIGURE_WIDTH, 2.9),
                                 sharey=True, squeeze=False, layout="constrained")  # fmt: skip
        for ax, (statistic, label) in zip(axes[0], SWEEP_DIAGNOSTICS.items(), strict=True):
            rows = table[table["statistic"] == statistic]
            for config, line in sorted(rows.groupby("config_hash"),
                                       key=lambda item: labels.get(item[0], item[0])):  # fmt: skip
                line = line.sort_values("length")
                pe = str(line["pe"].iloc[0])
                colour, marker, style = pe_style(pe)
                seeds = sorted(set(line["n_seeds"]))
                n = f"{seeds[0]}" if len(seeds) == 1 else f"{seeds[0]}–{seeds[-1]}"
                name = f"{labels.get(config, pe)} (n={n})"
                ax.plot(line["length"], line["mean"], color=colour, marker=marker,
                        linestyle=style, linewidth=1.4, markersize=4, label=name)  # fmt: skip
            length_axis(ax, lengths, train_len, unit or ("length", "input symbols"))
            ax.set_xlabel(ax.get_xlabel() if ax is axes[0][1] else "")  # once, in the middle
            ax.minorticks_off()
            ax.tick_params(axis="x", labelsize=8, labelrotation=45 if len(lengths) > 4 else 0)
            ax.set_ylim(-0.03, 1.03)
            ax.set_title(label, fontsize=9)  # the panel's y axis: its title
            ax.grid(alpha=0.3)
        handles, names = axes[0][0].get_legend_handles_labels()
        columns = max(1, min(3, len(names)))
        fig.legend(handles, names, loc="outside lower center", frameon=False, fontsize=8,
                   ncols=columns, title="PE (seeds)", title_fontsize=8)  # fmt: skip
        fig.suptitle(f"{title}: attention, mean over layers, heads and seeds", fontsize=9)
        fig.set_size_inches(FIGURE_WIDTH, 2.9 + 0.18 * math.ceil(len(names) / columns))
    return fig


def depth_grid_figure(grid, title: str, train_len: int):
    """Exact match by evaluation length (rows) × depth bin of the answer (columns), mean over
    seeds, annotated; viridis on [0, 1]. ``grid``: ``depth_over_seeds`` rows of one
    configuration."""
    import numpy as np

    plt = pyplot()
    lengths = sorted(int(n) for n in grid["length"].unique())
    bins = grid.drop_duplicates("depth_bin").sort_values("depth_bin")
    values = np.full((len(lengths), len(bins)), np.nan)
    for row in grid.itertuples():
        values[lengths.index(int(row.length)), int(row.depth_bin)] = row.exact_match
    seeds = sorted(set(grid["n_seeds"]))
    with plt.rc_context(PAPER_RC):
        fig, ax = plt.subplots(figsize=(1.8 + 0.9 * len(bins), 1.6 + 0.45 * len(lengths)),
                               layout="constrained")  # fmt: skip
        image = ax.imshow(values, vmin=0, vmax=1, cmap="viridis", aspect="auto")
        for i in range(len(lengths)):
            for j in range(len(bins)):
                if not np.isnan(values[i, j]):
                    ax.text(j, i, f"{values[i, j]:.2f}", ha="center", va="center", fontsize=8,
                            color="black" if values[i, j] > 0.6 else "white")  # fmt: skip
        ax.set_xticks(range(len(bins)), [f"{low:.1f}–{high:.1f}" for low, high in
                                         zip(bins["depth_low"], bins["depth_high"], strict=True)])  # fmt: skip
        ax.set_yticks(range(len(lengths)), [f"{n} (trained)" if n <= train_len else str(n)
                                            for n in lengths])  # fmt: skip
        ax.set_xlabel("depth of the answer (0 = start of the input)")
        ax.set_ylabel("evaluation length (input symbols)")
        n = f"n={seeds[0]}" if len(seeds) == 1 else f"n={seeds[0]}–{seeds[-1]}"
        ax.set_title(f"{title}\nexact match by depth, mean over seeds ({n})", fontsize=9)
        fig.colorbar(image, ax=ax, label="exact match")
    return fig
