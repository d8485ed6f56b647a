"""lengen.process: output streams closed before the process starts (cron, daemons, ``>&-``)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from helpers import ROOT

CLOSED = {"stdout": (1,), "stderr": (2,), "both": (1, 2)}


def _closing(descriptors: tuple[int, ...]):
    """A preexec_fn closing ``descriptors`` in the child, as the shell's ``>&-`` / ``2>&-``."""

    def close() -> None:
        for fd in descriptors:
            os.close(fd)

    return close


@pytest.fixture(scope="module", params=sorted(CLOSED))
def closed_run(request, tmp_path_factory):
    """``train.py debug=fast`` started with stdout, stderr or both closed -> (exit status, run
    directory)."""
    run_dir = tmp_path_factory.mktemp(f"closed_{request.param}") / "run"
    done = subprocess.run(
        [sys.executable, str(ROOT / "train.py"), "debug=fast", "eval.lengths=[8]",
         f"hydra.run.dir={run_dir}"],
        cwd=ROOT,
        # LENGEN_VERBOSE_LOGS: Lightning's INFO records reach train.log only when asked
        # (lengen.logs), and the test below counts one of them
        env={**os.environ, "OMP_NUM_THREADS": "1", "LENGEN_VERBOSE_LOGS": "1"},
        preexec_fn=_closing(CLOSED[request.param]),
        timeout=300,
        **({} if 1 in CLOSED[request.param] else {"stdout": subprocess.DEVNULL}),
        **({} if 2 in CLOSED[request.param] else {"stderr": subprocess.DEVNULL}),
    )  # fmt: skip
    return request.param, done.returncode, run_dir


def test_a_run_with_a_closed_stream_finishes(closed_run):
    _, status, run_dir = closed_run
    assert status == 0
    assert (run_dir / "results.json").is_file() and not (run_dir / "failed.json").exists()


def test_a_closed_stdout_s_lines_go_to_train_log(closed_run):
    closed, _, run_dir = closed_run
    if closed == "stderr":
        pytest.skip("stdout open: its lines went to stdout")
    assert f"results: {run_dir / 'results.json'}" in (run_dir / "train.log").read_text()


def test_a_log_record_is_in_train_log_once(closed_run):
    """Hydra's console handler writes into the closed stream's stand-in too: not a copy."""
    _, _, run_dir = closed_run
    assert (run_dir / "train.log").read_text().count("`Trainer.fit` stopped") == 1


PROBE = (
    "import sys\n"
    "from lengen.process import inherit_closed_output\n"
    "inherit_closed_output()\n"
    "print(type(sys.stdout).__name__, file=sys.stderr)"
)


def _stdout_kind(stdout) -> str:
    """A process started as a parallel sweep's worker is (its sweep's stdout closed) ->
    the class standing in for its stdout."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        timeout=60,
        env={**os.environ, "LENGEN_CLOSED_OUTPUT": "stdout"},
    )
    return done.stderr.strip()


def test_a_sweep_worker_heir_to_a_closed_stdout_writes_to_its_train_log():
    assert _stdout_kind(subprocess.DEVNULL) == "_ToRunLog"


def test_a_child_with_a_stdout_of_its_own_keeps_it():
    assert _stdout_kind(subprocess.PIPE) == "TextIOWrapper"


def test_closed_descriptors_are_held_for_children_too(tmp_path):
    """Descriptors 0-2, closed at start, point at /dev/null and are inheritable: a sweep's
    joblib workers (exec'd) crashed with sys.stderr None otherwise."""
    answer = tmp_path / "inheritable"
    code = (
        "import os\n"
        "from lengen.process import outlive_closed_output\n"
        "outlive_closed_output()\n"
        f"open({str(answer)!r}, 'w').write(str([os.get_inheritable(fd) for fd in (0, 1, 2)]))"
    )
    subprocess.run(
        [sys.executable, "-c", code], preexec_fn=_closing((0, 1, 2)), timeout=60, check=True
    )
    assert answer.read_text() == "[True, True, True]"
