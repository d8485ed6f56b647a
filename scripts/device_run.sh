#!/usr/bin/env bash
# The one command of a GPU lease (issue #46 item 5): every device check, in stages, each with its
# own time limit, so that one failing or hanging stage does not stop the others; the whole run
# stays within BUDGET seconds (default 420: with the machine's start, one 10-minute call).
#
#   bash scripts/make_devpkgs.sh                       # here, once: .devpkgs/ (hydra, omegaconf, antlr4)
#   run(command="bash scripts/device_run.sh", carry=[".devpkgs"], timeout_s=600)   # the device call
#   bash scripts/device_run.sh --dry-run               # here, without a GPU: the plumbing, and the
#                                                      # CPU-precision stage at a tiny size
#
# Stages, in order of what the issue needs most (scripts/device_check.py has the checks):
#   env          the machine: GPU, driver, CPU model and its bf16 flags, versions, imports
#   plain        lengen / the plain loop at bench.py's default size (eager, compile, CUDA graphs),
#                and a profile of both steps (host time, kernels, device time)
#   mfu          the ~100M model's MFU ladder (baseline, +batch, +fused, +compile), bf16
#   cpu          bf16 autocast vs fp32 on the host's CPU, 2 threads: beside mfu, on 2 cores of its
#                own (mfu is GPU-bound at its larger batches)
#   pack         runs per hour of a pack of 64 default-experiment seeds vs a solo run, memory per
#                member (scripts/bench_pack.py; "not available" where absent)
#   mechanisms   step time and 8,192-token evaluation memory of the 2024-26 mechanisms vs RoPE
#   functional   bf16 training of every encoding, flash, flex, greedy, ddp: with the time left
#   recipes      RECIPES=1 only: the recipe runs, with what is left of BUDGET (scripts/device_recipes.sh;
#                recipes.txt and recipes.tar.gz in $OUT); BUDGET=<n> RECIPES=1 bash scripts/device_run.sh
#
# Writes into $OUT (default results/device_run; at most 8 files, none in sub-folders):
#   report.md, report.json   every check's verdict and values (device_check.py's report)
#   summary.txt              the stages' exit status and seconds, then report.md
#   device_run.tar.gz        every stage's log, every timing's JSON, env.txt
#   recipes.txt, recipes.tar.gz   with RECIPES=1 (scripts/device_recipes.sh)
# and prints summary.txt last. Exit status: 0 when no check failed, 1 otherwise.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
DRY=0
[ "${1:-}" = "--dry-run" ] && DRY=1
OUT=${OUT:-$ROOT/results/device_run}
WORK=${WORK:-$(mktemp -d /tmp/lengen_device_run.XXXXXX)}
PY=${PYTHON:-python3}
BUDGET=${BUDGET:-420}
mkdir -p "$OUT" "$WORK/logs" "$WORK/check" "$WORK/cpu"
export PYTHONPATH="$ROOT/.devpkgs:$ROOT/src${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1 HF_DATASETS_OFFLINE=1 HF_HUB_OFFLINE=1 WANDB_MODE=disabled MPLBACKEND=Agg
export TORCHINDUCTOR_CACHE_DIR="$WORK/inductor" MPLCONFIGDIR="$WORK/matplotlib"
SUMMARY="$WORK/summary.txt"
: >"$SUMMARY"
START=$(date +%s)
CORES=$(nproc)
# the CPU-precision stage gets the last two cores, the GPU stages the others: pin CORES pins the
# stage's shell, and so every process it starts (where taskset exists and there are 8+ cores)
pin() { if command -v taskset >/dev/null && [ "$CORES" -ge 8 ]; then taskset -cp "$1" $$ >/dev/null; fi; }
GPU_CORES="0-$((CORES - 3))"
CPU_CORES="$((CORES - 2)),$((CORES - 1))"

# stage NAME CAP 'COMMAND': run the bash COMMAND with at most CAP seconds (less if the budget is
# nearly spent: a stage with under 20 s left is skipped); its output into logs/NAME.log
stage() {
    local name=$1 cap=$2 command=$3
    local left=$((BUDGET - ($(date +%s) - START)))
    local limit=$((cap < left ? cap : left))
    if [ "$limit" -lt 20 ]; then
        echo "stage $name: skipped (${left} s of the budget left)" | tee -a "$SUMMARY"
        return
    fi
    echo "== stage $name (at most ${limit} s)"
    local t0=$(date +%s)
    STAGE_LIMIT=$limit timeout --kill-after=10 "$limit" bash -c "$command" >"$WORK/logs/$name.log" 2>&1
    local rc=$?
    local how="exit $rc"
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then how="stopped at its limit"; fi
    echo "stage $name: $how after $(($(date +%s) - t0)) s" | tee -a "$SUMMARY"
    tail -n 3 "$WORK/logs/$name.log" | sed 's/^/    /'
}

# check CHECKS OUT [JOBS]: device_check.py for CHECKS into OUT, each case at most the stage's
# limit less 15 s (so its report is written before the stage's own limit)
check() {
    local extra=()
    [ "$DRY" = 1 ] && extra=(--dry-run)
    "$PY" scripts/device_check.py --only "$1" --out "$2" --merge --jobs "${3:-1}" \
        --timeout "$((STAGE_LIMIT > 35 ? STAGE_LIMIT - 15 : 20))" "${extra[@]}"
}

env_stage() {
    echo "date: $(date -u +%FT%TZ); commit: $(git rev-parse HEAD 2>/dev/null || echo unknown)"
    nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv 2>&1 | head -3
    grep -m1 "model name" /proc/cpuinfo
    echo "cores: $CORES; bf16 flags: $(grep -o -w 'amx_bf16\|amx_tile\|avx512_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ')"
    "$PY" - <<'PY'
import importlib, platform
import torch
print("python", platform.python_version(), "torch", torch.__version__,
      "cuda", torch.cuda.is_available() and torch.cuda.get_device_name())
for name in ("pytorch_lightning", "hydra", "omegaconf", "antlr4", "lengen", "lengen.lit",
             "lengen.train", "lengen.pack"):
    try:
        module = importlib.import_module(name)
        print(f"import {name}: ok {getattr(module, '__version__', '')} {module.__file__}")
    except Exception as error:  # every import reported, none stops the stage
        print(f"import {name}: FAILED {error!r}")
PY
}

export -f check pin env_stage
export DRY PY CORES WORK GPU_CORES CPU_CORES
stage env 60 'env_stage'
cp "$WORK/logs/env.log" "$WORK/env.txt" 2>/dev/null
if [ "$DRY" = 1 ]; then
    # the plumbing: what every GPU stage would run (nothing runs), and the CPU stage, tiny
    stage plain 60 'check plain,profile "$WORK/check"'
    stage mfu 60 'check mfu "$WORK/check"'
    stage cpu 120 'pin "$CPU_CORES"; "$PY" scripts/bench_precision.py --tiny --force --steps 10 \
        --threads 1 --json "$WORK/cpu/cpu_precision.json"'
    stage pack 60 'check pack "$WORK/check"'
    stage mechanisms 60 'check mechanisms "$WORK/check"'
    stage functional 60 'check bf16,flash,flex,greedy,ddp "$WORK/check"'
else
    stage plain 170 'pin "$GPU_CORES"; check plain,profile "$WORK/check"'
    # cpu beside mfu: its own report folder (two processes must not merge into one report)
    (stage cpu 150 'pin "$CPU_CORES"; OMP_NUM_THREADS=2 check cpu_precision "$WORK/cpu"' \
        >"$WORK/cpu_stage.txt") &
    CPU_PID=$!
    stage mfu 170 'pin "$GPU_CORES"; check mfu "$WORK/check"'
    wait "$CPU_PID"
    cat "$WORK/cpu_stage.txt"
    stage pack 100 'pin "$GPU_CORES"; check pack "$WORK/check"'
    stage mechanisms 80 'pin "$GPU_CORES"; check mechanisms "$WORK/check"'
    # the functional checks share the machine: 16 cases at once, 2 threads each
    stage functional 400 'OMP_NUM_THREADS=2 check bf16,flash,flex,greedy,ddp "$WORK/check" 16'
fi
if [ "${RECIPES:-0}" = 1 ]; then  # last: what the checks leave of the budget
    stage recipes "$BUDGET" 'args=(); [ "$DRY" = 1 ] && args=(--dry-run); PYTHON="$PY" \
        bash scripts/device_recipes.sh "${args[@]}"'
fi

# one report of both folders (the CPU stage's beside the others'), the archive, the summary
"$PY" - "$WORK" "$OUT" <<'PY'
import json, sys
from pathlib import Path

sys.path.insert(0, "scripts")
import device_check

work, out = Path(sys.argv[1]), Path(sys.argv[2])
reports = [json.loads(p.read_text()) for p in (work / "check" / "report.json",
                                               work / "cpu" / "report.json") if p.exists()]
checks, device, torch_version = {}, "no report", None
for report in reports:
    checks |= report["checks"]
    device, torch_version = report["device"], report["torch"]
if (work / "cpu" / "cpu_precision.json").exists() and "cpu_precision" not in checks:
    data = json.loads((work / "cpu" / "cpu_precision.json").read_text())  # the dry run's tiny one
    values, _ = device_check.judge_cpu_precision(data)
    checks["cpu_precision"] = {"tiny (dry run)": {"passed": True, "exit_status": 0,
                                                  "seconds": 0.0, "values": values, "error": None}}
report = {"device": device, "torch": torch_version, "checks": checks}
(out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
(out / "report.md").write_text(device_check.report_markdown(device, checks))
failed = [f"{n} {c}" for n, cases in checks.items() for c, r in cases.items() if r["passed"] is False]
print(f"{len(failed)} failed: {', '.join(failed)}" if failed else "no check failed")
sys.exit(1 if failed else 0)
PY
RC=$?
# the training runs' folders (checkpoints) stay behind: their verdicts are in the reports
tar -czf "$OUT/device_run.tar.gz" -C "$WORK" --exclude=runs logs env.txt summary.txt check cpu \
    2>/dev/null
{
    echo "device_run.sh: $(($(date +%s) - START)) s of a ${BUDGET} s budget; work folder $WORK"
    cat "$SUMMARY"
    echo
    cat "$OUT/report.md" 2>/dev/null
} >"$OUT/summary.txt"
cat "$OUT/summary.txt"
exit $RC
