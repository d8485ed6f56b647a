"""Peak memory of long evaluation, one fresh process per (encoding, length, repeat).

    python scripts/bench_memory.py [--pes rope,fox,stick_breaking,path,path_fox,dape]
        [--lengths 8192] [--repeats 3] [--threads 2] [--json results/bench/cpu_memory.json]

Each measurement runs in a new Python process (``--child``), so no earlier work has left freed
heap behind: the bench model of ``scripts/bench.py`` (d_model 128, 4 layers, 4 heads, ff 512,
vocab 64; seed 0) evaluates one batch-1 sequence under ``no_grad`` after a 128-token warm-up,
with the default allocator (nothing here sets one). Two figures per process:

* ``rss_mib``: the peak resident-set growth of the forward pass (``lengen.measure``: heap
  trimmed, the kernel's peak reset, then ``VmHWM`` − ``VmRSS`` before), i.e. what the operating
  system had to give, freed-but-kept heap included;
* ``live_mib``: the peak of torch's live tensor bytes during a second forward pass of the same
  sequence, from the profiler's allocation events (``profile_memory``): what the algorithm holds
  at once, whatever the allocator does with it.

The JSON holds every repeat's row, the per-(encoding, length) medians and ranges, the ratios to
RoPE's medians at the same length, the machine, threads and repeats. Memory is not timing: it
may be measured on a loaded machine (no process here competes for the same memory).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parent
DEFAULT_PES = "rope,fox,stick_breaking,path,path_fox,dape"
WARMUP_LENGTH = 128
MIB = 1 << 20


def live_peak_bytes(forward) -> int:
    """Run ``forward()`` under the profiler -> the peak of live CPU tensor bytes it reached,
    above what was live when it started (allocation events summed in time order)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        forward()
    events = sorted(
        (event.start_ns(), event.nbytes())
        for event in prof.profiler.kineto_results.events()
        if event.name() == "[memory]" and str(event.device_type()).endswith("CPU")
    )
    live = peak = 0
    for _, nbytes in events:
        live += nbytes
        peak = max(peak, live)
    return peak


def child(pe: str, length: int, threads: int) -> dict:
    """One measurement in this (fresh) process -> its row."""
    import torch

    sys.path.insert(0, str(SCRIPTS))
    import bench  # scripts/bench.py: the bench model's sizes and encodings
    from lengen.measure import measure

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = bench.lengen_model(pe, length).eval()
    vocab = bench.SIZES["vocab"]
    tokens = torch.randint(0, vocab, (1, length))
    with torch.no_grad():
        model(torch.randint(0, vocab, (1, WARMUP_LENGTH)))  # kernels and thread pool loaded
        with measure("cpu") as cost:
            model(tokens)
        live = live_peak_bytes(lambda: model(tokens))
    return {
        "pe": pe,
        "length": length,
        "rss_mib": round(cost.peak_mem_mb, 1),
        "memory_source": cost.memory_source,
        "live_mib": round(live / MIB, 1),
        "seconds": round(cost.seconds, 3),  # shared machine: not a timing result
    }


def run_child(pe: str, length: int, threads: int) -> dict:
    command = [sys.executable, str(Path(__file__).resolve()), "--child", pe, str(length)]
    command += ["--threads", str(threads)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"bench_memory: {pe} at {length} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def summarise(rows: list[dict]) -> list[dict]:
    """Median and range per (encoding, length), with the ratios to RoPE's medians."""
    keys = sorted({(r["pe"], r["length"]) for r in rows}, key=lambda k: (k[1], k[0] != "rope"))
    summary = []
    for pe, length in keys:
        mine = [r for r in rows if (r["pe"], r["length"]) == (pe, length)]
        entry = {"pe": pe, "length": length, "repeats": len(mine)}
        for field in ("rss_mib", "live_mib"):
            values = [r[field] for r in mine]
            entry[field] = statistics.median(values)
            entry[f"{field}_range"] = [min(values), max(values)]
        summary.append(entry)
    for entry in summary:
        rope = next(
            (s for s in summary if s["pe"] == "rope" and s["length"] == entry["length"]), None
        )
        for field in ("rss_mib", "live_mib"):
            if rope and rope[field] > 0:
                entry[f"{field}_vs_rope"] = round(entry[field] / rope[field], 2)
    return summary


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pes", default=DEFAULT_PES, help="comma-separated encodings (bench.py's)")
    parser.add_argument("--lengths", default="8192", help="comma-separated sequence lengths")
    parser.add_argument("--repeats", type=int, default=3, help="fresh processes per measurement")
    parser.add_argument("--threads", type=int, default=2, help="torch threads in each process")
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    parser.add_argument("--child", nargs=2, metavar=("PE", "LENGTH"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        row = child(args.child[0], int(args.child[1]), args.threads)
        print(json.dumps(row), flush=True)
        return row
    if args.repeats < 1 or args.threads < 1:
        raise SystemExit("--repeats and --threads: at least 1")
    sys.path.insert(0, str(SCRIPTS))
    import bench

    pes = [p for p in args.pes.split(",") if p]
    lengths = [int(n) for n in args.lengths.split(",") if n]
    machine = bench.machine() | {"threads": args.threads}
    command = "python scripts/bench_memory.py " + " ".join(
        argv if argv is not None else sys.argv[1:]
    )
    result = {
        "command": command.strip(),
        "machine": machine,
        "repeats": args.repeats,
        "allocator": os.environ.get("MALLOC_MMAP_THRESHOLD_", "default"),
        "rows": [],
        "summary": [],
    }
    for pe in pes:
        for length in lengths:
            for repeat in range(args.repeats):
                row = run_child(pe, length, args.threads) | {"repeat": repeat}
                result["rows"].append(row)
                print(
                    f"{pe:>15} {length:>6} #{repeat}: rss +{row['rss_mib']:7.1f} MiB, "
                    f"live {row['live_mib']:7.1f} MiB",
                    flush=True,
                )
                result["summary"] = summarise(result["rows"])
                if args.json:  # after every row: a long run interrupted keeps what it measured
                    args.json.parent.mkdir(parents=True, exist_ok=True)
                    args.json.write_text(json.dumps(result, indent=1) + "\n")
    summary = result["summary"]
    print("\nmedians (ratio to RoPE at the same length):")
    for s in summary:
        print(
            f"{s['pe']:>15} {s['length']:>6}: rss {s['rss_mib']:7.1f} MiB "
            f"({s.get('rss_mib_vs_rope', '-')}x), live {s['live_mib']:7.1f} MiB "
            f"({s.get('live_mib_vs_rope', '-')}x)"
        )
    return result


if __name__ == "__main__":
    main()
