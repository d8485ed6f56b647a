"""Print the per-length table of one or more results files or run directories.

python scripts/show_results.py results/runs/<run dir> [more …]

Exit 0 done; 2 a path that is not a results file (one line, naming it).
"""

from __future__ import annotations

import sys
from pathlib import Path

from lengen.results import format_table, load_results, schema_problems


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
            try:
                results = load_results(file)
                problems = schema_problems(results)
            except (OSError, ValueError) as error:  # missing, unreadable, not JSON
                reason = getattr(error, "strerror", None) or str(error).split("\n")[0]
                print(f"error: {file}: cannot be read as results ({reason})", file=sys.stderr)
                return 2
            if problems:
                print(f"error: {file}: not a results file: {problems[0]}", file=sys.stderr)
                return 2
            print(
                f"\n{file}\n{results['task']} · {results['model']} · pe={results['pe']} · "
                f"seed {results['seed']} · train_len {results['train_len']}"
            )
            print(format_table(results["eval"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
