"""Figures from a sweep folder, of a run's attention, or of the positional encodings themselves.

python scripts/plot.py <folder> [--metric exact_match] [--exclude-not-learned] [--tag TAG] [--out DIR]
                              [--labels names.yaml]
python scripts/plot.py [LABEL=]<folder> [LABEL=]<folder> … --out DIR   (sweeps compared)
python scripts/plot.py attention <run dir> --length L [--samples 16] [--out DIR]
python scripts/plot.py runs <folder>
python scripts/plot.py pe-analysis [--pe all|sinusoidal|rope] [--length 128] [--dim 64] --out DIR
python scripts/plot.py pe-analysis --grid 16x16 [--pe all|sinusoidal|rope|rope_mixed|alibi] --out DIR

The first writes extrapolation_<metric>_<task>_<model>_len<L>.{png,pdf} (mean ± 95% CI over
seeds per configuration; with 3 seeds or fewer the seeds themselves), heatmap_<metric>.{png,pdf},
extension_<metric>_<…>.{png,pdf} (length-extension methods, where runs carry eval.py
re-evaluations), attention_diagnostics_<task>_<model>_len<L>.{png,pdf} and, for retrieval tasks,
depth_<…>.{png,pdf} per configuration and accuracy_by_depth.csv into the folder (or --out DIR);
lines are named by what sets them apart, renamed with --labels FILE; the second the attention maps and
mean attention distance of a run's checkpoint at one length; the third the PE-matrix, waveform,
similarity and RoPE-score figures and prints the PE(p+k) = T(k)·PE(p) check; with ``--grid HxW``
the same on a 2-D grid, seen from the centre cell (similarity image, 2-D RoPE and RoPE-Mixed
scores with the offset-only check, ALiBi's distances); ``runs`` every run's own figures below the
folder again, from the json files each run wrote (the committed reproductions keep only the
numbers in git: docs/reproductions.md). See docs/analysis.md.
"""

from __future__ import annotations

import errno
import sys
from pathlib import Path

from lengen.aggregate.command import OneLineParser
from lengen.caches import use_lengen_caches
from lengen.plots import plot_pe_analysis, plot_sweep
from lengen.plots.pe import GRID_ENCODINGS, plot_pe_grid_analysis

use_lengen_caches()  # lengen imports matplotlib lazily: this runs before it (docs/scaling.md)


#: errors of a write that the disk or its folder refused on the way (after the --out probe)
WRITE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EIO}


def main(argv: list[str] | None = None) -> int:
    """``plot.py <folder> [...]`` (sweep figures) or ``plot.py pe-analysis [...]``; a disk that
    fills up on the way is one line and exit 4 in every subcommand: pe-analysis and attention
    ended in an OSError traceback (kept-back KB143, docs/trials/kept-back-2026-12-02.md)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        return _main(argv)
    except OSError as error:
        if error.errno not in WRITE_ERRNOS:
            raise
        from lengen.aggregate.report import write_failure

        out = next((arg.partition("=")[2] for arg in argv if arg.startswith("--out=")), None)
        if out is None and "--out" in argv[:-1]:
            out = argv[argv.index("--out") + 1]
        print(f"error: {write_failure(out or 'the output folder', error)}", file=sys.stderr)
        return 4


def _main(argv: list[str]) -> int:
    if argv and argv[0] == "attention":
        return _attention_main(argv[1:])
    if argv and argv[0] == "runs":
        return _runs_main(argv[1:])
    if argv and argv[0] == "pe-analysis":
        parser = OneLineParser(
            prog="plot.py pe-analysis", description="Figures of the PE math (docs/analysis.md)."
        )
        parser.add_argument(
            "--pe", default="all", choices=sorted({"all", "sinusoidal", "rope", *GRID_ENCODINGS})
        )
        parser.add_argument("--length", type=int, default=128, help="positions (default 128)")
        parser.add_argument("--dim", type=int, default=64, help="model / head dim (default 64)")
        parser.add_argument(
            "--base", type=_base, default=None, help="default 10000 (grids: each one's default)"
        )
        parser.add_argument(
            "--grid", default=None, help="HxW, e.g. 16x16: the encodings on a 2-D grid"
        )
        parser.add_argument("--out", type=Path, required=True, help="folder for the figures")
        args = parser.parse_args(argv[1:])
        from lengen.aggregate.report import unwritable

        if problem := unwritable(args.out):
            print(f"error: {problem}", file=sys.stderr)
            return 2
        if args.grid is not None:
            return _grid_analysis(args)
        if args.pe not in ("all", "sinusoidal", "rope"):
            print(f"error: --pe {args.pe} is drawn on grids only (--grid HxW)", file=sys.stderr)
            return 2
        if problem := _analysis_memory(args.length, args.dim):
            print(f"error: {problem}", file=sys.stderr)
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
    from lengen.aggregate.report import unwritable

    parser = OneLineParser(
        prog="plot.py",
        description="Figures of a sweep folder (metric vs length with 95% CI bands or, with 3 "
        "seeds or fewer, the seeds themselves; PE × task heatmap; length-extension methods "
        "compared where runs carry eval.py re-evaluations; attention diagnostics vs length; "
        "accuracy by depth over seeds), from the same aggregation as aggregate.py. Several "
        "folders ([LABEL=]FOLDER …, with --out): the sweeps compared. Also: plot.py attention "
        "--help, plot.py pe-analysis --help. Exit 0 done, 2 bad input or an output folder that "
        "cannot be written (nothing written), 4 writing failed on the way (a full disk), 5 "
        "plot.py attention ran out of memory at the length asked for.",
    )
    parser.add_argument("folder", nargs="+", help="a sweep folder; several: [LABEL=]FOLDER")
    add_selection_arguments(parser)
    parser.add_argument("--out", type=Path, default=None, help="default: the folder itself")
    parser.add_argument(
        "--labels",
        type=Path,
        default=None,
        help="a YAML (or JSON) file mapping a line's automatic name to the name to show, e.g. "
        "'rope [base=500]: RoPE, base 500' (docs/analysis.md)",
    )
    args = parser.parse_args(argv)
    renames = _read_labels(args.labels) if args.labels else {}
    if renames is None:
        return 2
    summary = summary_from_arguments(args)
    if summary is None:
        return 2
    from lengen.aggregate.command import no_runs

    out_dir = args.out or summary.folder
    if problem := no_runs(summary) or unwritable(out_dir):
        print(f"error: {problem}", file=sys.stderr)
        return 2
    for line in warnings_for(summary):
        print(f"warning: {line}", file=sys.stderr)
    for name in _unmatched(renames, summary.rows):
        print(f"warning: --labels: no line is named {name!r} (a line's name as the legend shows "
              "it without its (n=…), or a config_hash)", file=sys.stderr)  # fmt: skip
    from lengen.aggregate.report import write_failure

    try:
        paths = plot_sweep(summary, out_dir, renames=renames)
        paths += _extension(summary, out_dir, renames)
        paths += _diagnostics(summary, out_dir, renames)
    except OSError as error:  # after the probe: a disk that filled up, a folder made read-only
        print(f"error: {write_failure(out_dir, error)}", file=sys.stderr)
        return 4
    if not paths:
        print("warning: nothing to plot (no aggregated runs)", file=sys.stderr)
    print("\n".join(str(path) for path in paths))
    return 0


def _unmatched(renames: dict[str, str], rows: list[dict]) -> list[str]:
    """The keys of ``--labels`` that name no line (a typo would otherwise change nothing)."""
    from lengen.plots.names import line_names

    names = line_names(rows)
    return [key for key in renames if key not in names and key not in names.values()]


def _read_labels(path: Path) -> dict[str, str] | None:
    """``--labels FILE``: {automatic name: shown name}, or None (message printed) where the file
    cannot be read or is not a mapping of names to names."""
    import yaml

    try:
        mapping = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as error:
        reason = getattr(error, "strerror", None) or type(error).__name__
        print(f"error: --labels {path}: cannot be read ({reason})", file=sys.stderr)
        return None
    if not isinstance(mapping, dict) or not all(
        isinstance(value, (str, int, float)) for value in mapping.values()
    ):
        print(f"error: --labels {path}: must map each automatic line name to a new name, "
              "e.g. 'rope [base=500]: RoPE 500'", file=sys.stderr)  # fmt: skip
        return None
    return {str(key): str(value) for key, value in mapping.items()}


def _extension(summary, out_dir: Path, renames: dict[str, str]) -> list[Path]:
    """Length-extension methods compared, where runs carry eval.py re-evaluations."""
    from lengen.aggregate.extension import extension_rows
    from lengen.plots.names import line_names
    from lengen.plots.sweep import plot_extension

    rows = extension_rows(summary)
    return plot_extension(rows, out_dir, names=line_names(summary.rows, renames)) if rows else []


def _diagnostics(summary, out_dir: Path, renames: dict[str, str]) -> list[Path]:
    """The sweep's attention diagnostics and depth grids (``lengen.aggregate.diagnostics``), of
    the same runs as the summary, each configuration named as in its figures."""
    from lengen.aggregate.diagnostics import write_sweep_diagnostics
    from lengen.plots.names import line_names

    runs = summary.aggregated
    if summary.exclude_not_learned:
        runs = [run for run in runs if run.learned is not False]
    labels = line_names(summary.rows, renames)
    return write_sweep_diagnostics(runs, out_dir, tag=summary.tag, labels=labels)


def _analysis_memory(length: int, dim: int) -> str | None:
    """Why ``pe-analysis --length --dim`` cannot fit in the memory available (it was killed
    by the kernel without a word, or died in a torch allocator traceback: PA15), or None."""
    from lengen.plots.pe import analysis_bytes
    from lengen.preflight.resources import cpu_memory_limit

    # the tightest of MemAvailable, ulimit -v / -d and the memory cgroup (PA15 under ulimit -v)
    needed, (available, where) = analysis_bytes(length, dim), cpu_memory_limit()
    if not where or needed <= available:
        return None
    return (
        f"--length {length}: the analysis holds about {needed / 2**30:,.1f} GiB ({length:,} "
        f"positions × {dim} dimensions of tables and their copies), more than the "
        f"{available / 2**30:,.1f} GiB of {where} memory available; allowed: a shorter --length "
        f"or a smaller --dim"
    )


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


def _runs_main(argv: list[str]) -> int:
    """``plot.py runs <folder>``: each run's figures drawn again from its json files."""
    parser = OneLineParser(
        prog="plot.py runs",
        description="Every run's own figures (extrapolation, attention diagnostics, accuracy by "
        "position and by depth, loss by position) drawn again from the json files it wrote, for "
        "every run directory at or below the folder (docs/reproductions.md).",
    )
    parser.add_argument("folder", type=Path, help="a run directory or a folder of them")
    args = parser.parse_args(argv)
    from lengen.aggregate.report import unwritable
    from lengen.plots.redraw import redraw_run, run_folders

    if not args.folder.is_dir():
        print(f"error: {args.folder}: not a folder", file=sys.stderr)
        return 2
    runs = run_folders(args.folder)
    if not runs:
        print(f"error: {args.folder}: no run directory (config.yaml and results.json) at or "
              "below it", file=sys.stderr)  # fmt: skip
        return 2
    if problem := next(filter(None, map(unwritable, runs)), None):
        print(f"error: {problem}", file=sys.stderr)
        return 2
    try:
        for run in runs:
            print("\n".join(str(path) for path in redraw_run(run)))
    except OSError as error:  # a disk that filled up on the way
        from lengen.aggregate.report import write_failure

        print(f"error: {write_failure(run, error)}", file=sys.stderr)
        return 4
    return 0


def _positive(text: str) -> int:
    """argparse type: an integer >= 1."""
    import argparse

    value = int(text) if text.lstrip("-").isdigit() else 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text!r}")
    return value


def _base(text: str) -> float:
    """argparse type: a sinusoid base, a finite number > 1 (``--base nan`` drew figures of NaN
    and exited 0: PA12)."""
    import argparse
    import math

    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 1:
        raise argparse.ArgumentTypeError(f"must be a finite number > 1, got {text!r}")
    return value


def _attention_main(argv: list[str]) -> int:
    """``plot.py attention <run dir> --length L``: maps and mean attention distance."""
    from lengen.config import ConfigError

    parser = OneLineParser(
        prog="plot.py attention",
        description="Attention maps and mean attention distance of a run's checkpoint at one "
        "length (docs/analysis.md).",
    )
    parser.add_argument("run", type=Path, help="a run directory with checkpoints/last.ckpt")
    # refused before the run is loaded (the task refused it only once the model was built)
    parser.add_argument("--length", type=_positive, required=True, help="evaluation length")
    parser.add_argument("--samples", type=_positive, default=16, help="held-out instances (16)")
    parser.add_argument("--out", type=Path, default=None, help="default: the run directory")
    args = parser.parse_args(argv)
    from lengen.preflight.attention_maps import planned_map_refusal

    # from the run's config.yaml, before the run is loaded (G11, G12: refused after 25-28 s)
    if (refusal := planned_map_refusal(args.run, args.length, args.samples)) is not None:
        print(f"error: {refusal}", file=sys.stderr)
        return 2
    from lengen.aggregate.report import unwritable
    from lengen.attention_maps import analyse_run

    if args.run.is_dir() and (problem := unwritable(args.out or args.run)):
        print(f"error: {problem}", file=sys.stderr)
        return 2

    try:
        report = analyse_run(args.run, args.length, args.out, args.samples)
    except (ConfigError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except (MemoryError, RuntimeError) as error:  # torch's allocator: RuntimeError or its OOM
        if not isinstance(error, MemoryError) and "memory" not in str(error).lower():
            raise
        print(f"error: --length {args.length}: out of memory for {args.samples} instance(s) "
              "at this length; allowed: a shorter --length or fewer --samples", file=sys.stderr)  # fmt: skip
        return 5
    unit = report.get("distance_unit", "tokens")  # grids: cells
    print(f"mean attention distance at length {args.length} ({unit}; rows: layers, columns: heads)")
    for name, row in zip(report["layers"], report["mean_attention_distance"], strict=True):
        print(f"  layer {name:>10}: " + "  ".join(f"{d:7.2f}" for d in row))
    print("\n".join(report["paths"]))
    return 0


if __name__ == "__main__":
    from lengen.process import outlive_closed_output

    outlive_closed_output()  # `| head`, `>/dev/full`, a closed stream: the outputs still come
    sys.exit(main())
