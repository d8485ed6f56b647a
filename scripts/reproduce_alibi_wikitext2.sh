#!/usr/bin/env bash
# Small-scale version of Press et al. (2022), "Train Short, Test Long" (ICLR), Figure 1:
# perplexity vs evaluation length for sinusoidal, RoPE and ALiBi language models trained at
# 128 tokens on WikiText-2 (the ../shared/data copy: train on test.txt, validate on valid.txt),
# evaluated at 64 … 1,024 tokens on the same 32,768 validation tokens (nonoverlap); then the
# summary table and figure (metric ppl). docs/reproductions.md.
#   bash scripts/reproduce_alibi_wikitext2.sh [sweep dir]  (default results/multiruns/alibi_wikitext2)
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-.venv/bin/python}
sweep=${1:-results/multiruns/alibi_wikitext2}
"$python" train.py -m experiment=wikitext2_cpu pe=sinusoidal,rope,alibi \
    trainer.enable_progress_bar=false hydra.sweep.dir="$sweep" || true  # failures are listed below
"$python" scripts/aggregate.py "$sweep" --metric ppl
"$python" scripts/plot.py "$sweep" --metric ppl
