"""The context-extension arms side by side (issue #48; docs/reproductions.md (j)): one figure with
a panel per task (of one sweep folder or several), a line per method (none, PI, NTK, YaRN, Self-Extend, ReRoPE, Leaky ReRoPE,
DCA: eval.py re-evaluations of the RoPE runs; DroPE: their recalibrations without an encoding),
and one table of the same numbers.

python scripts/plot_extension_arms.py <sweep> [<sweep> …] --out DIR [--metric exact_match]

Writes DIR/extension_arms.csv, DIR/extension_arms.md and DIR/extrapolation_extension_arms.{png,pdf}.
Exit 0 done; 2 a folder without aggregated runs or re-evaluations (nothing written).
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

from lengen.caches import use_lengen_caches

use_lengen_caches()  # lengen imports matplotlib lazily: this runs before it (docs/scaling.md)

#: extension_arms.csv's columns: what a row is, then its statistics over seeds
COLUMNS = ("task", "method", "tag", "base_hash", "config_hash", "length", "n_seeds", "seeds",
           "mean", "min", "max", "ci95_low", "ci95_high", "baseline")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="plot_extension_arms.py", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "folder", nargs="+", type=Path, help="a sweep folder (searched recursively)"
    )
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--metric", default="exact_match")
    args = parser.parse_args(argv)
    from lengen.aggregate.extension_arms import arms_rows
    from lengen.aggregate.stats import aggregate

    panels = {}
    for folder in args.folder:
        if not folder.is_dir():
            print(f"error: {folder}: not a folder; allowed: a sweep folder", file=sys.stderr)
            return 2
        rows = arms_rows(aggregate(folder, metric=args.metric))
        if not rows:
            print(f"error: {folder}: no run with eval.py re-evaluations; allowed: a sweep of "
                  "scripts/reproduce_extension_arms.sh", file=sys.stderr)  # fmt: skip
            return 2
        for row in rows:
            task = str(row["task"])
            if panels.get(task, (folder,))[0] != folder:
                print(f"error: {folder}: task {task} is in another sweep given too; allowed: "
                      "each task in one sweep", file=sys.stderr)  # fmt: skip
                return 2
            panels.setdefault(task, (folder, []))[1].append(row)
    panels = {task: rows for task, (_, rows) in panels.items()}
    args.out.mkdir(parents=True, exist_ok=True)
    from lengen.plots.extension_arms import plot_extension_arms

    table = [{key: row.get(key) for key in COLUMNS} for rows in panels.values() for row in rows]
    with open(args.out / "extension_arms.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(table)
    (args.out / "extension_arms.md").write_text(markdown(panels, args.metric))
    paths = plot_extension_arms(panels, args.out / "extrapolation_extension_arms")
    print(" ".join(str(p) for p in [args.out / "extension_arms.csv", *paths]))
    return 0


def markdown(panels: dict[str, list[dict]], metric: str) -> str:
    """A table per task: a row per method, a column per length, the mean (each seed's range
    where there are several), the trivial baseline in the last row."""
    parts = []
    for task, rows in panels.items():
        lengths = sorted({row["length"] for row in rows})
        methods = list(dict.fromkeys(row["method"] for row in rows))
        cell = {(row["method"], row["length"]): row for row in rows}
        parts += [f"{task}, {metric} (mean over seeds; [min, max] with several)\n",
                  "| method | n | " + " | ".join(map(str, lengths)) + " |",
                  "|---|---|" + "---|" * len(lengths)]  # fmt: skip
        for method in methods:
            first = next(row for row in rows if row["method"] == method)
            values = [_cell(cell.get((method, length))) for length in lengths]
            parts.append(f"| {method} | {first['n_seeds']} | " + " | ".join(values) + " |")
        base = [cell.get(("none", length), {}).get("baseline") for length in lengths]
        parts += ["| trivial baseline | | " + " | ".join(_number(b) for b in base) + " |", ""]
    return "\n".join(parts)


def _cell(row: dict | None) -> str:
    if row is None or row["mean"] is None:
        return "–"
    text = _number(row["mean"])
    return text + (f" [{_number(row['min'])}, {_number(row['max'])}]" if row["n_seeds"] > 1 else "")


def _number(value) -> str:
    return "–" if value is None else f"{float(value):.3f}"


if __name__ == "__main__":
    sys.exit(main())
