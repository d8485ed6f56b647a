#!/usr/bin/env bash
# Flip-flop language modelling on its home ground (issue #31 item 3; Liu et al. 2023, "attention
# glitches"): causal decoders with Forgetting Attention, PaTH, stick-breaking, RoPE and NoPE,
# three seeds each, trained on FFL(0.8) at length 64 to an in-distribution criterion within a
# step budget and tested up to 4x (experiment=flip_flop_small); then every finished run is
# re-evaluated on the paper's sparse tail FFL(0.98) (tag sparse) and dense FFL(0.1) (tag dense)
# at the same lengths, and each gets its tables: the read error rate is 1 - accuracy
# (*.accuracy.*), the glitch rate 1 - exact match. Hydra multiruns: on this machine through the
# joblib launcher (hydra/launcher=local: one run per core, one torch thread each); on a cluster
# add hydra/launcher=slurm (the re-evaluations then still run here). resume=auto: re-running
# fills in only what is missing, the re-evaluations too. docs/reproductions.md (f).
#   bash scripts/reproduce_flip_flop.sh [sweep dir] [overrides…]  (default results/multiruns/flip_flop_small)
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-.venv/bin/python}
sweep=${1:-results/multiruns/flip_flop_small}
shift $(($# > 0))  # the rest: overrides for every run (a launcher, its partition, …)
status=0  # a run that fails is listed by the sweep's report; the others and the tables go on
"$python" train.py -m experiment=flip_flop_small seed=0,1,2 pe=fox,path,stick_breaking,rope,nope \
    resume=auto hydra.sweep.dir="$sweep" hydra/launcher=local "$@" || status=$?
reevaluate() {  # tag, p_ignore: each finished run not yet evaluated on that distribution
    for run in "$sweep"/flip_flop_decoder_*/; do
        if [ -e "$run/results.json" ] && [ ! -e "$run/results.$1.json" ]; then echo "$run"; fi
    done | xargs -r -P "$(nproc)" -I{} env OMP_NUM_THREADS=1 "$python" eval.py run={} \
        data.task.p_ignore="$2" tag="$1" > /dev/null || status=$?
}
reevaluate sparse 0.98  # the paper's sparse tail: long stretches of ignores between writes
reevaluate dense 0.1
bash scripts/summarize_tasks.sh "$sweep"  # FFL(0.8): exact match, per read (*.accuracy.*)
for tag in sparse dense; do
    "$python" scripts/aggregate.py "$sweep" --metric accuracy --tag "$tag"
    "$python" scripts/aggregate.py "$sweep" --metric exact_match --tag "$tag"
    "$python" scripts/plot.py "$sweep" --metric accuracy --tag "$tag"
done
exit "$status"
