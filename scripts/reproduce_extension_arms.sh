#!/usr/bin/env bash
# The context-extension arms side by side on trained RoPE models (issue #48, docs/reproductions.md
# (j); docs/pe.md "Length extension at evaluation time", "Training-time extension arms"): causal
# RoPE decoders trained on passkey and on multi-key retrieval (niah_multikey) at length <= 16
# (experiment=schedules_small: 4 layers, d_model 128, to its in-distribution criterion), then
# every finished run
#   - re-evaluated up to 8x (the experiment's lengths, greedy exact match) by eval.py under each
#     training-free arm: PI, NTK and YaRN at factor 8, Self-Extend, ReRoPE, Leaky ReRoPE and dual
#     chunk attention (results.<tag>.json in the run);
#   - recalibrated without its encoding (DroPE: train.py init_from=<run> pe=nope, the base's
#     model and data keys, to the experiment's criterion within DROPE_STEPS steps), a run of its
#     own under drope/ (its results.json records route drope);
#   - searched for LongRoPE-style factors at 8x (scripts/search_rope_factors.py, a report beside
#     the run: teacher-forced answer loss, not an eval.py arm).
# scripts/summarize_tasks.sh writes the tables (extension.csv among them, one figure per task)
# and scripts/plot_extension_arms.py the one figure and table of every arm of every task.
# Re-running skips the finished runs (resume=auto) and every evaluation already written.
#   bash scripts/reproduce_extension_arms.sh [sweep dir] [overrides…]
#        (default results/multiruns/extension_arms; the runs of every task in it)
#   TASKS=passkey SEEDS=0 bash scripts/reproduce_extension_arms.sh   (one task, one seed)
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-.venv/bin/python}
sweep=${1:-results/multiruns/extension_arms}
shift $(($# > 0))  # the rest: overrides for every training run (a launcher, its partition, …)
tasks=${TASKS:-"passkey niah_multikey"}
seeds=${SEEDS:-0,1,2}
drope_steps=${DROPE_STEPS:-2000}
status=0  # a run or an evaluation that fails is reported; the others and the tables go on
# tag -> the arm's overrides, sized so that no relative position at 8x leaves the range training
# saw: an instance of 16 input symbols takes 22 positions with its answer on passkey (19 on
# niah_multikey), one of 128 takes 134 (131). PI, NTK and YaRN at s = 8 (133/8 = 16.6);
# Self-Extend W = 8, G = 16 (farthest: floor(133/16) + W - floor(W/G) = 16; G = 8 would reach
# 23); ReRoPE w = 8 (every rectified position is 8); Leaky ReRoPE w = 8, k = 16 (bojone/rerope
# leaky_rerope_patch.py's scaling_factor; farthest 8 + 125/16 = 15.8); DCA its defaults (chunk
# 3L//4 = 16 and local window 1 for L = 22 positions; 14 and 1 for 19)
arms=(
    "pi8|pe.scaling=pi pe.scaling_factor=8"
    "ntk8|pe.scaling=ntk pe.scaling_factor=8"
    "yarn8|pe.scaling=yarn pe.scaling_factor=8"
    "selfext_g16_w8|pe.extension=self_extend pe.self_extend_group=16 pe.self_extend_window=8"
    "rerope_w8|pe.extension=rerope pe.rerope_window=8"
    "leaky_rerope_w8_k16|pe.extension=rerope pe.rerope_window=8 pe.rerope_leak=16"
    "dca|pe.extension=dual_chunk"
)
for task in $tasks; do
    case $task in
        passkey | niah_multikey) ;;
        *) echo "error: TASKS: unknown task '$task'; allowed: passkey, niah_multikey" >&2; exit 2 ;;
    esac
    "$python" train.py -m experiment=schedules_small data="$task" pe=rope seed="$seeds" \
        resume=auto hydra.sweep.dir="$sweep" hydra/launcher=local "$@" || status=$?
    for results in "$sweep"/"$task"_*/results.json; do
        [ -f "$results" ] || continue
        run_dir=$(dirname "$results")
        for arm in "${arms[@]}"; do
            tag=${arm%%|*}
            [ -f "$run_dir/results.$tag.json" ] && continue
            # shellcheck disable=SC2086  # the arm's overrides are words
            "$python" eval.py run="$run_dir" ${arm#*|} tag="$tag" || status=$?
        done
        drope="$sweep/drope/$(basename "$run_dir")_drope"
        # the base's seed: without it every recalibration trained on seed 0's stream, and the
        # aggregation counted the second seed's as a duplicate of the first's
        base_seed=$(sed -n 's/^seed: *//p' "$run_dir/config.yaml")
        [ -f "$drope/results.json" ] || "$python" train.py experiment=schedules_small \
            data="$task" pe=nope init_from="$run_dir" seed="$base_seed" \
            trainer.max_steps="$drope_steps" resume=auto hydra.run.dir="$drope" "$@" || status=$?
        [ -f "$run_dir/rope_factors.128.json" ] || "$python" scripts/search_rope_factors.py \
            --run "$run_dir" --length 128 --out "$run_dir/rope_factors.128.json" || status=$?
    done
done
bash scripts/summarize_tasks.sh "$sweep" || status=$?
# every arm of every task in one table and one figure, DroPE beside the training-free arms
"$python" scripts/plot_extension_arms.py "$sweep" --out "$sweep" || status=$?
exit "$status"
