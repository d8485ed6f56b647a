#!/usr/bin/env bash
# The recipe runs of a lent GPU (the stage `recipes` of scripts/device_run.sh, RECIPES=1): Hydra
# multiruns of lengen's own recipe scripts that a CPU session cannot afford, with seeds packed on
# the one GPU, each recipe under `timeout` with a cap, up to MAX_SWEEPS recipes at once, all
# within LIMIT seconds (the stage's STAGE_LIMIT, else 300). docs/scaling.md "Recipe runs on a lent
# GPU".
#   bash scripts/device_recipes.sh              # on the device (device_run.sh calls it)
#   bash scripts/device_recipes.sh --dry-run    # here (or DRY=1): the same plumbing, tiny CPU runs,
#                                               # the last recipe capped at DRY_CAP s (its stop path)
#   bash scripts/device_recipes.sh --commands   # each recipe script's own DRY=1 (its commands)
# The recipes, in order of priority (RECIPE_LIST=<file> replaces them: one a line, as below):
#   <name> <cap in s, or - for the time left> <script> [VAR=value …]
# Each recipe runs as `VAR=value … bash <script> $WORK/device_recipes/runs/<name> <overrides>`, overrides
# trainer.accelerator=gpu hydra.sweeper.pack=3 hydra.launcher.n_jobs=4 (+ $RECIPE_OVERRIDES).
# The scripts choose hydra/launcher=local (joblib): kept, since its loky workers are fresh
# processes (CUDA cannot be forked into) and its one torch thread a run is right for a GPU run,
# whose host side is kernel launches and batch generation; with seeds packed a multirun has at
# most 3 jobs, and n_jobs=4 bounds each recipe to 4 GPU processes (16 with 4 recipes: one a core).
# A recipe at its cap gets SIGTERM (its runs save checkpoints, train.py exits 143), KILL only
# GRACE s later, so finished runs stay finished.
# Writes two files into $OUT (device_run.sh writes four beside them: 6 of the 8 that come back):
#   recipes.txt      each recipe's exit status, seconds, finished / interrupted / failed runs
#   recipes.tar.gz   runs/<name>/… (the sweep folders, without checkpoints, png or pdf) and
#                    logs/<name>.log (each recipe's output); under 16 MiB
# scripts/device_unpack.sh puts its finished runs into results/multiruns/<name>/ here.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
MODE=run
[ "${DRY:-}" = 1 ] && MODE=dry
case ${1:-} in
    --dry-run) MODE=dry ;;
    --commands) MODE=commands ;;
    "") ;;
    *) echo "error: unknown argument '$1'; allowed: --dry-run, --commands, or none" >&2; exit 2 ;;
esac
OUT=${OUT:-$ROOT/results/device_run}
WORK=${WORK:-$(mktemp -d /tmp/lengen_device_recipes.XXXXXX)}
R=$WORK/device_recipes  # a folder of its own: device_run.sh's WORK is shared
LIMIT=${LIMIT:-${STAGE_LIMIT:-300}}
MAX_SWEEPS=${MAX_SWEEPS:-4}
if [ -z "${PYTHON:-}" ]; then
    PYTHON=python3
    [ -x "$ROOT/.venv/bin/python" ] && PYTHON=$ROOT/.venv/bin/python
fi
export PYTHON
export PYTHONPATH="$ROOT/.devpkgs:$ROOT/src${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1 HF_DATASETS_OFFLINE=1 HF_HUB_OFFLINE=1 WANDB_MODE=disabled MPLBACKEND=Agg
OVERRIDES=(trainer.accelerator=gpu hydra.sweeper.pack=3 hydra.launcher.n_jobs=4)
GRACE=30
TAIL=15  # seconds kept for the counts and the tarball after the last recipe's cap
if [ "$MODE" = dry ]; then
    # tiny CPU runs (a pack trains on the CPU too); the 4x evaluation kept small
    OVERRIDES=(trainer.accelerator=cpu hydra.sweeper.pack=3 hydra.launcher.n_jobs=2
               trainer.max_steps=30 eval.samples=16)
    GRACE=10
fi
read -r -a EXTRA <<<"${RECIPE_OVERRIDES:-}"
OVERRIDES+=("${EXTRA[@]}")

if [ -n "${RECIPE_LIST:-}" ]; then
    LIST=$(cat "$RECIPE_LIST") || exit 2
else
    LIST="state_tracking_depth - scripts/pilot_state_tracking_depth.sh SEEDS=0,1,2 LAYERS=1,2,4
indirect_indexing_lr - scripts/pilot_indirect_indexing_lr.sh SEEDS=0,1,2
encoding_or_recurrence - scripts/reproduce_encoding_or_recurrence.sh TASKS=a5"
    # the dry run's stop path: the last recipe capped at a few seconds
    [ "$MODE" = dry ] && LIST=${LIST/encoding_or_recurrence -/encoding_or_recurrence ${DRY_CAP:-20}}
fi
NAMES=() CAPS=() COMMANDS=()
while read -r name cap script vars; do
    [[ -z $name || $name == \#* ]] && continue
    if ! [[ $name =~ ^[A-Za-z0-9_.-]+$ && ($cap == - || $cap =~ ^[1-9][0-9]*$) && -f $script ]]; then
        echo "error: recipe list: '$name $cap $script': allowed: <name> <seconds or -> <script>" \
            "[VAR=value …], a name of letters, digits, . _ -, and an existing script" >&2
        exit 2
    fi
    NAMES+=("$name") CAPS+=("$cap") COMMANDS+=("$vars bash $script")
done <<<"$LIST"

if [ "$MODE" = commands ]; then  # each script's own dry run: its commands and its estimate
    status=0
    for i in "${!NAMES[@]}"; do
        echo "== ${NAMES[$i]}"
        env DRY=1 ${COMMANDS[$i]} "$R/runs/${NAMES[$i]}" "${OVERRIDES[@]}" || status=$?
    done
    exit "$status"
fi

mkdir -p "$OUT" "$R/runs" "$R/logs" "$R/status"
START=$(date +%s)
DEADLINE=$((START + LIMIT - GRACE - TAIL))
PIDS=()
# a TERM to this script (the stage's own limit) stops every recipe the same way as its cap
trap 'for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null; done' TERM INT

# launch I: recipe I under timeout, in the background; its status file when it ends
launch() {
    local i=$1 name=${NAMES[$1]} left=$((DEADLINE - $(date +%s)))
    local cap=${CAPS[$1]}
    [ "$cap" = - ] || [ "$cap" -gt "$left" ] && cap=$left
    if [ "$left" -lt 5 ]; then
        echo "$name skipped - (${left} s left)" >"$R/status/$name"
        return
    fi
    echo "== $name: at most $cap s: ${COMMANDS[$i]} ${OVERRIDES[*]}"
    (
        t0=$(date +%s)
        # DRY is device_run.sh's (0 or 1): the recipe scripts read any value as "print only"
        timeout --kill-after="$GRACE" "$cap" env -u DRY ${COMMANDS[$i]} "$R/runs/$name" \
            "${OVERRIDES[@]}" >"$R/logs/$name.log" 2>&1 &
        inner=$!
        # a TERM to this subshell goes on to timeout, which sends it to the recipe's processes
        trap 'kill -TERM "$inner" 2>/dev/null' TERM
        wait "$inner"
        rc=$?
        while kill -0 "$inner" 2>/dev/null; do  # the trap interrupted the wait: wait again
            wait "$inner"
            rc=$?
        done
        echo "$name $rc $(($(date +%s) - t0))" >"$R/status/$name"
    ) &
    PIDS+=($!)
}
next=0
while :; do
    running=0
    for pid in "${PIDS[@]}"; do kill -0 "$pid" 2>/dev/null && running=$((running + 1)); done
    while [ "$running" -lt "$MAX_SWEEPS" ] && [ "$next" -lt "${#NAMES[@]}" ]; do
        launch "$next"
        next=$((next + 1))
        running=$((running + 1))
    done
    [ "$running" -eq 0 ] && [ "$next" -ge "${#NAMES[@]}" ] && break
    sleep 1
done
wait

# the counts (from the run directories, before their checkpoints are left out), the tarball
"$PYTHON" - "$R" "$OUT" "${NAMES[@]}" <<'PY'
import sys
from pathlib import Path

from lengen.rundir.rules import run_state

work, out, names = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:]
lines = ["device_recipes.sh: each recipe's exit status, seconds and its runs (a run counts "
         "finished only with results.json; one stopped at the cap comes back without its "
         "checkpoint, so it starts again in a later lease)"]
for name in names:
    word, rc, seconds = (work / "status" / name).read_text().split()[:3] \
        if (work / "status" / name).exists() else (name, "?", "?")
    rc_text = {"skipped": "skipped: no time left", "0": "exit 0"}.get(rc, f"exit {rc}")
    if rc in ("124", "137"):  # timeout's: SIGTERM at the cap, or the KILL GRACE s after it
        rc_text = f"stopped at its cap (exit {rc})"
    elif rc == "143":  # a SIGTERM to this script (the stage's limit), sent on
        rc_text = "stopped by SIGTERM (exit 143)"
    counts: dict[str, int] = {}
    for config in sorted((work / "runs" / name).rglob("config.yaml")):
        if any(part.startswith(".") for part in config.relative_to(work).parts):
            continue
        state, _ = run_state(config.parent)
        counts[state] = counts.get(state, 0) + 1
    runs = ", ".join(f"{counts.get(s, 0)} {s}" for s in ("finished", "interrupted", "failed"))
    took = "" if rc == "skipped" else f" after {seconds} s"
    lines.append(f"{name}: {rc_text}{took}; runs: {runs}")
(out / "recipes.txt").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
PY
excludes=(--exclude=checkpoints --exclude='*.ckpt' --exclude='*.png' --exclude='*.pdf')
tar -czf "$OUT/recipes.tar.gz" -C "$R" "${excludes[@]}" runs logs
if [ "$(stat -c %s "$OUT/recipes.tar.gz")" -gt $((15 * 1024 * 1024)) ]; then
    # over what comes back: the training curves stay behind, results and configs come
    tar -czf "$OUT/recipes.tar.gz" -C "$R" "${excludes[@]}" --exclude=runs/*/logs runs logs
    echo "recipes.tar.gz: over 15 MiB with the training curves; left out (logs/)" |
        tee -a "$OUT/recipes.txt"
fi
echo "recipes.tar.gz: $(stat -c %s "$OUT/recipes.tar.gz") bytes; work folder $WORK"
