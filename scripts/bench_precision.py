"""bf16 autocast against fp32 training on this machine's CPU: speed, and the loss it reaches.

    python scripts/bench_precision.py --threads 2 --steps 60 --json results/bench/cpu_precision.json

Issue #46 item 3: fp32 was chosen on CPUs because bf16 matmuls ran at ≈ 0.3 GFLOP/s on the
developers' AMD EPYC (AVX2 only); CPUs with AMX or AVX-512 BF16 run them several times faster
than fp32. This measures, on the CPU it runs on (a GPU is never used):

* ``flags``: whether /proc/cpuinfo lists ``amx_bf16``, ``amx_tile``, ``avx512_bf16``;
* ``matmul``: GFLOP/s of a 1,024² matmul in fp32 and bf16 (best of five) on ``--threads``;
* ``train``: the bench model of scripts/bench.py (d=128, 4 layers, 4 heads, ff 512, vocab 64,
  sequence 128, batch 32) trained through ``LitModel`` for ``--warmup`` + ``--steps`` steps at
  ``32-true`` and at ``bf16-mixed``, the same seed and batches, ``--repeats`` times interleaved
  (fp32, bf16, fp32, bf16, …): the lower quartile of the step times, and the mean training loss
  of the last 10 steps of each (whether bf16 learns the same; the data are random tokens, so
  the loss approaches ln 64 ≈ 4.16 from above: a like-for-like check, not a task).

Without bf16 instructions (no ``amx_bf16``/``avx512_bf16``), bf16 training is skipped unless
``--force`` (it would take minutes a step). Prints a verdict line: bf16/fp32 speed and the loss
difference. Timed numbers need a quiet machine.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench  # noqa: E402  (scripts are not a package)

BF16_FLAGS = ("amx_bf16", "amx_tile", "avx512_bf16")
LOSS_STEPS = 10  # the last steps whose mean training loss is compared


def cpu_flags() -> dict[str, bool]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        text = ""
    words = set(text.split())
    return {flag: flag in words for flag in BF16_FLAGS}


def matmul_gflops(dtype: torch.dtype, n: int = 1024) -> float:
    a, b = (torch.randn(n, n).to(dtype) for _ in range(2))
    best = float("inf")
    for _ in range(6):
        started = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - started)
    return 2 * n**3 / best / 1e9


def train(precision: str, warmup: int, steps: int, sizes: dict) -> dict:
    """``warmup`` + ``steps`` steps on the CPU -> lower-quartile step seconds and the losses."""
    import pytorch_lightning as pl

    from lengen.lit import DataModule, LitModel, quiet_known_noise

    quiet_known_noise()
    times: list[float] = []
    losses: list[float] = []

    class Record(pl.Callback):
        def __init__(self):
            self.last = None

        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            self.last = time.perf_counter()

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            if trainer.global_step > warmup:
                times.append(time.perf_counter() - self.last)
            losses.append(float(pl_module.last_logged["train/loss"]))  # a host float on CPU

    torch.manual_seed(0)
    lit = LitModel(
        bench.lengen_model("rope", sizes["seq"], sizes=sizes),
        {"lr": 1e-3, "weight_decay": 0.1, "warmup_steps": 10},
        max_steps=warmup + steps,
    )
    trainer = pl.Trainer(
        accelerator="cpu", devices=1, max_steps=warmup + steps, logger=False,
        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
        limit_val_batches=0, num_sanity_val_steps=0, gradient_clip_val=1.0,
        precision=precision, callbacks=[Record()],
    )  # fmt: skip
    trainer.fit(lit, datamodule=DataModule(bench.RandomTokens(sizes)))
    return {
        "step_s": bench.lower_quartile(times),
        "final_loss": statistics.fmean(losses[-LOSS_STEPS:]),
        "losses": [round(x, 5) for x in losses],
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2, help="torch threads")
    parser.add_argument("--steps", type=int, default=60, help="timed steps per run")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    parser.add_argument("--repeats", type=int, default=1, help="runs of each precision")
    parser.add_argument("--force", action="store_true", help="train bf16 without bf16 flags")
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument(
        "--d-model",
        type=int,
        default=None,
        help="model width instead of the default size's (d_ff = 4x, one head per 32 channels)",
    )
    parser.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)  # tests
    args = parser.parse_args(argv)
    if args.steps < LOSS_STEPS or args.threads < 1 or args.repeats < 1:
        raise SystemExit(
            f"--steps must be >= {LOSS_STEPS}, --threads and --repeats >= 1; got --steps "
            f"{args.steps} --threads {args.threads} --repeats {args.repeats}"
        )
    if args.d_model is not None and (args.d_model < 32 or args.d_model % 32):
        raise SystemExit(f"--d-model must be a multiple of 32, at least 32; got {args.d_model}")
    torch.set_num_threads(args.threads)
    sizes = dict(bench.SIZES)
    if args.d_model is not None:
        # wider matmuls are where bf16 (AMX) could pay on a CPU: the default size is small
        sizes.update(d_model=args.d_model, d_ff=4 * args.d_model, n_heads=args.d_model // 32)
    if args.tiny:
        sizes = dict(vocab=32, d_model=16, n_layers=1, n_heads=2, d_ff=32, seq=8, batch=2)
    flags = cpu_flags()
    machine = bench.machine() | {"device": "cpu", "threads": args.threads}
    results: dict = {
        "machine": machine,
        "command": " ".join(["bench_precision.py", *(argv if argv is not None else sys.argv[1:])]),
        "sizes": sizes,
        "flags": flags,
        "matmul_gflops": {
            "fp32": round(matmul_gflops(torch.float32), 1),
            "bf16": round(matmul_gflops(torch.bfloat16), 1),
        },
        "train": {"32-true": [], "bf16-mixed": []},
    }
    print(f"cpu {machine.get('cpu')}: flags {flags}; matmul GFLOP/s {results['matmul_gflops']}")
    has_bf16 = flags["amx_bf16"] or flags["avx512_bf16"]
    precisions = ["32-true", "bf16-mixed"] if has_bf16 or args.force else ["32-true"]
    if "bf16-mixed" not in precisions:
        results["skipped"] = (
            "bf16-mixed: no amx_bf16 or avx512_bf16 on this CPU (--force trains it)"
        )
        print(results["skipped"])
    for _ in range(args.repeats):
        for precision in precisions:  # interleaved: drift in the machine's load burdens both
            row = train(precision, args.warmup, args.steps, sizes)
            results["train"][precision].append(row)
            print(f"  {precision:>10}: {1000 * row['step_s']:8.1f} ms/step, "
                  f"loss {row['final_loss']:.4f} (mean of the last {LOSS_STEPS} steps)", flush=True)  # fmt: skip
    fp32, bf16 = results["train"]["32-true"], results["train"]["bf16-mixed"]
    if fp32 and bf16:
        speed = statistics.median(r["step_s"] for r in fp32) / statistics.median(
            r["step_s"] for r in bf16
        )
        loss_gap = statistics.fmean(r["final_loss"] for r in bf16) - statistics.fmean(
            r["final_loss"] for r in fp32
        )
        results["bf16_speedup"] = round(speed, 3)
        results["bf16_loss_minus_fp32"] = round(loss_gap, 5)
        print(f"verdict: bf16-mixed is {speed:.2f}x fp32's speed; loss difference {loss_gap:+.4f}")
    if args.json:
        bench.write_json(args.json, results)
    return results


if __name__ == "__main__":
    main()
