"""Training throughput and long-evaluation cost, lengen against its peers, in one process.

    python scripts/bench.py                       # full run (CPU: ~4 min on a quiet 2-core machine)
    python scripts/bench.py --quick --json results/bench/cpu_quick.json

Training (decoder LM: d=128, 4 layers, 4 heads, ff 512, vocab 64, seq 128, batch 32; AdamW,
gradient clipping at 1.0, fp32) for each positional encoding, three implementations:

* ``lengen``: ``DecoderOnly`` trained through the real path, ``LitModel`` + ``DataModule`` in a
  Lightning ``Trainer`` (its overhead included: logging, the LR schedule, the data stream);
* ``plain``: a minimal hand-written PyTorch model of the same sizes and loop (below, ~80 lines);
* ``x-transformers``: its ``TransformerWrapper`` + ``Decoder`` with the same sizes, with
  ``attn_flash`` off and on; the faster is reported (``--xt-both`` keeps both rows).

Throughput = tokens per step / the lower quartile of the step times after the warm-up steps
(other processes on a shared machine only ever slow steps down, in bursts: the faster steps
show the implementation; the median is kept in the JSON as ``train_step_ms_median``). Evaluation: the lengen model, batch 1,
``no_grad``, one forward pass at each length: seconds and peak memory growth
(``lengen.measure``). The ratios behind the issue's targets are printed at the end.
``--mfu`` adds the model FLOPs utilisation of a ~100M-parameter lengen model (bf16 on GPU).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from functools import partial
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

SIZES = dict(vocab=64, d_model=128, n_layers=4, n_heads=4, d_ff=512, seq=128, batch=32)
FIRST_SLICE = ["nope", "sinusoidal", "learned", "alibi", "rope"]
PEER_PES = set(FIRST_SLICE)  # the plain loop and x-transformers implement these


# -- lengen -----------------------------------------------------------------------------------
def lengen_pe(name: str, max_positions: int, train_positions: int | None = None):
    from lengen import pe
    from lengen.pe.dape import DAPE
    from lengen.pe.fox import ForgettingAttention
    from lengen.pe.path import PaTH, PaTHFoX
    from lengen.pe.pope import PoPE
    from lengen.pe.schedule import IRoPE, RNoPESWA, Schedule
    from lengen.pe.stick_breaking import StickBreaking

    classes = {
        "nope": pe.NoPE,
        "sinusoidal": pe.Sinusoidal,
        "learned": pe.Learned,
        "alibi": pe.ALiBi,
        "rope": pe.RoPE,
        "t5": pe.T5RelativeBias,
        "kerple": pe.KERPLE,
        "sandwich": pe.Sandwich,
        "fire": pe.FIRE,
        "xpos": pe.XPos,
        "cope": pe.CoPE,
        "pope": PoPE,  # q and k 2 x head_dim wide
        "dape": DAPE,  # ALiBi + MLP over [scores; bias], explicit softmax per query block
        # attention computed by the encoding (kernel path ``encoding``); causal models only
        # except FoX
        "fox": ForgettingAttention,  # SDPA with the forget-gate bias per query block
        "stick_breaking": StickBreaking,  # explicit weights per query block, no softmax
        "path": PaTH,  # blockwise Householder products, explicit softmax per query block
        "path_fox": PaTHFoX,
        # an encoding per layer (lengen.pe.schedule; SIZES' 4 layers use one period each)
        "rnope": Schedule,  # [rope, rope, rope, nope]
        "rnope_swa": RNoPESWA,  # RoPE layers in a window of 8 keys: SDPA over key slices
        "irope": IRoPE,  # RoPE layers in chunks of 8, NoPE with Llama 4's temperature
        # local attention and temperatures on one encoding
        "rope_window": partial(pe.RoPE, window=SIZES["seq"]),  # the training length
        "alibi_window": partial(pe.ALiBi, window=SIZES["seq"]),  # in the per-offset table
        "rope_ssmax": partial(pe.RoPE, ssmax=True),  # per (layer, head) s, per-query n
    }
    if name not in classes:
        raise SystemExit(f"--pes: unknown encoding {name!r}; allowed: {', '.join(classes)}")
    train_positions = train_positions or SIZES["seq"]
    return partial(classes[name], train_positions=train_positions, max_positions=max_positions)


def lengen_model(
    name: str, max_positions: int, attention: str = "auto", sizes: dict | None = None
) -> nn.Module:
    from lengen.model import DecoderOnly

    sizes = sizes or SIZES
    return DecoderOnly(
        attention=attention,
        pe=lengen_pe(name, max_positions, sizes["seq"]),
        vocab_size=sizes["vocab"],
        d_model=sizes["d_model"],
        n_layers=sizes["n_layers"],
        n_heads=sizes["n_heads"],
        d_ff=sizes["d_ff"],
    )


class RandomTokens:
    """A data source for ``lengen.lit.DataModule``: random LM batches, a function of the step."""

    def __init__(self, sizes: dict | None = None):
        self.sizes = sizes or SIZES

    def train_batches(self, start_step: int = 0):
        step = start_step
        vocab, batch, seq = self.sizes["vocab"], self.sizes["batch"], self.sizes["seq"]
        while True:
            generator = torch.Generator().manual_seed(step)
            tokens = torch.randint(0, vocab, (batch, seq + 1), generator=generator)
            yield {"inputs": {"tokens": tokens[:, :-1]}, "targets": tokens[:, 1:]}
            step += 1

    def val_batches(self):
        return []


def train_lengen(
    name: str, warmup: int, steps: int, sizes: dict | None = None, precision: str = "32-true"
) -> list[float]:
    """Per-step seconds of ``steps`` steps after ``warmup``, through the Lightning Trainer."""
    import pytorch_lightning as pl

    from lengen.lit import DataModule, LitModel, quiet_known_noise

    quiet_known_noise()
    times: list[float] = []

    class StepTimer(pl.Callback):
        def __init__(self):
            self.last = None

        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            now = time.perf_counter()
            if self.last is not None and trainer.global_step > warmup:
                times.append(now - self.last)
            self.last = now

        def on_train_end(self, trainer, pl_module):
            times.append(time.perf_counter() - self.last)

    torch.manual_seed(0)
    lit = LitModel(
        lengen_model(name, (sizes or SIZES)["seq"], sizes=sizes),
        {"lr": 1e-3, "weight_decay": 0.1, "warmup_steps": 10},
        max_steps=warmup + steps,
    )
    trainer = pl.Trainer(
        accelerator="auto",
        devices=1,
        max_steps=warmup + steps,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        limit_val_batches=0,
        num_sanity_val_steps=0,
        gradient_clip_val=1.0,
        precision=precision,
        callbacks=[StepTimer()],
    )
    trainer.fit(lit, datamodule=DataModule(RandomTokens(sizes)))
    return times[-steps:]


# -- model FLOPs utilisation ------------------------------------------------------------------
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


def measure_mfu(
    name: str, device: torch.device, warmup: int, steps: int, sizes: dict = MFU_SIZES
) -> dict:
    """Training throughput of the lengen model of ``sizes`` (bf16-mixed on GPU, fp32 on CPU)
    as model FLOPs utilisation against the data-sheet peak and a measured matmul peak."""
    precision = "bf16-mixed" if device.type == "cuda" else "32-true"
    step = lower_quartile(train_lengen(name, warmup, steps, sizes, precision))
    tokens_per_s = sizes["batch"] * sizes["seq"] / step
    achieved = tokens_per_s * training_flops_per_token(sizes)
    matmul = matmul_peak(device, torch.bfloat16 if device.type == "cuda" else torch.float32)
    spec = spec_peak(device)
    n_params = sum(p.numel() for p in lengen_model(name, sizes["seq"], sizes=sizes).parameters())
    return {
        "pe": name,
        "sizes": sizes,
        "parameters": n_params,
        "precision": precision,
        "tokens_per_s": round(tokens_per_s, 1),
        "model_tflops_per_s": round(achieved / 1e12, 3),
        "matmul_peak_tflops_per_s": round(matmul / 1e12, 3),
        "mfu_vs_matmul_peak": round(achieved / matmul, 4),
        "spec_peak_tflops_per_s": None if spec is None else spec / 1e12,
        "mfu": None if spec is None else round(achieved / spec, 4),
    }


# -- the hand-written loop --------------------------------------------------------------------
class PlainBlock(nn.Module):
    def __init__(self, d, h, ff):
        super().__init__()
        self.h = h
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, ff), nn.GELU(), nn.Linear(ff, d))

    def forward(self, x, rope=None, bias=None):
        B, T, D = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(B, T, 3, self.h, D // self.h).permute(2, 0, 3, 1, 4)
        if rope is not None:  # (B, H, T, hd), half-split rotation
            cos, sin = rope
            q, k = (torch.cat([-t[..., t.shape[-1] // 2 :], t[..., : t.shape[-1] // 2]], -1)
                    * sin + t * cos for t in (q, k))  # fmt: skip
        if bias is None:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
        x = x + self.proj(y.transpose(1, 2).reshape(B, T, D))
        return x + self.mlp(self.ln2(x))


class PlainLM(nn.Module):
    """Pre-LN decoder, SDPA; the PE as the simplest code that does it (caches per length)."""

    def __init__(self, pe: str, vocab, d_model, n_layers, n_heads, d_ff, max_len):
        super().__init__()
        self.pe, self.h = pe, n_heads
        self.tok = nn.Embedding(vocab, d_model)
        self.pos = nn.Embedding(max_len, d_model) if pe == "learned" else None
        self.blocks = nn.ModuleList(PlainBlock(d_model, n_heads, d_ff) for _ in range(n_layers))
        self.ln, self.head = nn.LayerNorm(d_model), nn.Linear(d_model, vocab, bias=False)
        self.cache = {}

    def extras(self, T, device):
        if T not in self.cache:
            d, hd = self.tok.embedding_dim, self.tok.embedding_dim // self.h
            pos = torch.arange(T, device=device, dtype=torch.float32)
            sinusoid = rope = bias = None
            if self.pe == "sinusoidal":
                freq = 10000.0 ** (-torch.arange(0, d, 2, device=device) / d)
                angle = pos[:, None] * freq  # (T, d/2)
                sinusoid = torch.stack([angle.sin(), angle.cos()], -1).flatten(1)  # (T, d)
            if self.pe == "rope":
                freq = 10000.0 ** (-torch.arange(0, hd, 2, device=device) / hd)
                angle = torch.cat([pos[:, None] * freq] * 2, -1)  # (T, hd)
                rope = (angle.cos(), angle.sin())
            if self.pe == "alibi":
                slopes = 2.0 ** (-8.0 * torch.arange(1, self.h + 1, device=device) / self.h)
                distance = (pos[:, None] - pos[None, :]).clamp(min=0)
                bias = -slopes[:, None, None] * distance  # (H, T, T)
                bias = bias.masked_fill(pos[None, :] > pos[:, None], float("-inf"))[None]
            self.cache[T] = (sinusoid, rope, bias)
        return self.cache[T]

    def forward(self, tokens):
        B, T = tokens.shape
        sinusoid, rope, bias = self.extras(T, tokens.device)
        x = self.tok(tokens)
        if self.pos is not None:
            x = x + self.pos(torch.arange(T, device=tokens.device))
        if sinusoid is not None:
            x = x + sinusoid
        for block in self.blocks:
            x = block(x, rope, bias)
        return self.head(self.ln(x))


def timed_loop(model: nn.Module, forward, warmup: int, steps: int, device) -> list[float]:
    """AdamW + clipping at 1.0 on random batches; per-step seconds after the warm-up."""
    model.to(device).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1)
    times = []
    for step in range(warmup + steps):
        start = time.perf_counter()
        generator = torch.Generator().manual_seed(step)
        tokens = torch.randint(
            0, SIZES["vocab"], (SIZES["batch"], SIZES["seq"] + 1), generator=generator
        ).to(device)
        logits = forward(model, tokens[:, :-1])
        loss = F.cross_entropy(logits.flatten(0, 1), tokens[:, 1:].flatten())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        if step >= warmup:
            times.append(time.perf_counter() - start)
    return times


def train_plain(name: str, warmup: int, steps: int, device) -> list[float]:
    torch.manual_seed(0)
    model = PlainLM(
        name, SIZES["vocab"], SIZES["d_model"], SIZES["n_layers"], SIZES["n_heads"],
        SIZES["d_ff"], SIZES["seq"],
    )  # fmt: skip
    return timed_loop(model, lambda m, t: m(t), warmup, steps, device)


# -- x-transformers ---------------------------------------------------------------------------
def xt_model(name: str, flash: bool) -> nn.Module:
    """x-transformers at the same sizes. Differences from lengen (noted in the docs): no bias in
    its q/k/v projections; its sinusoidal embedding has a learned scale
    (``scaled_sinu_pos_emb``); ALiBi and RoPE must switch the learned absolute embedding off
    themselves (``use_abs_pos_emb=False``), or it stays on."""
    from x_transformers import Decoder, TransformerWrapper

    attn = dict(
        dim=SIZES["d_model"], depth=SIZES["n_layers"], heads=SIZES["n_heads"],
        attn_dim_head=SIZES["d_model"] // SIZES["n_heads"], ff_mult=SIZES["d_ff"] // SIZES["d_model"],
        attn_flash=flash,
    )  # fmt: skip
    wrapper = dict(num_tokens=SIZES["vocab"], max_seq_len=SIZES["seq"], use_abs_pos_emb=False)
    if name == "rope":
        attn.update(rotary_pos_emb=True, rotary_emb_dim=SIZES["d_model"] // SIZES["n_heads"])
    elif name == "alibi":
        attn.update(alibi_pos_bias=True)
    elif name == "learned":
        wrapper.update(use_abs_pos_emb=True)
    elif name == "sinusoidal":
        wrapper.update(use_abs_pos_emb=True, scaled_sinu_pos_emb=True)
    return TransformerWrapper(attn_layers=Decoder(**attn), **wrapper)


def train_xt(name: str, flash: bool, warmup: int, steps: int, device) -> list[float]:
    torch.manual_seed(0)
    return timed_loop(xt_model(name, flash), lambda m, t: m(t), warmup, steps, device)


# -- evaluation -------------------------------------------------------------------------------
def eval_lengen(
    name: str, lengths: list[int], device, repeats: int, attention: str = "auto"
) -> list[dict]:
    from lengen.measure import measure

    torch.manual_seed(0)
    model = lengen_model(name, max(lengths), attention).to(device).eval()
    if attention == "flex" and not model.stack.pe.bias_is_relative:
        return []  # FlexAttention serves relative biases only: these rows would repeat auto's
    rows = []
    with torch.no_grad():
        model(torch.randint(0, SIZES["vocab"], (1, min(lengths)), device=device))  # warm-up
        for length in lengths:
            tokens = torch.randint(0, SIZES["vocab"], (1, length), device=device)
            if attention == "flex":
                started = time.perf_counter()
                model(tokens)  # FlexAttention compiles per new length at first: untimed
                print(f"  eval {name:>10} {length:>6}: flex warm-up "
                      f"{time.perf_counter() - started:.1f} s", flush=True)  # fmt: skip
            best = None
            for _ in range(repeats):
                with measure(device) as cost:
                    model(tokens)
                if best is None or cost.seconds < best.seconds:
                    best = cost
            row = {"impl": "lengen", "pe": name, "attention": attention, "length": length}
            row.update(best.as_row())
            rows.append(row)
            print(
                f"  eval {name:>10} {length:>6}: {row['seconds']:8.3f} s "
                f"{row['peak_mem_mb']:8.1f} MiB",
                flush=True,
            )
    return rows


def lower_quartile(times: list[float]) -> float:
    return statistics.quantiles(times, n=4)[0] if len(times) > 1 else times[0]


# -- report -----------------------------------------------------------------------------------
def machine() -> dict:
    info = {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "threads": torch.get_num_threads(),
        "cpus": os.cpu_count(),
        "device": "cpu",
    }
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
        info["load_average"] = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        pass
    if torch.cuda.is_available():
        info["device"] = "cuda"
        info["gpu"] = torch.cuda.get_device_name()
    return info


def targets(results: dict, pes: list[str]) -> list[str]:
    """The issue's targets as lines with their measured ratios."""
    lines = []
    speeds = results["train_tokens_per_s"]
    for name in pes:
        ours = speeds.get(f"lengen/{name}")
        for peer, goal in (("x-transformers", 1.1), ("plain", 0.95)):
            theirs = speeds.get(f"{peer}/{name}")
            if ours and theirs:
                ratio = ours / theirs
                mark = "ok" if ratio >= goal else "MISSED"
                lines.append(f"train {name:>10}: lengen / {peer} = {ratio:.2f} (>= {goal}) {mark}")
    # RoPE has no bias: its rows are SDPA whatever the kernel option, the auto one is the base
    evals = {(r["pe"], r.get("attention", "auto"), r["length"]): r for r in results["eval"]}
    rope = evals.get(("rope", "auto", 8192))
    for (name, kernel, length), row in evals.items():
        if name == "rope" or rope is None or length != 8192:
            continue
        label = name if kernel == "auto" else f"{name}/{kernel}"
        for key in ("seconds", "peak_mem_mb"):
            ratio = row[key] / max(rope[key], 1e-9)
            if key == "peak_mem_mb":  # tiny peaks are noise: compare with a 16 MiB floor
                ratio = max(row[key], 16) / max(rope[key], 16)
            mark = "ok" if ratio <= 1.5 else "MISSED"
            lines.append(
                f"eval {label:>10} @{length}: {key} / rope's = {ratio:.2f} (<= 1.5) {mark}"
            )
    return lines


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps and lengths (~5 min)")
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--pes", default=",".join(FIRST_SLICE), help="comma-separated")
    parser.add_argument("--lengths", help="comma-separated eval lengths (default by device)")
    parser.add_argument("--impls", default="lengen,plain,x-transformers", help="training rows")
    parser.add_argument("--steps", type=int, help="timed training steps per row")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    parser.add_argument("--xt-both", action="store_true", help="keep both attn_flash rows")
    parser.add_argument("--threads", type=int, help="torch threads (default: torch's)")
    parser.add_argument(
        "--attention",
        default="auto",
        help="comma-separated model.attention kernels for the eval rows (auto, flex)",
    )
    parser.add_argument(
        "--mfu",
        action="store_true",
        help="also train a ~100M model (bf16 on GPU) and report its model FLOPs utilisation",
    )
    parser.add_argument("--no-train", action="store_true")
    parser.add_argument("--no-eval", action="store_true")
    args = parser.parse_args(argv)

    kernels = [k for k in args.attention.split(",") if k]
    for kernel in kernels:
        if kernel not in ("auto", "flex"):
            raise SystemExit(f"--attention: unknown kernel {kernel!r}; allowed: auto, flex")
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    pes = [p for p in args.pes.split(",") if p]
    impls = [i for i in args.impls.split(",") if i]
    steps = args.steps or (10 if args.quick else 30)
    if args.lengths:
        lengths = sorted(int(x) for x in args.lengths.split(","))
    elif device.type == "cuda":
        lengths = [512, 2048, 8192, 32768] if args.quick else [512, 2048, 8192, 16384, 32768, 65536]
    else:
        lengths = [512, 2048, 8192] if args.quick else [512, 1024, 2048, 4096, 8192, 16384]
    results = {
        "machine": machine(),
        "command": " ".join([Path(sys.argv[0]).name, *(argv or sys.argv[1:])]),
        "sizes": SIZES,
        "train_tokens_per_s": {},
        "train_step_ms": {},
        "train_step_ms_median": {},
        "eval": [],
        "skipped": [],
    }
    print(f"machine: {json.dumps(results['machine'])}", flush=True)
    tokens_per_step = SIZES["batch"] * SIZES["seq"]

    def record(key: str, times: list[float]) -> None:
        step = lower_quartile(times)
        results["train_tokens_per_s"][key] = round(tokens_per_step / step, 1)
        results["train_step_ms"][key] = round(1000 * step, 2)
        results["train_step_ms_median"][key] = round(1000 * statistics.median(times), 2)
        print(
            f"  train {key:>26}: {tokens_per_step / step:9.0f} tok/s "
            f"(median step {1000 * statistics.median(times):.0f} ms)",
            flush=True,
        )

    has_xt = True
    try:
        import x_transformers  # noqa: F401
    except ImportError:
        has_xt = False
        if "x-transformers" in impls:
            message = "x-transformers is not installed (pip install -e '.[bench]'): rows skipped"
            results["skipped"].append(message)
            print(message)
    for name in [] if args.no_train else pes:
        if "lengen" in impls:
            record(f"lengen/{name}", train_lengen(name, args.warmup, steps))
        if name not in PEER_PES:
            continue
        if "plain" in impls:
            record(f"plain/{name}", train_plain(name, args.warmup, steps, device))
        if "x-transformers" in impls and has_xt:
            rows = {}
            for flash in (False, True):
                rows[flash] = train_xt(name, flash, args.warmup, steps, device)
                if args.xt_both:
                    record(f"x-transformers-flash{int(flash)}/{name}", rows[flash])
            fastest = min(rows.values(), key=lower_quartile)
            record(f"x-transformers/{name}", fastest)
    for name in [] if args.no_eval else pes:
        for kernel in kernels:
            repeats = 1 if args.quick else 2
            results["eval"].extend(eval_lengen(name, lengths, device, repeats, kernel))
    if args.mfu:
        row = measure_mfu("rope", device, args.warmup, steps)
        results["mfu"] = row
        print(
            f"  mfu  rope, {row['parameters'] / 1e6:.0f}M parameters, {row['precision']}: "
            f"{row['tokens_per_s']:.0f} tok/s, {row['model_tflops_per_s']:.2f} TFLOP/s = "
            f"{row['mfu_vs_matmul_peak']:.1%} of a measured matmul peak"
            + ("" if row["mfu"] is None else f", MFU {row['mfu']:.1%} of the data sheet"),
            flush=True,
        )
    results["machine"]["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    results["targets"] = targets(results, pes)
    print("\n".join(["targets:", *results["targets"]]))
    if args.json:
        from lengen.atomic import atomic_write

        atomic_write(args.json, json.dumps(results, indent=1) + "\n")
        print(f"wrote {args.json}")
    return results


if __name__ == "__main__":
    main()
