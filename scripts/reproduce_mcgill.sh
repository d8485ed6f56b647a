#!/usr/bin/env bash
# Small-scale McGill comparison (Kazemnejad et al., 2023): NoPE, T5 bias, ALiBi, RoPE and
# sinusoidal causal decoders on copy, reverse and addition, three seeds each, trained to an
# in-distribution criterion within a step budget (experiment=mcgill_small; the settings come
# from scripts/search_mcgill.sh); greedy exact match as the headline. One Hydra multirun: on
# this machine through the joblib launcher (hydra/launcher=local: one run per core, one torch
# thread each); on a cluster add hydra/launcher=slurm. resume=auto: re-running fills in only
# what is missing. Then the summary tables (exact match and per-token accuracy) and figures.
# docs/reproductions.md.
#   bash scripts/reproduce_mcgill.sh [sweep dir] [overrides…]  (default results/multiruns/mcgill_small)
#   TASKS="copy reverse" bash scripts/reproduce_mcgill.sh   (a subset of the tasks)
#   bash scripts/reproduce_mcgill.sh results/multiruns/mcgill_small hydra/launcher=slurm hydra.launcher.partition=gpu
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-.venv/bin/python}
sweep=${1:-results/multiruns/mcgill_small}
shift $(($# > 0))  # the rest: overrides for every run (a launcher, its partition, …)
tasks=${TASKS:-copy reverse addition}
status=0  # a run that fails is listed by the sweep's report; the others and the tables go on
"$python" train.py -m experiment=mcgill_small data="${tasks// /,}" seed=0,1,2 \
    pe=nope,t5,alibi,rope,sinusoidal resume=auto hydra.sweep.dir="$sweep" hydra/launcher=local \
    "$@" || status=$?
bash scripts/summarize_tasks.sh "$sweep"  # tables (exact match; per token: *.accuracy.*), figures
exit "$status"
