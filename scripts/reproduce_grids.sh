#!/usr/bin/env bash
# Grids and volumes, small (experiment=grids_small): sinusoidal, learned (rows past training
# untrained, and interpolated as ViTs do), axial RoPE, RoPE-Mixed and 2-D ALiBi on grid_locate,
# grid_transpose, shapes and volume_locate, two seeds each; then the summary table and figures.
# Then RoPE runs re-evaluated with pe.scaling (pi, ntk, yarn) per axis through eval.py. See
# docs/grids.md for the numbers, runtime and comparison with the literature.
#   bash scripts/reproduce_grids.sh [sweep dir]     (default results/multiruns/grids_small)
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-.venv/bin/python}
sweep=${1:-results/multiruns/grids_small}
tasks=grid_locate,grid_transpose,shapes,volume_locate
"$python" train.py -m experiment=grids_small data=$tasks \
    pe=sinusoidal,learned,rope,rope_mixed,alibi seed=0,1 \
    trainer.enable_progress_bar=false hydra.sweep.dir="$sweep" || true  # failures are listed below
"$python" train.py -m experiment=grids_small data=$tasks pe=learned pe.policy=interpolate seed=0,1 \
    trainer.enable_progress_bar=false hydra.sweep.dir="$sweep" || true
# resolution extension without retraining: RoPE's frequencies scaled per axis for 3× the side
for run in "$sweep"/grid_locate_encoder_rope_len* "$sweep"/shapes_encoder_rope_len*; do
    for scaling in pi ntk yarn; do
        "$python" eval.py run="$run" pe.scaling=$scaling pe.scaling_factor=3 tag=${scaling}3 > /dev/null
    done
done
"$python" scripts/aggregate.py "$sweep" --metric exact_match
for scaling in pi ntk yarn; do
    "$python" scripts/aggregate.py "$sweep" --metric exact_match --tag ${scaling}3
done
"$python" scripts/plot.py "$sweep" --metric exact_match
