"""Figures from a sweep folder, or of the positional encodings themselves.

python scripts/plot.py <folder> [--metric accuracy] [--exclude-not-learned] [--tag TAG] [--out DIR]
python scripts/plot.py pe-analysis [--pe all|sinusoidal|rope] [--length 128] [--dim 64] --out DIR

The first writes extrapolation_<metric>_<task>_<model>_len<L>.{png,pdf} (mean ± 95% CI over
seeds per PE) and heatmap_<metric>.{png,pdf} into the folder; the second the PE-matrix,
waveform, similarity and RoPE-score figures and prints the PE(p+k) = T(k)·PE(p) check.
See docs/analysis.md.
"""

from __future__ import annotations

import sys

from lengen.plots import main

if __name__ == "__main__":
    sys.exit(main())
