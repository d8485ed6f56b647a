"""Summarise a sweep folder: mean ± 95% CI over seeds per configuration × length × protocol.

python scripts/aggregate.py <folder> [--metric exact_match] [--min-accuracy 0.9]
                                     [--exclude-not-learned] [--reached-criterion] [--tag TAG]
                                     [--test-rule K/N] [--out DIR]
python scripts/aggregate.py [LABEL=]<folder> [LABEL=]<folder> … --out DIR   (sweeps compared)

Writes summary.csv, summary.md, ratios.csv, ranking.csv, failed.csv, runs.csv and verdicts.json
(whether each comparison is a test: every arm learned in >= K of N seeds, default 2/3) into <folder>
(or --out DIR; with --metric other than exact_match the metric's tables are summary.<metric>.csv,
…), extension.csv / extension.md where runs carry eval.py re-evaluations, and paper_ratios.csv
where a paper's own length ratio is known (addition: operand digits at exact match > 0.98); the rules
(grouping, statistics, flags, ranking, names) are in docs/analysis.md and src/lengen/aggregate/.
Exit 0 done; 2 bad input or an output folder that cannot be written (nothing written).
"""

from __future__ import annotations

import sys

from lengen.aggregate import main
from lengen.caches import use_lengen_caches

use_lengen_caches()  # lengen imports matplotlib lazily: this runs before it (docs/scaling.md)

if __name__ == "__main__":
    from lengen.process import outlive_closed_output

    outlive_closed_output()  # `| head`, `>/dev/full`, a closed stream: the outputs still come
    sys.exit(main())
