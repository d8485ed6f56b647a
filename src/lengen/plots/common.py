"""The shared look of every figure: palette, per-PE styles, paper rc, axes and saving."""

from __future__ import annotations

from pathlib import Path


def length_axis(ax, lengths: list[int], train_len: int, unit=("length", "input symbols")) -> None:
    """Evaluation lengths on x (log2 when they span 4× or more), training length marked;
    ``unit``: (noun, unit) of ``lengen.results.length_unit`` (grids: the side)."""
    noun, counted = unit
    ax.axvline(
        train_len,
        color="black",
        linestyle="--",
        linewidth=1,
        label=f"training {noun} ({train_len})",
    )
    ax.set_xlabel(f"evaluation {noun} ({counted})")
    if len(lengths) > 1 and max(lengths) / max(min(lengths), 1) >= 4:
        ax.set_xscale("log", base=2)
    ax.set_xticks(lengths, [str(length) for length in lengths])


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
    # the 2026 mechanisms (issues #28, #29): dotted, seven colours so a sweep of them reads apart
    "fox": (OKABE_ITO["blue"], "o", ":"),
    "stick_breaking": (OKABE_ITO["orange"], "s", ":"),
    "path": (OKABE_ITO["bluish_green"], "^", ":"),
    "path_fox": (OKABE_ITO["reddish_purple"], "D", ":"),
    "pope": (OKABE_ITO["blue"], "D", ":"),  # not RoPE's colour: recipe (h) compares the two
    "dape": (OKABE_ITO["sky_blue"], "P", ":"),
    # the schedules: a colour each apart from NoPE's and RoPE's, which they are compared with
    "rnope": (OKABE_ITO["reddish_purple"], "X", "-."),
    "rnope_swa": (OKABE_ITO["bluish_green"], "*", "-."),
    "irope": (OKABE_ITO["sky_blue"], "h", "-."),
    # apart from what their recipes compare them with (grids_small, addition_positions)
    "rope_mixed": (OKABE_ITO["orange"], "X", "--"),
    "abacus": (OKABE_ITO["sky_blue"], "P", "--"),
}
#: every marker a PE uses; unknown names and a PE's variants in one-length panels cycle them
MARKERS = "osD^vPX*h<>p"
#: the saved width of every figure but the grids of many panels (docs/analysis.md, *Figure
#: sizes*): a one-column page's text width, a two-column paper's full width (``figure*``)
FIGURE_WIDTH = 6.4
#: where a heatmap has no value (a position not scored, a distance no key has): light grey,
#: apart from every viridis colour and named in the legend, so a gap never reads as a score
MISSING_COLOUR = "#d9d9d9"
#: resolution of saved PNGs unless a caller passes one (run figures: ``eval.plot_dpi``)
DEFAULT_DPI = 200
PAPER_RC = {
    "font.size": 10,
    "axes.titlesize": 10,
    "axes.labelsize": 10,
    "xtick.labelsize": 9,
    "ytick.labelsize": 9,
    "legend.fontsize": 9,
    "legend.title_fontsize": 9,
    "figure.dpi": 100,
    "savefig.dpi": DEFAULT_DPI,
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
    return colours[digest % len(colours)], MARKERS[digest % len(MARKERS)], ":"


def marker_line(ax, x: float | None = None, y: float | None = None, **kw):
    """A dashed marker line on a heatmap, black on a white edge so it shows on every colour of
    any colour map (white alone vanished on viridis' yellow): vertical at ``x`` or horizontal
    at ``y`` -> the Line2D (``kw``: ``label``, ``linewidth``)."""
    from matplotlib import patheffects

    width = kw.pop("linewidth", 1.3)
    draw = ax.axvline if x is not None else ax.axhline
    line = draw(x if x is not None else y, color="black", linestyle="--", linewidth=width, **kw)
    line.set_path_effects([patheffects.withStroke(linewidth=width + 2.2, foreground="white")])
    return line


def pyplot():
    import logging

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # embedding TrueType fonts in PDFs logs every subset table at INFO: not the user's business
    logging.getLogger("fontTools").setLevel(logging.WARNING)
    return plt


#: what each figure is written as unless a caller says (run figures: ``eval.plot_formats``)
FORMATS = ("png", "pdf")


def floats(values):
    """A list of numbers with None (a missing or non-finite value in results.json) -> float64
    array with NaN there, which matplotlib leaves as a gap."""
    import numpy as np

    return np.array([np.nan if v is None else v for v in values], dtype=np.float64)


def figure_output(settings) -> dict:
    """A run's figure keywords from its ``eval`` settings: ``dpi`` (``eval.plot_dpi``) and
    ``formats`` (``eval.plot_formats``); settings without them (a run directory written before
    the key existed) get the defaults."""
    formats = settings.get("plot_formats")
    return {"dpi": settings.get("plot_dpi"), "formats": tuple(formats) if formats else FORMATS}


def save_figure(
    fig,
    stem: str | Path,
    formats: tuple[str, ...] = FORMATS,
    dpi: int | None = None,
) -> list[Path]:
    """Write ``stem.<format>`` for each format, atomically (``lengen.atomic.atomic_write``),
    with TrueType text in PDFs; close the figure -> the paths written. ``dpi`` sets the raster
    formats' resolution (default ``DEFAULT_DPI``; ``eval.plot_dpi`` for run figures); a PDF is
    vector, so it only affects images embedded in it."""
    import io

    from lengen.atomic import atomic_write

    plt = pyplot()
    stem = Path(stem)
    paths = []
    try:
        with plt.rc_context({"pdf.fonttype": 42, "ps.fonttype": 42}):  # read when saving
            for fmt in formats:
                # rendered in memory, so the one atomic writer puts the bytes on disk
                image = io.BytesIO()
                fig.savefig(image, format=fmt, bbox_inches="tight", dpi=dpi or DEFAULT_DPI)
                paths.append(stem.with_name(f"{stem.name}.{fmt}"))
                atomic_write(paths[-1], image.getvalue())
    finally:  # also when a write fails (a full disk): a sweep's process must not pile them up
        plt.close(fig)
    return paths


def figure_stem(path: str | Path) -> Path:
    """``run/extrapolation.tag.png`` -> ``run/extrapolation.tag``: where a caller names the
    PNG, its figure is written as every format beside it."""
    path = Path(path)
    return path.with_suffix("") if path.suffix in (".png", ".pdf", ".svg") else path


def wrap_title(text: str, width: int = 64) -> str:
    """A long ``a · b · c`` label on as few lines of at most ``width`` characters as it
    takes, broken at the `` · `` separators (inside a part only where a part is longer)."""
    import textwrap

    lines: list[str] = []
    for part in str(text).split(" · "):
        if lines and len(lines[-1]) + 3 + len(part) <= width:
            lines[-1] += " · " + part
        else:
            lines += textwrap.wrap(part, width) or [""]
    return "\n".join(lines)


def plain_number(value: float) -> str:
    """A tick label in plain decimals, 4 significant digits at most: 10.25, 40, 1200, 0.5."""
    import numpy as np

    if value == 0 or not np.isfinite(value):
        return f"{value:g}"
    return np.format_float_positional(value, precision=4, fractional=False, trim="-")


def plain_log_axis(ax, values, axis: str = "y") -> None:
    """A log axis for positive ``values`` (perplexity) with a few plain decimal ticks, never
    "1.025×10¹": 1-2-5 steps per decade over a range of 10× or more, else ~5 evenly spaced
    round values; minor ticks unlabelled."""
    import numpy as np
    from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter

    axis_ = ax.yaxis if axis == "y" else ax.xaxis
    (ax.set_yscale if axis == "y" else ax.set_xscale)("log")
    finite = np.asarray([v for v in values if v is not None], dtype=np.float64)
    finite = finite[np.isfinite(finite) & (finite > 0)]
    if finite.size and finite.max() / finite.min() >= 10:
        axis_.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    else:
        axis_.set_major_locator(MaxNLocator(nbins=5, steps=[1, 2, 2.5, 5, 10]))
    axis_.set_major_formatter(FuncFormatter(lambda value, _: plain_number(value)))
    axis_.set_minor_formatter(NullFormatter())


def safe_name(text) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in str(text))


def metric_label(metric: str) -> str:
    return {
        "accuracy": "per-token accuracy",
        "exact_match": "exact match",
        "ppl": "perplexity",
        "loss": "loss (nats / token)",
    }.get(metric, metric)
