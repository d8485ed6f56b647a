#!/usr/bin/env bash
# Permutation composition on PaTH's home ground (issue #31 item 3; Yang et al. 2025, "PaTH
# Attention"; the S5/A5 word problem of Merrill et al. 2024): causal decoders with PaTH, RoPE and
# NoPE on A5 (S5 with TASKS), three seeds each, trained on lengths 1-8 to an in-distribution criterion
# within a step budget and tested up to 4x (experiment=state_tracking_small); exact match (every
# running product right) as the headline, per-token accuracy beside it. Hydra multiruns: on
# this machine through the joblib launcher (hydra/launcher=local: one run per core, one torch
# thread each); on a cluster add hydra/launcher=slurm. resume=auto: re-running fills in only
# what is missing. Then the summary tables and figures. docs/reproductions.md (g).
#   bash scripts/reproduce_state_tracking.sh [sweep dir] [overrides…]  (default results/multiruns/state_tracking_small)
#   TASKS="s5 a5" bash scripts/reproduce_state_tracking.sh   (S5 too; TASKS=s5: S5 alone)
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-.venv/bin/python}
sweep=${1:-results/multiruns/state_tracking_small}
shift $(($# > 0))  # the rest: overrides for every run (a launcher, its partition, …)
tasks=${TASKS:-a5}
status=0  # a run that fails is listed by the sweep's report; the others and the tables go on
"$python" train.py -m experiment=state_tracking_small data="${tasks// /,}" seed=0,1,2 \
    pe=path,rope,nope resume=auto hydra.sweep.dir="$sweep" hydra/launcher=local "$@" || status=$?
bash scripts/summarize_tasks.sh "$sweep"  # tables (exact match; per token: *.accuracy.*), figures
exit "$status"
