"""Summarise a sweep folder: mean ± 95% CI over seeds per configuration × length × protocol.

python scripts/aggregate.py <folder> [--metric exact_match] [--min-accuracy 0.9]
                                     [--exclude-not-learned] [--reached-criterion] [--tag TAG]

Writes summary.csv, summary.md, ranking.csv, failed.csv and runs.csv into <folder>; the rules
(grouping, statistics, flags, ranking) are in docs/analysis.md and src/lengen/aggregate/.
"""

from __future__ import annotations

import sys

from lengen.aggregate import main
from lengen.caches import use_lengen_caches

use_lengen_caches()  # lengen imports matplotlib lazily: this runs before it (docs/scaling.md)

if __name__ == "__main__":
    sys.exit(main())
