#!/usr/bin/env bash
# The pilot that sized the state-tracking and indirect-indexing recipes (issue #31 (g), (h);
# docs/reproductions.md): 15 configurations of experiment=state_tracking_small and
# indirect_indexing_small as they were before the resizing (length 16, batch 64, 4 heads) with
# one change each (batch, length, group, heads, learning rate), all at once, one process each,
# each stopped by SIGTERM after $T seconds (checkpoint kept; running it again resumes them:
# resume=auto), then their validation curves. Made for a GPU (2026-11-26: an H100 ran the 15 at
# 15-22 steps/s each); on a 2-core CPU it would start the 15 all the same, and the same steps
# two at a time would take about 8 h (from its step times, not run). Run as it was, twice with T=390 and
# T=290 (h_pope_b256_h8 in the second only), from 38d87c7 (results/pilots/home_ground_h100):
#   T=390 P=<folder> bash scripts/pilot_home_ground.sh; T=290 P=<folder> bash scripts/pilot_home_ground.sh
# ONLY=<regex> runs the configurations whose names match.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1 MPLBACKEND=Agg OMP_NUM_THREADS=1
T=${T:-400}; OUT=${OUT:-}; P=${P:-results/pilots/home_ground}; PY=${PYTHON:-.venv/bin/python}
ONLY=${ONLY:-}
mkdir -p "$P"
run() {
  name=$1; shift
  [[ -n $ONLY && ! $name =~ $ONLY ]] && return
  timeout -s TERM "$T" "$PY" train.py "$@" trainer.max_steps=20000 logger=csv resume=auto \
    hydra.run.dir="$P/$name" > "$P/$name.log" 2>&1 &
}
# the recipes as they were before the resize (length 16, batch 64, 4 heads), at any commit
G=(experiment=state_tracking_small data.len=16 'eval.lengths=[16,32,48,64]' data.batch_size=64)
H=(experiment=indirect_indexing_small data.batch_size=64 model.n_heads=4)
run g_a5_path_b64      "${G[@]}" data=a5 pe=path
run g_a5_rope_b64      "${G[@]}" data=a5 pe=rope
run g_a5_nope_b64      "${G[@]}" data=a5 pe=nope
run g_a5_path_b256     "${G[@]}" data=a5 pe=path data.batch_size=256
run g_a5_rope_b256     "${G[@]}" data=a5 pe=rope data.batch_size=256
run g_a5_nope_b256     "${G[@]}" data=a5 pe=nope data.batch_size=256
run g_a5_path_len8_b64 "${G[@]}" data=a5 pe=path data.len=8 'eval.lengths=[8,16,24,32]'
run g_s5_path_b256     "${G[@]}" data=s5 pe=path data.batch_size=256
run h_rope_b64         "${H[@]}" pe=rope
run h_pope_b64         "${H[@]}" pe=pope
run h_rope_b256        "${H[@]}" pe=rope data.batch_size=256
run h_pope_b256        "${H[@]}" pe=pope data.batch_size=256
run h_rope_b256_lr3e-4 "${H[@]}" pe=rope data.batch_size=256 optim.lr=3e-4
run h_rope_b256_h8     "${H[@]}" pe=rope data.batch_size=256 model.n_heads=8
run h_pope_b256_h8     "${H[@]}" pe=pope data.batch_size=256 model.n_heads=8
command -v nvidia-smi > /dev/null && (sleep 120; nvidia-smi > "$P/nvidia-smi.txt" 2>&1) &
wait
"$PY" - "$P" <<'PYEOF'
import sys, glob, os, pandas as pd
for f in sorted(glob.glob(sys.argv[1] + "/*/logs/metrics.csv")):
    d = pd.read_csv(f); name = f.split("/")[-3]
    val = [c for c in d.columns if c.startswith("val")]
    v = d.dropna(subset=val[:1]) if val else d.iloc[0:0]
    print(f"== {name}: last step {int(d.step.max())}, {len(v)} validations")
    if len(v): print(v[["step"] + val].iloc[::max(1, len(v) // 6)].to_string(index=False)); print(v[["step"] + val].tail(1).to_string(index=False, header=False))
PYEOF
# a device machine's files come back in one archive
[[ -n $OUT ]] && tar czf "$OUT/pilot.tgz" --exclude=checkpoints --exclude='*.pdf' --exclude='*.png' -C "$P" .
exit 0
