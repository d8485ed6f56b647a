#!/usr/bin/env bash
# Small-scale McGill comparison (Kazemnejad et al., 2023): NoPE, T5 bias, ALiBi, RoPE and
# sinusoidal causal decoders on copy, reverse and addition, two seeds each; then the summary
# table and figures. See docs/reproductions.md for the numbers, runtime and comparison.
#   bash scripts/reproduce_mcgill.sh [sweep dir]     (default results/multiruns/mcgill_small)
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-.venv/bin/python}
sweep=${1:-results/multiruns/mcgill_small}
"$python" train.py -m experiment=mcgill_small data=copy,reverse,addition \
    pe=nope,t5,alibi,rope,sinusoidal seed=0,1 \
    trainer.enable_progress_bar=false hydra.sweep.dir="$sweep" || true  # failures are listed below
"$python" scripts/aggregate.py "$sweep" --metric exact_match
"$python" scripts/plot.py "$sweep" --metric exact_match
