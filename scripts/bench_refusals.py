"""How long a refused command line takes, from the shell, for each kind of check.

Every user-input check runs before a run directory exists and before heavy imports where it
can (target: under 2 s on the 2-core development machine). This prints the median wall time
of each bad command line over ``--repeats`` runs, its exit status and first line, and whether
it met the target. Run it on a quiet machine:

    .venv/bin/python scripts/bench_refusals.py --repeats 5

Kinds: ``key`` (an unknown key or group choice: config composition only), ``value`` (a value
the config layer checks), ``component`` (a component's own check: the data source's, the
model's or the encoding's, run by ``lengen.preflight.check_components`` without importing torch
for lengen's own components; the text case reads no corpus), ``eval`` (eval.py's own checks of
its command line and the run directory).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_SECONDS = 2.0

#: (kind, script, arguments): each must be refused with exit status 2
CASES = [
    ("key", "train.py", ["pe=ropee"]),
    ("key", "train.py", ["model.dmodel=64"]),
    ("value", "train.py", ["model.d_model=12", "model.n_heads=5"]),
    ("value", "train.py", ["data.len=0"]),
    ("component", "train.py", ["pe=cope", "model=encoder"]),
    ("component", "train.py", ["pe=learned", "pe.policy=error"]),
    ("component", "train.py", ["data.task.n_symbols=1"]),
    ("component", "train.py", ["data=grid_locate", "model=encoder", "pe=t5"]),
    ("component", "train.py", ["+pe.bse=500"]),
    ("component", "train.py", ["experiment=wikitext2_cpu", "pe=learned", "pe.policy=error"]),
    ("value", "train.py", ["--config-dir=configs", "data.len=0"]),  # Hydra's flags: checked too
    ("value", "train.py", ["trainer.num_nodes=2", "trainer.accelerator=cpu"]),
    ("value", "train.py", ["trainer.precision=bf16-mixed", "trainer.accelerator=cpu"]),
    ("component", "train.py", ["data=text", "model=encoder", "data.files.train=README.md"]),
    ("eval", "eval.py", ["run=/nonexistent/run"]),
    ("eval", "eval.py", ["run=/nonexistent/run", "model.d_model=64"]),
]


def time_case(script: str, arguments: list[str], repeats: int) -> tuple[float, int, str]:
    """Median seconds, exit status and first stderr line of one refused command."""
    seconds, status, first = [], 0, ""
    with tempfile.TemporaryDirectory() as scratch:
        run_dir = Path(scratch) / "run"
        command = [sys.executable, script, *arguments]
        if script == "train.py":
            command.append(f"hydra.run.dir={run_dir}")
        for _ in range(repeats):
            start = time.perf_counter()
            done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
            seconds.append(time.perf_counter() - start)
            status, first = done.returncode, (done.stderr.strip().splitlines() or [""])[0]
        if run_dir.exists():
            first = f"WROTE {run_dir} (a refusal must write nothing): {first}"
    return statistics.median(seconds), status, first


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="runs per command (median)")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error(f"--repeats must be >= 1, got {args.repeats}")
    print(f"{'kind':<10} {'seconds':>8} {'exit':>4}  target  command / first line")
    missed = 0
    for kind, script, arguments in CASES:
        seconds, status, first = time_case(script, arguments, args.repeats)
        ok = seconds < TARGET_SECONDS and status == 2 and not first.startswith("WROTE")
        missed += not ok
        verdict = "met" if ok else "MISSED"
        print(
            f"{kind:<10} {seconds:8.2f} {status:>4}  {verdict:<6}  {script} {' '.join(arguments)}"
        )
        print(f"{'':<33}{first[:100]}")
    print(f"{len(CASES) - missed} of {len(CASES)} under {TARGET_SECONDS:.0f} s with exit status 2")
    return 0


if __name__ == "__main__":
    sys.exit(main())
