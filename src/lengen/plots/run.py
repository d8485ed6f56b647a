"""Figures of one run's results: metric vs length, accuracy by depth, loss by position, accuracy
by answer position (its attention figures: ``plots.attention``).

Each ``plot_*`` writes its figure as PNG and PDF (atomically, ``save_figure``) and returns the
paths; the ``*_figure`` function beside it builds the same figure without saving it, for tests
and notebooks."""

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
    metric_label,
    plain_log_axis,
    plain_number,
    pyplot,
    save_figure,
    wrap_title,
)
from lengen.results import length_unit

#: colour and marker of each metric in a run's extrapolation figure
_METRIC_STYLES = {
    "accuracy": (OKABE_ITO["blue"], "o"),
    "exact_match": (OKABE_ITO["vermillion"], "s"),
    "ppl": (OKABE_ITO["blue"], "^"),
    "loss": (OKABE_ITO["blue"], "^"),
}


def extrapolation_figure(results: dict):
    """The figure of :func:`plot_extrapolation`, not saved -> matplotlib Figure.

    Tasks: per-token accuracy and exact match vs evaluation length (y axis named after both),
    each with its most-frequent-symbol baseline dashed and chance accuracy dotted; where the
    rows come from several position draws (randomized models), error bars of ± the standard
    deviation across draws. Language modelling: perplexity on a log axis with plain decimal
    ticks. The training length is the dashed vertical line; the title is the run's label
    (task · model · PE and options · protocol · seed · tag), wrapped to fit."""
    plt = pyplot()
    rows = results["eval"]
    lengths = [row["length"] for row in rows]
    metrics = [m for m in ("accuracy", "exact_match") if any(r[m] is not None for r in rows)]
    if not metrics:  # language modelling: perplexity (log scale) where rows carry it
        metrics = ["ppl"] if any(r.get("ppl") is not None for r in rows) else ["loss"]
    with plt.rc_context(PAPER_RC):
        fig, ax = plt.subplots(figsize=(6.0, 4.0), layout="constrained")
        for metric in metrics:
            colour, marker = _METRIC_STYLES[metric]
            values = floats([r[metric] for r in rows])
            spread = [r.get(f"{metric}_draw_std") for r in rows]
            if any(value is not None for value in spread):  # randomized positions
                draws = sorted({r["position_draws"] for r in rows if r.get("position_draws")})
                over = "–".join(map(str, sorted({draws[0], draws[-1]}))) if draws else "several"
                ax.errorbar(lengths, values, yerr=floats(spread), color=colour, marker=marker,
                            capsize=3, label=f"{metric_label(metric)} (mean ± std over "
                            f"{over} position draws)")  # fmt: skip
            else:  # accuracy wide and hollow beneath exact match: equal values show both
                wide = metric == "accuracy" and "exact_match" in metrics
                ax.plot(lengths, values, color=colour, marker=marker, label=metric_label(metric),
                        markersize=8 if wide else 5, linewidth=2.4 if wide else 1.4,
                        markerfacecolor="white" if wide else colour)  # fmt: skip
            baseline = [r.get(f"baseline_{metric}") for r in rows]
            if any(value is not None for value in baseline):  # the trivial predictor to beat
                ax.plot(lengths, floats(baseline), color=colour, linestyle="--", linewidth=1,
                        label=f"{metric_label(metric)}: baseline")  # fmt: skip
        chance = rows[0].get("chance_accuracy") if rows else None
        if chance is not None and "accuracy" in metrics:
            ax.axhline(chance, color="grey", linestyle=":", linewidth=1, label="chance accuracy")
        length_axis(ax, lengths, results["train_len"], length_unit(rows[0]))
        text = metrics == ["ppl"]
        ax.set_ylabel(" / ".join(metric_label(metric) for metric in metrics))
        if text:
            plain_log_axis(ax, [r.get("ppl") for r in rows])
        elif metrics != ["loss"]:
            ax.set_ylim(-0.02, 1.02)
        label = results.get("label") or (
            f"{results['task']} · {results['model']} · pe={results['pe']} · seed {results['seed']}"
        )  # results written before labels existed
        ax.set_title(wrap_title(label), fontsize=9)
        verdict = results.get("learned")
        if verdict and not verdict["learned"]:  # said where the reader looks, not only in JSON
            ax.text(0.5, 0.5, f"NOT LEARNED in distribution\n(accuracy {verdict['value']:.2f} < "
                    f"{verdict['threshold']})", transform=ax.transAxes, ha="center",
                    va="center", color="#D55E00", fontsize=12, alpha=0.8)  # fmt: skip
        ax.grid(alpha=0.3)
        handles, labels = ax.get_legend_handles_labels()  # error bars come last: reorder
        order = sorted(range(len(labels)), key=lambda i: _legend_rank(labels[i], metrics))
        baselines = any(":" in label for label in labels)
        fig.legend([handles[i] for i in order], [labels[i] for i in order],
                   loc="outside lower center", ncols=2, frameon=False, fontsize=8,
                   title="baseline: the most frequent symbol at each answer position"
                   if baselines else None, title_fontsize=8)  # fmt: skip
    return fig


def _legend_rank(label: str, metrics: list[str]) -> tuple[int, int]:
    """Legend order: each metric, then its baseline, metric by metric; then the rest."""
    for index, metric in enumerate(metrics):
        if label.startswith(metric_label(metric)):
            return index, ":" in label  # "<metric>: baseline" after the metric
    return len(metrics), 0


def plot_extrapolation(
    results: dict, path: str | Path, dpi: int | None = None, formats: tuple[str, ...] = FORMATS
) -> list[Path]:
    """The metric-vs-length figure of a run (:func:`extrapolation_figure`), written as
    ``path`` (``extrapolation.png``) and the PDF beside it (``formats``) -> the paths written."""
    return save_figure(extrapolation_figure(results), figure_stem(path), formats, dpi=dpi)


def depth_figure(report: dict):
    """The figure of :func:`plot_depth_heatmap`, not saved: exact match by evaluation length
    (rows) × depth bin of the answer (columns), viridis on [0, 1], colour bar labelled."""
    import numpy as np

    plt = pyplot()
    lengths = sorted({row["length"] for row in report["rows"]})
    bins = report["bins"]
    grid = np.full((len(lengths), bins), np.nan)
    for row in report["rows"]:
        if row["exact_match"] is not None:
            grid[lengths.index(row["length"]), row["depth_bin"]] = row["exact_match"]
    with plt.rc_context(PAPER_RC):
        fig, ax = plt.subplots(
            figsize=(1.6 + 0.9 * bins, 1.6 + 0.45 * len(lengths)), layout="constrained"
        )
        trained = report.get("train_lengths", [0, 0])[-1]
        image = ax.imshow(grid, vmin=0, vmax=1, cmap="viridis", aspect="auto")
        ax.set_xticks(range(bins), [f"{i / bins:.1f}–{(i + 1) / bins:.1f}" for i in range(bins)])
        ax.set_yticks(range(len(lengths)), [f"{n} (trained)" if n <= trained else str(n)
                                            for n in lengths])  # fmt: skip
        ax.set_xlabel("depth of the answer (0 = start of the input)")
        ax.set_ylabel("evaluation length (input symbols)")
        ax.set_title(f"{report['task']}: exact match by depth · {report['protocol']}")
        fig.colorbar(image, ax=ax, label="exact match")
    return fig


def plot_depth_heatmap(
    report: dict, path: str | Path, dpi: int | None = None, formats: tuple[str, ...] = FORMATS
) -> list[Path]:
    """Exact match by length × depth (:func:`depth_figure`), written as ``path``
    (``accuracy_by_depth.png``) and the PDF beside it (``formats``) -> the paths written."""
    return save_figure(depth_figure(report), figure_stem(path), formats, dpi=dpi)


def binned_loss(loss, count, bins: int = 40, span: int | None = None):
    """Per-position mean loss and token count (L,) -> (centres, mean, stderr) per non-empty
    bin. The bins grow geometrically over ``span`` positions (default L; pass the longest
    length so every length of a report shares the same bins): single positions at the start,
    where the loss falls fastest, wide bins far out. ``mean`` is the token-weighted mean loss
    of the bin, ``centres`` its mean position (0-based).

    ``stderr`` approximates the standard error of that mean from the spread of the
    per-position means inside the bin: their std / √(positions in the bin). The report keeps
    no per-token losses, so this treats the positions of a bin as repeated measurements of
    one value; it also counts the real slope of the loss inside a bin as noise (small in the
    wide far bins, where the curve is flat). A bin of one position has no spread of its own:
    it borrows the std of the per-position means of the nearest bin holding several."""
    import numpy as np

    loss = np.asarray(loss, dtype=np.float64)  # (L,)
    count = np.asarray(count, dtype=np.float64)  # (L,)
    span = max(span or len(loss), len(loss))
    edges = np.unique(np.geomspace(1, span + 1, bins + 1).astype(int) - 1)  # from 0
    edges = np.append(edges[edges < len(loss)], len(loss))
    centres, means, spreads, sizes = [], [], [], []
    for start, stop in zip(edges[:-1], edges[1:], strict=True):
        scored = count[start:stop] > 0
        if not scored.any():
            continue
        position_means = loss[start:stop][scored]
        weights = count[start:stop][scored]
        centres.append((start + stop - 1) / 2)
        means.append(float((position_means * weights).sum() / weights.sum()))
        sizes.append(len(position_means))
        spreads.append(float(position_means.std(ddof=1)) if len(position_means) > 1 else np.nan)
    centres, means, spreads, sizes = map(np.array, (centres, means, spreads, sizes))
    measured = np.flatnonzero(~np.isnan(spreads))
    for index in np.flatnonzero(np.isnan(spreads)):  # single positions: the nearest wider bin
        nearest = measured[np.argmin(np.abs(measured - index))] if measured.size else None
        spreads[index] = spreads[nearest] if nearest is not None else 0.0
    return centres, means, spreads / np.sqrt(np.maximum(sizes, 1))


def loss_by_position_figure(report: dict, bins: int = 40):
    """The figure of :func:`plot_loss_by_position`, not saved: mean loss vs position in the
    window, one line per eval length in up to ``bins`` geometric bins shared by the lengths
    (:func:`binned_loss`), each with a band of ± one standard error (approximated from the
    spread of the positions' means inside the bin; see :func:`binned_loss`), on a log
    position axis with plain tick labels; the training length marked (extrapolation failure
    shows as loss rising past it)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    plt = pyplot()
    palette = [OKABE_ITO[name] for name in ("blue", "orange", "bluish_green", "vermillion",
                                            "reddish_purple", "sky_blue", "black")]  # fmt: skip
    with plt.rc_context(PAPER_RC):
        fig, ax = plt.subplots(figsize=(6.0, 4.0), layout="constrained")
        items = sorted(report["lengths"].items(), key=lambda kv: int(kv[0]))
        longest = max((len(values["loss"]) for _, values in items), default=1)
        for index, (length, values) in enumerate(items):  # the same bins for every length
            centres, means, stderrs = binned_loss(values["loss"], values["count"], bins, longest)
            colour = palette[index % len(palette)]
            ax.plot(centres + 1, means, color=colour, marker=".", label=f"length {length}")
            ax.fill_between(centres + 1, means - stderrs, means + stderrs, color=colour,
                            alpha=0.25, linewidth=0)  # fmt: skip
        train_len = report["train_len"]
        ax.axvline(train_len, color="black", linestyle="--", linewidth=1,
                   label=f"training length ({train_len})")  # fmt: skip
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_locator(LogLocator(base=2, numticks=8))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: plain_number(value)))
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("position in the window + 1 (tokens of context + 1)")
        ax.set_ylabel("loss (nats / token)")
        ax.set_title(
            f"loss by position · protocol {report['protocol']} · band: ± 1 standard error",
            fontsize=9,
        )
        ax.grid(alpha=0.3)
        # below the axes: inside, it covered the long lengths' last bins (lower right)
        fig.legend(loc="outside lower center", ncols=4, frameon=False, fontsize=8)
    return fig


def plot_loss_by_position(
    report: dict,
    path: str | Path,
    bins: int = 40,
    dpi: int | None = None,
    formats: tuple[str, ...] = FORMATS,
) -> list[Path]:
    """Loss by position (:func:`loss_by_position_figure`), written as ``path``
    (``loss_by_position.png``) and the PDF beside it (``formats``) -> the paths written."""
    figure = loss_by_position_figure(report, bins)
    return save_figure(figure, figure_stem(path), formats, dpi=dpi)


def position_grid(by_length: dict):
    """Accuracy by evaluation length × answer position -> (lengths, positions, grid): ``grid``
    (len(lengths), len(positions)) with NaN where a position was not scored at that length
    (accuracy null or ``scored`` 0: flip-flop scores only the symbol after a read, and longer
    lengths have longer answers); ``positions`` keeps only those scored at some length, so
    never-scored ones (flip-flop's instructions) draw no stripes. Bins of ``bin_width``
    positions are spread over the positions they cover."""
    import numpy as np

    lengths = sorted(int(length) for length in by_length)
    entries = [by_length[str(n)] for n in lengths]
    extent = max(len(e["accuracy"]) * e["bin_width"] for e in entries)  # positions
    grid = np.full((len(lengths), extent), np.nan)
    for row, entry in enumerate(entries):
        values = floats(entry["accuracy"])  # (bins,), NaN where null
        scored = entry.get("scored")
        if isinstance(scored, list):  # a count per bin: 0 is no answer token there
            values[np.asarray(scored) == 0] = np.nan
        values = np.repeat(values, entry["bin_width"])
        grid[row, : len(values)] = values
    positions = np.flatnonzero(~np.isnan(grid).all(axis=0))  # scored at some length
    return lengths, positions, grid[:, positions]


def position_figure(section: dict):
    """The figure of :func:`plot_position_heatmap`, not saved: per protocol, accuracy by answer
    position (columns: the positions scored at some length, :func:`position_grid`) ×
    evaluation length (rows), viridis on [0, 1]; cells not scored at that length in grey
    (``MISSING_COLOUR``, named in the legend); a dashed line, black on a white edge so it shows
    on every colour, after the longest answer of a training length; the legend below."""
    import numpy as np
    from matplotlib.patches import Patch
    from matplotlib.ticker import MaxNLocator

    plt = pyplot()
    train_len = section["train_len"]
    protocols = section["protocols"]
    cmap = plt.get_cmap("viridis").with_extremes(bad=MISSING_COLOUR)
    missing, marker = False, None  # what the legend names, where drawn
    with plt.rc_context(PAPER_RC):
        fig, axes = plt.subplots(len(protocols), 1, squeeze=False, layout="constrained",
                                 figsize=(FIGURE_WIDTH, (0.3 * max(map(len, protocols.values())) + 1.4)
                                          * len(protocols) + 0.4))  # fmt: skip
        for ax, (protocol, by_length) in zip(axes[:, 0], protocols.items(), strict=True):
            lengths, positions, grid = position_grid(by_length)
            missing = missing or bool(np.isnan(grid).any())
            image = ax.imshow(np.ma.masked_invalid(grid), vmin=0, vmax=1, cmap=cmap,
                              aspect="auto", interpolation="nearest")  # fmt: skip
            trained = [len(by_length[str(n)]["accuracy"]) * by_length[str(n)]["bin_width"]
                       for n in lengths if n <= train_len]  # fmt: skip
            boundary = int(np.searchsorted(positions, max(trained))) if trained else 0
            if 0 < boundary < len(positions):
                label = f"longest answer in training ({max(trained)} tokens)"
                marker = marker_line(ax, x=boundary - 0.5, label=label)
            # round true positions as ticks, placed at their columns
            ticks = MaxNLocator(nbins=8, integer=True).tick_values(positions[0], positions[-1])
            columns = sorted({int(np.searchsorted(positions, t)) for t in ticks
                              if positions[0] <= t <= positions[-1]})  # fmt: skip
            ax.set_xticks(columns, [str(positions[c]) for c in columns])
            ax.set_yticks(range(len(lengths)), [f"{n} (trained)" if n <= train_len else str(n)
                                                for n in lengths])  # fmt: skip
            never = grid.shape[1] < int(positions[-1]) + 1 if len(positions) else False
            ax.set_xlabel("position in the answer (0 = first answer token)"
                          + ("; positions never scored left out" if never else ""))  # fmt: skip
            ax.set_ylabel("evaluation length")
            ax.set_title(f"accuracy by answer position · {protocol.replace('_', '-')}")
            fig.colorbar(image, ax=ax, label="accuracy")
        label = "no score (not scored at that length, or past its answer)"
        handles = [Patch(facecolor=MISSING_COLOUR, label=label)] if missing else []
        handles += [marker] if marker is not None else []
        if handles:
            fig.legend(handles=handles, loc="outside lower center", ncols=2, frameon=False,
                       fontsize=8)  # fmt: skip
    return fig


def plot_position_heatmap(
    section: dict, stem: str | Path, dpi: int | None = None, formats: tuple[str, ...] = FORMATS
):
    """Accuracy by answer position × length (:func:`position_figure`), written as
    ``<stem>.{png,pdf}`` -> the paths written. ``section``: results.json's
    ``accuracy_by_answer_position``."""
    return save_figure(position_figure(section), figure_stem(stem), formats, dpi=dpi)
