#!/usr/bin/env bash
# Small-scale Chomsky-hierarchy subset (Delétang et al., 2023; Ruoss et al., 2023): encoders with
# sinusoidal, ALiBi (the papers' code's form: pe.bidirectional=asymmetric_offset) and RoPE
# positions, each with and without randomized positions, on even pairs and cycle navigation
# (regular) and binary reverse (deterministic context-free), three seeds, trained to an
# in-distribution criterion within a step budget (experiment=chomsky_small; the settings come
# from scripts/search_chomsky.sh). Runs go two at a time, one torch thread each
# (scripts/lanes.sh), task by task; re-running fills in only what is missing. Then the
# summary tables (greedy exact match; per-token accuracy under *.accuracy.*), figures, and the
# benchmark's own score beside the published one (scripts/chomsky_scores.py).
# docs/reproductions.md, section (c).
#   bash scripts/reproduce_chomsky.sh [sweep dir]     (default results/multiruns/chomsky_small)
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-.venv/bin/python}
sweep=${1:-results/multiruns/chomsky_small}
for task in even_pairs cycle_navigation reverse; do  # a task's runs finish together
    for randomized in true false; do  # the slower to learn first
        for seed in 0 1 2; do
            for pe in sinusoidal alibi rope; do
                line="data=$task pe=$pe pe.randomized=$randomized seed=$seed"
                [ "$task" = reverse ] && line+=" data.task.n_symbols=2"  # the benchmark's reverse string
                [ "$pe" = alibi ] && line+=" pe.bidirectional=asymmetric_offset"
                echo "$line"
            done
        done
    done
done | bash scripts/lanes.sh "$sweep" experiment=chomsky_small
bash scripts/summarize_tasks.sh "$sweep"  # tables (exact match; per token: *.accuracy.*), figures
"$python" scripts/chomsky_scores.py "$sweep"
