#!/usr/bin/env bash
# Run a sweep's runs in parallel lanes, one torch thread each: on a small CPU, two one-thread
# runs side by side finish sooner than one two-thread run after another (small models keep a
# second thread idle much of the time). Reads one run per line of stdin (its overrides), runs
#   train.py <common overrides> <line> resume=auto
# in $LANES lanes (default: the number of cores) into <sweep dir>, named as a Hydra sweep names
# its runs, so aggregate.py and plot.py read the folder like any sweep; re-running the same
# command only fills in what is missing. A run that fails is reported and the others go on.
#   printf '%s\n' "pe=rope seed=0" "pe=alibi seed=0" | bash scripts/lanes.sh <sweep dir> [common overrides]
set -euo pipefail
cd "$(dirname "$0")/.."
sweep=${1:?usage: bash scripts/lanes.sh <sweep dir> [common overrides] < runs}
shift
python=${PYTHON:-.venv/bin/python}
lanes=${LANES:-$(nproc)}
mkdir -p "$sweep"
subdir='${data.name}_${model.name}_${pe.name}_len${data.len}_seed${seed}_${lengen_run_id:}'
run_one() {  # $1: the run's own overrides (one line)
    # shellcheck disable=SC2086  # a line is several overrides
    if ! OMP_NUM_THREADS=1 "$python" train.py "${common[@]}" $1 resume=auto \
        trainer.enable_progress_bar=false "hydra.run.dir=$sweep/$subdir" > /dev/null 2>> "$sweep/lanes.err"; then
        echo "failed: $1 (stderr in $sweep/lanes.err)" >&2
    fi
}
common=("$@")
export -f run_one
export python sweep subdir
# xargs gives each line to one lane; the common overrides travel as an exported array's text
COMMON="$(printf '%q ' "${common[@]}")" xargs -P "$lanes" -I{} bash -c \
    'eval "common=($COMMON)"; run_one "$1"' _ {}
