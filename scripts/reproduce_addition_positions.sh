#!/usr/bin/env bash
# Task-supplied positions on their home ground (issue #31 item 3; docs/pe.md "Task-supplied
# positions"): reversed addition on causal decoders with position coupling (Cho et al. 2024:
# a learned table at coupled positions, random start up to 20 so that its trained rows reach
# the 30-digit evaluation's largest position), Abacus (McLeish et al. 2024: the digit's offset in
# its number, random offset up to 99, FIRE in attention) and RoPE and NoPE at token indices,
# three seeds each, trained on operands of up to 10 digits to an in-distribution criterion
# within a step budget and tested up to 30 digits (experiment=addition_positions); greedy exact
# match as the headline. Hydra multiruns: on this machine through the joblib launcher
# (hydra/launcher=local: one run per core, one torch thread each); on a cluster add
# hydra/launcher=slurm. resume=auto: re-running fills in only what is missing. Then the summary
# tables and figures. docs/reproductions.md (e).
#   bash scripts/reproduce_addition_positions.sh [sweep dir] [overrides…]  (default results/multiruns/addition_positions)
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-.venv/bin/python}
sweep=${1:-results/multiruns/addition_positions}
shift $(($# > 0))  # the rest: overrides for every run (a launcher, its partition, …)
status=0  # a run that fails is listed by the sweep's report; the others and the tables go on
runs() {  # one multirun of the recipe: its own overrides, then the common ones
    "$python" train.py -m experiment=addition_positions seed=0,1,2 "$@" \
        resume=auto hydra.sweep.dir="$sweep" hydra/launcher=local "${common[@]}" || status=$?
}
common=("$@")
runs pe=rope,nope  # the baselines: positions are the token indices (data.task.positions=index)
# position coupling: training positions reach 12 + 20 = 32, the largest at 30-digit operands
runs pe=learned data.task.positions=coupled pe.start_offset=20
runs pe=abacus data.task.positions=abacus pe.start_offset=99 pe.base=fire
bash scripts/summarize_tasks.sh "$sweep"  # tables (exact match; per token: *.accuracy.*), figures
exit "$status"
