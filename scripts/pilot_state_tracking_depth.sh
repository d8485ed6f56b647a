#!/usr/bin/env bash
# The depth argument of docs/reproductions.md (g) (issue #47): at A5 length 8 a 4-layer model can
# compose the eight products by depth alone (the parallel-prefix scan joins 2^L elements with L
# layers; Fagnou et al.'s bound log2(n+1) asks for 4 at n = 8), so the committed 4-layer runs
# cannot separate PaTH from RoPE. This pilot fixes n = 8 and varies the depth: PaTH, RoPE and
# NoPE (the arms of (g)) at model.n_layers 1, 2 and 4, experiment=state_tracking_small otherwise
# (A5, lengths 1-8, criterion 0.95 exact match within 20,000 steps, tested up to 4x). The claim
# to test: PaTH reaches the criterion at a smaller depth than RoPE and NoPE. One seed by default
# (a pilot: which depths learn at all); SEEDS=0,1,2 makes it the depth experiment.
# The 4-layer jobs are the committed runs' configurations (same run ids: results/reproductions/
# state_tracking_small, seeds 0-2); LAYERS=1,2 leaves them out.
# One Hydra multirun per depth, each into a folder of its own (<sweep dir>/layers_<L>), so that
# each depth's tables and verdict class compare the three arms at that depth (aggregate.py makes
# one comparison of a folder's task, model and length: one folder of every depth would class
# them all together); through hydra/launcher=local (one run per core, one torch thread each),
# resume=auto, then per folder the tables, verdict classes and figures (summarize_tasks.sh).
#   bash scripts/pilot_state_tracking_depth.sh [sweep dir] [overrides…]
#        (default results/multiruns/state_tracking_depth)
#   SEEDS=0,1,2 LAYERS=1,2 bash scripts/pilot_state_tracking_depth.sh      (beside the committed L = 4)
#   DRY=1 bash scripts/pilot_state_tracking_depth.sh    (the commands and the sweep's estimate only)
#   … hydra/launcher=slurm, or on one GPU: hydra.sweeper.pack=3 with SEEDS=0,1,2 (seeds packed)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/recipe_sweeps.sh
sweep_dir=${1:-results/multiruns/state_tracking_depth}
shift $(($# > 0))  # the rest: overrides for every run (a launcher, its partition, …)
layers=${LAYERS:-1,2,4}
for depth in ${layers//,/ }; do
    [[ $depth =~ ^[1-9][0-9]*$ ]] || { echo "error: LAYERS: '$depth' is not a positive integer; give e.g. LAYERS=1,2,4" >&2; exit 2; }
done
for depth in ${layers//,/ }; do
    sweep experiment=state_tracking_small data=a5 pe=path,rope,nope model.n_layers="$depth" \
        seed="${SEEDS:-0}" resume=auto hydra.sweep.dir="$sweep_dir/layers_$depth" \
        hydra/launcher=local "$@"
done
for depth in ${layers//,/ }; do summarize "$sweep_dir/layers_$depth"; done
finish
