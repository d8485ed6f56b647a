#!/usr/bin/env bash
# Small-scale McGill comparison (Kazemnejad et al., 2023): NoPE, T5 bias, ALiBi, RoPE and
# sinusoidal causal decoders on copy, reverse and addition, three seeds each, trained to an
# in-distribution criterion within a step budget (experiment=mcgill_small; the settings come
# from scripts/search_mcgill.sh); greedy exact match as the headline. Runs go two at a time,
# one torch thread each (scripts/lanes.sh); re-running fills in only what is missing. Then the
# summary tables (exact match and per-token accuracy) and figures. docs/reproductions.md.
#   bash scripts/reproduce_mcgill.sh [sweep dir]     (default results/multiruns/mcgill_small)
#   TASKS="copy reverse" bash scripts/reproduce_mcgill.sh   (a subset of the tasks; LANES=N lanes)
set -euo pipefail
cd "$(dirname "$0")/.."
sweep=${1:-results/multiruns/mcgill_small}
for task in ${TASKS:-copy reverse addition}; do
    for seed in 0 1 2; do
        for pe in nope t5 alibi rope sinusoidal; do echo "data=$task pe=$pe seed=$seed"; done
    done
done | bash scripts/lanes.sh "$sweep" experiment=mcgill_small
bash scripts/summarize_tasks.sh "$sweep"  # tables (exact match; per token: *.accuracy.*), figures
