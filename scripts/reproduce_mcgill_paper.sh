#!/usr/bin/env bash
# Kazemnejad et al. (2023) at the paper's scale (experiment=mcgill_paper), for one GPU: NoPE, T5
# bias, ALiBi, RoPE and sinusoidal decoders on copy and reverse (L = 20) and addition (L = 8),
# three seeds, 40K steps each; then the exact-match summary and figures. Estimated runtime in
# docs/reproductions.md (45 runs). On a SLURM cluster add hydra/launcher=slurm (docs/scaling.md).
#   bash scripts/reproduce_mcgill_paper.sh [sweep dir]  (default results/multiruns/mcgill_paper)
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-.venv/bin/python}
sweep=${1:-results/multiruns/mcgill_paper}
pes=nope,t5,alibi,rope,sinusoidal
"$python" train.py -m experiment=mcgill_paper data=copy,reverse pe=$pes seed=0,1,2 resume=auto \
    trainer.enable_progress_bar=false hydra.sweep.dir="$sweep" || true  # failures are listed below
"$python" train.py -m experiment=mcgill_paper data=addition data.len=8 pe=$pes seed=0,1,2 \
    resume=auto trainer.enable_progress_bar=false hydra.sweep.dir="$sweep" || true
"$python" scripts/aggregate.py "$sweep" --metric exact_match
"$python" scripts/plot.py "$sweep" --metric exact_match
