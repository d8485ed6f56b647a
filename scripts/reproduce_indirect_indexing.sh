#!/usr/bin/env bash
# Indirect indexing on PoPE's home ground (issue #31 item 3; Gopalakrishnan et al. 2025, PoPE;
# the task's generator is lengen's, docs/tasks.md): causal decoders with PoPE and RoPE, three
# seeds each, trained on lengths 4-16 to an in-distribution criterion within a step budget and
# tested up to 4x (experiment=indirect_indexing_small); greedy exact match of the answer symbol
# as the headline, accuracy by the target's depth in accuracy_by_depth.json. Hydra multiruns: on
# this machine through the joblib launcher (hydra/launcher=local: one run per core, one torch
# thread each); on a cluster add hydra/launcher=slurm. resume=auto: re-running fills in only
# what is missing. Then the summary tables and figures. docs/reproductions.md (h).
#   bash scripts/reproduce_indirect_indexing.sh [sweep dir] [overrides…]  (default results/multiruns/indirect_indexing_small)
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-.venv/bin/python}
sweep=${1:-results/multiruns/indirect_indexing_small}
shift $(($# > 0))  # the rest: overrides for every run (a launcher, its partition, …)
status=0  # a run that fails is listed by the sweep's report; the others and the tables go on
"$python" train.py -m experiment=indirect_indexing_small seed=0,1,2 pe=pope,rope resume=auto \
    hydra.sweep.dir="$sweep" hydra/launcher=local "$@" || status=$?
bash scripts/summarize_tasks.sh "$sweep"  # tables (exact match; per token: *.accuracy.*), figures
exit "$status"
