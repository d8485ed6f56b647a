#!/usr/bin/env bash
# The small search that chose experiment=mcgill_small's depth, learning rate and step budget:
# NoPE (the slowest learner of the five encodings in earlier runs) on copy, reverse and addition
# with 2 or 4 layers and learning rate 1e-3 or 3e-3, trained to the recipe's criterion
# (in-distribution exact match >= 0.95 at two validations in a row) within a 6,000-step budget,
# evaluated at the training length only. One Hydra multirun through the joblib launcher
# (hydra/launcher=local: one run per core, one torch thread each; hydra/launcher=slurm on a
# cluster); then the summary of which settings reached the criterion, and at which step.
# docs/reproductions.md shows the result.
#   bash scripts/search_mcgill.sh [sweep dir] [overrides…]  (default results/multiruns/mcgill_search)
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-.venv/bin/python}
sweep=${1:-results/multiruns/mcgill_search}
shift $(($# > 0))  # the rest: overrides for every run (a launcher, its partition, …)
status=0  # a run that fails is listed by the sweep's report; the others and the table go on
"$python" train.py -m experiment=mcgill_small pe=nope seed=0 data=copy,reverse,addition \
    model.n_layers=2,4 optim.lr=1e-3,3e-3 trainer.max_steps=6000 eval.lengths=[8] resume=auto \
    hydra.sweep.dir="$sweep" hydra/launcher=local "$@" || status=$?
"$python" scripts/aggregate.py "$sweep" --metric exact_match
exit "$status"
