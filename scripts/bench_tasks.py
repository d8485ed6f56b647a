"""Generation throughput of every task: training batches (sample, hold-out redraw, solve,
format) per second at fixed lengths, on one CPU thread.

    python scripts/bench_tasks.py                 # lengths 16 and 128, batch 64, decoder format
    python scripts/bench_tasks.py --lengths 16 128 1024 --tasks passkey copy

tokens/s counts the decoder's input tokens (BOS, the n input symbols, SEP, the answer but its
last symbol), the same tokens a training step consumes; compare with the ~40-45k tokens/s that
training the default model consumes on a 2-core CPU (docs/tasks.md).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf

from lengen.data.task_data import TaskData

CONFIG_DIR = Path(__file__).resolve().parents[1] / "configs" / "data"
TASK_DATA = "lengen.data.datamodule.TaskData"


def task_names() -> list[str]:
    return sorted(
        p.stem for p in CONFIG_DIR.glob("*.yaml") if OmegaConf.load(p).get("_target_") == TASK_DATA
    )


def throughput(name: str, length: int, batch_size: int, seconds: float) -> tuple[float, float]:
    """(instances/s, tokens/s) of training batches of this task at exactly this length."""
    task = instantiate(OmegaConf.load(CONFIG_DIR / f"{name}.yaml").task)
    data = TaskData(
        task=task, len=length, min_len=length, batch_size=batch_size, curriculum="fixed"
    )
    tokens_per_batch = data.train_batch(0)["inputs"]["tokens"].numel()  # also warms up
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        data.train_batch(steps + 1)
        steps += 1
    elapsed = time.perf_counter() - start
    return steps * batch_size / elapsed, steps * tokens_per_batch / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[16, 128])
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=0.5, help="per task and length")
    parser.add_argument("--tasks", nargs="+", default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)

    header = " | ".join(f"{n}: inst/s | {n}: tok/s" for n in args.lengths)
    print(f"| task | {header} |")
    print("|---|" + "---:|" * (2 * len(args.lengths)))
    for name in args.tasks or task_names():
        cells = []
        for length in args.lengths:
            instances, tokens = throughput(name, length, args.batch_size, args.seconds)
            cells += [f"{instances:,.0f}", f"{tokens:,.0f}"]
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
