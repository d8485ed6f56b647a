"""What only a GPU can check, in one command, with a report (issues #32 item 6, #46 items 2, 5).

    python scripts/device_check.py                      # every check, report in results/device_check/
    python scripts/device_check.py --only bf16,greedy   # some of them
    python scripts/device_check.py --list               # the checks and their commands, nothing run
    python scripts/device_check.py --jobs 8             # 8 cases at once (timings still run alone)
    python scripts/device_check.py --dry-run --out F    # the report of what would run (any machine)
    bash scripts/device_run.sh                          # all of it, in stages, inside a GPU lease

On whatever CUDA device is present, each check runs as its own ``train.py`` (or bench script)
process, so one failure does not hide the others:

* ``bf16``: bf16-mixed training of every encoding (configs/pe/*.yaml), a short run each;
* ``flash``: SDPA's flash kernel on RoPE's rotated bf16 q, k, v equals the math kernel;
* ``flex``: FlexAttention training (``model.attention=flex``) of the bias encodings;
* ``greedy``: greedy decoding with the KV cache (``eval.decoding=greedy``);
* ``ddp``: DDP over every device present (skipped with one device);

and timings, which fail when they miss the issue's targets (``TARGETS``), not only on an error:

* ``mfu``: ``scripts/bench_mfu.py --ladder``, the ~100M model in bf16: baseline, +batch,
  +fused, +compile; fails when the best rung is under 40 % MFU of the data-sheet peak;
* ``plain``: ``scripts/bench.py`` lengen against the plain loop at bench.py's default size
  (d=128, 4 layers, seq 128, batch 32, fp32); RoPE also through ``torch.compile`` and its CUDA
  graphs; fails when the default (eager) lengen is under 0.9 × the plain loop for an encoding;
* ``profile``: ``scripts/profile_step.py``: host (Python) time, kernels and device time of a
  lengen step and of a plain-loop step, with lengen's costliest functions (recorded);
* ``mechanisms``: step time and long-evaluation memory (8,192 tokens) of the 2024–26
  mechanisms (FoX, stick-breaking, PaTH, PaTH-FoX, DAPE, PoPE, SSMax on RoPE, Llama 4's
  temperature on NoPE, iRoPE) beside RoPE's, as ratios (recorded; fails on an error only);
* ``pack``: ``scripts/bench_pack.py --device cuda --members 64``: runs per hour of a pack of 64
  default-experiment seeds against one solo run (fails under 20×) and memory per member;
  "not available" where the script is absent;
* ``cpu_precision``: ``scripts/bench_precision.py`` on the host's CPU (2 threads): bf16
  autocast against fp32, speed and loss (recorded).

``--jobs N`` runs N cases at once on the device (small models share it easily); the timings
always run after the others, one at a time. ``--timeout`` (seconds, default 300) stops a case
that hangs and reports it failed, so one hang cannot spend a whole GPU lease.

Writes ``report.json`` and ``report.md`` (each check: passed, seconds, the values a timing
measured, the last line of its error) into ``--out``, the timings' JSON beside them; exit status
0 when every check passed, 1 otherwise, 2 without a CUDA device (one line, nothing written)
unless ``--dry-run``, which runs nothing and writes the report of what would run.
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
#: timed steps of the plain check's rows: at ~10 ms a step, enough for a stable mean
STEPS = ["--steps", "100", "--warmup", "5"]
#: encodings with a bias of distances, the ones FlexAttention serves (docs/benchmarks.md)
FLEX_ENCODINGS = ("alibi", "t5", "kerple", "fire", "sandwich")
CHECKS = ("bf16", "flash", "flex", "greedy", "ddp", "mfu", "plain", "profile", "mechanisms",
          "pack", "cpu_precision")  # fmt: skip
#: issue #46: the ~100M model's MFU in bf16, lengen / the plain loop, a pack's runs per hour
TARGETS = {"mfu": 0.40, "plain": 0.9, "pack": 20.0}
#: the 2024–26 mechanisms and their baseline (scripts/bench.py's encoding names)
MECHANISMS = ("rope", "fox", "stick_breaking", "path", "path_fox", "dape", "pope", "rope_ssmax",
              "nope_temperature", "irope")  # fmt: skip
PACK_MEMBERS = 64

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

    def script(name: str) -> str:
        return str(ROOT / "scripts" / f"{name}.py")

    def json_for(check: str, case: str = "") -> str:
        return str(out / f"{check}{'_' + case if case else ''}.json")

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
        "mfu": [("ladder", [python, script("bench_mfu"), "--ladder", "--json", json_for("mfu")])],
        "plain": [
            ("rope", [python, script("bench"), "--no-eval", "--impls", "lengen,plain", "--pes",
                      "rope", "--lengen-variants", "eager,compile,cudagraphs", *STEPS, "--json",
                      json_for("plain", "rope")]),
            ("others", [python, script("bench"), "--no-eval", "--impls", "lengen,plain", "--pes",
                        "nope,learned,alibi", *STEPS, "--json", json_for("plain", "others")]),
        ],
        "profile": [("rope", [python, script("profile_step"), "--json", json_for("profile")])],
        "mechanisms": [
            ("8192", [python, script("bench"), "--impls", "lengen", "--pes", ",".join(MECHANISMS),
                      "--lengths", "8192", "--steps", "20", "--json", json_for("mechanisms")]),
        ],
        "pack": [
            (f"{PACK_MEMBERS} members", [python, script("bench_pack"), "--device", "cuda",
                                         "--members", str(PACK_MEMBERS), "--repeats", "1",
                                         "--json", json_for("pack")]),
        ],
        "cpu_precision": [
            ("2 threads", [python, script("bench_precision"), "--threads", "2", "--steps", "60",
                           "--json", json_for("cpu_precision")]),
        ],
    }  # fmt: skip
    if devices > 1:
        checks["ddp"] = [(f"{devices} devices", run("ddp", "trainer=ddp", "trainer.accelerator=gpu",
                                                    f"trainer.devices={devices}"))]  # fmt: skip
    return checks


#: checks that are timings: run after the others, one case at a time, nothing beside them
TIMINGS = ("mfu", "plain", "profile", "mechanisms", "pack", "cpu_precision")


def json_argument(command: list[str]) -> Path | None:
    """The file a bench command writes its results to (its ``--json`` argument)."""
    return Path(command[command.index("--json") + 1]) if "--json" in command else None


def run_case(command: list[str], timeout: float | None = None, log: Path | None = None) -> dict:
    """Run one case -> its row; its output goes to ``log`` where given. A bench script that is
    absent (another issue's, not written yet), or that needs a lengen module that is, is "not
    available" (passed None), not a failure."""
    script = next((part for part in command[1:2] if part.endswith(".py")), None)
    if script is not None and not Path(script).exists():
        return {"passed": None, "exit_status": None, "seconds": 0.0,
                "error": f"not available: {Path(script).name} is absent"}  # fmt: skip
    start = time.monotonic()
    try:
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as expired:
        write_log(log, expired.stdout, expired.stderr)
        return {"passed": False, "exit_status": None, "seconds": round(time.monotonic() - start, 1),
                "error": f"stopped after --timeout {timeout:g} s"}  # fmt: skip
    write_log(log, done.stdout, done.stderr)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    error = None if done.returncode == 0 else (lines[-1] if lines else "(no output)")
    if error and "No module named 'lengen." in error:
        return {"passed": None, "exit_status": done.returncode,
                "seconds": round(time.monotonic() - start, 1), "error": f"not available: {error}"}  # fmt: skip
    return {
        "passed": done.returncode == 0,
        "exit_status": done.returncode,
        "seconds": round(time.monotonic() - start, 1),
        "error": error,
    }


def write_log(log: Path | None, stdout, stderr) -> None:
    if log is None:
        return
    text = [part.decode() if isinstance(part, bytes) else part for part in (stdout, stderr)]
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("".join(part or "" for part in text))


# -- the timings' verdicts -----------------------------------------------------------------------
def judge_mfu(data: dict) -> tuple[dict, str | None]:
    ladder = data["ladder"]
    values = {row["rung"]: row["mfu"] for row in ladder["rungs"]}
    values |= {"batch": ladder["device_batch"], "flash": ladder["flash"], "best": ladder["best"]}
    values["vs_matmul_peak"] = {r["rung"]: r["mfu_vs_matmul_peak"] for r in ladder["rungs"]}
    errors = {row["rung"]: row["error"] for row in ladder["rungs"] if row.get("error")}
    if errors:
        values["errors"] = errors
    if ladder["best"] is None:
        return values, "every rung failed"
    if ladder["mfu"] is None:
        return values, "no data-sheet peak known for this device: MFU not judged"
    if ladder["mfu"] < TARGETS["mfu"]:
        return (
            values,
            f"MFU {ladder['mfu']:.1%} < {TARGETS['mfu']:.0%} (best rung {ladder['best']})",
        )
    return values, None


def judge_plain(data: dict) -> tuple[dict, str | None]:
    speeds = data["train_tokens_per_s"]
    values, missed = {}, []
    for key, speed in speeds.items():
        impl, pe = key.split("/", 1)
        plain = speeds.get(f"plain/{pe}")
        if impl.startswith("lengen") and plain:
            values[key] = round(speed / plain, 3)
            if impl == "lengen" and speed / plain < TARGETS["plain"]:
                missed.append(f"{pe} {speed / plain:.2f}")
    values["step_ms"] = data.get("train_step_ms", {})
    if data.get("errors"):
        values["errors"] = data["errors"]
        missed += [f"{key} failed" for key in data["errors"] if key.startswith("lengen/")]
    if missed:
        return values, f"lengen / plain < {TARGETS['plain']} or failed: {', '.join(missed)}"
    return values, None


def judge_profile(data: dict) -> tuple[dict, str | None]:
    keys = ("host_ms", "kernels", "device_ms")
    values = {impl: {k: data[impl].get(k) for k in keys} for impl in ("lengen", "plain")}
    values["lengen"]["top"] = [
        f"{row['ms_per_step']} ms {row['function']}" for row in data["lengen"]["top"][:6]
    ]
    return values, None


def judge_mechanisms(data: dict) -> tuple[dict, str | None]:
    steps = {k.split("/", 1)[1]: v for k, v in data["train_step_ms"].items()}
    evals = {row["pe"]: row for row in data["eval"] if row["length"] == 8192}
    rope_step, rope_eval = steps.get("rope"), evals.get("rope")
    values = {}
    for pe in steps.keys() | evals.keys():
        row = {"step_ms": steps.get(pe)}
        if rope_step and steps.get(pe):
            row["step_vs_rope"] = round(steps[pe] / rope_step, 2)
        if pe in evals:
            row |= {"eval_s": evals[pe]["seconds"], "eval_mib": evals[pe]["peak_mem_mb"]}
            if rope_eval:
                floor = 16  # MiB: tiny peaks are noise, as in bench.py's targets
                row["eval_mib_vs_rope"] = round(
                    max(evals[pe]["peak_mem_mb"], floor) / max(rope_eval["peak_mem_mb"], floor), 2
                )
        values[pe] = row
    return values, None


def judge_pack(data: dict) -> tuple[dict, str | None]:
    ratio = data.get("runs_per_hour_ratio")
    values = {"runs_per_hour_ratio": ratio, "runs_per_hour": data.get("runs_per_hour"),
              "memory_per_member_mib": data.get("memory_per_member_mib")}  # fmt: skip
    if ratio is None or ratio < TARGETS["pack"]:
        return values, f"runs per hour, pack / solo = {ratio} < {TARGETS['pack']:g}"
    return values, None


def judge_cpu_precision(data: dict) -> tuple[dict, str | None]:
    keys = ("flags", "matmul_gflops", "bf16_speedup", "bf16_loss_minus_fp32", "skipped")
    values = {key: data.get(key) for key in keys if key in data}
    values["cpu"] = data.get("machine", {}).get("cpu")
    return values, None


JUDGES = {"mfu": judge_mfu, "plain": judge_plain, "profile": judge_profile,
          "mechanisms": judge_mechanisms, "pack": judge_pack,
          "cpu_precision": judge_cpu_precision}  # fmt: skip


def judge(check: str, command: list[str], row: dict) -> dict:
    """A finished timing's row with the values its JSON holds, failed where they miss
    ``TARGETS`` (or the JSON cannot be read)."""
    path = json_argument(command)
    if check not in JUDGES or not row["passed"] or path is None:
        return row
    try:
        values, missed = JUDGES[check](json.loads(path.read_text()))
    except (OSError, ValueError, KeyError, TypeError) as error:
        return {**row, "passed": False, "error": f"{path.name}: not as expected ({error!r})"}
    row = {**row, "values": values}
    return {**row, "passed": False, "error": missed} if missed else row


def report_markdown(device: str, results: dict) -> str:
    lines = [f"# Device check on {device}", "",
             "| check | case | passed | seconds | values | error |", "|---|---|---|---|---|---|"]  # fmt: skip
    for check, cases in results.items():
        if not cases:
            lines.append(f"| {check} | (skipped: one device) | | | | |")
        for case, row in cases.items():
            mark = {True: "yes", False: "**no**", None: "—"}[row["passed"]]
            values = json.dumps(row.get("values"), separators=(",", ":")) if "values" in row else ""
            values = values if len(values) <= 400 else values[:397] + "..."
            error = " ".join((row["error"] or "").split())  # one line: a table row
            lines.append(f"| {check} | {case} | {mark} | {row['seconds']} | {values} | {error} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "device_check")
    parser.add_argument("--only", help=f"comma-separated, of {', '.join(CHECKS)}")
    parser.add_argument("--list", action="store_true", help="print the commands, run nothing")
    parser.add_argument("--dry-run", action="store_true", help="write the report, run nothing")
    parser.add_argument("--merge", action="store_true", help="add to --out's report.json")
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
    if devices == 0 and not args.dry_run:
        print("error: no CUDA device here (torch.cuda.device_count() is 0); the device check "
              "runs where a GPU is present: --list shows what it would run", file=sys.stderr)  # fmt: skip
        return 2
    device = f"{devices} × {torch.cuda.get_device_name(0)}" if devices else "no CUDA device"
    results: dict = {name: {} for name in checks}

    def finish(name: str, case: str, row: dict) -> None:
        results[name][case] = row
        state = {True: "passed", False: "FAILED: ", None: ""}[row["passed"]]
        print(f"{name} {case}: {state}{row['error'] or ''} ({row['seconds']} s)"
              + (f" {json.dumps(row['values'])[:300]}" if "values" in row else ""), flush=True)  # fmt: skip

    def case(name: str, label: str, command: list[str]) -> dict:
        if args.dry_run:
            shown = " ".join(" ".join(command[1:]).split())
            return {"passed": None, "exit_status": None, "seconds": 0.0,
                    "error": "dry run: " + (shown if len(shown) <= 160 else shown[:157] + "...")}  # fmt: skip
        slug = "".join(c if c.isalnum() else "_" for c in f"{name}_{label}")
        row = run_case(command, args.timeout, args.out / "logs" / f"{slug}.log")
        return judge(name, command, row)

    parallel = [(n, c, cmd) for n, cases in checks.items() if n not in TIMINGS for c, cmd in cases]
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        futures = {pool.submit(case, n, c, cmd): (n, c) for n, c, cmd in parallel}
        for future in concurrent.futures.as_completed(futures):
            finish(*futures[future], future.result())
    for name in (n for n in checks if n in TIMINGS):
        for label, command in checks[name]:
            finish(name, label, case(name, label, command))
    # the report in the plan's order, whatever order the cases finished in
    results = {n: {c: results[n][c] for c, _ in cases} for n, cases in checks.items()}
    from lengen.atomic import atomic_write

    args.out.mkdir(parents=True, exist_ok=True)
    if args.merge and (args.out / "report.json").exists():  # device_run.sh's later stages
        earlier = json.loads((args.out / "report.json").read_text())["checks"]
        results = {**{n: c for n, c in earlier.items() if n not in results}, **results}
    report = {"device": device, "torch": torch.__version__, "checks": results}
    atomic_write(args.out / "report.json", json.dumps(report, indent=2) + "\n")
    atomic_write(args.out / "report.md", report_markdown(device, results))
    failed = [
        f"{n} {c}" for n, cases in results.items() for c, r in cases.items() if r["passed"] is False
    ]
    print(f"report: {args.out / 'report.md'}; "
          + (f"{len(failed)} failed: {', '.join(failed)}" if failed else "no check failed"))  # fmt: skip
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
