#!/usr/bin/env bash
# Here, after a lease: put the finished runs of scripts/device_recipes.sh's tarball into
# results/multiruns/<the recipe's name>/… (the folders the recipe scripts write by default, beside
# CPU runs of the same recipes), then the tables and figures of each sweep folder that gained runs
# (scripts/summarize_tasks.sh). docs/scaling.md "Recipe runs on a lent GPU".
#   bash scripts/device_unpack.sh <recipes.tar.gz>
# A run folder that exists here already is kept as it is (the same run id is the same config: a
# CPU run's results, or its checkpoint, are never replaced); a run not finished on the device
# came without its checkpoint and stays in the tarball (its train.log there says how far it got).
# MULTIRUNS=<folder> puts them elsewhere; SUMMARIZE=<command> replaces summarize_tasks.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
tarball=${1:?usage: bash scripts/device_unpack.sh <recipes.tar.gz>}
multiruns=${MULTIRUNS:-results/multiruns}
summarize=${SUMMARIZE:-bash scripts/summarize_tasks.sh}
staging=$(mktemp -d /tmp/lengen_device_unpack.XXXXXX)
trap 'rm -rf "$staging"' EXIT
if ! tar -xzf "$tarball" -C "$staging" runs 2>/dev/null; then
    echo "error: $tarball: not a tarball of scripts/device_recipes.sh (no runs/ in it)" >&2
    exit 2
fi
moved=0 kept=0 left=0
sweeps=()
while IFS= read -r config; do
    run=${config%/config.yaml}
    rel=${run#"$staging/runs/"}
    [[ /$rel == */.* ]] && continue  # .jobs, .hydra: the device's own records
    if [ ! -f "$run/results.json" ]; then
        echo "left in the tarball: $rel (not finished on the device)"
        left=$((left + 1))
    elif [ -e "$multiruns/$rel" ]; then
        echo "kept: $multiruns/$rel (exists here)"
        kept=$((kept + 1))
    else
        mkdir -p "$(dirname "$multiruns/$rel")"
        mv "$run" "$multiruns/$rel"
        moved=$((moved + 1))
        sweep=$(dirname "$multiruns/$rel")
        [[ " ${sweeps[*]-} " == *" $sweep "* ]] || sweeps+=("$sweep")
    fi
done < <(find "$staging/runs" -name config.yaml -type f | sort)
echo "device_unpack.sh: $moved runs into $multiruns, $kept kept as they were here, $left unfinished"
for sweep in "${sweeps[@]}"; do
    $summarize "$sweep"
done
