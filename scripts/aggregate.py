"""Summarise a sweep folder: mean ± 95% CI over seeds per configuration × length × protocol.

python scripts/aggregate.py <folder> [--metric accuracy] [--min-accuracy 0.9]
                                     [--exclude-not-learned] [--tag TAG]

Writes summary.csv, summary.md, ranking.csv, failed.csv and runs.csv into <folder>; the rules
(grouping, statistics, flags, ranking) are in docs/analysis.md and src/lengen/aggregate.py.
"""

from __future__ import annotations

import sys

from lengen.aggregate import main

if __name__ == "__main__":
    sys.exit(main())
