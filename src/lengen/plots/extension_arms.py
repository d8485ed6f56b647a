"""The context-extension arms side by side in one figure (issue #48; docs/reproductions.md (j)):
one panel per task, a line per method (``lengen.aggregate.extension_arms.arms_rows``: the run's
own evaluation ``none``, every eval.py arm, DroPE), mean over seeds with each seed's value as
a thin line where there are few, the training length and the trivial baseline marked. The
per-task ``extension_*`` figures of ``plot.py`` draw one task each and leave DroPE out (it is a
trained configuration of its own); this one puts every arm of every task in one figure."""

from __future__ import annotations

from pathlib import Path

from lengen.plots.common import (
    OKABE_ITO,
    PAPER_RC,
    floats,
    length_axis,
    metric_label,
    pyplot,
    save_figure,
)

#: a fixed (colour, marker, line style) per method family, so an arm looks the same in every
#: panel; ``none`` (the run's own) black and solid, the interpolations solid, the re-mapping
#: arms dashed, DroPE dotted
ARM_STYLES = {
    "none": (OKABE_ITO["black"], "o", "-"),
    "PI": (OKABE_ITO["blue"], "s", "-"),
    "NTK": (OKABE_ITO["orange"], "^", "-"),
    "YaRN": (OKABE_ITO["vermillion"], "v", "-"),
    "Self-Extend": (OKABE_ITO["bluish_green"], "D", "--"),
    "ReRoPE": (OKABE_ITO["reddish_purple"], "P", "--"),
    "Leaky ReRoPE": (OKABE_ITO["sky_blue"], "X", "--"),
    "DCA": (OKABE_ITO["orange"], "h", "--"),
    "DroPE": (OKABE_ITO["blue"], "*", ":"),
}


def arm_style(method: str) -> tuple[str, str, str]:
    """(colour, marker, line style) of a method's line: by its family (the name before " ×"
    or ","); other names grey and dash-dotted."""
    family = str(method).split(" ×")[0].split(",")[0]
    return ARM_STYLES.get(family, ("#777777", ".", "-."))


#: an arm's keys as its paper writes them, for short legend labels
SHORT_KEYS = {"pe.self_extend_group": "G", "pe.self_extend_window": "W", "pe.rerope_window": "w",
              "pe.rerope_leak": "k", "pe.dca_chunk_size": "s", "pe.dca_local_window": "w"}  # fmt: skip


def short_label(method: str) -> str:
    """ "Self-Extend, pe.self_extend_group=16, pe.self_extend_window=8" -> "Self-Extend G=16,
    W=8": the method's keys by their papers' letters (other keys kept as written)."""
    name, *keys = str(method).split(", ")
    parts = []
    for item in keys:
        key, _, value = item.partition("=")
        parts.append(f"{SHORT_KEYS[key]}={value}" if key in SHORT_KEYS else item)
    return name + (" " + ", ".join(parts) if parts else "")


def plot_extension_arms(panels: dict[str, list[dict]], stem: str | Path, formats=("png", "pdf")):
    """One figure, a panel per task of ``panels`` (task -> ``arms_rows`` of one metric and one
    trained configuration), a line per method in the rows' order -> the paths written."""
    plt = pyplot()
    with plt.rc_context(PAPER_RC):
        fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels), 4.4),
                                 layout="constrained", sharey=True, squeeze=False)  # fmt: skip
        handles = {}
        for ax, (task, rows) in zip(axes[0], panels.items(), strict=True):
            handles |= _panel(ax, task, rows)
        metric = next(iter(panels.values()))[0]["metric"]
        axes[0][0].set_ylabel(f"mean {metric_label(metric)}")
        fig.legend(handles.values(), handles.keys(), loc="outside lower center", ncols=3,
                   title="method", fontsize=8)  # fmt: skip
    return save_figure(fig, stem, formats)


def _panel(ax, task: str, rows: list[dict]) -> dict:
    """Draw one task's methods on ``ax`` -> {legend label: handle}."""
    lines: dict[str, list[dict]] = {}
    for row in rows:
        lines.setdefault(row["method"], []).append(row)
    lengths = sorted({row["length"] for row in rows})
    handles = {}
    for method, members in lines.items():
        members = sorted(members, key=lambda r: r["length"])
        x = [r["length"] for r in members]
        colour, marker, style = arm_style(method)
        (handle,) = ax.plot(x, floats([r["mean"] for r in members]), color=colour,
                            marker=marker, linestyle=style, linewidth=1.4, markersize=5)  # fmt: skip
        for key in ("min", "max"):  # the seeds' range, where there are several
            if any(r["n_seeds"] > 1 for r in members):
                ax.plot(x, floats([r[key] for r in members]), color=colour, linewidth=0.5,
                        linestyle=style, alpha=0.5)  # fmt: skip
        handles[short_label(method)] = handle
    baseline = [r.get("baseline") for r in rows if r.get("baseline") is not None]
    if baseline:
        line = ax.axhline(max(baseline), color="grey", linestyle=(0, (4, 2)), linewidth=1)
        handles["trivial baseline (highest of the panel)"] = line
    length_axis(ax, lengths, rows[0]["train_len"])
    seeds = sorted({r["n_seeds"] for r in rows})
    ax.set_title(f"{task} · n = {'/'.join(str(n) for n in seeds)} seed(s)")
    ax.set_ylim(-0.03, 1.03)
    return handles
