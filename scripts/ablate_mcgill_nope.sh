#!/usr/bin/env bash
# Does NoPE's lead (Kazemnejad et al., 2023) appear at this scale, and what does it take? The
# McGill recipe (experiment=mcgill_small: criterion and budget, greedy exact match) on copy with
# NoPE, T5's bias and RoPE, varying the two axes the paper's setting differs on most that fit
# a CPU: depth (4 or 8 layers; the paper has 12) and training length (L = 8 or 16; the paper's
# copy has 20), two seeds each, evaluated at 1x-4x L. Two lanes of one torch thread each; a
# re-run fills in only what is missing. docs/reproductions.md, section (a), shows the result.
#   bash scripts/ablate_mcgill_nope.sh [sweep dir]   (default results/multiruns/mcgill_nope_ablation)
set -euo pipefail
cd "$(dirname "$0")/.."
sweep=${1:-results/multiruns/mcgill_nope_ablation}
for len in 8 16; do  # cheapest first: the first half already answers for L = 8
    for layers in 4 8; do
        for seed in 0 1; do
            for pe in nope t5 rope; do
                echo "pe=$pe model.n_layers=$layers data.len=$len seed=$seed"
            done
        done
    done
done | bash scripts/lanes.sh "$sweep" experiment=mcgill_small data=copy eval.lengths=null \
    "eval.factors=[1,1.5,2,3,4]"
bash scripts/summarize_tasks.sh "$sweep"
