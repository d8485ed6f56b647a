"""A pack of runs against the same runs one after another, timed (#46: packs).

    python scripts/bench_pack.py                          # CPU: a pack of 8 seeds vs 8 solo runs
    python scripts/bench_pack.py --steps 500 --repeats 3 --json results/bench/cpu_pack.json
    python scripts/bench_pack.py --device cuda --members 64 --json results/bench/gpu_pack.json
    python scripts/bench_pack.py --member-threads 1,2   # CPU: also members two at a time

Both ways train the default experiment (``python train.py``'s config) with seeds 0, 1, …, for
``--steps`` steps each (the learning-rate horizon too), on ``--device``:

* ``pack``: ``--members`` runs trained together in one process (``lengen.pack.train_pack``);
* ``solo``: ``--solo-runs`` runs one after another in one process (``lengen.train.run``), as a
  sweep's basic launcher runs them. Default: as many as the pack on a CPU; one on a GPU, where
  the target compares runs per hour (a single run leaves most of the device idle, and 64 of
  them one after another would cost what the pack is meant to save).

Each way runs in a fresh process (so its peak memory is its own), ``--repeats`` times,
interleaved (pack, solo, solo, pack, …: a machine whose load drifts burdens both alike), and
each process writes its runs' folders into a temporary folder, removed afterwards. The clock
starts at the first run, after Python's and torch's imports (which a process pays once either
way). The runs are whole runs (set-up, training, checkpoints, logs, evaluation, figures),
except that evaluation is cut to one length of a few samples (``--eval minimal``, the default):
it is per member either way, and at the default's lengths it would outweigh the training being
compared; ``--eval default`` keeps the default experiment's.

Prints, and writes to ``--json``: each way's wall seconds per repeat (median, min, max), CPU
seconds, runs per hour, the pack's total against the solo runs' scaled to the same number of runs
(target <= 0.9 on a CPU) and runs per hour of the pack against solo (target >= 20 on a GPU); peak
memory per member (a CPU: the process's peak resident memory above its size before the first
run, divided by the runs it held at once; a GPU: the peak of allocated device memory); the
machine (CPU or GPU model, torch threads, cores, load average). Timed numbers need a quiet
machine: run it where nothing else runs.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: one length of a few samples, no diagnostics: evaluation is not what is compared (docstring)
MINIMAL_EVAL = [
    "eval.factors=[1]",
    "eval.samples=32",
    "eval.diagnostics=false",
    "eval.plot_formats=[png]",
]
TARGET_CPU = 0.9  # the pack's total time / the solo runs' (at most)
TARGET_GPU = 20.0  # the pack's runs per hour / a solo run's (at least)


def overrides(args, seed: int) -> list[str]:
    """The config of run ``seed``: ``python train.py``'s, timed at ``--steps``."""
    accelerator = "gpu" if args.device == "cuda" else args.device
    chosen = [
        f"seed={seed}",
        f"trainer.max_steps={args.steps}",
        f"trainer.accelerator={accelerator}",
        "trainer.enable_progress_bar=false",
    ]
    if args.eval == "minimal":
        chosen += MINIMAL_EVAL
    return [*chosen, *args.set]


# -- one way, in its own process -------------------------------------------------------------------
def child(args) -> dict:
    """Train ``--members`` runs as a pack, or ``--solo-runs`` one after another -> timings."""
    import resource

    import torch
    from hydra import compose, initialize_config_dir

    from lengen.config import CONFIG_DIR

    if args.threads:
        torch.set_num_threads(args.threads)
    runs = args.members if args.child == "pack" else args.solo_runs
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        configs = [compose("train", overrides=overrides(args, seed)) for seed in range(runs)]
    folder = Path(args.folder)
    run_dirs = [folder / f"{args.child}_seed{seed}" for seed in range(runs)]
    # imported before the memory baseline: their size is the process's, not the runs'
    import matplotlib.pyplot  # noqa: F401 - the figures' (evaluation)
    import pytorch_lightning  # noqa: F401

    import lengen.train  # noqa: F401

    if args.child == "pack":
        import lengen.pack.engine

        # members trained at once, one a thread of one intra-op thread (engine.MEMBER_THREADS)
        lengen.pack.engine.MEMBER_THREADS[args.device] = args.member_threads[0]
    if args.device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    wall, cpu = time.perf_counter(), time.process_time()
    if args.child == "pack":
        from lengen.pack import train_pack

        train_pack(configs, run_dirs)
    else:
        from lengen.train import run

        for cfg, run_dir in zip(configs, run_dirs, strict=True):
            run(cfg, run_dir)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    unfinished = [d.name for d in run_dirs if not (d / "results.json").is_file()]
    at_once = runs if args.child == "pack" else 1
    result = {
        "way": args.child,
        "runs": runs,
        "wall_s": wall,
        "cpu_s": cpu,
        "unfinished": unfinished,
        # what the engine was set to (the pack's), and what it used: never more than torch's
        "member_threads": (
            lengen.pack.engine.MEMBER_THREADS[args.device] if args.child == "pack" else None
        ),
        "member_threads_used": (
            min(lengen.pack.engine.MEMBER_THREADS[args.device], torch.get_num_threads())
            if args.child == "pack"
            else None
        ),
        "peak_rss_growth_mib": (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024,
    }
    result["memory_per_member_mib"] = result["peak_rss_growth_mib"] / at_once
    if args.device == "cuda":
        peak = torch.cuda.max_memory_allocated() / 2**20
        result["peak_cuda_mib"] = peak
        result["memory_per_member_mib"] = peak / at_once
    return result


def run_child(args, way: str, folder: Path, log: Path, member_threads: int = 1) -> dict:
    """One way in a fresh process (its output appended to ``log``) -> its timings."""
    out = folder / f"{way}.json"
    command = [
        sys.executable, __file__, "--child", way, "--folder", str(folder), "--out", str(out),
        "--device", args.device, "--members", str(args.members),
        "--solo-runs", str(args.solo_runs), "--steps", str(args.steps), "--eval", args.eval,
        "--member-threads", str(member_threads),
        *(["--threads", str(args.threads)] if args.threads else []),
        *[f"--set={value}" for value in args.set],
    ]  # fmt: skip
    env = dict(os.environ)
    if args.threads:
        env["OMP_NUM_THREADS"] = str(args.threads)
    with log.open("a") as output:
        done = subprocess.run(command, cwd=ROOT, env=env, stdout=output, stderr=output)
    if done.returncode != 0:
        raise SystemExit(
            f"bench_pack: the {way} process failed (exit {done.returncode}); see {log}"
        )
    return json.loads(out.read_text())


# -- the comparison ------------------------------------------------------------------------------
def machine(args) -> dict:
    import torch

    info = {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "threads": args.threads or torch.get_num_threads(),
        "cpus": os.cpu_count(),
        "device": args.device,
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    if args.device == "cuda" and torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name()
    return info


def spread(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def pack_label(threads: int, first: int) -> str:
    """The key of a pack's rows: ``pack`` for the first ``--member-threads`` setting (the
    summary's), ``pack_threads<N>`` for each other."""
    return "pack" if threads == first else f"pack_threads{threads}"


def compare(args, log: Path) -> dict:
    """Every repeat of every way, interleaved -> the summary (docstring)."""
    settings = args.member_threads
    ways = [(pack_label(t, settings[0]), "pack", t) for t in settings] + [("solo", "solo", 1)]
    measured: dict[str, list[dict]] = {label: [] for label, _, _ in ways}
    for repeat in range(args.repeats):
        order = ways if repeat % 2 == 0 else ways[::-1]
        for label, way, threads in order:
            with tempfile.TemporaryDirectory(prefix=f"bench_pack_{way}_") as folder:
                result = run_child(args, way, Path(folder), log, threads)
            if result["unfinished"]:
                raise SystemExit(f"bench_pack: {way} runs did not finish: {result['unfinished']}")
            measured[label].append(result)
            print(
                f"repeat {repeat + 1}/{args.repeats} {label}: {result['runs']} runs in "
                f"{result['wall_s']:.1f} s (cpu {result['cpu_s']:.1f} s), "
                f"{result['memory_per_member_mib']:.0f} MiB per member",
                flush=True,
            )
    pack = spread([r["wall_s"] for r in measured["pack"]])
    solo = spread([r["wall_s"] for r in measured["solo"]])
    per_solo_run = solo["median"] / args.solo_runs
    pack_total_ratio = pack["median"] / (per_solo_run * args.members)
    runs_per_hour = {
        "pack": args.members / pack["median"] * 3600,
        "solo": args.solo_runs / solo["median"] * 3600,
    }
    summary = {
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "config": overrides(args, 0)[1:],
        "members": args.members,
        "solo_runs": args.solo_runs,
        "steps": args.steps,
        "repeats": args.repeats,
        "evaluation": args.eval,
        "member_threads": settings[0],
        "machine": machine(args),
        "wall_s": {"pack": pack, "solo": solo},
        "cpu_s": {w: spread([r["cpu_s"] for r in measured[w]]) for w in measured},
        "runs_per_hour": runs_per_hour,
        "runs_per_hour_ratio": runs_per_hour["pack"] / runs_per_hour["solo"],
        "pack_total_ratio": pack_total_ratio,
        "memory_per_member_mib": {
            w: spread([r["memory_per_member_mib"] for r in measured[w]]) for w in measured
        },
        "raw": measured,
    }
    for threads in settings[1:]:  # each other setting: its own total against the solo runs'
        walls = spread([r["wall_s"] for r in measured[pack_label(threads, settings[0])]])
        ratio = walls["median"] / (per_solo_run * args.members)
        summary.setdefault("other_member_threads", {})[str(threads)] = {
            "wall_s": walls, "pack_total_ratio": ratio, "met": ratio <= TARGET_CPU,
        }  # fmt: skip
    if args.device == "cuda":
        summary["target"] = f"runs per hour: pack / solo >= {TARGET_GPU:g}"
        summary["met"] = summary["runs_per_hour_ratio"] >= TARGET_GPU
    else:
        summary["target"] = f"pack total / solo total <= {TARGET_CPU:g}"
        summary["met"] = pack_total_ratio <= TARGET_CPU
    return summary


def main(argv: list[str] | None = None) -> dict | None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--members", type=int, default=None, help="runs in the pack (8; cuda 64)")
    parser.add_argument(
        "--solo-runs", type=int, default=None, help="solo runs timed (the pack's; cuda 1)"
    )
    parser.add_argument("--steps", type=int, default=200, help="training steps of every run")
    parser.add_argument("--repeats", type=int, default=2, help="times each way is timed")
    parser.add_argument("--threads", type=int, help="torch threads (default: torch's)")
    parser.add_argument("--eval", default="minimal", choices=["minimal", "default"])
    parser.add_argument(
        "--member-threads",
        default="1",
        help="a CPU pack's members trained at once, one a thread (lengen.pack.engine's "
        "MEMBER_THREADS; 1: one after another, the default); comma-separated: each setting "
        "its own pack rows, interleaved with the others' (the first is the summary's)",
    )
    parser.add_argument(
        "--set", action="append", default=[], help="another override, e.g. model.d_model=64"
    )
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--log", type=Path, help="the runs' output (default: a temporary file)")
    parser.add_argument("--child", choices=["pack", "solo"], help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.members is None:
        args.members = 64 if args.device == "cuda" else 8
    if args.solo_runs is None:
        args.solo_runs = 1 if args.device == "cuda" else args.members
    for name in ("members", "solo_runs", "steps", "repeats"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')}={getattr(args, name)}: allowed: >= 1")
    threads = [t.strip() for t in args.member_threads.split(",")]
    if not all(t.isdigit() and int(t) >= 1 for t in threads) or len(set(threads)) < len(threads):
        parser.error(
            f"--member-threads={args.member_threads}: allowed: distinct integers >= 1, "
            "comma-separated (1,2)"
        )
    args.member_threads = [int(t) for t in threads]
    if args.child and len(args.member_threads) > 1:
        parser.error("--member-threads: a child process takes one setting")
    if args.child:
        Path(args.out).write_text(json.dumps(child(args)) + "\n")
        return None
    log = args.log or Path(tempfile.mkstemp(prefix="bench_pack_", suffix=".log")[1])
    print(f"bench_pack: the runs' output in {log}", flush=True)
    summary = compare(args, log)
    wall = summary["wall_s"]
    print(
        f"pack of {args.members}: {wall['pack']['median']:.1f} s; {args.solo_runs} solo: "
        f"{wall['solo']['median']:.1f} s; pack / solo total at {args.members} runs: "
        f"{summary['pack_total_ratio']:.3f}; runs per hour {summary['runs_per_hour']['pack']:.0f}"
        f" vs {summary['runs_per_hour']['solo']:.0f} ({summary['runs_per_hour_ratio']:.2f}x); "
        f"target {summary['target']}: {'met' if summary['met'] else 'NOT met'}"
    )
    for threads, other in summary.get("other_member_threads", {}).items():
        print(
            f"pack of {args.members}, members {threads} at a time: {other['wall_s']['median']:.1f}"
            f" s; pack / solo total: {other['pack_total_ratio']:.3f}: "
            f"{'met' if other['met'] else 'NOT met'}"
        )
    if args.json:
        from lengen.atomic import atomic_write

        args.json.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(args.json, json.dumps(summary, indent=1) + "\n")
        print(f"wrote {args.json}")
    return summary


if __name__ == "__main__":
    main()
