"""Model FLOPs utilisation (MFU) of a ~100M-parameter lengen decoder, and what raises it.

    python scripts/bench_mfu.py                           # one row: bench.py --mfu's settings
    python scripts/bench_mfu.py --ladder --json results/bench/h100/mfu_ladder.json
    python scripts/bench.py --mfu                         # the same one row inside bench.py

The model is the lengen RoPE decoder at GPT-2 small's shape (``MFU_SIZES``: d=768, 12 layers,
12 heads, ff 3,072, vocab 8,192; 98M parameters), sequence 1,024, trained through the real
Lightning path (``LitModel``), ``bf16-mixed`` on a GPU and fp32 on a CPU. Model FLOPs per token
are PaLM's 6N + 12·L·d·T (``training_flops_per_token``). MFU is against the data sheet's dense
bf16 peak of the GPU (``SPEC_PEAK_BF16``) and against a large matmul measured here.

``--ladder`` trains one rung after another, each adding one change to the one before, so that
each change's gain is recorded in one run (issue #46 item 2; target: >= 40 % MFU on an H100):

1. ``baseline``: batch 8, eager, AdamW ``foreach`` (bench.py --mfu before issue #46);
2. ``+batch``: the batch sized to the device (``device_batch``: the largest of 64, 32, 16, 8
   sequences whose estimated training memory fits in 60 % of the device's);
3. ``+fused``: AdamW's fused kernel (``LitModel(fused=True)``);
4. ``+compile``: ``torch.compile`` of the training forward (``model.compile``), the one rung
   that compiles (a minute or more), so last.

Attention is SDPA throughout; ``flash`` in the JSON says whether its flash kernel accepts the
model's q, k, v (bf16, causal; checked once by forcing that kernel). On a CPU the ladder runs
too (fp32, no data-sheet peak): a check of the plumbing, not a measurement to quote.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench  # noqa: E402  (scripts are not a package)

#: ~100M parameters (85M in the blocks, 2 × 6.3M embedding and head): GPT-2 small's shape
MFU_SIZES = dict(vocab=8192, d_model=768, n_layers=12, n_heads=12, d_ff=3072, seq=1024, batch=8)

#: Dense bf16 tensor-core peaks from the vendors' data sheets (no sparsity), by device name.
SPEC_PEAK_BF16 = {
    "H100 80GB HBM3": 989.4e12,  # SXM
    "H100 PCIe": 756.5e12,
    "H100 NVL": 835.5e12,
    "H200 NVL": 835.5e12,
    "H200": 989.4e12,
    "A100": 312e12,
}
TARGET_MFU = 0.40  # issue #46: the ~100M model in bf16 on an H100
LADDER = ("baseline", "+batch", "+fused", "+compile")  # the one compile last: it costs most


def training_flops_per_token(sizes: dict) -> float:
    """Model FLOPs of one training token (PaLM, Chowdhery et al. 2022, appendix B):
    6N + 12·L·d·T, with N the weights of the matmuls (q, k, v, output and MLP projections and
    the output head; not embeddings, norms or biases) and 12·L·d·T the attention scores and
    their weighted sum over T keys, forward and backward, counted without the causal saving."""
    d, layers, ff = sizes["d_model"], sizes["n_layers"], sizes["d_ff"]
    matmul_weights = layers * (4 * d * d + 2 * d * ff) + d * sizes["vocab"]
    return 6 * matmul_weights + 12 * layers * d * sizes["seq"]


def matmul_peak(device: torch.device, dtype: torch.dtype) -> float:
    """FLOP/s of a large square matmul here: the achievable peak (best of five)."""
    n = 8192 if device.type == "cuda" else 1024
    a, b = (torch.randn(n, n, device=device, dtype=dtype) for _ in range(2))
    best = float("inf")
    for _ in range(6):
        if device.type == "cuda":
            torch.cuda.synchronize()
        started = time.perf_counter()
        a @ b
        if device.type == "cuda":
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - started)
    return 2 * n**3 / best


def spec_peak(device: torch.device) -> float | None:
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    # the longest matching key: "H200 NVL" before "H200"
    matches = [key for key in SPEC_PEAK_BF16 if key in name]
    return SPEC_PEAK_BF16[max(matches, key=len)] if matches else None


def training_bytes(sizes: dict) -> float:
    """A rough upper estimate of one training step's memory under bf16 autocast: fp32 weights,
    gradients and two AdamW moments (16 bytes a parameter), the activations kept for the
    backward pass (~34·d bytes a token a layer, plus the MLP's 4·d_ff), and the fp32 logits with
    their gradient and softmax (12·vocab bytes a token)."""
    d, ff, layers = sizes["d_model"], sizes["d_ff"], sizes["n_layers"]
    params = layers * (4 * d * d + 2 * d * ff) + 2 * d * sizes["vocab"]
    tokens = sizes["batch"] * sizes["seq"]
    return 16 * params + tokens * (layers * (34 * d + 4 * ff) + 12 * sizes["vocab"])


def device_batch(device: torch.device, sizes: dict = MFU_SIZES) -> int:
    """The largest of 64, 32, 16, 8 sequences whose estimated training memory fits in 60 % of
    the device's (a CPU: the batch of ``sizes``, unchanged)."""
    if device.type != "cuda":
        return sizes["batch"]
    total = torch.cuda.get_device_properties(device).total_memory
    for batch in (64, 32, 16, 8):
        if training_bytes({**sizes, "batch": batch}) <= 0.6 * total:
            return batch
    return sizes["batch"]


def flash_accepts(device: torch.device, sizes: dict = MFU_SIZES) -> bool | None:
    """Whether SDPA's flash kernel runs the model's attention (bf16 autocast, causal): one
    forward with only that kernel allowed. None on a CPU."""
    if device.type != "cuda":
        return None
    from torch.nn.attention import SDPBackend, sdpa_kernel

    model = bench.lengen_model("rope", sizes["seq"], sizes=sizes).to(device)
    tokens = torch.randint(0, sizes["vocab"], (1, sizes["seq"]), device=device)
    try:
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION), torch.autocast("cuda", torch.bfloat16):
            model(tokens)
        return True
    except Exception:  # noqa: BLE001  whatever refuses the kernel, the answer is no
        return False


def measure_mfu(
    name: str,
    device: torch.device,
    warmup: int,
    steps: int,
    sizes: dict = MFU_SIZES,
    compile: bool = False,
    fused: bool | None = None,
    peaks: tuple[float, float | None] | None = None,
) -> dict:
    """Training throughput of the lengen model of ``sizes`` (bf16-mixed on GPU, fp32 on CPU)
    as model FLOPs utilisation against the data-sheet peak and a measured matmul peak
    (``peaks``: (matmul, data sheet), measured here when not given)."""
    precision = "bf16-mixed" if device.type == "cuda" else "32-true"
    lit_options = {"compile": compile, "fused": fused}
    times = bench.train_lengen(name, warmup, steps, sizes, precision, lit_options)
    step = bench.lower_quartile(times)
    tokens_per_s = sizes["batch"] * sizes["seq"] / step
    achieved = tokens_per_s * training_flops_per_token(sizes)
    if peaks is None:
        matmul = matmul_peak(device, torch.bfloat16 if device.type == "cuda" else torch.float32)
        peaks = (matmul, spec_peak(device))
    matmul, spec = peaks
    n_params = sum(p.numel() for p in bench.lengen_model(name, 16, sizes=sizes).parameters())
    memory = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None
    return {
        "pe": name,
        "sizes": sizes,
        "parameters": n_params,
        "precision": precision,
        "compile": compile,
        "fused": fused,
        "step_ms": round(1000 * step, 2),
        "tokens_per_s": round(tokens_per_s, 1),
        "model_tflops_per_s": round(achieved / 1e12, 3),
        "matmul_peak_tflops_per_s": round(matmul / 1e12, 3),
        "mfu_vs_matmul_peak": round(achieved / matmul, 4),
        "spec_peak_tflops_per_s": None if spec is None else spec / 1e12,
        "mfu": None if spec is None else round(achieved / spec, 4),
        "peak_memory_gib": None if memory is None else round(memory / 2**30, 2),
    }


def measure_rung(device: torch.device, warmup: int, steps: int, peaks, setting: dict) -> dict:
    """One rung's row; out of device memory, the rung is measured again at half the batch
    (down to 8), and its row says so."""
    sizes = setting["sizes"]
    while True:
        if device.type == "cuda":
            gc.collect()  # the failed try's model and optimiser state
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(device)
        # a compiled rung warms up longer: its first steps compile (forward and backward)
        rung_warmup = warmup + (3 if setting["compile"] else 0)
        try:
            return measure_mfu("rope", device, rung_warmup, steps, peaks=peaks,
                               **{**setting, "sizes": sizes})  # fmt: skip
        except torch.cuda.OutOfMemoryError:
            if sizes["batch"] <= 8:
                raise
            sizes = {**sizes, "batch": sizes["batch"] // 2}
            print(f"  out of memory: batch {sizes['batch']} instead", flush=True)


def ladder(device: torch.device, warmup: int, steps: int, sizes: dict = MFU_SIZES) -> dict:
    """The rungs of the module docstring, each with its MFU and its gain over the rung before."""
    matmul = matmul_peak(device, torch.bfloat16 if device.type == "cuda" else torch.float32)
    peaks = (matmul, spec_peak(device))
    batch = device_batch(device, sizes)
    settings = {
        "baseline": dict(sizes=sizes, compile=False, fused=False),
        "+batch": dict(sizes={**sizes, "batch": batch}, compile=False, fused=False),
        "+fused": dict(sizes={**sizes, "batch": batch}, compile=False, fused=True),
        "+compile": dict(sizes={**sizes, "batch": batch}, compile=True, fused=True),
    }
    rows, before = [], None
    for rung in LADDER:
        try:
            row = {"rung": rung, **measure_rung(device, warmup, steps, peaks, settings[rung])}
        except Exception as error:  # noqa: BLE001  a failed rung (a compile error) keeps the rest
            rows.append({"rung": rung, "error": repr(error)[:500], "tokens_per_s": None,
                         "mfu": None, "mfu_vs_matmul_peak": None, "gain": None})  # fmt: skip
            print(f"  mfu ladder {rung:>9}: FAILED {error!r}"[:300], flush=True)
            continue
        speed = row["tokens_per_s"]
        row["gain"] = None if before is None else round(speed / before, 3)
        before = speed
        rows.append(row)
        mfu = row["mfu"] if row["mfu"] is not None else row["mfu_vs_matmul_peak"]
        print(f"  mfu ladder {rung:>9}: batch {row['sizes']['batch']:>3}, {speed:10.0f} tok/s, "
              f"MFU {mfu:.1%}" + ("" if row["gain"] is None else f", ×{row['gain']:.2f}"),
              flush=True)  # fmt: skip
    measured = [row for row in rows if row["tokens_per_s"] is not None]
    if not measured:
        return {"rungs": rows, "device_batch": batch, "flash": flash_accepts(device, sizes),
                "best": None, "mfu": None, "target": TARGET_MFU, "met": None}  # fmt: skip
    best = max(measured, key=lambda r: r["tokens_per_s"])
    return {
        "rungs": rows,
        "device_batch": batch,
        "flash": flash_accepts(device, sizes),
        "best": best["rung"],
        "mfu": best["mfu"],
        "target": TARGET_MFU,
        "met": None if best["mfu"] is None else best["mfu"] >= TARGET_MFU,
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ladder", action="store_true", help="the four rungs (docstring)")
    parser.add_argument("--steps", type=int, default=10, help="timed steps per row")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)  # tests: CPU-sized
    args = parser.parse_args(argv)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    sizes = MFU_SIZES
    if args.tiny:
        sizes = dict(vocab=32, d_model=16, n_layers=2, n_heads=2, d_ff=48, seq=12, batch=2)
    results = {
        "machine": bench.machine(),
        "command": " ".join(["bench_mfu.py", *(argv or sys.argv[1:])]),
    }
    if args.ladder:
        results["ladder"] = ladder(device, args.warmup, args.steps, sizes)
    else:
        results["mfu"] = measure_mfu("rope", device, args.warmup, args.steps, sizes)
        print(
            f"  mfu rope: {results['mfu']['tokens_per_s']:.0f} tok/s, MFU {results['mfu']['mfu']}"
        )
    if args.json:
        bench.write_json(args.json, results)
    return results


if __name__ == "__main__":
    main()
