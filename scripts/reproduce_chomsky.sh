#!/usr/bin/env bash
# Small-scale Chomsky-hierarchy subset (Delétang et al., 2023; Ruoss et al., 2023): encoders with
# sinusoidal, ALiBi and RoPE positions, each with and without randomized positions, on one
# regular (even_pairs, cycle_navigation) and one deterministic context-free task (reverse), two
# seeds; then the summary (mean, CI and best of seeds) and figures. docs/reproductions.md.
#   bash scripts/reproduce_chomsky.sh [sweep dir]     (default results/multiruns/chomsky_small)
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-.venv/bin/python}
sweep=${1:-results/multiruns/chomsky_small}
"$python" train.py -m experiment=chomsky_small data=even_pairs,cycle_navigation,reverse \
    pe=sinusoidal,alibi,rope pe.randomized=false,true seed=0,1 \
    trainer.enable_progress_bar=false hydra.sweep.dir="$sweep" || true  # failures are listed below
"$python" scripts/aggregate.py "$sweep" --metric exact_match
"$python" scripts/plot.py "$sweep" --metric exact_match
