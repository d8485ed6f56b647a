"""What only a GPU can check, in one command, with a report (issue #32 item 6; docs/scaling.md).

    python scripts/device_check.py                      # every check, report in results/device_check/
    python scripts/device_check.py --only bf16,greedy   # some of them
    python scripts/device_check.py --list               # the checks and their commands, nothing run
    python scripts/device_check.py --jobs 8             # 8 cases at once (mfu still runs alone)

On whatever CUDA device is present, each check runs as its own ``train.py`` (or ``bench.py``)
process, so one failure does not hide the others:

* ``bf16``: bf16-mixed training of every encoding (configs/pe/*.yaml), a short run each;
* ``flash``: SDPA's flash kernel on RoPE's rotated bf16 q, k, v equals the math kernel;
* ``flex``: FlexAttention training (``model.attention=flex``) of the bias encodings;
* ``greedy``: greedy decoding with the KV cache (``eval.decoding=greedy``);
* ``ddp``: DDP over every device present (skipped with one device);
* ``mfu``: ``scripts/bench.py --mfu --quick`` (model FLOPs utilisation, bf16).

``--jobs N`` runs N cases at once on the device (small models share it easily); ``mfu``, a
timing, always runs last and alone. ``--timeout`` (seconds, default 300) stops a case that hangs
and reports it failed, so one hang cannot spend a whole GPU lease.

Writes ``report.json`` and ``report.md`` (each check: passed, seconds, the last line of its
error) into ``--out``; exit status 0 when every check passed, 1 otherwise, 2 without a CUDA
device (one line, nothing written).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: a short run: enough steps for a mixed-precision step to go wrong, lengths beyond training
SHORT = ["trainer.max_steps=50", "trainer.val_check_interval=25", "data.len=8", "eval.factors=[1,2]",
         "eval.samples=64", "logger=none"]  # fmt: skip
#: encodings with a bias of distances, the ones FlexAttention serves (docs/benchmarks.md)
FLEX_ENCODINGS = ("alibi", "t5", "kerple", "fire", "sandwich")
CHECKS = ("bf16", "flash", "flex", "greedy", "ddp", "mfu")

FLASH_CHECK = """
import torch, torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from lengen.pe import RoPE
pe = RoPE(d_model=256, n_heads=4).cuda()
q, k, v = (torch.randn(2, 4, 512, 64, device="cuda", dtype=torch.bfloat16) for _ in range(3))
positions = torch.arange(512, device="cuda")
q, k = pe.rotate(q, k, positions, positions)
with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
    flash = F.scaled_dot_product_attention(q, k, v, is_causal=True)
with sdpa_kernel(SDPBackend.MATH):
    math = F.scaled_dot_product_attention(q, k, v, is_causal=True)
torch.testing.assert_close(flash.float(), math.float(), atol=2e-2, rtol=2e-2)
print("flash equals math")
"""


def encodings() -> list[str]:
    return sorted(path.stem for path in (ROOT / "configs" / "pe").glob("*.yaml"))


def plan(out: Path, devices: int) -> dict[str, list[tuple[str, list[str]]]]:
    """{check: [(case, command)]}: every command this script would run on ``devices`` GPUs."""
    python, train = sys.executable, str(ROOT / "train.py")

    runs = out / "runs" / time.strftime("%Y-%m-%d_%H-%M-%S")  # a check again: runs of its own

    def run(case: str, *overrides: str) -> list[str]:
        return [python, train, *SHORT, *overrides, f"hydra.run.dir={runs / case}"]

    checks = {
        "bf16": [
            (pe, run(f"bf16-{pe}", f"pe={pe}", "trainer.precision=bf16-mixed"))
            for pe in encodings()
        ],  # fmt: skip
        "flash": [("rope", [python, "-c", FLASH_CHECK])],
        "flex": [
            (pe, run(f"flex-{pe}", f"pe={pe}", "model.attention=flex")) for pe in FLEX_ENCODINGS
        ],  # fmt: skip
        "greedy": [
            (pe, run(f"greedy-{pe}", f"pe={pe}", "eval.decoding=greedy"))
            for pe in ("rope", "alibi", "fox")
        ],  # fmt: skip
        "ddp": [],
        "mfu": [
            (
                "rope",
                [
                    python,
                    str(ROOT / "scripts" / "bench.py"),
                    "--mfu",
                    "--quick",
                    "--no-eval",
                    "--json",
                    str(out / "bench_mfu.json"),
                ],
            )
        ],  # fmt: skip
    }
    if devices > 1:
        checks["ddp"] = [(f"{devices} devices", run("ddp", "trainer=ddp", "trainer.accelerator=gpu",
                                                    f"trainer.devices={devices}"))]  # fmt: skip
    return checks


#: checks that are timings: run after the others, one case at a time, nothing beside them
TIMINGS = ("mfu",)


def run_case(command: list[str], timeout: float | None = None) -> dict:
    start = time.monotonic()
    try:
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"passed": False, "exit_status": None, "seconds": round(time.monotonic() - start, 1),
                "error": f"stopped after --timeout {timeout:g} s"}  # fmt: skip
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    return {
        "passed": done.returncode == 0,
        "exit_status": done.returncode,
        "seconds": round(time.monotonic() - start, 1),
        "error": None if done.returncode == 0 else (lines[-1] if lines else "(no output)"),
    }


def report_markdown(device: str, results: dict) -> str:
    lines = [f"# Device check on {device}", "", "| check | case | passed | seconds | error |",
             "|---|---|---|---|---|"]  # fmt: skip
    for check, cases in results.items():
        if not cases:
            lines.append(f"| {check} | (skipped: one device) | | | |")
        for case, row in cases.items():
            mark = "yes" if row["passed"] else "**no**"
            lines.append(f"| {check} | {case} | {mark} | {row['seconds']} | {row['error'] or ''} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "device_check")
    parser.add_argument("--only", help=f"comma-separated, of {', '.join(CHECKS)}")
    parser.add_argument("--list", action="store_true", help="print the commands, run nothing")
    parser.add_argument("--jobs", type=int, default=1, help="cases at once (timings run alone)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per case")
    args = parser.parse_args(argv)
    only = CHECKS if args.only is None else tuple(args.only.split(","))
    if unknown := [name for name in only if name not in CHECKS]:
        print(f"error: --only must name checks of {', '.join(CHECKS)}; got {unknown[0]!r}",
              file=sys.stderr)  # fmt: skip
        return 2
    if args.jobs < 1 or args.timeout <= 0:
        print(f"error: --jobs must be ≥ 1 and --timeout > 0; got --jobs {args.jobs} "
              f"--timeout {args.timeout:g}", file=sys.stderr)  # fmt: skip
        return 2
    import torch

    devices = torch.cuda.device_count()
    checks = {
        name: cases for name, cases in plan(args.out, max(devices, 1)).items() if name in only
    }
    if args.list:
        for name, cases in checks.items():
            for case, command in cases:
                print(f"{name} {case}: {' '.join(command[1:])[:200]}")
        return 0
    if devices == 0:
        print("error: no CUDA device here (torch.cuda.device_count() is 0); the device check "
              "runs where a GPU is present: --list shows what it would run", file=sys.stderr)  # fmt: skip
        return 2
    device = f"{devices} × {torch.cuda.get_device_name(0)}"
    results: dict = {name: {} for name in checks}

    def finish(name: str, case: str, row: dict) -> None:
        results[name][case] = row
        print(f"{name} {case}: {'passed' if row['passed'] else 'FAILED: ' + row['error']} "
              f"({row['seconds']} s)", flush=True)  # fmt: skip

    parallel = [(n, c, cmd) for n, cases in checks.items() if n not in TIMINGS for c, cmd in cases]
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        futures = {pool.submit(run_case, cmd, args.timeout): (n, c) for n, c, cmd in parallel}
        for future in concurrent.futures.as_completed(futures):
            finish(*futures[future], future.result())
    for name in (n for n in checks if n in TIMINGS):
        for case, command in checks[name]:
            finish(name, case, run_case(command, args.timeout))
    # the report in the plan's order, whatever order the cases finished in
    results = {n: {c: results[n][c] for c, _ in cases} for n, cases in checks.items()}
    from lengen.atomic import atomic_write

    args.out.mkdir(parents=True, exist_ok=True)
    report = {"device": device, "torch": torch.__version__, "checks": results}
    atomic_write(args.out / "report.json", json.dumps(report, indent=2) + "\n")
    atomic_write(args.out / "report.md", report_markdown(device, results))
    failed = [
        f"{n} {c}" for n, cases in results.items() for c, r in cases.items() if not r["passed"]
    ]
    print(f"report: {args.out / 'report.md'}; "
          + (f"{len(failed)} failed: {', '.join(failed)}" if failed else "every check passed"))  # fmt: skip
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
