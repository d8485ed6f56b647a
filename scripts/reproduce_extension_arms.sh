#!/usr/bin/env bash
# The training-free context-extension arms side by side on trained RoPE models (issue #48 item 3;
# docs/pe.md "Length extension at evaluation time"): causal RoPE decoders trained on passkey and
# on multi-key retrieval (niah_multikey) at length <= 16 (experiment=schedules_small: 4 layers,
# d_model 128, to its in-distribution criterion), three seeds, then every finished run
# re-evaluated up to 8x (the experiment's lengths, greedy exact match) by eval.py under each arm:
# PI, NTK and YaRN at factor 8, Self-Extend, ReRoPE, Leaky ReRoPE and dual chunk attention, and
# the LongRoPE-style factor search at 8x (scripts/search_rope_factors.py, its report beside the
# run). An arm's results land in the run as results.<tag>.json; aggregate.py's extension.csv /
# plot.py's extension figure put them side by side (docs/analysis.md). Re-running skips the
# finished runs (resume=auto) and every evaluation already written. Not run yet.
#   bash scripts/reproduce_extension_arms.sh [sweep dir] [overrides…]
#        (default results/multiruns/extension_arms; one sub-folder per task)
#   TASKS=passkey bash scripts/reproduce_extension_arms.sh   (one task only)
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-.venv/bin/python}
sweep=${1:-results/multiruns/extension_arms}
shift $(($# > 0))  # the rest: overrides for every training run (a launcher, its partition, …)
tasks=${TASKS:-"passkey niah_multikey"}
status=0  # a run or an evaluation that fails is reported; the others and the tables go on
# tag -> the arm's overrides; windows of 8 positions, half the training length (16 symbols)
arms=(
    "pi8|pe.scaling=pi pe.scaling_factor=8"
    "ntk8|pe.scaling=ntk pe.scaling_factor=8"
    "yarn8|pe.scaling=yarn pe.scaling_factor=8"
    "selfext_g8_w8|pe.extension=self_extend pe.self_extend_group=8 pe.self_extend_window=8"
    "rerope_w8|pe.extension=rerope pe.rerope_window=8"
    "leaky_rerope_w8_k8|pe.extension=rerope pe.rerope_window=8 pe.rerope_leak=8"
    "dca|pe.extension=dual_chunk"
)
for task in $tasks; do
    case $task in
        passkey | niah_multikey) ;;
        *) echo "error: TASKS: unknown task '$task'; allowed: passkey, niah_multikey" >&2; exit 2 ;;
    esac
    dir="$sweep/$task"
    "$python" train.py -m experiment=schedules_small data="$task" pe=rope seed=0,1,2 resume=auto \
        hydra.sweep.dir="$dir" hydra/launcher=local "$@" || status=$?
    for results in "$dir"/*/results.json; do
        [ -f "$results" ] || continue
        run_dir=$(dirname "$results")
        for arm in "${arms[@]}"; do
            tag=${arm%%|*}
            [ -f "$run_dir/results.$tag.json" ] && continue
            # shellcheck disable=SC2086  # the arm's overrides are words
            "$python" eval.py run="$run_dir" ${arm#*|} tag="$tag" || status=$?
        done
        [ -f "$run_dir/rope_factors.128.json" ] || "$python" scripts/search_rope_factors.py \
            --run "$run_dir" --length 128 --out "$run_dir/rope_factors.128.json" || status=$?
    done
    bash scripts/summarize_tasks.sh "$dir" || status=$?
done
exit "$status"
