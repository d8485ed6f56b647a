"""Greedy decoding time with and without the key/value cache (docs/tasks.md, "Decoding").

    python scripts/bench_decoding.py [--lengths 128 512] [--batch 8] [--pe rope]

A decoder-only copy model (untrained; the timing does not depend on the weights) of the default
model config's size generates the n answer tokens of a batch of copy instances of length n:
once with ``lengen.evaluation.tasks.greedy_generate`` (cache), once by recomputing the full forward pass
for every generated token (no cache). Both must generate the same tokens; the script checks it.
"""

from __future__ import annotations

import argparse
import platform
import time

import torch

from lengen.data.task_data import PAD, TaskData
from lengen.data.tasks import Copy
from lengen.evaluation.tasks import greedy_generate
from lengen.model import DecoderOnly
from lengen.pe import ALiBi, NoPE, RoPE

PES = {"rope": RoPE, "alibi": ALiBi, "nope": NoPE}


@torch.no_grad()
def greedy_without_cache(model: DecoderOnly, tokens: torch.Tensor, length: int) -> torch.Tensor:
    """Full forward pass over the whole (PAD-filled) sequence for every generated token."""
    sequence = tokens.clone()
    sequence[:, length + 2 :] = PAD
    generated = []
    for index in range(length):
        token = model(sequence)[:, length + 1 + index].argmax(-1)  # (B,)
        generated.append(token)
        if length + 2 + index < sequence.shape[1]:
            sequence[:, length + 2 + index] = token
    return torch.stack(generated, dim=1)


def timed(function, *args):
    start = time.perf_counter()
    result = function(*args)
    return result, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[128, 512])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--pe", choices=sorted(PES), default="rope")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = DecoderOnly(
        pe=PES[args.pe], vocab_size=20, d_model=128, n_layers=2, n_heads=4, d_ff=512
    ).eval()
    print(
        f"decoder d_model=128 n_layers=2 n_heads=4 d_ff=512 pe={args.pe} batch={args.batch} "
        f"threads={args.threads} torch={torch.__version__} {platform.processor() or ''}"
    )
    print("| length n | sequence | with cache | without cache | speed-up |")
    print("|---|---|---|---|---|")
    data = TaskData(task=Copy(n_symbols=16), len=max(args.lengths), model_kind="decoder")
    for length in args.lengths:
        batch = next(data.eval_batches(length, args.batch, args.batch))
        tokens, targets = batch["inputs"]["tokens"], batch["targets"]
        cached, with_cache = timed(greedy_generate, model, batch["inputs"], targets)
        full, without_cache = timed(greedy_without_cache, model, tokens, length)
        if not torch.equal(cached, full):
            raise SystemExit(f"length {length}: cached and uncached decoding disagree")
        print(
            f"| {length} | {tokens.shape[1]} | {with_cache:.2f} s | {without_cache:.2f} s "
            f"| {without_cache / with_cache:.1f}x |"
        )


if __name__ == "__main__":
    main()
