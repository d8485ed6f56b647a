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

