"""Print the per-length table of one or more results files or run directories.

python scripts/show_results.py results/runs/<run dir> [more …]
"""

from __future__ import annotations

import sys
from pathlib import Path

from lengen.results import format_table, load_results


def main(paths: list[str]) -> int:
    if not paths:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    for path in map(Path, paths):
        files = sorted(path.glob("results*.json")) if path.is_dir() else [path]
        if not files:
            print(f"error: {path}: no results*.json there", file=sys.stderr)
            return 2
        for file in files:
            results = load_results(file)
            print(
                f"\n{file}\n{results['task']} · {results['model']} · pe={results['pe']} · "
                f"seed {results['seed']} · train_len {results['train_len']}"
            )
            print(format_table(results["eval"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
