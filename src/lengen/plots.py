"""Figures from results dictionaries (matplotlib, no display needed)."""

from __future__ import annotations

import math
from pathlib import Path


def length_axis(ax, lengths: list[int], train_len: int) -> None:
    """Evaluation lengths on x (log2 when they span 4× or more), training length marked."""
    ax.axvline(
        train_len,
        color="black",
        linestyle="--",
        linewidth=1,
        label=f"training length ({train_len})",
    )
    if len(lengths) > 1 and max(lengths) / max(min(lengths), 1) >= 4:
        ax.set_xscale("log", base=2)
    ax.set_xticks(lengths, [str(length) for length in lengths])


def plot_extrapolation(results: dict, path: str | Path) -> None:
    """Metric vs evaluation length, training length marked; written atomically as PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = results["eval"]
    lengths = [row["length"] for row in rows]
    metrics = [m for m in ("accuracy", "exact_match") if any(r[m] is not None for r in rows)]
    if not metrics:  # language modelling: perplexity (log scale) where rows carry it
        metrics = ["ppl"] if any(r.get("ppl") is not None for r in rows) else ["loss"]
    fig, ax = plt.subplots(figsize=(6, 4), dpi=120)
    markers = {"accuracy": "o", "exact_match": "s", "loss": "^", "ppl": "^"}
    for metric in metrics:
        ax.plot(
            lengths,
            [r[metric] for r in rows],
            marker=markers[metric],
            label=metric.replace("_", " "),
        )
    chance = rows[0].get("chance_accuracy") if rows else None
    if chance is not None and "accuracy" in metrics:
        ax.axhline(chance, color="grey", linestyle=":", linewidth=1, label="chance accuracy")
    length_axis(ax, lengths, results["train_len"])
    text = metrics == ["ppl"]
    ax.set_xlabel(f"evaluation length ({'tokens' if text else 'input symbols'})")
    ax.set_ylabel({"loss": "loss", "ppl": "perplexity"}.get(metrics[0], "score"))
    if text:
        ax.set_yscale("log")
    elif metrics != ["loss"]:
        ax.set_ylim(-0.02, 1.02)
    ax.set_title(
        f"{results['task']} · {results['model']} · pe={results['pe']} · seed {results['seed']}"
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = Path(path)
    tmp = path.with_name(f".{path.stem}.tmp{path.suffix}")
    fig.savefig(tmp)
    plt.close(fig)
    tmp.replace(path)


# -- paper figures: shared look ----------------------------------------------------------------
#: Okabe & Ito (2008) colour-blind-safe palette (yellow left out: too light on white)
OKABE_ITO = {
    "black": "#000000",
    "orange": "#E69F00",
    "sky_blue": "#56B4E9",
    "bluish_green": "#009E73",
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "reddish_purple": "#CC79A7",
}
#: a fixed colour, marker and line style per PE name, so a PE looks the same in every figure;
#: the five first-slice PEs get five well-separated colours; the later ones share a colour with a
#: relative and differ in marker and line style (xPos ~ RoPE, FIRE ~ ALiBi, Sandwich ~ sinusoidal)
PE_STYLES = {
    "nope": (OKABE_ITO["black"], "o", "-"),
    "sinusoidal": (OKABE_ITO["bluish_green"], "s", "-"),
    "learned": (OKABE_ITO["reddish_purple"], "D", "-"),
    "alibi": (OKABE_ITO["blue"], "^", "-"),
    "rope": (OKABE_ITO["vermillion"], "v", "-"),
    "t5": (OKABE_ITO["orange"], "P", "-"),
    "kerple": (OKABE_ITO["sky_blue"], "X", "-"),
    "fire": (OKABE_ITO["blue"], "*", "--"),
    "sandwich": (OKABE_ITO["bluish_green"], "h", "--"),
    "xpos": (OKABE_ITO["vermillion"], "<", "--"),
    "cope": (OKABE_ITO["orange"], ">", "--"),
}
_MARKERS = "osD^vPX*h<>p"
PAPER_RC = {
    "font.size": 10,
    "axes.titlesize": 10,
    "axes.labelsize": 10,
    "xtick.labelsize": 9,
    "ytick.labelsize": 9,
    "legend.fontsize": 9,
    "legend.title_fontsize": 9,
    "figure.dpi": 100,
    "savefig.dpi": 200,
    "pdf.fonttype": 42,  # TrueType in PDFs: editable text, accepted by publishers
}


def pe_style(name: str) -> tuple[str, str, str]:
    """(colour, marker, line style) of a PE name; unknown names get a colour from a hash of
    the name (deterministic across runs and machines, unlike Python's ``hash``)."""
    if name in PE_STYLES:
        return PE_STYLES[name]
    import hashlib

    digest = int(hashlib.sha256(name.encode()).hexdigest(), 16)
    colours = list(OKABE_ITO.values())
    return colours[digest % len(colours)], _MARKERS[digest % len(_MARKERS)], ":"


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig, stem: str | Path, formats: tuple[str, ...] = ("png", "pdf")) -> list[Path]:
    """Write ``stem.<format>`` for each format, atomically; close the figure."""
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    paths = []
    for fmt in formats:
        path = stem.with_name(f"{stem.name}.{fmt}")
        tmp = stem.with_name(f".{stem.name}.tmp.{fmt}")
        fig.savefig(tmp, bbox_inches="tight")
        tmp.replace(path)
        paths.append(path)
    _pyplot().close(fig)
    return paths


def _safe(text) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in str(text))


# -- figures of an aggregated sweep (lengen.aggregate.Summary) ---------------------------------
def _metric_label(metric: str) -> str:
    return {"accuracy": "per-token accuracy", "exact_match": "exact match"}.get(metric, metric)


def plot_sweep(summary, out_dir: str | Path, formats=("png", "pdf")) -> list[Path]:
    """Every figure of a sweep: one metric-vs-length file per (task, model, train_len,
    protocol, metric) and one PE × setup heatmap per metric; returns the paths written."""
    panels = {}
    for row in summary.rows:
        key = (row["task"], row["model"], row["train_len"], row["protocol"], row["metric"])
        panels.setdefault(key, []).append(row)
    several_protocols = len({key[3] for key in panels}) > 1
    paths = []
    for (task, model, train_len, protocol, metric), rows in panels.items():
        name = f"extrapolation_{metric}_{task}_{model}_len{train_len}"
        name += f"_{protocol}" if several_protocols else ""
        fig = plot_metric_vs_length(rows, title=f"{task} · {model} · {protocol}")
        paths += save_figure(fig, Path(out_dir) / _safe(name), formats)
    for metric in sorted({row["metric"] for row in summary.rows}):
        fig = plot_extrapolation_heatmap([r for r in summary.rows if r["metric"] == metric])
        if fig is not None:
            paths += save_figure(fig, Path(out_dir) / f"heatmap_{_safe(metric)}", formats)
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
    95% CI where n ≥ 2, the training length as a dashed vertical line. Rows: aggregate rows of
    one (task, model, train_len, protocol, metric)."""
    plt = _pyplot()
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
        chance = {r["chance_accuracy"] for r in rows if r.get("chance_accuracy") is not None}
        if metric == "accuracy" and len(chance) == 1:
            ax.axhline(chance.pop(), color="grey", linestyle=":", linewidth=1, label="chance")
        length_axis(ax, lengths, train_len)
        ax.minorticks_off()
        unit = "tokens" if rows[0].get("_language_modelling") else "input symbols"
        ax.set_xlabel(f"evaluation length ({unit})")
        ax.set_ylabel(_metric_label(metric))
        if METRIC_RANGE.get(metric):
            ax.set_ylim(*METRIC_RANGE[metric])
        ax.set_title(f"{title} · trained on lengths ≤ {train_len}" if title else "")
        ax.grid(alpha=0.3)
        ax.legend(
            title="PE (seeds); band: 95% CI, Student t",
            loc="upper left",
            bbox_to_anchor=(1.02, 1.0),
            frameon=False,
        )
    return fig


METRIC_RANGE = {"accuracy": (-0.02, 1.02), "exact_match": (-0.02, 1.02)}


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
    None when no row lies beyond training."""
    import numpy as np

    plt = _pyplot()
    means = extrapolation_means(rows)
    if not means:
        return None
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
        ax.set_title(f"mean {_metric_label(metric)} beyond the training length")
        bar = fig.colorbar(image, ax=ax, fraction=0.05, pad=0.03)
        bar.set_label(_metric_label(metric))
    return fig


METRIC_DIRECTIONS_PLOT = {"loss": False, "ppl": False, "bits_per_byte": False}


# -- figures of the PE math (python scripts/plot.py pe-analysis) -------------------------------
def shift_rotation_matrix(shift: float, frequencies):
    """T(k): block-diagonal 2×2 rotations with PE(p + k) = T(k) · PE(p) for an interleaved
    sinusoidal table (columns 2i, 2i+1 = sin, cos of p·ω_i) -> Tensor[dim, dim], float64.

    Each block is [[cos kω_i, sin kω_i], [−sin kω_i, cos kω_i]], from sin(a+b) = sin a cos b +
    cos a sin b and cos(a+b) = cos a cos b − sin a sin b."""
    import torch

    angles = shift * torch.as_tensor(frequencies, dtype=torch.float64)  # (dim/2,)
    cos, sin = angles.cos(), angles.sin()
    dim = 2 * angles.shape[0]
    sin_rows = torch.arange(0, dim, 2)  # row of each block's sin component
    cos_rows = sin_rows + 1
    rotation = torch.zeros(dim, dim, dtype=torch.float64)
    rotation[sin_rows, sin_rows], rotation[sin_rows, cos_rows] = cos, sin
    rotation[cos_rows, sin_rows], rotation[cos_rows, cos_rows] = -sin, cos
    return rotation


def check_shift_rotation(table, base: float = 10000.0) -> float:
    """max over p, k (p + k < length) of |T(k) · PE(p) − PE(p + k)| for an interleaved
    sinusoidal table [length, dim] (a tensor or an array), with T(k) from
    :func:`shift_rotation_matrix` and ω_i = base^(−2i/dim) computed here in float64,
    independently of ``lengen.pe``.

    A correct table gives its own rounding error: for fp32, about length · 2⁻²⁴ (the fp32
    angle p·ω at the largest position; 7e-6 at 128 positions, 6e-5 at 1024); a float64 table
    ~1e-13. A corrupted table (wrong frequency, swapped or shifted columns) gives O(1)."""
    import torch

    table = torch.as_tensor(table)
    if table.ndim != 2 or table.shape[1] % 2:
        raise ValueError(f"need a table [length, even dim], got shape {tuple(table.shape)}")
    length, dim = table.shape
    frequencies = base ** -(torch.arange(0, dim, 2, dtype=torch.float64) / dim)  # (dim/2,)
    table = table.to(torch.float64)
    error = 0.0
    for shift in range(length):
        rotation = shift_rotation_matrix(shift, frequencies)  # (dim, dim)
        predicted = table[: length - shift] @ rotation.T  # row p: T(k) · PE(p)
        error = max(error, (predicted - table[shift:]).abs().max().item())
    return error


def rope_relative_scores(query, key, offsets, base: float = 10000.0, query_position: int = 0):
    """q·k after RoPE with q at ``query_position`` and k at query_position + offset, for each
    offset -> Tensor[len(offsets)] (float64 dot products of the rotated fp32 vectors)."""
    import torch

    from lengen.pe import apply_rope

    offsets = torch.as_tensor(offsets)
    q = apply_rope(query[None, :], torch.tensor([query_position]), base)  # (1, D)
    keys = key[None, :].expand(len(offsets), -1)  # (K, D)
    k = apply_rope(keys, query_position + offsets, base)  # (K, D)
    return k.double() @ q[0].double()


def plot_pe_analysis(
    out_dir: str | Path,
    pe: str = "all",
    length: int = 128,
    dim: int = 64,
    base: float = 10000.0,
    formats: tuple[str, ...] = ("png", "pdf"),
) -> dict:
    """Figures of the encodings themselves; returns {'paths': [...], numerical checks …}.

    sinusoidal: the table as a heatmap (positions × dimensions), the sin/cos waveforms of a
    few frequency pairs, PE(p0)·PE(p) vs p − p0 for two p0 (the curves coincide: the dot
    product depends on the offset only), and the check PE(p+k) = T(k)·PE(p) with a corrupted
    control table. rope: q·k vs relative offset for q = k = 1 and a random pair."""
    import torch

    from lengen.pe import sinusoidal_table

    if pe not in ("all", "sinusoidal", "rope"):
        raise ValueError(f"pe must be one of all, sinusoidal, rope; got {pe!r}")
    if length < 2 or dim < 2 or dim % 2:
        raise ValueError(f"need length >= 2 and an even dim >= 2; got {length}, {dim}")
    plt = _pyplot()
    out_dir = Path(out_dir)
    report = {"paths": []}
    if pe in ("all", "sinusoidal"):
        table = sinusoidal_table(length, dim, base)  # (length, dim), fp32
        report["shift_rotation_error"] = check_shift_rotation(table, base)
        corrupted = table.clone()
        corrupted[:, [0, 1]] = corrupted[:, [1, 0]]  # swap sin and cos of the fastest pair
        report["corrupted_shift_rotation_error"] = check_shift_rotation(corrupted, base)
        table = table.numpy()
        with plt.rc_context(PAPER_RC):
            fig, ax = plt.subplots(figsize=(6.0, 4.0))
            image = ax.imshow(table, cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto")
            ax.set_xlabel("dimension (2i: sin, 2i+1: cos)")
            ax.set_ylabel("position p")
            ax.set_title(f"sinusoidal encoding, d={dim}, base={base:g}")
            fig.colorbar(image, ax=ax, label="PE(p, dimension)")
        report["paths"] += save_figure(fig, out_dir / "pe_sinusoidal_matrix", formats)

        pairs = sorted({0, dim // 16, dim // 8, dim // 4} & set(range(dim // 2)))
        positions = torch.arange(length).numpy()
        with plt.rc_context(PAPER_RC):
            fig, axes = plt.subplots(len(pairs), 1, figsize=(6.0, 1.3 + 1.0 * len(pairs)))
            for ax, pair in zip(list(getattr(axes, "flat", [axes])), pairs, strict=True):
                omega = base ** (-2 * pair / dim)
                ax.plot(positions, table[:, 2 * pair], color=OKABE_ITO["blue"], label="sin")
                ax.plot(
                    positions,
                    table[:, 2 * pair + 1],
                    color=OKABE_ITO["vermillion"],
                    linestyle="--",
                    label="cos",
                )
                ax.set_ylabel(f"dims {2 * pair}, {2 * pair + 1}")
                ax.set_title(f"ω = {omega:.3g} (wavelength {2 * math.pi / omega:.3g})", fontsize=9)
                ax.set_ylim(-1.15, 1.15)
                ax.grid(alpha=0.3)
            ax.set_xlabel("position p")
            fig.suptitle(f"sinusoidal encoding, d={dim}: sin (solid) and cos (dashed) pairs")
            fig.tight_layout()
        report["paths"] += save_figure(fig, out_dir / "pe_sinusoidal_waveforms", formats)

        with plt.rc_context(PAPER_RC):
            fig, ax = plt.subplots(figsize=(6.0, 3.6))
            for anchor, style in ((length // 4, "-"), (3 * length // 4, "--")):
                similarity = table @ table[anchor]  # (length,)
                ax.plot(
                    positions - anchor,
                    similarity,
                    linestyle=style,
                    color=OKABE_ITO["blue"] if style == "-" else OKABE_ITO["orange"],
                    label=f"p0 = {anchor}",
                )
            ax.set_xlabel("offset p − p0")
            ax.set_ylabel("PE(p0) · PE(p)")
            ax.set_title(f"sinusoidal: dot product depends on the offset only (max {dim // 2})")
            ax.grid(alpha=0.3)
            ax.legend(frameon=False)
        report["paths"] += save_figure(fig, out_dir / "pe_sinusoidal_similarity", formats)

    if pe in ("all", "rope"):
        generator = torch.Generator().manual_seed(0)
        random_q, random_k = torch.randn(2, dim, generator=generator)
        ones = torch.ones(dim)
        offsets = torch.arange(length)
        at_zero = rope_relative_scores(random_q, random_k, offsets, base, 0)
        shifted = rope_relative_scores(random_q, random_k, offsets, base, length // 2 + 1)
        report["rope_relative_error"] = (at_zero - shifted).abs().max().item()
        at_zero = at_zero.numpy()
        with plt.rc_context(PAPER_RC):
            fig, ax = plt.subplots(figsize=(6.0, 3.6))
            ax.plot(
                offsets.numpy(),
                rope_relative_scores(ones, ones, offsets, base).numpy() / dim,
                color=OKABE_ITO["vermillion"],
                label="q = k = 1 (normalised by d)",
            )
            ax.plot(
                offsets.numpy(),
                at_zero / dim,
                color=OKABE_ITO["blue"],
                linestyle="--",
                label="random q, k (seed 0), / d",
            )
            ax.set_xlabel("relative offset n − m (key minus query position)")
            ax.set_ylabel("RoPE score q_m · k_n / d")
            ax.set_title(f"RoPE, head dim {dim}, base {base:g}")
            ax.grid(alpha=0.3)
            ax.legend(frameon=False)
        report["paths"] += save_figure(fig, out_dir / "pe_rope_relative_score", formats)
    return report


# -- command line (scripts/plot.py) ------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    """``plot.py <folder> [...]`` (sweep figures) or ``plot.py pe-analysis [...]``."""
    import argparse
    import sys

    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "attention":
        return _attention_main(argv[1:])
    if argv and argv[0] == "pe-analysis":
        parser = argparse.ArgumentParser(
            prog="plot.py pe-analysis", description="Figures of the PE math (docs/analysis.md)."
        )
        parser.add_argument("--pe", default="all", choices=["all", "sinusoidal", "rope"])
        parser.add_argument("--length", type=int, default=128, help="positions (default 128)")
        parser.add_argument("--dim", type=int, default=64, help="model / head dim (default 64)")
        parser.add_argument("--base", type=float, default=10000.0)
        parser.add_argument("--out", type=Path, required=True, help="folder for the figures")
        args = parser.parse_args(argv[1:])
        try:
            report = plot_pe_analysis(args.out, args.pe, args.length, args.dim, args.base)
        except ValueError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
        if "shift_rotation_error" in report:
            print(
                f"PE(p+k) = T(k)·PE(p), sinusoidal table {args.length}×{args.dim}: max error "
                f"{report['shift_rotation_error']:.2e} (fp32 rounding of the largest angle: "
                f"~{args.length * 2**-24:.1e}; control with sin/cos of pair 0 swapped: "
                f"{report['corrupted_shift_rotation_error']:.2e})"
            )
        if "rope_relative_error" in report:
            print(
                "RoPE score depends on the offset only: max difference between query at 0 and "
                f"at {args.length // 2 + 1}: {report['rope_relative_error']:.2e}"
            )
        print("\n".join(str(path) for path in report["paths"]))
        return 0

    from lengen.aggregate import add_selection_arguments, summary_from_arguments, warnings_for

    parser = argparse.ArgumentParser(
        prog="plot.py",
        description="Figures of a sweep folder (metric vs length with 95%% CI bands, PE × task "
        "heatmap), from the same aggregation as aggregate.py. Also: plot.py pe-analysis --help.",
    )
    parser.add_argument("folder", type=Path)
    add_selection_arguments(parser)
    parser.add_argument("--out", type=Path, default=None, help="default: the folder itself")
    args = parser.parse_args(argv)
    summary = summary_from_arguments(args)
    if summary is None:
        return 2
    for line in warnings_for(summary):
        print(f"warning: {line}", file=sys.stderr)
    paths = plot_sweep(summary, args.out or args.folder)
    if not paths:
        print("warning: nothing to plot (no aggregated runs)", file=sys.stderr)
    print("\n".join(str(path) for path in paths))
    return 0


def _attention_main(argv: list[str]) -> int:
    """``plot.py attention <run dir> --length L``: maps and mean attention distance."""
    import argparse
    import sys

    from lengen.config import ConfigError

    parser = argparse.ArgumentParser(
        prog="plot.py attention",
        description="Attention maps and mean attention distance of a run's checkpoint at one "
        "length (docs/analysis.md).",
    )
    parser.add_argument("run", type=Path, help="a run directory with checkpoints/last.ckpt")
    parser.add_argument("--length", type=int, required=True, help="evaluation length")
    parser.add_argument("--samples", type=int, default=16, help="held-out instances (16)")
    parser.add_argument("--out", type=Path, default=None, help="default: the run directory")
    args = parser.parse_args(argv)
    from lengen.attention_maps import analyse_run

    try:
        report = analyse_run(args.run, args.length, args.out, args.samples)
    except (ConfigError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"mean attention distance at length {args.length} (tokens; rows: layers, columns: heads)")
    for name, row in zip(report["layers"], report["mean_attention_distance"], strict=True):
        print(f"  layer {name:>10}: " + "  ".join(f"{d:7.2f}" for d in row))
    print("\n".join(report["paths"]))
    return 0
