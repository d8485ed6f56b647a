#!/usr/bin/env bash
# The small search behind experiment=chomsky_small's width and position range: randomized RoPE
# (the encoding that extrapolated best in earlier runs) on binary reverse (as in the benchmark),
# the task no randomized model learned in distribution in 3,000 steps, 2 layers, d_model 128 or
# 64 (the papers' width; d_ff = 4 d_model, their widening factor), randomized positions drawn
# from [0, 512) or [0, 1,024), trained to the recipe's criterion (in-distribution exact match
# >= 0.95 at two validations in a row) within a 6,000-step budget, evaluated at the training
# length only, over 10 position draws (as the committed search was; the recipe now uses 5).
# Hydra multiruns, one per width, through the joblib launcher (hydra/launcher=local: one run
# per core, one torch thread each; hydra/launcher=slurm on a cluster); then which settings
# reached the criterion, and at which step. docs/reproductions.md shows the result.
#   bash scripts/search_chomsky.sh [sweep dir] [overrides…]  (default results/multiruns/chomsky_search)
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-.venv/bin/python}
sweep=${1:-results/multiruns/chomsky_search}
shift $(($# > 0))  # the rest: overrides for every run (a launcher, its partition, …)
status=0  # a run that fails is listed by the sweep's report; the others and the table go on
for width in "model.d_model=128 model.d_ff=512" "model.d_model=64 model.d_ff=256"; do
    # shellcheck disable=SC2086  # $width is two overrides: d_ff goes with d_model
    "$python" train.py -m experiment=chomsky_small data=reverse data.task.n_symbols=2 pe=rope \
        pe.randomized=true seed=0 trainer.max_steps=6000 eval.lengths=[16] \
        eval.position_draws=10 $width pe.max_position=512,1024 resume=auto \
        hydra.sweep.dir="$sweep" hydra/launcher=local "$@" || status=$?
done
"$python" scripts/aggregate.py "$sweep" --metric exact_match
exit "$status"
