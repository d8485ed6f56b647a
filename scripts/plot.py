"""Figures from a sweep folder, of a run's attention, or of the positional encodings themselves.

python scripts/plot.py <folder> [--metric exact_match] [--exclude-not-learned] [--tag TAG] [--out DIR]
python scripts/plot.py attention <run dir> --length L [--samples 16] [--out DIR]
python scripts/plot.py pe-analysis [--pe all|sinusoidal|rope] [--length 128] [--dim 64] --out DIR
python scripts/plot.py pe-analysis --grid 16x16 [--pe all|sinusoidal|rope|rope_mixed|alibi] --out DIR

The first writes extrapolation_<metric>_<task>_<model>_len<L>.{png,pdf} (mean ± 95% CI over
seeds per PE), heatmap_<metric>.{png,pdf}, attention_diagnostics_<task>_<model>_len<L>.{png,pdf}
and, for retrieval tasks, depth_<…>.{png,pdf} per configuration and accuracy_by_depth.csv into
the folder; the second the attention maps and
mean attention distance of a run's checkpoint at one length; the third the PE-matrix, waveform,
similarity and RoPE-score figures and prints the PE(p+k) = T(k)·PE(p) check; with ``--grid HxW``
the same on a 2-D grid, seen from the centre cell (similarity image, 2-D RoPE and RoPE-Mixed
scores with the offset-only check, ALiBi's distances).
See docs/analysis.md.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from lengen.caches import use_lengen_caches
from lengen.plots import plot_pe_analysis, plot_sweep
from lengen.plots.pe import GRID_ENCODINGS, plot_pe_grid_analysis

use_lengen_caches()  # lengen imports matplotlib lazily: this runs before it (docs/scaling.md)


def main(argv: list[str] | None = None) -> int:
    """``plot.py <folder> [...]`` (sweep figures) or ``plot.py pe-analysis [...]``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "attention":
        return _attention_main(argv[1:])
    if argv and argv[0] == "pe-analysis":
        parser = argparse.ArgumentParser(
            prog="plot.py pe-analysis", description="Figures of the PE math (docs/analysis.md)."
        )
        parser.add_argument(
            "--pe", default="all", choices=sorted({"all", "sinusoidal", "rope", *GRID_ENCODINGS})
        )
        parser.add_argument("--length", type=int, default=128, help="positions (default 128)")
        parser.add_argument("--dim", type=int, default=64, help="model / head dim (default 64)")
        parser.add_argument(
            "--base", type=float, default=None, help="default 10000 (grids: each one's default)"
        )
        parser.add_argument(
            "--grid", default=None, help="HxW, e.g. 16x16: the encodings on a 2-D grid"
        )
        parser.add_argument("--out", type=Path, required=True, help="folder for the figures")
        args = parser.parse_args(argv[1:])
        if args.grid is not None:
            return _grid_analysis(args)
        if args.pe not in ("all", "sinusoidal", "rope"):
            print(f"error: --pe {args.pe} is drawn on grids only (--grid HxW)", file=sys.stderr)
            return 2
        try:
            report = plot_pe_analysis(
                args.out, args.pe, args.length, args.dim, args.base or 10000.0
            )
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
        "heatmap, attention diagnostics vs length, accuracy by depth over seeds), from the same "
        "aggregation as aggregate.py. Also: plot.py pe-analysis --help.",
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
    paths += _diagnostics(summary, args.out or args.folder)
    if not paths:
        print("warning: nothing to plot (no aggregated runs)", file=sys.stderr)
    print("\n".join(str(path) for path in paths))
    return 0


def _diagnostics(summary, out_dir: Path) -> list[Path]:
    """The sweep's attention diagnostics and depth grids (``lengen.aggregate.diagnostics``), of
    the same runs as the summary, each configuration named as in its figures."""
    from lengen.aggregate.diagnostics import write_sweep_diagnostics

    runs = summary.aggregated
    if summary.exclude_not_learned:
        runs = [run for run in runs if run.learned is not False]
    labels = {row["config_hash"]: str(row["pe"]) + (f" [{row['settings']}]" if row["settings"]
              else "") for row in summary.rows}  # fmt: skip
    return write_sweep_diagnostics(runs, out_dir, tag=summary.tag, labels=labels)


def _grid_analysis(args) -> int:
    """``plot.py pe-analysis --grid HxW``: the grid figures and their numerical checks."""
    try:
        shape = tuple(int(size) for size in args.grid.lower().split("x"))
        report = plot_pe_grid_analysis(args.out, args.pe, shape, args.dim, args.base)
    except ValueError as error:
        message = str(error)
        if "invalid literal" in message:
            message = f"--grid must be HxW with integer sides, e.g. 16x16; got {args.grid!r}"
        print(f"error: {message}", file=sys.stderr)
        return 2
    for key, label in (("grid_rope", "axial RoPE"), ("grid_rope_mixed", "RoPE-Mixed (init)")):
        if f"{key}_offset_error" in report:
            row, column = report[f"{key}_axis_dependence"]
            print(
                f"{label} on a {args.grid} grid: score depends on the offset vector only, max "
                f"|s(p+δ, q+δ) − s(p, q)| = {report[f'{key}_offset_error']:.2e}; a unit step "
                f"along the row / column axis changes it by {row:.2f} / {column:.2f}"
            )
    print("\n".join(str(path) for path in report["paths"]))
    return 0


def _attention_main(argv: list[str]) -> int:
    """``plot.py attention <run dir> --length L``: maps and mean attention distance."""
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


if __name__ == "__main__":
    sys.exit(main())
