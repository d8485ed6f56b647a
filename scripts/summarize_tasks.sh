#!/usr/bin/env bash
# The tables and figures of a task sweep, as the reproduction scripts write them: per-token
# accuracy under summary.accuracy.{md,csv} and ranking.accuracy.csv, then greedy exact match
# (the headline) under summary.{md,csv} and ranking.csv, then the exact-match figures.
#   bash scripts/summarize_tasks.sh <sweep dir>
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-.venv/bin/python}
sweep=${1:?usage: bash scripts/summarize_tasks.sh <sweep dir>}
"$python" scripts/aggregate.py "$sweep" --metric accuracy   # names its outputs *.accuracy.*
"$python" scripts/aggregate.py "$sweep" --metric exact_match
"$python" scripts/plot.py "$sweep" --metric exact_match
