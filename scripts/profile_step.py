"""Where a training step's time goes: lengen's against the plain loop's, host and device.

    python scripts/profile_step.py --json results/bench/h100/profile_step.json   # on a GPU
    python scripts/profile_step.py --pe nope --steps 20

Trains bench.py's default size (d=128, 4 layers, seq 128, batch 32; fp32) through lengen's
Lightning path and through the plain loop of scripts/bench_peers.py, and profiles
``--profiled`` steps after a warm-up:

* ``host_ms``: the host's (Python's) time per step, from cProfile, and its top functions by own
  time (``top``: file:line function, ms per step, calls per step);
* ``kernels`` and ``device_ms``: CUDA kernels launched per step and their summed time, from
  torch.profiler (on a GPU). A step whose host time exceeds its device time is host-bound: the
  device waits for Python, and only less host work (or CUDA graphs) makes it faster.

Prints both summaries; ``--json`` keeps them. Profilers slow what they watch: compare the two
implementations with each other, not with bench.py's timings.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench  # noqa: E402  (scripts are not a package)
from bench_peers import PlainLM  # noqa: E402

TOP = 25


def summarise(profiler: cProfile.Profile, steps: int, kernel_events: list | None) -> dict:
    stats = pstats.Stats(profiler)
    rows = []
    for (filename, line, function), (_, calls, own, _, _) in stats.stats.items():
        rows.append((own, calls, f"{Path(filename).name}:{line} {function}"))
    rows.sort(reverse=True)
    result = {
        "host_ms": round(1000 * stats.total_tt / steps, 3),
        "top": [
            {
                "function": name,
                "ms_per_step": round(1000 * own / steps, 3),
                "calls_per_step": round(calls / steps, 1),
            }
            for own, calls, name in rows[:TOP]
        ],  # fmt: skip
    }
    if kernel_events is not None:
        kernels = [e for e in kernel_events if e.device_type == torch.autograd.DeviceType.CUDA]
        result["kernels"] = round(len(kernels) / steps, 1)
        result["device_ms"] = round(sum(e.device_time for e in kernels) / 1000 / steps, 3)
    return result


class Watch:
    """cProfile (and torch.profiler's CUDA activity on a GPU) between two calls."""

    def __init__(self):
        self.cuda = torch.cuda.is_available()
        self.profile = cProfile.Profile()
        self.torch_profile = None

    def start(self):
        if self.cuda:
            from torch.profiler import ProfilerActivity, profile

            torch.cuda.synchronize()
            self.torch_profile = profile(activities=[ProfilerActivity.CUDA])
            self.torch_profile.__enter__()
        self.profile.enable()

    def stop(self, steps: int) -> dict:
        self.profile.disable()
        events = None
        if self.cuda:
            torch.cuda.synchronize()
            self.torch_profile.__exit__(None, None, None)
            events = list(self.torch_profile.events())
        return summarise(self.profile, steps, events)


def profile_lengen(pe: str, warmup: int, steps: int) -> dict:
    import pytorch_lightning as pl

    from lengen.lit import DataModule, LitModel, quiet_known_noise

    quiet_known_noise()
    watch, result = Watch(), {}

    class Profile(pl.Callback):
        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            if trainer.global_step == warmup:
                watch.start()

        def on_train_end(self, trainer, pl_module):
            result.update(watch.stop(steps))

    torch.manual_seed(0)
    lit = LitModel(
        bench.lengen_model(pe, bench.SIZES["seq"]),
        {"lr": 1e-3, "weight_decay": 0.1, "warmup_steps": 10},
        max_steps=warmup + steps,
    )
    trainer = pl.Trainer(
        accelerator="auto", devices=1, max_steps=warmup + steps, logger=False,
        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
        limit_val_batches=0, num_sanity_val_steps=0, gradient_clip_val=1.0,
        callbacks=[Profile()],
    )  # fmt: skip
    trainer.fit(lit, datamodule=DataModule(bench.RandomTokens()))
    return result


def profile_plain(pe: str, warmup: int, steps: int) -> dict:
    from bench_peers import timed_loop

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    sizes = bench.SIZES
    torch.manual_seed(0)
    model = PlainLM(pe, sizes["vocab"], sizes["d_model"], sizes["n_layers"], sizes["n_heads"],
                    sizes["d_ff"], sizes["seq"])  # fmt: skip
    watch = Watch()

    def hook(step: int) -> None:
        if step == warmup:
            watch.start()

    timed_loop(model, lambda m, t: m(t), warmup, steps, device, sizes, hook=hook)
    return watch.stop(steps)


def show(label: str, result: dict) -> None:
    device = ""
    if "kernels" in result:
        device = f", {result['kernels']:.0f} kernels and {result['device_ms']:.2f} ms on the device"
    print(f"{label}: host {result['host_ms']:.2f} ms a step{device}")
    for row in result["top"][:12]:
        print(f"  {row['ms_per_step']:8.3f} ms {row['calls_per_step']:7.1f}x  {row['function']}")


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--pe", default="rope", help="of the plain loop's: " + ", ".join(bench.FIRST_SLICE)
    )
    parser.add_argument("--warmup", type=int, default=10, help="steps before profiling")
    parser.add_argument("--steps", type=int, default=10, help="steps profiled")
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args(argv)
    if args.pe not in bench.FIRST_SLICE or args.steps < 1 or args.warmup < 1:
        raise SystemExit(
            f"--pe must be one of {', '.join(bench.FIRST_SLICE)}, --steps and --warmup >= 1; "
            f"got --pe {args.pe} --steps {args.steps} --warmup {args.warmup}"
        )
    results = {"machine": bench.machine(), "pe": args.pe, "sizes": bench.SIZES,
               "lengen": profile_lengen(args.pe, args.warmup, args.steps),
               "plain": profile_plain(args.pe, args.warmup, args.steps)}  # fmt: skip
    show("lengen", results["lengen"])
    show("plain", results["plain"])
    if args.json:
        bench.write_json(args.json, results)
    return results


if __name__ == "__main__":
    main()
