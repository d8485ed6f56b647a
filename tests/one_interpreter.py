"""Many refusals of lengen's scripts in one fresh interpreter, each as ``python <script> …`` runs
it: the script executed as ``__main__`` (``runpy``) with its own ``sys.argv`` and working folder,
its stdout and stderr captured, its exit status taken from the ``SystemExit`` it ends with.

A refusal's own work (composing and checking the command line) is a fraction of a second; a
process of its own per case added an interpreter's start and Hydra's and lengen's imports,
most of tests/test_bad_input.py's and tests/test_faults.py's time. The property those tables
check, one line naming the key, the exit status, no traceback and nothing written, is the
script's, not the process's: cases about the process (environment variables, signals, closed
streams) keep a process of their own there, and so do a few plain cases of each table.

``run_together(cases)`` starts the interpreter (this file as a script) and hands it the cases
as JSON on stdin; it answers one JSON object per case on stdout."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: what the interpreter prints when a case gets past the checks: its run is stopped there, at
#: ``lengen.cli.train_main``, instead of training (the case's test then fails on its status)
PAST_THE_CHECKS = "one_interpreter: the command got past the checks; its run was not started"


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What ``subprocess.run(…, capture_output=True, text=True)`` tells of a finished process,
    plus whether torch was imported once the case ended."""

    returncode: int
    stdout: str
    stderr: str
    torch_imported: bool


def run_together(
    cases: list[tuple[str, list[str]]], *, cwd: Path = ROOT, env=None, timeout: int = 300
) -> list[Outcome]:
    """``cases``: (script relative to the checkout, its arguments) -> each one's Outcome, in
    order, all run in one fresh interpreter started in ``cwd`` with ``env`` (os.environ)."""
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve())],
        input=json.dumps([[script, list(arguments)] for script, arguments in cases]),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=os.environ.copy() if env is None else env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return [Outcome(**answer) for answer in json.loads(done.stdout)]


def _stop_past_the_checks(cfg) -> None:
    print(PAST_THE_CHECKS, file=sys.stderr)


def _run_one(script: str, arguments: list[str]) -> dict:
    import runpy
    import traceback

    streams = (sys.stdout, sys.stderr)
    stdout, stderr = io.StringIO(), io.StringIO()
    sys.argv = [str(ROOT / script), *arguments]
    sys.stdout, sys.stderr = stdout, stderr
    try:
        runpy.run_path(str(ROOT / script), run_name="__main__")
        status = 0
    except SystemExit as stop:  # as the interpreter turns it into an exit status
        if stop.code is None or isinstance(stop.code, int):
            status = stop.code or 0
        else:
            print(stop.code, file=sys.stderr)
            status = 1
    except BaseException:  # an uncaught exception: the interpreter's traceback, status 1
        traceback.print_exc()
        status = 1
    finally:
        sys.stdout, sys.stderr = streams
    return {
        "returncode": status,
        "stdout": stdout.getvalue(),
        "stderr": stderr.getvalue(),
        "torch_imported": "torch" in sys.modules,
    }


def _main() -> None:
    import lengen.cli

    lengen.cli.train_main = _stop_past_the_checks  # train.py imports it when its run starts
    cases = json.loads(sys.stdin.read())
    answers = [_run_one(script, arguments) for script, arguments in cases]
    sys.stdout.write(json.dumps(answers))


if __name__ == "__main__":
    _main()
