#!/usr/bin/env bash
# Does NoPE's lead (Kazemnejad et al., 2023) appear at this scale, and what does it take? The
# McGill recipe (experiment=mcgill_small: criterion and budget, greedy exact match) on copy with
# NoPE, T5's bias and RoPE, varying the two axes the paper's setting differs on most that fit
# a CPU: depth (4 or 8 layers; the paper has 12) and training length (L = 8 or 16; the paper's
# copy has 20), two seeds each, evaluated at 1x-4x L. One Hydra multirun through the joblib
# launcher (hydra/launcher=local: one run per core, one torch thread each; hydra/launcher=slurm
# on a cluster); re-running fills in only what is missing. docs/reproductions.md, section (a),
# shows the result.
#   bash scripts/ablate_mcgill_nope.sh [sweep dir] [overrides…]  (default results/multiruns/mcgill_nope_ablation)
set -euo pipefail
cd "$(dirname "$0")/.."
sweep=${1:-results/multiruns/mcgill_nope_ablation}
shift $(($# > 0))  # the rest: overrides for every run (a launcher, its partition, …)
python=${PYTHON:-.venv/bin/python}
status=0  # a run that fails is listed by the sweep's report; the others and the tables go on
# data.len first: runs go in this order, and the cheaper first half already answers for L = 8
"$python" train.py -m experiment=mcgill_small data=copy eval.lengths=null "eval.factors=[1,1.5,2,3,4]" \
    data.len=8,16 model.n_layers=4,8 seed=0,1 pe=nope,t5,rope resume=auto \
    hydra.sweep.dir="$sweep" hydra/launcher=local "$@" || status=$?
bash scripts/summarize_tasks.sh "$sweep"
exit "$status"
