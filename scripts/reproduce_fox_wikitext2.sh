#!/usr/bin/env bash
# Small-scale version of Lin et al. (2025), "Forgetting Transformer: Softmax Attention with a
# Forget Gate" (ICLR), Figure 2: per-token loss L(i) at token position i of language models
# evaluated beyond their training length. FoX (no positions, a forget gate per head and token)
# against the Transformer with RoPE (the paper's baseline) and ALiBi (FoX's data-independent
# counterpart), trained at 128 tokens on WikiText-2 (the ../shared/data copy: train on test.txt,
# validate on valid.txt), two seeds, evaluated at 64 … 1,024 tokens with non-overlapping windows
# on the same 32,768 validation tokens. Then the perplexity tables and figures (aggregate.py,
# plot.py) and the per-token loss by window position at 1,024 tokens, mean over seeds, with a
# unigram baseline (scripts/loss_by_position.py). One Hydra multirun through the joblib launcher
# (hydra/launcher=local: one run per core, one torch thread each); resume=auto: re-running
# fills in only what is missing. docs/reproductions.md.
#   bash scripts/reproduce_fox_wikitext2.sh [sweep dir] [overrides…]  (default results/multiruns/fox_wikitext2)
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-.venv/bin/python}
sweep=${1:-results/multiruns/fox_wikitext2}
shift $(($# > 0))  # the rest: overrides for every run (a launcher, its partition, …)
status=0  # a run that fails is listed by the sweep's report; the others and the tables go on
"$python" train.py -m experiment=wikitext2_cpu seed=0,1 pe=fox,rope,alibi resume=auto \
    hydra.sweep.dir="$sweep" hydra/launcher=local "$@" || status=$?
"$python" scripts/aggregate.py "$sweep" --metric ppl
"$python" scripts/plot.py "$sweep" --metric ppl
"$python" scripts/loss_by_position.py "$sweep" --length 1024
exit "$status"
