#!/usr/bin/env bash
# Grids and volumes, small (experiment=grids_small): sinusoidal, learned (rows past training
# untrained, and interpolated as ViTs do), axial RoPE, RoPE-Mixed and 2-D ALiBi on grid_locate,
# grid_transpose, shapes and volume_locate, two seeds each; then the summary table and figures.
# Then RoPE runs re-evaluated with pe.scaling (pi, ntk, yarn) per axis through eval.py. See
# docs/grids.md for the numbers, runtime and comparison with the literature.
# Two Hydra multiruns, one run after another with torch's default threads, as the committed
# runs were made (a run's numbers can depend on its thread count); hydra/launcher=local runs
# them side by side instead (one per core, one torch thread each), hydra/launcher=slurm on a
# cluster. resume=auto: re-running fills in only what is missing.
#   bash scripts/reproduce_grids.sh [sweep dir] [overrides…]  (default results/multiruns/grids_small)
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-.venv/bin/python}
sweep=${1:-results/multiruns/grids_small}
shift $(($# > 0))  # the rest: overrides for every run (a launcher, its partition, …)
tasks=grid_locate,grid_transpose,shapes,volume_locate
status=0  # a run that fails is listed by the sweep's report; the others and the tables go on
"$python" train.py -m experiment=grids_small data=$tasks pe=sinusoidal,learned,rope,rope_mixed,alibi \
    seed=0,1 resume=auto hydra.sweep.dir="$sweep" "$@" || status=$?
"$python" train.py -m experiment=grids_small data=$tasks pe=learned pe.policy=interpolate seed=0,1 \
    resume=auto hydra.sweep.dir="$sweep" "$@" || status=$?
# resolution extension without retraining: RoPE's frequencies scaled per axis for 3× the side
for run in "$sweep"/grid_locate_encoder_rope_len* "$sweep"/shapes_encoder_rope_len*; do
    [ -e "$run/results.json" ] || continue  # a run that failed has nothing to re-evaluate
    for scaling in pi ntk yarn; do
        [ -e "$run/results.${scaling}3.json" ] ||
            "$python" eval.py run="$run" pe.scaling=$scaling pe.scaling_factor=3 tag=${scaling}3 > /dev/null
    done
done
"$python" scripts/aggregate.py "$sweep" --metric exact_match
for scaling in pi ntk yarn; do
    "$python" scripts/aggregate.py "$sweep" --metric exact_match --tag ${scaling}3
done
"$python" scripts/plot.py "$sweep" --metric exact_match
exit "$status"
