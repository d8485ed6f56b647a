#!/usr/bin/env bash
# Kazemnejad et al. (2023) at the paper's scale (experiment=mcgill_paper), for one GPU: NoPE, T5
# bias, ALiBi, RoPE and sinusoidal decoders on copy and reverse (L = 20) and addition (L = 8),
# three seeds, 40K steps each; then the exact-match summary and figures. Estimated runtime in
# docs/reproductions.md (45 runs). Two Hydra multiruns, one run after another on this machine's
# GPU; on a SLURM cluster add hydra/launcher=slurm (docs/cluster.md). resume=auto: re-running
# fills in only what is missing.
#   bash scripts/reproduce_mcgill_paper.sh [sweep dir] [overrides…]  (default results/multiruns/mcgill_paper)
#   bash scripts/reproduce_mcgill_paper.sh results/multiruns/mcgill_paper hydra/launcher=slurm hydra.launcher.partition=gpu
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-.venv/bin/python}
sweep=${1:-results/multiruns/mcgill_paper}
shift $(($# > 0))  # the rest: overrides for every run (a launcher, its partition, …)
pes=nope,t5,alibi,rope,sinusoidal
status=0  # a run that fails is listed by the sweep's report; the others and the tables go on
"$python" train.py -m experiment=mcgill_paper data=copy,reverse pe=$pes seed=0,1,2 resume=auto \
    hydra.sweep.dir="$sweep" "$@" || status=$?
"$python" train.py -m experiment=mcgill_paper data=addition data.len=8 pe=$pes seed=0,1,2 \
    resume=auto hydra.sweep.dir="$sweep" "$@" || status=$?
"$python" scripts/aggregate.py "$sweep" --metric exact_match
"$python" scripts/plot.py "$sweep" --metric exact_match
exit "$status"
