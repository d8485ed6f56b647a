"""Figures of the encodings themselves (``python scripts/plot.py pe-analysis``, with ``--grid
HxW`` on a 2-D grid); the numerical checks they print come from ``lengen.pe.analysis``."""

from __future__ import annotations

import math
from pathlib import Path

from lengen.pe.analysis import check_shift_rotation, rope_relative_scores
from lengen.pe.config.base import BASE
from lengen.plots.common import OKABE_ITO, PAPER_RC, pyplot, save_figure

#: bytes ``plot_pe_analysis`` holds at once per entry of a (length, dim) table: the fp32 table
#: and its corrupted control, their fp64 copies and the shifted products of the shift check,
#: matplotlib's float64 copy for the heatmap (a rough upper bound: docs/analysis.md)
ANALYSIS_BYTES_PER_ENTRY = 64


def analysis_bytes(length: int, dim: int) -> int:
    """Memory ``plot_pe_analysis`` needs at ``length`` positions of ``dim`` dimensions (both
    encodings' figures hold a (length, dim) table and its copies, one encoding at a time)."""
    return ANALYSIS_BYTES_PER_ENTRY * max(length, 0) * max(dim, 0)


def plot_pe_analysis(
    out_dir: str | Path,
    pe: str = "all",
    length: int = 128,
    dim: int = 64,
    base: float = BASE,
    formats: tuple[str, ...] = ("png", "pdf"),
) -> dict:
    """Figures of the encodings themselves; returns {'paths': [...], numerical checks …}.

    sinusoidal: the table as a heatmap (positions × dimensions), the sin/cos waveforms of a
    few frequency pairs, PE(p0)·PE(p) vs p − p0 for two p0 (the curves coincide: the dot
    product depends on the offset only), and the check PE(p+k) = T(k)·PE(p) with a corrupted
    control table, printed by the CLI and drawn per shift k (``pe_sinusoidal_shift_check``). rope: q·k vs relative offset for q = k = 1 and a random pair."""
    import torch

    from lengen.pe import sinusoidal_table

    if pe not in ("all", "sinusoidal", "rope"):
        raise ValueError(f"pe must be one of all, sinusoidal, rope; got {pe!r}")
    if length < 2:
        raise ValueError(f"--length must be an integer >= 2, got {length}")
    if dim < 2 or dim % 2:
        raise ValueError(f"--dim must be an even integer >= 2, got {dim}")
    plt = pyplot()
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
                if 2 * math.pi / omega < 12:  # a few samples a period: lines alone look jagged
                    for line in ax.get_lines()[-2:]:
                        line.set(marker=".", markersize=3)
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

        fig = shift_check_figure(
            shift_errors(torch.from_numpy(table), base),
            shift_errors(corrupted, base),
            report["shift_rotation_error"],
            report["corrupted_shift_rotation_error"],
            length,
            dim,
        )
        report["paths"] += save_figure(fig, out_dir / "pe_sinusoidal_shift_check", formats)

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


def shift_errors(table, base: float = BASE):
    """max over p of |T(k) · PE(p) − PE(p + k)| for each shift k = 1 … length − 1 of an
    interleaved sinusoidal table -> Tensor[length − 1], float64 (k = 0 is the identity).
    ``lengen.pe.analysis.check_shift_rotation`` is the max of these; this is the same check
    kept per shift, for the figure."""
    import torch

    from lengen.pe.analysis import shift_rotation_matrix

    table = torch.as_tensor(table).to(torch.float64)  # (length, dim)
    length, dim = table.shape
    frequencies = base ** -(torch.arange(0, dim, 2, dtype=torch.float64) / dim)  # (dim/2,)
    errors = []
    for shift in range(1, length):
        predicted = table[: length - shift] @ shift_rotation_matrix(shift, frequencies).T
        errors.append((predicted - table[shift:]).abs().max())
    return torch.stack(errors) if errors else torch.zeros(0, dtype=torch.float64)


def shift_check_figure(errors, corrupted_errors, max_error, corrupted_max, length, dim):
    """The shift check as a figure, not saved: max_p |T(k)·PE(p) − PE(p+k)| against the shift
    k for the real table and for the corrupted control, log y axis, with the fp32 rounding
    level L · 2⁻²⁴ (the rounding of the largest angle p·ω) drawn; the title states the maxima."""
    plt = pyplot()
    shifts = range(1, len(errors) + 1)
    rounding = length * 2**-24
    with plt.rc_context(PAPER_RC):
        fig, ax = plt.subplots(figsize=(6.0, 3.8), layout="constrained")
        ax.plot(shifts, errors.numpy(), color=OKABE_ITO["blue"], marker=".", markersize=3,
                label="sinusoidal table (fp32)")  # fmt: skip
        ax.plot(shifts, corrupted_errors.numpy(), color=OKABE_ITO["vermillion"], linestyle="--",
                label="control: sin and cos of pair 0 swapped")  # fmt: skip
        ax.axhline(rounding, color="grey", linestyle=":", linewidth=1.2,
                   label=f"fp32 rounding of the largest angle, L·2⁻²⁴ = {rounding:.1e}")  # fmt: skip
        ax.set_yscale("log")
        ax.set_xlabel("shift k (positions)")
        ax.set_ylabel("max over p of |T(k)·PE(p) − PE(p+k)|")
        ax.set_title(
            f"PE(p+k) = T(k)·PE(p), sinusoidal table {length}×{dim}: max error "
            f"{max_error:.1e}\n(fp32 rounding ≈ {rounding:.1e}); corrupted control: "
            f"{corrupted_max:.1e}",
            fontsize=9,
        )
        ax.grid(alpha=0.3)
        ax.legend(frameon=False, fontsize=8, loc="center right")
    return fig


def colour_range(panels) -> tuple[tuple[float, float], str]:
    """((vmin, vmax), colour map) shared by ``panels`` (tensors): the values' own range, so a
    map of similarities between 0.6 and 1 is not flattened into one colour of a fixed [−1, 1];
    symmetric about 0 with a diverging map where the values take both signs, sequential
    (viridis) where they take one."""
    low = min(float(panel.min()) for panel in panels)
    high = max(float(panel.max()) for panel in panels)
    if low < 0 < high:
        bound = max(-low, high)
        return (-bound, bound), "RdBu_r"
    return (low, high if high > low else low + 1.0), "viridis"


#: ``plot.py pe-analysis --grid``: the encodings drawn on a grid
GRID_ENCODINGS = ("all", "sinusoidal", "rope", "rope_mixed", "alibi")


def plot_pe_grid_analysis(
    out_dir: str | Path,
    pe: str = "all",
    shape: tuple[int, int] = (16, 16),
    dim: int = 64,
    base: float | None = None,
    formats: tuple[str, ...] = ("png", "pdf"),
) -> dict:
    """Figures of the encodings on a 2-D grid of ``shape``, seen from the centre cell; returns
    {'paths': [...], numerical checks …}.

    sinusoidal: cosine similarity of the centre cell's ``sinusoidal_grid`` encoding to every
    cell's (``pe_grid_sinusoidal_similarity``). rope / rope_mixed: q·k/hd with q at the centre and
    k at every cell, q = k = 1 (axial RoPE; RoPE-Mixed at its initialisation, seed 0), with the
    offset-only check max |score(p+δ, q+δ) − score(p, q)| over random vectors, cells and offsets
    in the caption (``pe_grid_rope_scores``). alibi: −distance to the centre, Euclidean and
    Manhattan (``pe_grid_alibi_distance``). ``base``: the encodings' grid defaults when None
    (sinusoidal 10,000; axial RoPE 100 and RoPE-Mixed 10, rope-vit's)."""
    import torch

    from lengen.pe import RoPE, RoPEMixed, apply_rope, grid_distance, sinusoidal_grid
    from lengen.pe.analysis import (
        grid_axis_dependence,
        grid_offset_error,
        grid_similarity,
        rotated_grid_scores,
    )
    from lengen.pe.grid import grid_positions
    from lengen.pe.rope import rotate_pairs
    from lengen.pe.rope_mixed import mixed_angles

    if pe not in GRID_ENCODINGS:
        raise ValueError(f"--pe must be one of {', '.join(GRID_ENCODINGS)} with --grid; got {pe!r}")
    shape = tuple(int(size) for size in shape)
    if len(shape) != 2 or min(shape) < 2:
        raise ValueError(f"--grid must be HxW with sides >= 2, got {'x'.join(map(str, shape))}")
    if dim < 4 or dim % 4:
        raise ValueError(f"--dim must be a multiple of 4 (an even share per axis), got {dim}")
    plt = pyplot()
    out_dir = Path(out_dir)
    centre = (shape[0] // 2, shape[1] // 2)
    report: dict = {"paths": [], "grid": list(shape), "anchor": list(centre)}

    def image(ax, values, title, limits, cmap):
        """One grid panel, the centre cell marked, integer cell ticks -> the mappable."""
        from matplotlib.ticker import MaxNLocator

        vmin, vmax = limits
        drawn = ax.imshow(values.numpy(), cmap=cmap, origin="upper", vmin=vmin, vmax=vmax)
        ax.plot(centre[1], centre[0], marker="+", color="black", markersize=8)
        for axis in (ax.xaxis, ax.yaxis):  # cells are integers: no 2.5 ticks
            axis.set_major_locator(MaxNLocator(nbins=6, integer=True))
        ax.set_xlabel("column (axis 1)")
        ax.set_ylabel("row (axis 0)")
        ax.set_title(title, fontsize=9)
        return drawn

    if pe in ("all", "sinusoidal"):
        sin_base = base or BASE
        table = sinusoidal_grid(shape, dim, sin_base)  # (H, W, dim)
        similarity = grid_similarity(table, centre)
        with plt.rc_context(PAPER_RC):
            fig, ax = plt.subplots(figsize=(4.6, 3.8), layout="constrained")
            drawn = image(ax, similarity, f"sinusoidal_grid {shape[0]}×{shape[1]}, d={dim}, "
                          f"base={sin_base:g}", *colour_range([similarity]))  # fmt: skip
            fig.colorbar(drawn, ax=ax, label="cosine similarity to the centre cell", shrink=0.8)
        report["paths"] += save_figure(fig, out_dir / "pe_grid_sinusoidal_similarity", formats)

    if pe in ("all", "rope", "rope_mixed"):
        rope_base = base or RoPE.DEFAULT_GRID_BASE
        mixed_base = base or RoPEMixed.DEFAULT_GRID_BASE

        def axial(x, positions):
            return apply_rope(x, positions, rope_base, axes=2)

        with torch.random.fork_rng():  # RoPE-Mixed's random initial directions, seed 0
            torch.manual_seed(0)
            mixed_pe = RoPEMixed(d_model=dim, n_heads=1, axes=2, base=mixed_base)
        frequencies = mixed_pe.frequency_sets()[0].detach()  # (1 head, dim/2, 2)

        def mixed(x, positions):
            return rotate_pairs(x, mixed_angles(positions, frequencies)[0])

        panels = []
        if pe in ("all", "rope"):
            panels.append(("axial RoPE", axial, rope_base, "grid_rope"))
        if pe in ("all", "rope_mixed"):
            panels.append(("RoPE-Mixed (init, seed 0)", mixed, mixed_base, "grid_rope_mixed"))
        ones = torch.ones(dim)
        with plt.rc_context(PAPER_RC):
            fig, axes = plt.subplots(1, len(panels), figsize=(4.4 * len(panels), 4.2),
                                     layout="constrained", squeeze=False)  # fmt: skip
            caption = []
            scores = [rotated_grid_scores(rotate, ones, ones, shape, centre) / dim
                      for _, rotate, _, _ in panels]  # fmt: skip
            shared = colour_range(scores)  # the panels compare: one scale
            for ax, (title, rotate, panel_base, key), score in zip(axes[0], panels, scores,
                                                                  strict=True):  # fmt: skip
                error = grid_offset_error(rotate, dim, shape)
                dependence = grid_axis_dependence(rotate, dim, 2)
                report[f"{key}_offset_error"] = error
                report[f"{key}_axis_dependence"] = dependence
                drawn = image(ax, score, f"{title}, head dim {dim}, base {panel_base:g}", *shared)
                caption.append(
                    f"{title}: max |s(p+δ, q+δ) − s(p, q)| = {error:.1e}; "
                    f"|Δs| for a unit step along row, column: {dependence[0]:.2f}, "
                    f"{dependence[1]:.2f}"
                )
            fig.colorbar(drawn, ax=axes, label="q·k / d, q = k = 1, q at the centre", shrink=0.8)
            fig.suptitle(
                "score depends on the offset vector only (256 random q, k, cells, offsets):\n"
                + "\n".join(caption),
                fontsize=8,
            )
        report["paths"] += save_figure(fig, out_dir / "pe_grid_rope_scores", formats)

    if pe in ("all", "alibi"):
        cells = grid_positions(shape)  # (H·W, 2)
        offsets = cells - torch.tensor(centre)
        with plt.rc_context(PAPER_RC):
            fig, axes = plt.subplots(1, 2, figsize=(8.8, 3.8), layout="constrained")
            kinds = ("euclidean", "manhattan")
            biases = [-grid_distance(offsets, kind).reshape(shape).double() for kind in kinds]
            shared = colour_range(biases)  # the panels compare: one scale
            for ax, kind, bias in zip(axes, kinds, biases, strict=True):
                drawn = image(ax, bias, f"2-D ALiBi, {kind} distance", *shared)
            fig.colorbar(drawn, ax=axes, label="bias / slope m_h", shrink=0.8)
        report["paths"] += save_figure(fig, out_dir / "pe_grid_alibi_distance", formats)
    return report
