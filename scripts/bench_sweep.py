"""The reference sweep three ways, timed: lanes, the joblib launcher, one run after another.

    python scripts/bench_sweep.py                        # the eleven encodings, 2,000 steps each
    python scripts/bench_sweep.py --quick                # two encodings, debug=fast: checks the script
    python scripts/bench_sweep.py --modes lanes,local --jobs 2 --json results/bench/cpu_sweep.json

The reference sweep (docs/reproductions.md): the default experiment for every encoding of the
first two slices. Modes, each into its own sweep folder under ``--out`` (default
results/multiruns/bench_sweep/, git-ignored; emptied first, so every mode starts from nothing):

* ``lanes``: what ``scripts/lanes.sh`` did until the recipes became Hydra multiruns: ``--jobs``
  runs at a time, each its own ``train.py`` process with one torch thread, written where a
  sweep puts it (``hydra.run.dir=<sweep>/<the sweep's subdir>``). Re-created here, so that the
  comparison can be repeated without the deleted script;
* ``local``: the same runs as one ``train.py -m`` on the joblib launcher
  (``hydra/launcher=local``, ``--jobs`` worker processes, one torch thread each): the recipes'
  way now. Workers live on between runs, so each pays Python's and torch's start-up once;
* ``basic``: the same multirun on Hydra's basic launcher, one run after another in one process
  with torch's default threads (how the committed reference sweep was made).

Prints, and writes to ``--json`` if given: each mode's wall time, its runs that finished, and
whether lanes and local gave identical result rows (they should: same configuration, one thread
each). Exit status 1 when a run did not finish or the rows differ. Run it on a quiet machine:
parallel modes compete for the cores with anything else.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: the reference sweep's encodings (docs/reproductions.md, "the reference sweep")
REFERENCE_PES = "nope,sinusoidal,learned,alibi,rope,t5,kerple,fire,sandwich,xpos,cope"
#: where a run of a sweep writes (configs/hydra/default.yaml's hydra.sweep.subdir, verbatim:
#: the lanes' runs must land where the sweep's do)
SUBDIR = "${data.name}_${model.name}_${pe.name}_len${data.len}_seed${seed}_${lengen_run_id:}"
MODES = ("lanes", "local", "basic")


def lanes_commands(pes: list[str], common: list[str], sweep: Path) -> list[list[str]]:
    """One ``train.py`` per run, as the lanes started them."""
    return [
        [sys.executable, "train.py", *common, f"pe={pe}", "resume=auto",
         f"hydra.run.dir={sweep}/{SUBDIR}"]
        for pe in pes
    ]  # fmt: skip


def sweep_command(pes: list[str], common: list[str], sweep: Path, launcher: list[str]):
    """The same runs as one multirun."""
    return [sys.executable, "train.py", "-m", *common, f"pe={','.join(pes)}", "resume=auto",
            f"hydra.sweep.dir={sweep}", *launcher]  # fmt: skip


def run_lanes(commands: list[list[str]], jobs: int, log: Path) -> int:
    """``jobs`` commands at a time, one torch thread each -> how many failed."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}

    def one(command: list[str]) -> int:
        with log.open("a") as out:
            return subprocess.run(command, cwd=ROOT, env=env, stdout=out, stderr=out).returncode

    with ThreadPoolExecutor(jobs) as pool:
        return sum(code != 0 for code in pool.map(one, commands))


def run_sweep(command: list[str], log: Path) -> int:
    with log.open("a") as out:
        return subprocess.run(command, cwd=ROOT, stdout=out, stderr=out).returncode


def finished_rows(sweep: Path) -> dict[str, list[dict]]:
    """run folder -> its result rows without the timing fields (they differ run to run)."""
    rows = {}
    for path in sorted(sweep.glob("*/results.json")):
        results = json.loads(path.read_text())
        rows[path.parent.name] = [
            {k: v for k, v in row.items() if k not in ("seconds", "peak_mem_mb")}
            for row in results["eval"]
        ]
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pes", default=REFERENCE_PES, help="comma-separated encodings")
    parser.add_argument("--modes", default="lanes,local,basic", help=f"of {', '.join(MODES)}")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="runs at a time")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "multiruns" / "bench_sweep")
    parser.add_argument("--json", type=Path, help="write the timings here")
    parser.add_argument("--quick", action="store_true", help="rope and alibi, debug=fast")
    parser.add_argument("overrides", nargs="*", help="for every run, e.g. trainer.max_steps=500")
    args = parser.parse_args(argv)
    modes = args.modes.split(",")
    if unknown := sorted(set(modes) - set(MODES)):
        parser.error(f"--modes: unknown {', '.join(unknown)}; allowed: {', '.join(MODES)}")
    pes = ["rope", "alibi"] if args.quick else args.pes.split(",")
    common = [*(["debug=fast"] if args.quick else []), *args.overrides]
    out = args.out.resolve()
    report = {"pes": pes, "overrides": common, "jobs": args.jobs, "cpus": os.cpu_count(),
              "machine": platform.processor() or platform.machine(), "modes": {}}  # fmt: skip
    for mode in modes:
        sweep = out / mode
        shutil.rmtree(sweep, ignore_errors=True)  # timed from nothing: no run finished earlier
        sweep.mkdir(parents=True)
        log = out / f"{mode}.log"
        log.unlink(missing_ok=True)
        start = time.perf_counter()
        if mode == "lanes":
            failed = run_lanes(lanes_commands(pes, common, sweep), args.jobs, log)
        else:
            launcher = ["hydra/launcher=local", f"hydra.launcher.n_jobs={args.jobs}"]
            command = sweep_command(pes, common, sweep, launcher if mode == "local" else [])
            failed = run_sweep(command, log)
        seconds = time.perf_counter() - start
        finished = len(finished_rows(sweep))
        report["modes"][mode] = {"seconds": round(seconds, 1), "finished": finished,
                                 "failed": failed}  # fmt: skip
        print(f"{mode:6s} {seconds:8.1f} s  {finished}/{len(pes)} runs finished  (log: {log})")
    if {"lanes", "local"} <= set(modes):
        same = finished_rows(out / "lanes") == finished_rows(out / "local")
        report["lanes_and_local_rows_identical"] = same
        print(f"lanes and local: result rows {'identical' if same else 'DIFFER'}")
        lanes, local = report["modes"]["lanes"]["seconds"], report["modes"]["local"]["seconds"]
        print(f"local / lanes wall time: {local / lanes:.3f}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    complete = all(m["finished"] == len(pes) for m in report["modes"].values())
    return 0 if complete and report.get("lanes_and_local_rows_identical", True) else 1


if __name__ == "__main__":
    sys.exit(main())
