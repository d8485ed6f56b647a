#!/usr/bin/env bash
# An encoding per layer (issue #29; docs/pe.md "Schedules"): causal decoders with RoPE, NoPE,
# NoPE every 4th layer (pe=rnope), the same with windowed RoPE layers (pe=rnope_swa) and RoPE
# with Scalable-Softmax (pe.ssmax=true), on passkey retrieval and associative recall, three
# seeds each, trained to an in-distribution criterion within a step budget and tested up to 8x
# (experiment=schedules_small); greedy exact match as the headline. Hydra multiruns: on this
# machine through the joblib launcher (hydra/launcher=local: one run per core, one torch thread
# each); on a cluster add hydra/launcher=slurm. resume=auto: re-running fills in only what is
# missing. Then the summary tables and figures.
#   bash scripts/reproduce_schedules.sh [sweep dir] [overrides…]  (default results/multiruns/schedules_small)
#   TASKS=passkey bash scripts/reproduce_schedules.sh   (a subset of the tasks)
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-.venv/bin/python}
sweep=${1:-results/multiruns/schedules_small}
shift $(($# > 0))  # the rest: overrides for every run (a launcher, its partition, …)
tasks=${TASKS:-passkey associative_recall}
status=0  # a run that fails is listed by the sweep's report; the others and the tables go on
runs() {  # one multirun of the recipe: its own overrides, then the common ones
    "$python" train.py -m experiment=schedules_small data="${tasks// /,}" seed=0,1,2 "$@" \
        resume=auto hydra.sweep.dir="$sweep" hydra/launcher=local "${common[@]}" || status=$?
}
common=("$@")
runs pe=rope,nope,rnope,rnope_swa
runs pe=rope pe.ssmax=true  # Scalable-Softmax is an option of RoPE, not an encoding of its own
bash scripts/summarize_tasks.sh "$sweep"  # tables (exact match; per token: *.accuracy.*), figures
exit "$status"
