"""Model options against RoPE attention: training step time, and what decoding keeps.

    python scripts/bench_options.py --steps 100 --json results/bench/cpu_options.json
    python scripts/bench_options.py --rows gla,lstm --steps 20          # some rows only
    python scripts/bench_options.py --list                              # the rows

Issues #48 and #49 ask, per sequence mixer (``model.mixer``), hybrid (``model.mixers``), block
option (``model.attn_gate``, ``attn_sinks``, ``kv_bias``, ``qk_norm``, ``attn_fn``,
``model.canon``) and looped depth (``model.loops``), for a training step within 2× RoPE
attention's at the default size, and for decoding memory constant in length for the recurrent
mixers. Two measurements per row:

* **step time, interleaved**: the row's model and its baseline (the same config without the
  option: RoPE attention, same depth) are built from ``configs/`` at the default experiment's
  size (decoder, d_model 128, 4 heads, d_ff 512, 2 layers unless the row says otherwise, copy's
  vocabulary) and trained in one process, one step each in turn on the same random batch
  (``--batch`` × ``--tokens``, default 64 × 33: the default experiment's batch and its longest
  instance, 2·16 + 1), each with its own AdamW. Every pair gives a ratio (row / baseline); the
  report is the median and interquartile range of those ratios, which a burst of load in one
  step cannot move. Only the model's forward, backward and optimiser step are timed: Lightning
  and the data stream cost both sides alike and are left out.
* **long-evaluation memory** (``--memory-lengths``, default none): one batch-1 ``no_grad``
  forward pass at L tokens in a fresh process per (row, repeat), the RoPE baseline included
  (row ``rope``), as ``scripts/bench_memory.py`` measures it: the peak resident growth of the
  pass (``lengen.measure``) and the peak of torch's live tensor bytes (the profiler's allocation
  events); with the evaluation-only rows (``EVAL_ROWS``: Self-Extend, ReRoPE, DCA). Memory, not
  time: it may be measured on a loaded machine.
* **decoding state** (``--decode-lengths``, decoders only): the bytes of every tensor the
  decoding cache's layers hold after a prompt of L tokens was fed (``model.new_cache`` then
  ``model.decode``), summed over distinct storages (the cache's own (L,) positions left out): attention keeps keys and values (linear in
  L), a recurrent mixer a state of fixed size. Counted, not timed: load does not change it.

Timed numbers need a quiet machine (nothing else running); the JSON records the load average.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

#: name -> (the row's overrides, its baseline's overrides); the default experiment otherwise.
#: A stack with no attention layer takes pe=nope (lengen refuses an attention encoding there).
ROWS: dict[str, tuple[list[str], list[str]]] = {
    "gla": (["model.mixer=gla", "pe=nope"], []),
    "deltanet": (["model.mixer=deltanet", "pe=nope"], []),
    "gated_deltanet": (["model.mixer=gated_deltanet", "pe=nope"], []),
    "lstm": (["model.mixer=lstm", "pe=nope"], []),
    # the chunked mixers at smaller chunks than the yamls' 64 (which, as 32, is one chunk of the
    # 32 tokens a 64 × 33 step feeds): more sequential chunks of smaller C² products (#49)
    **{
        f"{mixer}_chunk{size}": (
            [f"model.mixer={{mixer:{mixer},chunk_size:{size}}}", "pe=nope"],
            [],
        )
        for mixer in ("gla", "deltanet", "gated_deltanet")
        for size in (8, 16)
    },
    "hybrid_3to1": (
        ["model.mixers=[gla,gla,gla,attention]", "model.n_layers=4"],
        ["model.n_layers=4"],
    ),
    "attn_gate_headwise": (["model.attn_gate=headwise"], []),
    "attn_gate_elementwise": (["model.attn_gate=elementwise"], []),
    "attn_sinks": (["model.attn_sinks=true"], []),
    "kv_bias": (["model.kv_bias=true"], []),
    "qk_norm": (["model.qk_norm=true"], []),
    "sigmoid": (["model.attn_fn=sigmoid"], []),
    "canon_abcd": (["model.canon=ABCD"], []),
    "loops_2": (["model.loops=2"], []),
    "fope": (["pe=fope"], []),
    "string": (["pe=string"], []),
    "comrope": (["pe=comrope"], []),
    "liere": (["pe=liere"], []),
    "rope_rfs": (["pe=rope_rfs"], []),
    "rope_randomized_yarn": (["pe=rope_randomized_yarn"], []),
}
#: evaluation-only rows (RoPE's training-free arms, ``pe.extension``): long-evaluation memory
#: only, sized for 8x the default training length (16 -> 128 positions seen)
EVAL_ROWS: dict[str, list[str]] = {
    "self_extend": [
        "pe.extension=self_extend",
        "pe.self_extend_group=8",
        "pe.self_extend_window=32",
    ],
    "rerope": ["pe.extension=rerope", "pe.rerope_window=32"],
    "dual_chunk": ["pe.extension=dual_chunk"],
}
#: rows whose decoding state is counted by default: the recurrent mixers and a hybrid
DECODE_ROWS = ("gla", "deltanet", "gated_deltanet", "lstm", "hybrid_3to1")
BASE = ["pe=rope", "model=decoder", "data=copy"]


def compose(overrides: list[str]):
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base="1.3"):
        return hydra_compose(config_name="train", overrides=[*BASE, *overrides])


def build_model(overrides: list[str], seed: int = 0):
    """The model lengen trains for ``overrides`` -> (model, vocabulary size)."""
    import torch

    from lengen.build import build

    cfg = compose(overrides)
    cfg.seed = seed
    data, model, _ = build(cfg)
    torch.manual_seed(seed)
    return model, data.vocab_size


def train_step(model, optimizer, tokens) -> float:
    """One plain step (forward, loss, backward, AdamW) -> its seconds."""
    import torch

    started = time.perf_counter()
    logits = model(tokens[:, :-1])  # (B, T-1, V)
    loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), tokens[:, 1:].flatten())
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    return time.perf_counter() - started


def paired_ratios(times: list[float], baseline: list[float]) -> dict:
    """Per-step times of a row and its baseline -> the ratio row / baseline: median, IQR."""
    ratios = [t / max(b, 1e-12) for t, b in zip(times, baseline, strict=True)]
    q1, median, q3 = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else ratios * 3
    return {
        "pairs": len(ratios),
        "ratio_median": round(statistics.median(ratios), 3),
        "ratio_iqr": [round(q1, 3), round(q3, 3)],
        "step_ms_median": round(1000 * statistics.median(times), 2),
        "baseline_step_ms_median": round(1000 * statistics.median(baseline), 2),
    }


def time_row(name: str, steps: int, warmup: int, batch: int, tokens: int) -> dict:
    import torch

    overrides, baseline_overrides = ROWS[name]
    model, vocab = build_model(overrides)
    baseline, _ = build_model(baseline_overrides)
    optimizers = [torch.optim.AdamW(m.parameters(), lr=1e-3) for m in (model, baseline)]
    generator = torch.Generator().manual_seed(0)
    times: list[float] = []
    base_times: list[float] = []
    for step in range(warmup + steps):
        sample = torch.randint(0, vocab, (batch, tokens), generator=generator)
        # alternate which goes first, so that neither always finds the caches the other warmed
        order = [(model, 0), (baseline, 1)] if step % 2 == 0 else [(baseline, 1), (model, 0)]
        seconds = [0.0, 0.0]
        for which, index in order:
            seconds[index] = train_step(which, optimizers[index], sample)
        if step >= warmup:
            times.append(seconds[0])
            base_times.append(seconds[1])
    return {"row": name, "overrides": overrides, "baseline": ["pe=rope", *baseline_overrides]} | (
        paired_ratios(times, base_times)
    )


def tensor_bytes(obj, seen: set | None = None, depth: int = 0) -> int:
    """Bytes of the distinct tensor storages reachable from ``obj`` (attributes, lists, dicts)."""
    import torch

    seen = set() if seen is None else seen
    if depth > 8 or id(obj) in seen:
        return 0
    seen.add(id(obj))
    if isinstance(obj, torch.Tensor):
        key = ("storage", obj.untyped_storage().data_ptr())
        if key in seen:
            return 0
        seen.add(key)
        return obj.untyped_storage().nbytes()
    if isinstance(obj, (list, tuple, set)):
        return sum(tensor_bytes(x, seen, depth + 1) for x in obj)
    if isinstance(obj, dict):
        return sum(tensor_bytes(x, seen, depth + 1) for x in obj.values())
    if isinstance(obj, torch.nn.Module):  # the encoding a cache refers to: not its state
        return 0
    if hasattr(obj, "__dict__"):
        return sum(tensor_bytes(x, seen, depth + 1) for x in vars(obj).values())
    if hasattr(obj, "__slots__"):
        return sum(tensor_bytes(getattr(obj, s, None), seen, depth + 1) for s in obj.__slots__)
    return 0


def decode_state(overrides: list[str], length: int) -> int:
    """Bytes the decoding cache holds after a prompt of ``length`` tokens (batch 1)."""
    import torch

    model, vocab = build_model(overrides)
    model.eval()
    prompt = torch.randint(0, vocab, (1, length), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        cache = model.new_cache(length + 1)
        model.decode(prompt, cache)
    return tensor_bytes(cache.layers)  # the layers' states: not the (N,) positions it keeps


def memory_child(name: str, length: int) -> dict:
    """One long-evaluation measurement in this (fresh) process -> its row."""
    import torch

    from lengen.measure import measure

    sys.path.insert(0, str(ROOT / "scripts"))
    from bench_memory import live_peak_bytes

    overrides = [] if name == "rope" else EVAL_ROWS.get(name) or ROWS[name][0]
    model, vocab = build_model(overrides)
    model.eval()
    tokens = torch.randint(0, vocab, (1, length), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        model(tokens[:, :128])  # kernels and thread pool loaded
        with measure("cpu") as cost:
            model(tokens)
        live = live_peak_bytes(lambda: model(tokens))
    return {"row": name, "length": length, "rss_mib": round(cost.peak_mem_mb, 1),
            "live_mib": round(live / (1 << 20), 1)}  # fmt: skip


def memory_rows(names: list[str], lengths: list[int], repeats: int, threads: int) -> list:
    """Fresh processes per (row, length, repeat) -> the rows and the medians against RoPE's."""
    import subprocess

    rows = []
    for name in ["rope", *names]:
        for length in lengths:
            for _ in range(repeats):
                done = subprocess.run(
                    [sys.executable, __file__, "--memory-child", name, str(length),
                     "--threads", str(threads)],
                    capture_output=True, text=True, check=False,
                )  # fmt: skip
                if done.returncode != 0:
                    rows.append({"row": name, "length": length, "error": done.stderr[-400:]})
                    print(f"{name:>22} {length}: failed: {done.stderr.strip()[-200:]}", flush=True)
                    continue
                rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
                print(f"{name:>22} {length}: rss +{rows[-1]['rss_mib']} MiB, "
                      f"live {rows[-1]['live_mib']} MiB", flush=True)  # fmt: skip
    summary = []
    for name in ["rope", *names]:
        for length in lengths:
            mine = [
                r for r in rows if r["row"] == name and r["length"] == length and "error" not in r
            ]
            if not mine:
                continue
            entry = {"row": name, "length": length, "repeats": len(mine)}
            for field in ("rss_mib", "live_mib"):
                entry[field] = statistics.median(r[field] for r in mine)
            summary.append(entry)
    for entry in summary:
        rope = next(
            (e for e in summary if e["row"] == "rope" and e["length"] == entry["length"]), None
        )
        for field in ("rss_mib", "live_mib"):
            if rope and rope[field] > 0:
                entry[f"{field}_vs_rope"] = round(entry[field] / rope[field], 2)
    return [rows, summary]


def decode_rows(names: list[str], lengths: list[int]) -> list[dict]:
    rows = []
    for name in ["attention", *names]:
        overrides = [] if name == "attention" else ROWS[name][0]
        row = {"row": name, "overrides": overrides, "bytes": {}}
        for length in lengths:
            row["bytes"][str(length)] = decode_state(overrides, length)
        counts = list(row["bytes"].values())
        row["growth_first_to_last"] = round(counts[-1] / max(counts[0], 1), 3)
        rows.append(row)
        print(f"{name:>22}: decoding state " + ", ".join(
            f"{n}: {b / 1024:.0f} KiB" for n, b in row["bytes"].items()
        ), flush=True)  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", default=",".join(ROWS), help="comma-separated rows (--list)")
    parser.add_argument("--list", action="store_true", help="print the rows and exit")
    parser.add_argument("--steps", type=int, default=100, help="timed pairs of steps per row")
    parser.add_argument("--warmup", type=int, default=5, help="untimed pairs first")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--tokens", type=int, default=33, help="tokens per training sequence")
    parser.add_argument("--threads", type=int, default=2, help="torch threads")
    parser.add_argument(
        "--decode-lengths", default="1024,2048,4096,8192",
        help="prompt lengths for the decoding state; empty: none",
    )  # fmt: skip
    parser.add_argument(
        "--memory-lengths", default="", help="long-evaluation memory at these lengths; empty: none"
    )
    parser.add_argument("--memory-repeats", type=int, default=2, help="fresh processes per row")
    parser.add_argument("--eval-rows", default=",".join(EVAL_ROWS),
                        help="evaluation-only rows for the memory")  # fmt: skip
    parser.add_argument("--memory-child", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--no-train", action="store_true", help="no step times")
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args(argv)
    if args.memory_child:
        import torch

        torch.set_num_threads(args.threads)
        row = memory_child(args.memory_child[0], int(args.memory_child[1]))
        print(json.dumps(row), flush=True)
        return row
    if args.list:
        for name, (overrides, baseline) in ROWS.items():
            print(f"{name:>22}: {' '.join(overrides)}  (against pe=rope {' '.join(baseline)})")
        return {}
    names = [n for n in args.rows.split(",") if n]
    eval_names = [n for n in args.eval_rows.split(",") if n]
    unknown = [n for n in names if n not in ROWS] + [n for n in eval_names if n not in EVAL_ROWS]
    if unknown:
        raise SystemExit(
            f"--rows / --eval-rows: unknown {', '.join(unknown)}; allowed: "
            f"{', '.join(ROWS)} / {', '.join(EVAL_ROWS)}"
        )
    if args.steps < 1 or args.warmup < 0 or args.batch < 1 or args.tokens < 2 or args.threads < 1:
        raise SystemExit("--steps, --batch, --threads >= 1, --warmup >= 0, --tokens >= 2")
    lengths = [int(n) for n in args.decode_lengths.split(",") if n]
    memory_lengths = [int(n) for n in args.memory_lengths.split(",") if n]
    import os

    import torch

    torch.set_num_threads(args.threads)
    result: dict = {
        "command": "python scripts/bench_options.py "
        + " ".join(argv if argv is not None else sys.argv[1:]),
        "machine": {
            "torch": torch.__version__,
            "threads": args.threads,
            "cpus": os.cpu_count(),
            "load_average_start": [round(x, 2) for x in os.getloadavg()],
        },
        "sizes": {"batch": args.batch, "tokens": args.tokens, "base": BASE},
        "train": [],
        "memory": [],
        "memory_summary": [],
        "decode": [],
    }

    def save() -> None:
        if args.json:  # after every row: an interrupted run keeps what it measured
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(result, indent=1) + "\n")

    if not args.no_train:
        for name in names:
            row = time_row(name, args.steps, args.warmup, args.batch, args.tokens)
            result["train"].append(row)
            print(f"{name:>22}: step {row['step_ms_median']:7.2f} ms vs RoPE "
                  f"{row['baseline_step_ms_median']:7.2f} ms: {row['ratio_median']:.2f}x "
                  f"(IQR {row['ratio_iqr'][0]:.2f}-{row['ratio_iqr'][1]:.2f})", flush=True)  # fmt: skip
            save()
    if memory_lengths:
        result["memory"], result["memory_summary"] = memory_rows(
            [*names, *eval_names], memory_lengths, args.memory_repeats, args.threads
        )
        save()
    if lengths:
        result["decode"] = decode_rows([n for n in names if n in DECODE_ROWS], lengths)
    result["machine"]["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    save()
    return result


if __name__ == "__main__":
    main()
