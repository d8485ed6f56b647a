#!/usr/bin/env bash
# The learning-rate pilot of docs/reproductions.md (h) (issue #47): lengen's PoPE learns copy at
# optim.lr=3e-3 and hardly at the default 1e-3, and on indirect indexing PoPE reached the
# criterion in 1 of 3 seeds at 1e-3 within 20,000 steps, so before a new sweep of (h) every arm
# (PoPE, RoPE) is piloted at both rates: experiment=indirect_indexing_small (16 symbols, offsets
# ±1…±4, lengths 4-16, 4 layers, 8 heads, batch 256, criterion 0.95, tested up to 4x) with a
# 10,000-step budget. 10,000 steps because the arms part only between 5,000 and 10,000 steps at
# 1e-3 (the committed runs' curves); the budget is also the learning-rate horizon, so the 1e-3
# runs are not the committed 20,000-step runs cut short (their cosine decays twice as fast).
# One seed by default (SEEDS=0,1,2 for more; on one GPU pack them: hydra.sweeper.pack=3).
# One Hydra multirun per learning rate, each into a folder of its own (<sweep dir>/lr_<rate>), so
# that each rate's tables and verdict class compare the two arms at that rate (aggregate.py
# makes one comparison of a folder's task, model and length); through hydra/launcher=local (one
# run per core, one torch thread each), resume=auto, then per folder the tables, verdict
# classes and figures (scripts/summarize_tasks.sh).
#   bash scripts/pilot_indirect_indexing_lr.sh [sweep dir] [overrides…]
#        (default results/multiruns/indirect_indexing_lr)
#   DRY=1 bash scripts/pilot_indirect_indexing_lr.sh    (the commands and the sweep's estimate only)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/recipe_sweeps.sh
sweep_dir=${1:-results/multiruns/indirect_indexing_lr}
shift $(($# > 0))  # the rest: overrides for every run (a launcher, its partition, …)
rates=(1e-3 3e-3)
for rate in "${rates[@]}"; do
    sweep experiment=indirect_indexing_small pe=pope,rope optim.lr="$rate" trainer.max_steps=10000 \
        seed="${SEEDS:-0}" resume=auto hydra.sweep.dir="$sweep_dir/lr_$rate" hydra/launcher=local "$@"
done
for rate in "${rates[@]}"; do summarize "$sweep_dir/lr_$rate"; done
finish
