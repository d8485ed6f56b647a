#!/usr/bin/env bash
# Encoding or recurrence (issue #49): the data-dependent attention encodings against recurrent
# sequence mixers on the state-tracking tasks their papers compare them on, flip-flop
# (experiment=flip_flop_small, docs/reproductions.md (f)) and A5 (experiment=state_tracking_small,
# (g)), three seeds each, trained to each experiment's in-distribution criterion within its step
# budget and tested up to 4x. Arms: RoPE, PaTH and FoX attention; gated linear attention (Mamba-2's
# scalar gate), DeltaNet and Gated DeltaNet with negative eigenvalues (Grazzi et al. 2025), all
# layers recurrent (pe=nope: no layer attends); and a 3:1 hybrid, three Gated DeltaNet layers
# (negative eigenvalues) to one RoPE attention layer. The experiments' sizes otherwise (4 layers,
# d_model 128). Hydra multiruns through hydra/launcher=local (one run per core, one torch thread
# each), resume=auto (a re-run fills in only what is missing), then each task's tables and
# figures (scripts/summarize_tasks.sh). docs/models.md "Encoding or recurrence".
#   bash scripts/reproduce_encoding_or_recurrence.sh [sweep dir] [overrides…]
#        (default results/multiruns/encoding_or_recurrence; one sub-folder per task)
#   TASKS=flip_flop bash scripts/reproduce_encoding_or_recurrence.sh   (one task only)
#   DRY=1 bash scripts/reproduce_encoding_or_recurrence.sh   (the commands and the estimate only)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/recipe_sweeps.sh
sweep_dir=${1:-results/multiruns/encoding_or_recurrence}
shift $(($# > 0))  # the rest: overrides for every run (a launcher, its partition, …)
tasks=${TASKS:-"flip_flop a5"}
negative='{mixer:gated_deltanet,negative_eigenvalues:true}'
for task in $tasks; do
    case $task in
        flip_flop) experiment=flip_flop_small ;;
        a5) experiment=state_tracking_small ;;
        *) echo "error: TASKS: unknown task '$task'; allowed: flip_flop, a5" >&2; exit 2 ;;
    esac
done
for task in $tasks; do
    case $task in flip_flop) experiment=flip_flop_small ;; a5) experiment=state_tracking_small ;; esac
    common=(experiment="$experiment" seed=0,1,2 resume=auto hydra.sweep.dir="$sweep_dir/$task"
            hydra/launcher=local)
    sweep "${common[@]}" pe=rope,path,fox "$@"                                                 # attention
    sweep "${common[@]}" pe=nope "model.mixer=gla,deltanet,$negative" "$@"                     # recurrent
    sweep "${common[@]}" pe=rope "model.mixers=[$negative,$negative,$negative,attention]" "$@" # 3:1 hybrid
    summarize "$sweep_dir/$task"
done
finish
