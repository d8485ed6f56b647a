#!/usr/bin/env bash
# An encoding per layer (issue #29; docs/pe.md "Schedules"): causal decoders with RoPE, NoPE,
# NoPE every 4th layer (pe=rnope), the same with windowed RoPE layers (pe=rnope_swa) and RoPE
# with Scalable-Softmax (pe.ssmax=true), on passkey retrieval and associative recall, three
# seeds each, trained to an in-distribution criterion within a step budget and tested up to 8x
# (experiment=schedules_small); greedy exact match as the headline. Runs go two at a time, one
# torch thread each (scripts/lanes.sh); re-running fills in only what is missing. Then the
# summary tables and figures.
#   bash scripts/reproduce_schedules.sh [sweep dir]   (default results/multiruns/schedules_small)
#   TASKS=passkey bash scripts/reproduce_schedules.sh   (a subset of the tasks; LANES=N lanes)
set -euo pipefail
cd "$(dirname "$0")/.."
sweep=${1:-results/multiruns/schedules_small}
for task in ${TASKS:-passkey associative_recall}; do
    for seed in 0 1 2; do
        for pe in rope nope rnope rnope_swa "rope pe.ssmax=true"; do
            echo "data=$task pe=$pe seed=$seed"
        done
    done
done | bash scripts/lanes.sh "$sweep" experiment=schedules_small
bash scripts/summarize_tasks.sh "$sweep"  # tables (exact match; per token: *.accuracy.*), figures
