"""The figure of a run's Effective Remembrance (results.json's ``effective_remembrance``,
``eval.effrem``; ``lengen.evaluation.remembrance``): EffRem_T(t) against t, one curve per
evaluation length, as Buitrago Ruiz & Gu's Figure 1 (d–f) draws it for one T."""

from __future__ import annotations

from pathlib import Path

from lengen.plots.common import (
    FIGURE_WIDTH,
    FORMATS,
    OKABE_ITO,
    PAPER_RC,
    figure_stem,
    pyplot,
    save_figure,
)


def remembrance_figure(section: dict):
    """EffRem_T(t) (total variation, 0 … 1) against the start t of the kept suffix x[t:T]; a
    curve per length, labelled with its T (tokens of the context looked at)."""
    plt = pyplot()
    colours = list(OKABE_ITO.values())
    with plt.rc_context(PAPER_RC):
        fig, ax = plt.subplots(figsize=(FIGURE_WIDTH, FIGURE_WIDTH * 0.55), layout="constrained")
        for index, (length, curve) in enumerate(section["lengths"].items()):
            in_distribution = int(length) <= section["train_len"]
            ax.plot(curve["t"], curve["effrem"], marker="o", markersize=2.5,
                    color=colours[index % len(colours)],
                    linestyle="-" if in_distribution else "--",
                    label=f"length {length} (T = {curve['tokens']})")  # fmt: skip
        ax.set_xlabel("t: the first t tokens removed (token index)")
        ax.set_ylabel("EffRem$_T$(t) (total variation)")
        ax.set_ylim(bottom=0.0)
        ax.set_title(f"Effective Remembrance, mean over {section['samples']} instances "
                     f"(dashed: beyond training)", fontsize=9)  # fmt: skip
        ax.legend(fontsize=7, frameon=False)
    return fig


def plot_remembrance(
    section: dict, stem: str | Path, dpi: int | None = None, formats: tuple[str, ...] = FORMATS
) -> list[Path]:
    """``<stem>.{png,pdf}`` (:func:`remembrance_figure`) -> the paths written."""
    return save_figure(remembrance_figure(section), figure_stem(stem), formats, dpi=dpi)
