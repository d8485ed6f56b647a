#!/usr/bin/env bash
# Small-scale Chomsky-hierarchy subset (Delétang et al., 2023; Ruoss et al., 2023): encoders with
# sinusoidal, ALiBi (the papers' code's form: pe.bidirectional=asymmetric_offset) and RoPE
# positions, each with and without randomized positions, on even pairs and cycle navigation
# (regular) and binary reverse (deterministic context-free), three seeds, trained to an
# in-distribution criterion within a step budget (experiment=chomsky_small; the settings come
# from scripts/search_chomsky.sh). Hydra multiruns, task by task: on this machine through the
# joblib launcher (hydra/launcher=local: one run per core, one torch thread each); on a cluster
# add hydra/launcher=slurm. resume=auto: re-running fills in only what is missing. Then the
# summary tables (greedy exact match; per-token accuracy under *.accuracy.*), figures, and the
# benchmark's own score beside the published one (scripts/chomsky_scores.py).
# docs/reproductions.md, section (c).
#   bash scripts/reproduce_chomsky.sh [sweep dir] [overrides…]  (default results/multiruns/chomsky_small)
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-.venv/bin/python}
sweep=${1:-results/multiruns/chomsky_small}
shift $(($# > 0))  # the rest: overrides for every run (a launcher, its partition, …)
status=0  # a run that fails is listed by the sweep's report; the others and the tables go on
runs() {  # one multirun of the recipe: its own overrides, then the common ones
    "$python" train.py -m experiment=chomsky_small "$@" resume=auto hydra.sweep.dir="$sweep" \
        hydra/launcher=local "${common[@]}" || status=$?
}
common=("$@")
for task in even_pairs cycle_navigation reverse; do  # a task's runs finish together
    task_keys=(data="$task")
    [ "$task" = reverse ] && task_keys+=(data.task.n_symbols=2)  # the benchmark's reverse string
    # randomized first: the slower to learn
    runs "${task_keys[@]}" pe.randomized=true,false seed=0,1,2 pe=sinusoidal,rope
    runs "${task_keys[@]}" pe.randomized=true,false seed=0,1,2 pe=alibi \
        pe.bidirectional=asymmetric_offset
done
bash scripts/summarize_tasks.sh "$sweep"  # tables (exact match; per token: *.accuracy.*), figures
"$python" scripts/chomsky_scores.py "$sweep"
exit "$status"
