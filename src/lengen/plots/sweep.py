"""Figures of an aggregated sweep (``lengen.aggregate.Summary``): metric vs length with CI
bands per configuration, and the PE × setup heatmap of means beyond the training length."""

from __future__ import annotations

from pathlib import Path

from lengen.plots.common import (
    PAPER_RC,
    length_axis,
    metric_label,
    pe_style,
    pyplot,
    safe_name,
    save_figure,
)


def plot_sweep(summary, out_dir: str | Path, formats=("png", "pdf")) -> list[Path]:
    """Every figure of a sweep: one metric-vs-length file per (task, model, train_len,
    protocol, metric) and one PE × setup heatmap per metric, named ``<name>.<tag>`` for the
    re-evaluations of ``--tag`` (as aggregate.py names its outputs), so they never overwrite the
    runs' own figures; returns the paths written."""
    suffix = f".{summary.tag}" if getattr(summary, "tag", None) else ""
    panels = {}
    for row in summary.rows:
        key = (row["task"], row["model"], row["train_len"], row["protocol"], row["metric"])
        panels.setdefault(key, []).append(row)
    several_protocols = len({key[3] for key in panels}) > 1
    paths = []
    for (task, model, train_len, protocol, metric), rows in panels.items():
        name = f"extrapolation_{metric}_{task}_{model}_len{train_len}"
        name += f"_{protocol}" if several_protocols else ""
        name = safe_name(name) + suffix
        fig = plot_metric_vs_length(rows, title=f"{task} · {model} · {protocol}")
        paths += save_figure(fig, Path(out_dir) / name, formats)
    for metric in sorted({row["metric"] for row in summary.rows}):
        fig = plot_extrapolation_heatmap([r for r in summary.rows if r["metric"] == metric])
        if fig is not None:
            paths += save_figure(
                fig, Path(out_dir) / f"heatmap_{safe_name(metric)}{suffix}", formats
            )
    return paths


def _line_label(rows: list[dict]) -> str:
    counts = sorted({r["n_seeds"] for r in rows})
    n = f"n={counts[0]}" if len(counts) == 1 else f"n={counts[0]}–{counts[-1]}"
    not_learned = max(r["n_not_learned"] for r in rows)
    n += f", {not_learned} not learned" if not_learned else ""
    settings = rows[0]["settings"]
    return f"{rows[0]['pe']}" + (f" [{settings}]" if settings else "") + f" ({n})"


def plot_metric_vs_length(rows: list[dict], title: str = ""):
    """Mean metric vs evaluation length, one line per configuration (colour = PE), shaded
    95% CI where n ≥ 2, error bars of ±std over position draws where rows carry it, the
    training length as a dashed vertical line, chance (dotted) and the trivial baseline (grey
    dashed) where known. Rows: aggregate rows of one (task, model, train_len, protocol,
    metric)."""
    plt = pyplot()
    metric, train_len = rows[0]["metric"], rows[0]["train_len"]
    lines = {}
    for row in rows:
        lines.setdefault(row["config_hash"], []).append(row)
    lengths = sorted({row["length"] for row in rows})
    with plt.rc_context(PAPER_RC):
        fig, ax = plt.subplots(figsize=(6.0, 3.8))
        variants = {}
        for members in sorted(lines.values(), key=lambda m: (str(m[0]["pe"]), m[0]["settings"])):
            members = sorted(
                (m for m in members if m["mean"] is not None), key=lambda m: m["length"]
            )
            if not members:
                continue
            colour, marker, style = pe_style(str(members[0]["pe"]))
            variant = variants.setdefault(members[0]["pe"], 0)
            variants[members[0]["pe"]] += 1
            if variant:
                style = ("--", ":", "-.", (0, (5, 1, 1, 1)))[(variant - 1) % 4]
            xs = [m["length"] for m in members]
            ax.plot(
                xs,
                [m["mean"] for m in members],
                color=colour,
                marker=marker,
                linestyle=style,
                linewidth=1.6,
                markersize=5,
                label=_line_label(members),
            )
            band = [m for m in members if m["ci95_low"] is not None]
            if band:
                ax.fill_between(
                    [m["length"] for m in band],
                    [m["ci95_low"] for m in band],
                    [m["ci95_high"] for m in band],
                    color=colour,
                    alpha=0.2 if len(lines) <= 4 else 0.1,  # many PEs: lighter, still legible
                    linewidth=0,
                )
            draws = [m for m in members if m.get("draw_std") is not None]
            if draws:  # spread over position draws (randomized positions), beside the seed CI
                ax.errorbar(
                    [m["length"] for m in draws],
                    [m["mean"] for m in draws],
                    yerr=[m["draw_std"] for m in draws],
                    fmt="none",
                    ecolor=colour,
                    elinewidth=1,
                    capsize=3,
                )
        chance = {r["chance_accuracy"] for r in rows if r.get("chance_accuracy") is not None}
        if metric == "accuracy" and len(chance) == 1:
            ax.axhline(chance.pop(), color="grey", linestyle=":", linewidth=1, label="chance")
        baseline = baseline_by_length(rows)
        if baseline:
            ax.plot(
                list(baseline),
                list(baseline.values()),
                color="grey",
                linestyle="--",
                linewidth=1,
                label="baseline (best constant answer)",
            )
        unit = rows[0].get("_length_unit") or ("length", "input symbols")
        length_axis(ax, lengths, train_len, unit)
        ax.minorticks_off()
        ax.set_ylabel(metric_label(metric))
        if METRIC_RANGE.get(metric):
            ax.set_ylim(*METRIC_RANGE[metric])
        ax.set_title(f"{title} · trained on {unit[0]}s ≤ {train_len}" if title else "")
        ax.grid(alpha=0.3)
        bars = "; bars: ±std over position draws" if any(r.get("draw_std") for r in rows) else ""
        ax.legend(
            title=f"PE (seeds); band: 95% CI, Student t{bars}",
            loc="upper left",
            bbox_to_anchor=(1.02, 1.0),
            frameon=False,
        )
    return fig


METRIC_RANGE = {"accuracy": (-0.02, 1.02), "exact_match": (-0.02, 1.02)}


def baseline_by_length(rows: list[dict]) -> dict:
    """{length: trivial baseline} (mean over the panel's configurations, which share their
    evaluation instances), sorted by length; {} where rows carry no baseline."""
    values = {}
    for row in sorted(rows, key=lambda r: r["length"]):
        if row.get("baseline") is not None:
            values.setdefault(row["length"], []).append(row["baseline"])
    return {length: sum(v) / len(v) for length, v in values.items()}


def extrapolation_means(rows: list[dict]) -> dict:
    """{(row label, column label): mean over lengths beyond training of the seed means}.

    Row label: PE (plus settings); column label: task · model · train_len (· protocol). Each
    length counts once, whatever its number of seeds."""
    from collections import defaultdict

    several_protocols = len({r["protocol"] for r in rows}) > 1
    cells = defaultdict(list)
    for r in rows:
        if r["in_distribution"] or r["mean"] is None:
            continue
        row_label = str(r["pe"]) + (f" [{r['settings']}]" if r["settings"] else "")
        column = f"{r['task']}\n{r['model']}, L={r['train_len']}"
        column += f"\n{r['protocol']}" if several_protocols else ""
        cells[(row_label, column)].append(r["mean"])
    return {key: sum(values) / len(values) for key, values in cells.items()}


def plot_extrapolation_heatmap(rows: list[dict]):
    """PE × (task, model, train_len) heatmap of the mean metric beyond the training length;
    None when no row lies beyond training, or when there is one setup only (its
    metric-vs-length figure says everything a one-column heatmap would)."""
    import numpy as np

    means = extrapolation_means(rows)
    if len({column for _, column in means}) < 2:
        return None
    plt = pyplot()
    metric = rows[0]["metric"]
    row_labels = sorted({r for r, _ in means})
    columns = sorted({c for _, c in means})
    grid = np.full((len(row_labels), len(columns)), np.nan)
    for (r, c), value in means.items():
        grid[row_labels.index(r), columns.index(c)] = value
    limits = METRIC_RANGE.get(metric)
    vmin, vmax = (0.0, 1.0) if limits else (np.nanmin(grid), np.nanmax(grid))
    with plt.rc_context(PAPER_RC):
        width = 2.2 + 1.1 * len(columns) + 0.05 * max(len(r) for r in row_labels)
        fig, ax = plt.subplots(figsize=(min(width, 14), 1.0 + 0.42 * len(row_labels)))
        cmap = plt.get_cmap("viridis" if METRIC_DIRECTIONS_PLOT.get(metric, True) else "viridis_r")
        image = ax.imshow(grid, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
        for i in range(len(row_labels)):
            for j in range(len(columns)):
                value = grid[i, j]
                if np.isnan(value):
                    ax.text(j, i, "–", ha="center", va="center", fontsize=9, color="grey")
                    continue
                shade = (value - vmin) / (vmax - vmin) if vmax > vmin else 0.5
                if not METRIC_DIRECTIONS_PLOT.get(metric, True):
                    shade = 1 - shade
                text = f"{value:.2f}" if limits else f"{value:.3g}"
                colour = "black" if shade > 0.6 else "white"
                ax.text(j, i, text, ha="center", va="center", fontsize=9, color=colour)
        ax.set_xticks(range(len(columns)), columns)
        ax.set_yticks(range(len(row_labels)), row_labels)
        ax.set_title(f"mean {metric_label(metric)} beyond the training length")
        bar = fig.colorbar(image, ax=ax, fraction=0.05, pad=0.03)
        bar.set_label(metric_label(metric))
    return fig


METRIC_DIRECTIONS_PLOT = {"loss": False, "ppl": False, "bits_per_byte": False}


#: the diagnostics a sweep figure draws, in order, with their axis labels
SWEEP_DIAGNOSTICS = {
    "entropy_normalized": "entropy / log(keys seen)",
    "max_weight": "largest weight",
    "sink_mass": "mass on the first token",
}


def diagnostics_vs_length_figure(table, labels: dict, title: str, train_len: int):
    """Per attention statistic (columns), its mean over layers, heads and seeds against the
    evaluation length, one line per configuration (colour and marker = PE, as in every figure);
    the training length dashed. ``table``: ``lengen.aggregate.diagnostics.attention_over_seeds``
    rows of one task, model and training length; ``labels``: config_hash -> line name."""
    plt = pyplot()
    lengths = sorted(int(n) for n in table["length"].unique())
    with plt.rc_context(PAPER_RC):
        fig, axes = plt.subplots(1, len(SWEEP_DIAGNOSTICS), figsize=(3.0 * len(SWEEP_DIAGNOSTICS)
                                 + 1.6, 3.2), squeeze=False, layout="constrained")  # fmt: skip
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
            length_axis(ax, lengths, train_len)
            ax.minorticks_off()
            ax.set_ylim(-0.03, 1.03)
            ax.set_ylabel(label)
            ax.set_title(label, fontsize=9)
            ax.grid(alpha=0.3)
        handles, names = axes[0][0].get_legend_handles_labels()
        fig.legend(handles, names, loc="outside right upper", frameon=False, fontsize=8,
                   title="PE (seeds)")  # fmt: skip
        fig.suptitle(f"{title}: attention, mean over layers, heads and seeds", fontsize=9)
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
