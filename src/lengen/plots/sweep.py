"""Figures of an aggregated sweep (``lengen.aggregate.Summary``): metric vs length with CI
bands per configuration, and the PE × setup heatmap of means beyond the training length."""

from __future__ import annotations

from pathlib import Path

from lengen.plots.common import (
    MARKERS,
    PAPER_RC,
    length_axis,
    metric_label,
    pe_style,
    pyplot,
    safe_name,
    save_figure,
)
from lengen.plots.names import line_names


def plot_sweep(
    summary, out_dir: str | Path, formats=("png", "pdf"), renames: dict | None = None
) -> list[Path]:
    """Every figure of a sweep: one metric-vs-length file per (task, model, train_len,
    protocol, metric) and one PE × setup heatmap per metric, named ``<name>.<tag>`` for the
    re-evaluations of ``--tag`` (as aggregate.py names its outputs), so they never overwrite the
    runs' own figures; returns the paths written. ``renames``: automatic line name (or config
    hash) -> the name to show (``plot.py --labels``)."""
    suffix = f".{summary.tag}" if getattr(summary, "tag", None) else ""
    names = line_names(summary.rows, renames)
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
        fig = plot_metric_vs_length(rows, title=f"{task} · {model} · {protocol}", names=names)
        paths += save_figure(fig, Path(out_dir) / name, formats)
    for metric in sorted({row["metric"] for row in summary.rows}):
        rows = [r for r in summary.rows if r["metric"] == metric]
        fig = plot_extrapolation_heatmap(rows, names=names)
        if fig is not None:
            paths += save_figure(
                fig, Path(out_dir) / f"heatmap_{safe_name(metric)}{suffix}", formats
            )
    return paths


#: with this many seeds or fewer a figure shows each seed, not a t-interval: with 2 seeds the
#: 95% interval is ±12.7 standard errors, a band that swamps the figure and says little
FEW_SEEDS = 3


def _line_label(rows: list[dict], name: str, with_n: bool = True) -> str:
    """The legend entry: name, seeds (unless the legend's title gives one n for all), and
    what did not learn or was NaN."""
    counts = sorted({r["n_seeds"] for r in rows})
    notes = [f"n={counts[0]}" if len(counts) == 1 else f"n={counts[0]}–{counts[-1]}"]
    notes = notes if with_n else []
    if _not_learned(rows):
        notes.append("did not learn")
    elif not_learned := max(r["n_not_learned"] for r in rows):
        notes.append(f"{not_learned} not learned")
    if nan := max(r.get("n_nan") or 0 for r in rows):
        notes.append(f"{nan} NaN")
    return f"{name} ({', '.join(notes)})" if notes else name


def _not_learned(rows: list[dict]) -> bool:
    """Whether every run of a line did not learn in distribution (drawn apart: faint, hollow)."""
    return all(r["n_not_learned"] > 0 and not r.get("_n_learned") for r in rows) and not any(
        r.get("_n_unchecked") for r in rows
    )


def _dodge(index: int, count: int, log_axis: bool, lengths: list[int]):
    """x -> x shifted for the ``index``-th of ``count`` lines, so points at the same value (many
    lines at 0) stand side by side instead of on top of each other: 0.04 octave apart on a log
    axis (0.16 octave at most from the first line to the last), the same share of the smallest
    gap between lengths on a linear one."""
    if count < 2:
        return lambda x: x
    step = (index - (count - 1) / 2) / (count - 1)  # -0.5 … 0.5
    spread = min(0.04 * count, 0.16)  # octaves from the first line to the last
    if log_axis:
        return lambda x: x * 2 ** (spread * step)
    # one length: a gap of the length itself, drawn within ±25 % of it (``plot_metric_vs_length``)
    gaps = [b - a for a, b in zip(lengths, lengths[1:], strict=False)] or [max(lengths[0], 1)]
    return lambda x: x + spread / 2 * min(gaps) * step


def plot_metric_vs_length(
    rows: list[dict], title: str = "", names: dict | None = None, style=None, what: str = "PE"
):
    """Mean metric vs evaluation length, one line per configuration (colour = PE); a line of
    more than ``FEW_SEEDS`` seeds gets a shaded 95% CI (clipped to the metric's range), one of
    fewer its seeds' values as thin lines; error bars of ±std over position draws where rows carry it;
    configurations whose runs all did not learn faint, with hollow markers; lines dodged a
    little along x so equal values (at 0) do not hide each other; the training length as a
    dashed vertical line, chance (dotted) and the trivial baseline (grey dashed, drawn above the
    lines) where known; the legend below the axes in columns. Rows: aggregate rows of one (task, model, train_len,
    protocol, metric); ``names``: config_hash -> line name (``line_names``); ``style``: row ->
    (colour, marker, line style) of its line (default: its PE's, ``pe_style``, a PE's variants
    told apart by line style); ``what``: what a line is, for the legend's title."""
    import math

    plt = pyplot()
    metric, train_len = rows[0]["metric"], rows[0]["train_len"]
    names, style_of = names or line_names(rows), style
    lines = {}
    for row in rows:
        lines.setdefault(row["config_hash"], []).append(row)
    lengths = sorted({row["length"] for row in rows})
    log_axis = len(lengths) > 1 and max(lengths) / max(min(lengths), 1) >= 4
    same_n = len({r["n_seeds"] for r in rows if r["mean"] is not None}) == 1
    limits = METRIC_RANGE.get(metric)
    ordered = sorted(
        lines.values(), key=lambda m: (str(m[0]["pe"]), m[0]["settings"], m[0].get("_order", 0))
    )
    with plt.rc_context(PAPER_RC):
        fig, ax = plt.subplots(figsize=(6.4, 3.8), layout="constrained")
        variants, seeds_drawn, bands_drawn = {}, False, False
        for index, members in enumerate(ordered):
            members = sorted(
                (m for m in members if m["mean"] is not None), key=lambda m: m["length"]
            )
            if not members:
                continue
            shift = _dodge(index, len(ordered), log_axis, lengths)
            if style_of is not None:
                colour, marker, style = style_of(members[0])
            else:
                colour, marker, style = pe_style(str(members[0]["pe"]))
                variant = variants.setdefault(members[0]["pe"], 0)
                variants[members[0]["pe"]] += 1
                if variant:
                    style = ("--", ":", "-.", (0, (5, 1, 1, 1)))[(variant - 1) % 4]
                if variant and len(lengths) == 1:  # points, no lines: tell variants by marker
                    marker = MARKERS[(MARKERS.index(marker) + variant) % len(MARKERS)]
            faint = _not_learned(members)
            few = max(m["n_seeds"] for m in members) <= FEW_SEEDS  # this line's seeds
            xs = [shift(m["length"]) for m in members]
            ax.plot(
                xs,
                [m["mean"] for m in members],
                color=colour,
                marker=marker,
                linestyle=style,
                linewidth=1.0 if faint else 1.6,
                markersize=5,
                markerfacecolor="white" if faint else colour,
                alpha=0.55 if faint else 1.0,
                label=_line_label(
                    members, names.get(members[0]["config_hash"], members[0]["pe"]), not same_n
                ),
                zorder=2,
            )
            if few:  # each seed, thin: two or three seeds are data, not a distribution
                by_seed = {}
                for m in members:
                    for seed, value in m.get("_seed_values") or []:
                        by_seed.setdefault(seed, []).append((shift(m["length"]), value))
                for points in by_seed.values() if max(m["n_seeds"] for m in members) > 1 else []:
                    ax.plot(*zip(*points, strict=True), color=colour, linewidth=0.6,
                            alpha=0.5, marker=marker, markersize=2.5, zorder=1.5)  # fmt: skip
                    seeds_drawn = True
            band = [m for m in members if m["ci95_low"] is not None]
            if band and not few:
                low = [m["ci95_low"] for m in band]
                high = [m["ci95_high"] for m in band]
                if limits:  # the interval's arithmetic leaves [0, 1]; the metric cannot
                    low = [max(v, 0.0) for v in low]
                    high = [min(v, 1.0) for v in high]
                ax.fill_between(
                    [shift(m["length"]) for m in band],
                    low,
                    high,
                    color=colour,
                    alpha=0.2 if len(lines) <= 4 else 0.1,  # many PEs: lighter, still legible
                    linewidth=0,
                    zorder=1,
                )
                bands_drawn = True
            draws = [m for m in members if m.get("draw_std") is not None]
            if draws:  # spread over position draws (randomized positions), beside the seed CI
                ax.errorbar(
                    [shift(m["length"]) for m in draws],
                    [m["mean"] for m in draws],
                    yerr=[m["draw_std"] for m in draws],
                    fmt="none",
                    ecolor=colour,
                    elinewidth=1,
                    capsize=3,
                )
        chance = {r["chance_accuracy"] for r in rows if r.get("chance_accuracy") is not None}
        if metric == "accuracy" and len(chance) == 1:
            ax.axhline(chance.pop(), color="grey", linestyle=":", linewidth=1, label="chance",
                       zorder=3)  # fmt: skip
        baseline = baseline_by_length(rows)
        if baseline:  # above the lines: where every model sits at 0, so may the baseline
            ax.plot(
                list(baseline),
                list(baseline.values()),
                color="grey",
                linestyle="--",
                linewidth=1.1,
                marker="_" if len(baseline) == 1 else None,  # one length: a line of one point
                markersize=24,
                label="baseline (best constant answer)",
                zorder=4,
            )
        unit = rows[0].get("_length_unit") or ("length", "input symbols")
        length_axis(ax, lengths, train_len, unit)
        if len(lengths) == 1:  # else autoscaling zooms into the dodge: one length at full width
            ax.set_xlim(0.75 * lengths[0], 1.25 * lengths[0])
        ax.minorticks_off()
        ax.set_ylabel(metric_label(metric))
        if limits:
            ax.set_ylim(*limits)
        ax.set_title(f"{title} · trained on {unit[0]}s ≤ {train_len}" if title else "")
        ax.grid(alpha=0.3)
        seeds = {r["n_seeds"] for r in rows if r["mean"] is not None}
        notes = [f"{what}; n = {seeds.pop()} seed(s) each" if same_n else f"{what} (seeds)"]
        notes += ["thin lines: each seed"] if seeds_drawn else []
        clipped = ", clipped to [0, 1]" if limits else ""
        notes += [f"band: 95% CI, Student t{clipped}"] if bands_drawn else []
        if any(r.get("draw_std") for r in rows):
            notes.append("bars: ±std over position draws")
        if any(_not_learned(m) for m in lines.values()):
            notes.append("faint, hollow markers: did not learn")
        handles, labels = ax.get_legend_handles_labels()
        longest = max((len(label) for label in labels), default=1)
        # columns as wide as the longest entry (~0.055 in per 8-pt character) fit in 6.4 in
        columns = max(1, min(len(labels), 4, int(6.2 / (0.055 * longest + 0.5))))
        title = "; ".join(notes)
        if len(title) > 90:  # two lines, not a title wider than the figure
            half = len(notes) // 2
            title = "; ".join(notes[:half]) + ";\n" + "; ".join(notes[half:])
        fig.legend(handles, labels, title=title, loc="outside lower center",
                   ncols=columns, frameon=False, fontsize=8, title_fontsize=8)  # fmt: skip
        rows_of_legend = math.ceil(len(labels) / columns)
        fig.set_size_inches(6.4, min(3.8 + 0.2 * rows_of_legend, 9.0))
    return fig


#: y limits of bounded metrics, with room so that lines at 0 and 1 are not cut by the frame
METRIC_RANGE = {"accuracy": (-0.04, 1.04), "exact_match": (-0.04, 1.04)}


def baseline_by_length(rows: list[dict]) -> dict:
    """{length: trivial baseline} (mean over the panel's configurations, which share their
    evaluation instances), sorted by length; {} where rows carry no baseline."""
    values = {}
    for row in sorted(rows, key=lambda r: r["length"]):
        if row.get("baseline") is not None:
            values.setdefault(row["length"], []).append(row["baseline"])
    return {length: sum(v) / len(v) for length, v in values.items()}


def extrapolation_means(rows: list[dict], names: dict | None = None) -> dict:
    """{(row label, column label): mean over lengths beyond training of the seed means}.

    Row label: the line's name (``line_names``: PE plus short settings); column label: task ·
    model · train_len (· protocol). Each length counts once, whatever its number of seeds."""
    from collections import defaultdict

    cells = defaultdict(list)
    for r in rows:
        if not (r["in_distribution"] or r["mean"] is None):
            cells[_heatmap_cell(r, rows, names)].append(r["mean"])
    return {key: sum(values) / len(values) for key, values in cells.items()}


def _heatmap_cell(row: dict, rows: list[dict], names: dict | None) -> tuple[str, str]:
    several_protocols = len({r["protocol"] for r in rows}) > 1
    column = f"{row['task']}\n{row['model']}, L={row['train_len']}"
    column += f"\n{row['protocol']}" if several_protocols else ""
    return (names or {}).get(row["config_hash"], str(row["pe"])), column


def plot_extrapolation_heatmap(rows: list[dict], names: dict | None = None):
    """PE × (task, model, train_len) heatmap of the mean metric beyond the training length;
    None when no row lies beyond training. A one-column heatmap (the common first sweep: one
    task) is drawn too: the sweep's ranking at a glance, one number per configuration. Cells
    whose runs all did not learn are marked †; the size is bounded (never wider than 12 or
    taller than 14 inches; smaller text with many cells)."""
    import numpy as np

    names = names or line_names(rows)
    means = extrapolation_means(rows, names)
    if not means:
        return None
    by_config: dict[str, list[dict]] = {}
    for r in rows:
        by_config.setdefault(r["config_hash"], []).append(r)
    unlearned = {_heatmap_cell(members[0], rows, names) for members in by_config.values()
                 if _not_learned(members)}  # fmt: skip
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
        width = 2.4 + 1.1 * len(columns) + 0.06 * max(len(r) for r in row_labels)
        height = min(1.4 + 0.42 * len(row_labels), 14.0)
        fig, ax = plt.subplots(figsize=(min(width, 12.0), height), layout="constrained")
        cmap = plt.get_cmap("viridis" if METRIC_DIRECTIONS_PLOT.get(metric, True) else "viridis_r")
        image = ax.imshow(grid, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
        size = 9 if len(row_labels) <= 24 and len(columns) <= 10 else 7
        for i in range(len(row_labels)):
            for j in range(len(columns)):
                value = grid[i, j]
                if np.isnan(value):
                    ax.text(j, i, "–", ha="center", va="center", fontsize=size, color="grey")
                    continue
                shade = (value - vmin) / (vmax - vmin) if vmax > vmin else 0.5
                if not METRIC_DIRECTIONS_PLOT.get(metric, True):
                    shade = 1 - shade
                text = f"{value:.2f}" if limits else f"{value:.3g}"
                text += " †" if (row_labels[i], columns[j]) in unlearned else ""
                colour = "black" if shade > 0.6 else "white"
                ax.text(j, i, text, ha="center", va="center", fontsize=size, color=colour)
        ax.set_xticks(range(len(columns)), columns, fontsize=size)
        ax.set_yticks(range(len(row_labels)), row_labels, fontsize=size)
        title = f"mean {metric_label(metric)} beyond the training length"
        notes = ["† no run learned the task in distribution"] if unlearned else []
        notes += ["– not run"] if np.isnan(grid).any() else []  # a configuration not in a column
        ax.set_title(title + ("\n" + "; ".join(notes) if notes else ""))
        bar = fig.colorbar(image, ax=ax, fraction=0.05, pad=0.03)
        bar.set_label(metric_label(metric))
    return fig


METRIC_DIRECTIONS_PLOT = {"loss": False, "ppl": False, "bits_per_byte": False}


#: a colour per length-extension method, the same in every figure (``none``: the run's own)
METHOD_COLOURS = {"none": "black", "PI": "blue", "NTK": "orange", "dynamic NTK": "sky_blue"}
METHOD_COLOURS |= {"YaRN": "vermillion"}


def plot_extension(rows: list[dict], out_dir: str | Path, formats=("png", "pdf"), names=None):
    """Length-extension methods compared (``lengen.aggregate.extension.extension_rows``): one
    ``extension_<metric>_<task>_<model>_len<L>`` figure per panel, a line per trained
    configuration × method (colour = method, ``METHOD_COLOURS``; marker = PE), drawn as
    :func:`plot_metric_vs_length` draws a sweep; -> the paths written."""
    names = names or {}
    panels: dict[tuple, list[dict]] = {}
    for row in rows:
        key = (row["task"], row["model"], row["train_len"], row["protocol"], row["metric"])
        panels.setdefault(key, []).append(row)
    several_protocols = len({key[3] for key in panels}) > 1
    paths = []
    for (task, model, train_len, protocol, metric), members in panels.items():
        bases = {row["base_hash"] for row in members}
        lines, labels = [], {}
        for row in members:
            digest = f"{row['base_hash']}·{row['method']}"
            base = names.get(row["base_hash"], str(row["pe"]))
            labels[digest] = row["method"] if len(bases) == 1 else f"{base} · {row['method']}"
            lines.append({**row, "config_hash": digest})
        name = f"extension_{metric}_{task}_{model}_len{train_len}"
        name += f"_{protocol}" if several_protocols else ""
        pe = next(iter({str(row["pe"]) for row in members})) if len(bases) == 1 else ""
        title = f"{task} · {model} · {protocol}" + (f" · {pe}" if pe else "")
        methods = sorted({row["method"] for row in members}, key=lambda m: (m != "none", m))
        if len(methods) == 1:  # eval.py's sliding32 on every PE: colour by PE, not all one
            style, what = None, f"PE; {methods[0]}"
        elif len(bases) > 1:  # several PEs × methods: colour and marker by PE, line by method
            style, what = _pe_method_style(methods), "PE · method (line style)"
        else:
            style, what = _method_style, "length-extension method"
        fig = plot_metric_vs_length(lines, title=title, names=labels, style=style, what=what)
        paths += save_figure(fig, Path(out_dir) / safe_name(name), formats)
    return paths


def _method_style(row: dict) -> tuple[str, str, str]:
    """(colour, marker, line style) of a method's line: colour by method, marker by PE."""
    from lengen.plots.common import OKABE_ITO

    method = str(row["method"]).split(" ×")[0].split(",")[0]
    colour, marker, _ = pe_style(str(row["pe"]))
    if method in METHOD_COLOURS:
        colour = OKABE_ITO[METHOD_COLOURS[method]]
    else:  # a colour from the name, never black: that is the run's own (``none``)
        others = [c for c in OKABE_ITO.values() if c != OKABE_ITO["black"]]
        colour = others[list(OKABE_ITO.values()).index(pe_style(f"method:{method}")[0]) % 6]
    return colour, marker, "-" if row["method"] == "none" else "--"


#: line styles of the methods in a figure of several PEs, ``none`` (the run's own) solid
_METHOD_LINES = ("-", "--", ":", "-.", (0, (5, 1, 1, 1)), (0, (1, 1)))


def _pe_method_style(methods: list[str]):
    """row -> (colour, marker, line style): the PE's colour and marker, a line style per method
    (in ``methods``' order, solid first), so 5 PEs × 3 methods read apart."""

    def style(row: dict) -> tuple[str, str, str]:
        colour, marker, _ = pe_style(str(row["pe"]))
        return colour, marker, _METHOD_LINES[methods.index(row["method"]) % len(_METHOD_LINES)]

    return style
