#!/usr/bin/env bash
# Small-scale version of Press et al. (2022), "Train Short, Test Long" (ICLR), Figure 1:
# perplexity vs evaluation length for sinusoidal, RoPE and ALiBi language models trained at
# 128 tokens on WikiText-2 (the ../shared/data copy: train on test.txt, validate on valid.txt),
# two seeds, evaluated at 64 … 1,024 tokens on the same 32,768 validation tokens twice: with
# non-overlapping windows (the paper's main protocol; in the run) and with sliding windows of
# stride 32 (every scored token sees at least L − 32 tokens of context, as in the paper's
# appendix B; eval.py, tag sliding32). Then the summary tables, figures and the early-token
# analysis (scripts/context_analysis.py). The runs are one Hydra multirun: on this machine
# through the joblib launcher (hydra/launcher=local: one run per core, one torch thread each);
# on a cluster add hydra/launcher=slurm (the sliding-window evaluations then still run here).
# resume=auto: re-running fills in only what is missing. docs/reproductions.md.
#   bash scripts/reproduce_alibi_wikitext2.sh [sweep dir] [overrides…]  (default results/multiruns/alibi_wikitext2)
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-.venv/bin/python}
sweep=${1:-results/multiruns/alibi_wikitext2}
shift $(($# > 0))  # the rest: overrides for every run (a launcher, its partition, …)
status=0  # a run that fails is listed by the sweep's report; the others and the tables go on
"$python" train.py -m experiment=wikitext2_cpu seed=0,1 pe=sinusoidal,rope,alibi resume=auto \
    hydra.sweep.dir="$sweep" hydra/launcher=local "$@" || status=$?
for run in "$sweep"/wikitext2_decoder_*/; do  # finished runs without the sliding evaluation
    if [ -e "$run/results.json" ] && [ ! -e "$run/results.sliding32.json" ]; then echo "$run"; fi
done | xargs -r -P "$(nproc)" -I{} env OMP_NUM_THREADS=1 "$python" eval.py run={} \
    eval.protocol=sliding eval.stride=32 tag=sliding32 > /dev/null
"$python" scripts/aggregate.py "$sweep" --metric ppl
"$python" scripts/aggregate.py "$sweep" --metric ppl --tag sliding32
"$python" scripts/plot.py "$sweep" --metric ppl
"$python" scripts/plot.py "$sweep" --metric ppl --tag sliding32
"$python" scripts/context_analysis.py "$sweep" --tag sliding32 | tee "$sweep/context_analysis.md"
exit "$status"
