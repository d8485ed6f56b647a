"""Figures of attention: a checkpoint's attention maps and mean attention distance (``plot.py
attention``, on sequences and on grids) and a run's attention diagnostics over lengths (the
``attention_diagnostics`` section of results.json: entropy, largest weight, sink mass, mass by
distance). Each ``plot_*`` writes PNG and PDF atomically (``save_figure``) and returns the
paths; the ``*_figure`` function beside it builds the figure without saving it."""

from __future__ import annotations

from pathlib import Path

from lengen.plots.common import (
    FIGURE_WIDTH,
    FORMATS,
    MISSING_COLOUR,
    OKABE_ITO,
    PAPER_RC,
    figure_stem,
    floats,
    length_axis,
    marker_line,
    pyplot,
    save_figure,
)


def attention_maps_figure(recorded, names, length, train_len, train_tokens=None):
    """The figure of :func:`plot_attention_maps`, not saved: one panel per layer × head
    (rows: queries, columns: keys), a few token indices on each axis, one shared colour bar
    (square-root scale from 0 to the largest weight, so weak spread-out attention stays
    visible). ``train_tokens``: per layer (or one for all), the keys that layer held at the
    training length; where a map is longer, a line marks that boundary on both axes."""
    import numpy as np
    from matplotlib.colors import PowerNorm
    from matplotlib.ticker import MaxNLocator

    plt = pyplot()
    n_layers, n_heads = len(recorded), recorded[0].shape[1]
    if train_tokens is None or isinstance(train_tokens, int):
        train_tokens = [train_tokens] * n_layers
    largest = max(float(weights[0].max()) for weights in recorded)
    norm = PowerNorm(gamma=0.5, vmin=0.0, vmax=largest or 1.0)
    with plt.rc_context(PAPER_RC):
        side = max(1.1, min(2.0, (FIGURE_WIDTH - 0.8) / n_heads))  # a page wide up to 4 heads
        fig, axes = plt.subplots(n_layers, n_heads, figsize=(side * n_heads + 0.8,
                                 side * n_layers + 0.6), squeeze=False, layout="constrained")  # fmt: skip
        for layer, weights in enumerate(recorded):
            q_len, k_len = weights.shape[-2:]
            seen = train_tokens[layer]
            for head in range(n_heads):
                ax = axes[layer][head]
                image = ax.imshow(np.asarray(weights[0, head], dtype=np.float32), cmap="viridis",
                                  norm=norm, aspect="auto", interpolation="nearest")  # fmt: skip
                ax.set_title(f"layer {names[layer]}, head {head}", fontsize=8)
                for axis in (ax.xaxis, ax.yaxis):
                    axis.set_major_locator(MaxNLocator(nbins=3, integer=True))
                ax.tick_params(labelsize=7)
                if seen is not None and 0 < seen < k_len:  # keys beyond those seen in training
                    marker_line(ax, x=seen - 0.5, linewidth=0.8)
                    query_row = seen - 0.5 - (k_len - q_len)  # queries: the last q_len keys
                    if 0 < query_row < q_len:
                        marker_line(ax, y=query_row, linewidth=0.8)
            axes[layer][0].set_ylabel("query index")
        for head in range(n_heads):
            axes[-1][head].set_xlabel("key index")
        fig.colorbar(image, ax=axes, label="attention weight (√ scale)", shrink=0.9)
        marked = sorted({seen for seen, w in zip(train_tokens, recorded, strict=True)
                         if seen is not None and seen < w.shape[-1]})  # fmt: skip
        title = f"attention weights at length {length} (trained ≤ {train_len}), first instance"
        if marked:
            seen_text = "/".join(map(str, marked))
            title += f"\ndashed: end of the {seen_text} tokens of a training-length sequence"
        fig.suptitle(title, fontsize=9)
    return fig


def plot_attention_maps(
    recorded, names, length, train_len, stem, formats=("png", "pdf"), dpi=None, train_tokens=None
):
    """Attention weights of the first instance, one panel per layer × head
    (:func:`attention_maps_figure`) -> the paths written. ``recorded``: per layer, weights
    (B, H, Tq, Tk)."""
    figure = attention_maps_figure(recorded, names, length, train_len, train_tokens)
    return save_figure(figure, stem, formats, dpi=dpi)


def plot_attention_distance(report, distances, stem, formats=("png", "pdf"), dpi=None):
    """Mean attention distance per layer, one line per head -> the paths written.
    ``distances`` (layers, H); ``report`` gives the length, training length, layer names and
    the distances' unit (``distance_unit``: tokens unless given; grids: cells)."""
    plt = pyplot()
    n_layers, n_heads = distances.shape
    with plt.rc_context(PAPER_RC):
        fig, ax = plt.subplots(figsize=(6.0, 3.6))
        palette = list(OKABE_ITO.values())
        for head in range(n_heads):
            ax.plot(
                range(n_layers),
                distances[:, head].numpy(),
                marker="o",
                color=palette[head % len(palette)],
                label=f"head {head}",
            )
        ax.set_xticks(range(n_layers), report["layers"])
        ax.set_xlabel("layer")
        unit = report.get("distance_unit", "tokens")  # grids: cells (Euclidean)
        ax.set_ylabel(f"mean attention distance ({unit})")
        ax.set_title(
            f"length {report['length']} (trained ≤ {report['train_len']}), "
            f"{report['samples']} instances"
        )
        ax.grid(alpha=0.3)
        ax.legend(frameon=False, fontsize=8)
    return save_figure(fig, stem, formats, dpi=dpi)


#: the scalar attention statistics a run's diagnostics figure draws, with their axis labels
DIAGNOSTIC_LABELS = {
    "entropy": "entropy (nats)",
    "entropy_normalized": "entropy / log(keys seen)",
    "max_weight": "largest weight",
    "sink_mass": "mass on the first token",
}
_HEAD_MARKERS = "osD^vPX*h<>p"


def attention_diagnostics_figure(section: dict):
    """The figure of :func:`plot_attention_diagnostics`, not saved: one row per layer, one
    column per statistic (:data:`DIAGNOSTIC_LABELS`), each head a line against the evaluation
    length; the training length dashed. ``section``: results.json's ``attention_diagnostics``."""
    plt = pyplot()
    lengths = sorted(int(length) for length in section["lengths"])
    layers = [name for name in section["layers"]
              if any(name in section["lengths"][str(n)]["layers"] for n in lengths)]  # fmt: skip
    palette = list(OKABE_ITO.values())
    with plt.rc_context(PAPER_RC):
        # a page's width (FIGURE_WIDTH): statistics named once above their column, layers
        # at the left of their row, so the panels need no titles of their own
        fig, axes = plt.subplots(len(layers), len(DIAGNOSTIC_LABELS), squeeze=False,
                                 figsize=(FIGURE_WIDTH, 1.45 * len(layers) + 1.1),
                                 layout="constrained", sharex=True)  # fmt: skip
        for row, layer in enumerate(layers):
            for column, (statistic, label) in enumerate(DIAGNOSTIC_LABELS.items()):
                ax = axes[row][column]
                per_length = [section["lengths"][str(n)]["layers"].get(layer) for n in lengths]
                n_heads = max(len(stats[statistic]) for stats in per_length if stats)
                for head in range(n_heads):
                    values = floats([stats[statistic][head] if stats else None
                                      for stats in per_length])  # fmt: skip
                    ax.plot(lengths, values, color=palette[head % len(palette)],
                            marker=_HEAD_MARKERS[head % len(_HEAD_MARKERS)], markersize=3,
                            linewidth=1.2, label=f"head {head}")  # fmt: skip
                length_axis(ax, lengths, section["train_len"])
                ax.minorticks_off()
                ax.set_xlabel("evaluation length" if row == len(layers) - 1 else "", fontsize=8)
                ax.tick_params(labelsize=7)
                if statistic != "entropy":  # fractions of the weight, or of the maximum
                    ax.set_ylim(-0.03, 1.03)
                if row == 0:
                    ax.set_title(label.replace(" / ", " /\n").replace(" on the", "\non the"),
                                 fontsize=8)  # fmt: skip
                if column == 0:
                    ax.set_ylabel(f"layer {layer}", fontsize=8)
                ax.grid(alpha=0.3)
        handles, labels = axes[0][0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside lower center", ncols=min(len(labels), 5),
                   frameon=False, fontsize=8)  # fmt: skip
        fig.suptitle(f"attention per layer and head, mean over queries of "
                     f"{section['samples']} instances per length", fontsize=9)  # fmt: skip
    return fig


def distance_buckets_figure(section: dict):
    """The companion figure: per layer, the attention mass (mean over heads) by distance bucket
    (columns: 0, 1, 2–3, …) at each evaluation length (rows), viridis on [0, 1]; lengths up to
    the training length are labelled (trained)."""
    import numpy as np
    from matplotlib.patches import Patch

    plt = pyplot()
    lengths = sorted(int(length) for length in section["lengths"])
    buckets = section["buckets"]
    layers = [name for name in section["layers"]
              if any(name in section["lengths"][str(n)]["layers"] for n in lengths)]  # fmt: skip
    with plt.rc_context(PAPER_RC):
        columns = min(2, len(layers))  # two layers a row: a page's width (FIGURE_WIDTH)
        rows = -(-len(layers) // columns)
        fig, axes = plt.subplots(rows, columns, squeeze=False, layout="constrained",
                                 figsize=(FIGURE_WIDTH, (0.28 * len(lengths) + 1.5) * rows + 0.5))  # fmt: skip
        cmap = plt.get_cmap("viridis").with_extremes(bad=MISSING_COLOUR)
        for ax in axes.flat[len(layers) :]:
            ax.set_axis_off()
        for index, layer in enumerate(layers):
            grid = np.full((len(lengths), len(buckets)), np.nan)
            for row, length in enumerate(lengths):
                stats = section["lengths"][str(length)]["layers"].get(layer)
                if stats:
                    mass = np.asarray(stats["bucket_mass"], dtype=np.float64)  # (H, buckets)
                    grid[row, : mass.shape[1]] = mass.mean(axis=0)
            ax = axes.flat[index]
            image = ax.imshow(np.ma.masked_invalid(grid), vmin=0, vmax=1, cmap=cmap,
                              aspect="auto")  # fmt: skip
            ax.set_xticks(range(len(buckets)), buckets, rotation=60, fontsize=7)
            ax.set_yticks(range(len(lengths)), [f"{n} (trained)" if n <= section["train_len"]
                                                else str(n) for n in lengths], fontsize=8)  # fmt: skip
            ax.set_xlabel("distance |i − j| (tokens)", fontsize=8)
            ax.set_ylabel("evaluation length" if index % columns == 0 else "", fontsize=8)
            ax.set_title(f"layer {layer}", fontsize=9)
        fig.colorbar(image, ax=axes, label="attention mass (mean over heads)", shrink=0.9)
        fig.legend(handles=[Patch(facecolor=MISSING_COLOUR, label="no keys that far")],
                   loc="outside lower center", frameon=False, fontsize=8)  # fmt: skip
    return fig


def plot_attention_diagnostics(
    section: dict, stem: str | Path, dpi: int | None = None, formats: tuple[str, ...] = FORMATS
):
    """``<stem>.{png,pdf}`` (:func:`attention_diagnostics_figure`) and
    ``<stem>_distance.{png,pdf}`` (:func:`distance_buckets_figure`) -> the paths written."""
    stem = figure_stem(stem)
    paths = save_figure(attention_diagnostics_figure(section), stem, formats, dpi=dpi)
    distance_stem = stem.with_name(f"{stem.name}_distance")
    return paths + save_figure(distance_buckets_figure(section), distance_stem, formats, dpi=dpi)


def grid_queries(positions) -> list[tuple[int, str]]:
    """The query tokens a grid attention figure shows, as (token index, label): the centre
    cell, the corner cell (0, 0), and the first readout slot after the cells where the layout
    has one (position −1: it attends over the cells to answer). ``positions``: (T, 2)."""
    import numpy as np

    positions = np.asarray(positions)
    cells = np.flatnonzero((positions >= 0).all(axis=1))
    extent = positions[cells].max(axis=0) + 1
    centre = tuple(int(side) // 2 for side in extent)
    index = {tuple(int(c) for c in positions[i]): int(i) for i in cells}
    queries = [(index[centre], f"query at cell {centre}")]
    if centre != (0, 0):
        queries.append((index[(0, 0)], "query at cell (0, 0)"))
    slots = np.flatnonzero((positions < 0).any(axis=1))
    if slots.size:
        queries.append((int(slots[0]), "first readout slot"))
    return queries


def grid_attention_maps_figure(recorded, names, positions, length, train_len):
    """Attention of a grid run on the grid: per layer × query (rows; queries: :func:`grid_queries`)
    and head (columns), the weight on every key cell drawn at that cell, the query's cell marked
    +, the training grid's extent (sides ≤ ``train_len``, the top-left corner) dashed; one shared
    √-scale colour bar. ``recorded``: per layer, weights (B, H, Tq, Tk) of the first instance's
    tokens; ``positions`` (T, 2): each token's cell, −1 for readout slots (their keys carry no
    cell and are left out of the maps; the title gives their largest mass)."""
    import numpy as np
    from matplotlib import patheffects
    from matplotlib.colors import PowerNorm
    from matplotlib.patches import Rectangle
    from matplotlib.ticker import MaxNLocator

    plt = pyplot()
    positions = np.asarray(positions)
    cells = np.flatnonzero((positions >= 0).all(axis=1))
    extent = tuple(int(side) for side in positions[cells].max(axis=0) + 1)
    queries = grid_queries(positions)
    rows = [(layer, query) for layer in range(len(recorded)) for query in queries]
    n_heads = recorded[0].shape[1]
    largest = max(float(np.asarray(w[0], dtype=np.float32)[:, :, cells].max()) for w in recorded)
    norm = PowerNorm(gamma=0.5, vmin=0.0, vmax=largest or 1.0)
    slot_mass = []
    side = max(1.1, min(1.9, (FIGURE_WIDTH - 1.6) / n_heads))  # a page wide up to 4 heads
    with plt.rc_context(PAPER_RC):
        fig, axes = plt.subplots(len(rows), n_heads, squeeze=False, layout="constrained",
                                 figsize=(side * n_heads + 1.6, side * len(rows) + 0.8))  # fmt: skip
        for row, (layer, (token, label)) in enumerate(rows):
            weights = np.asarray(recorded[layer][0], dtype=np.float32)  # (H, Tq, Tk)
            offset = weights.shape[2] - weights.shape[1]  # queries: the last Tq of the keys
            for head in range(n_heads):
                ax = axes[row][head]
                keys = weights[head, token - offset] if token >= offset else weights[head, 0] * 0
                grid = np.full(extent, np.nan)
                grid[tuple(positions[cells].T)] = keys[cells]
                slot_mass.append(float(keys.sum() - keys[cells].sum()))
                image = ax.imshow(grid, cmap="viridis", norm=norm, interpolation="nearest")
                edge = [patheffects.withStroke(linewidth=3.0, foreground="white")]  # any colour
                if (positions[token] >= 0).all():
                    ax.plot(positions[token][1], positions[token][0], marker="+", color="black",
                            markersize=7, markeredgewidth=1.2, path_effects=edge)  # fmt: skip
                if 0 < train_len < max(extent):
                    ax.add_patch(Rectangle((-0.5, -0.5), train_len, train_len, fill=False,
                                           edgecolor="black", linestyle="--", linewidth=0.8,
                                           path_effects=edge))  # fmt: skip
                for axis in (ax.xaxis, ax.yaxis):
                    axis.set_major_locator(MaxNLocator(nbins=4, integer=True))
                ax.tick_params(labelsize=7)
                if row == 0:
                    ax.set_title(f"head {head}", fontsize=8)
            axes[row][0].set_ylabel(f"layer {names[layer]}\n{label}\nrow (cells)", fontsize=7)
        for head in range(n_heads):
            axes[-1][head].set_xlabel("column (cells)", fontsize=7)
        fig.colorbar(image, ax=axes, label="attention weight (√ scale)", shrink=0.9)
        title = f"attention over the cells of a {extent[0]}×{extent[1]} grid (first instance)"
        if 0 < train_len < max(extent):
            title += f"\ndashed: the {train_len}×{train_len} extent of the largest training grid"
        if max(slot_mass, default=0.0) > 1e-3:
            title += f"; mass on readout slots (not drawn) up to {max(slot_mass):.2f}"
        fig.suptitle(title, fontsize=9)
    return fig


def plot_grid_attention_maps(
    recorded, names, positions, length, train_len, stem, formats=("png", "pdf"), dpi=None
):
    """Attention of a grid run over its cells (:func:`grid_attention_maps_figure`) -> the paths
    written."""
    figure = grid_attention_maps_figure(recorded, names, positions, length, train_len)
    return save_figure(figure, stem, formats, dpi=dpi)
