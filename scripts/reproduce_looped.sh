#!/usr/bin/env bash
# Looped depth on its home ground (issue #49; Fan et al., "Looped Transformers for Length
# Generalization", ICLR 2025, arXiv 2409.15647): one weight-tied block whose passes grow with the
# length against the same model unlooped, on copy, parity and reversed addition as lengen has
# them (docs/tasks.md), three seeds each, trained on lengths 1-8 to the in-distribution criterion
# within 10,000 steps and tested up to 4x (experiment=looped_small; causal decoders, NoPE,
# d_model 128). Three arms per task:
#   looped  model.n_layers=1 model.loops=8 model.loop_rule=linear (the yaml): 8 passes at the
#           training length, ceil(8 T / T_train) at T tokens; input injection, step embedding
#   depth   model.n_layers=8, unlooped: the looped arm's passes at the training length
#   params  model.n_layers=1, unlooped: the looped arm's block (it adds only the step MLP)
# Hydra multiruns through hydra/launcher=local (one run per core, one torch thread each),
# resume=auto (a re-run fills in only what is missing), into one sweep folder, then its tables,
# verdict classes and figures (scripts/summarize_tasks.sh). docs/models.md "Looped depth on its
# home ground".
#   bash scripts/reproduce_looped.sh [sweep dir] [overrides…]   (default results/multiruns/looped_small)
#   TASKS="copy parity" bash scripts/reproduce_looped.sh        (a subset; allowed: copy, parity,
#                                                              addition_reversed, addition)
#   SEEDS=0 bash scripts/reproduce_looped.sh                    (other seeds; default 0,1,2)
#   ARMS="looped depth" bash scripts/reproduce_looped.sh        (a subset of the arms; allowed:
#                                                              looped, depth, params)
#   DRY=1 bash scripts/reproduce_looped.sh                      (the commands and the sweep's
#                                                              estimate; nothing runs or is written)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/recipe_sweeps.sh
sweep_dir=${1:-results/multiruns/looped_small}
shift $(($# > 0))  # the rest: overrides for every run (a launcher, its partition, …)
tasks=${TASKS:-copy parity addition_reversed}
seeds=${SEEDS:-0,1,2}
for task in $tasks; do
    case $task in
        copy | parity | addition_reversed | addition) ;;
        *) echo "error: TASKS: unknown task '$task'; allowed: copy, parity, addition_reversed, addition" >&2; exit 2 ;;
    esac
done
common=(experiment=looped_small data="${tasks// /,}" seed="$seeds" resume=auto
        hydra.sweep.dir="$sweep_dir" hydra/launcher=local)
arms=${ARMS:-looped depth params}
for arm in $arms; do
    case $arm in
        looped | depth | params) ;;
        *) echo "error: ARMS: unknown arm '$arm'; allowed: looped, depth, params" >&2; exit 2 ;;
    esac
done
unlooped=(model.loops=1 model.loop_rule=fixed)
for arm in $arms; do
    case $arm in
        looped) sweep "${common[@]}" "$@" ;;                                     # looped
        depth) sweep "${common[@]}" "${unlooped[@]}" model.n_layers=8 "$@" ;;    # same depth, unlooped
        params) sweep "${common[@]}" "${unlooped[@]}" model.n_layers=1 "$@" ;;   # same parameters
    esac
done
summarize "$sweep_dir"
finish
