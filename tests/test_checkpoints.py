"""Writing checkpoints: beside the run, never staged elsewhere, and a failed write reported in
one line with what can still be done (issue #34)."""

from __future__ import annotations

import errno
import tempfile
from pathlib import Path

import pytest

from helpers import compose_train
from lengen.checkpoints import save_checkpoint
from lengen.checks import CheckpointWriteError
from lengen.rundir import FAILED, RunDirectory
from lengen.train import run

# its runs are read for numbers and files, never figures: each is built, not rasterised
pytestmark = pytest.mark.usefixtures("unsaved_run_figures")

FAST = ["debug=fast", "eval.factors=[1]", "logger=none"]


class _FailingTrainer:
    """What save_checkpoint asks of a trainer, whose write fails as a read-only folder does."""

    is_global_zero = True

    def save_checkpoint(self, path, weights_only):
        Path(path).write_bytes(b"part")  # the write got this far
        raise OSError(errno.EROFS, "Read-only file system")


def test_a_checkpoint_is_not_staged_in_the_temporary_folder(tmp_path, monkeypatch):
    # a temporary folder that cannot hold a file: Lightning's own writer staged checkpoints there
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "no-such-folder"))
    run(compose_train(*FAST), run_dir=tmp_path / "run")
    assert (tmp_path / "run" / "checkpoints" / "last.ckpt").is_file()


def test_a_failed_first_write_says_there_is_nothing_to_resume(tmp_path):
    path = tmp_path / "last.ckpt"
    with pytest.raises(CheckpointWriteError, match=r"no checkpoint was kept, so the run cannot"):
        save_checkpoint(_FailingTrainer(), path)
    assert list(tmp_path.iterdir()) == []  # the partial temporary file is gone


def test_a_failed_write_keeps_the_previous_checkpoint_and_advises_resume(tmp_path):
    path = tmp_path / "last.ckpt"
    path.write_bytes(b"previous")
    with pytest.raises(CheckpointWriteError, match=r"is kept; allowed: .*resume=true"):
        save_checkpoint(_FailingTrainer(), path)
    assert path.read_bytes() == b"previous"


def test_a_cleanup_refused_by_a_read_only_folder_still_gives_the_one_line(tmp_path, monkeypatch):
    def refuse(self, missing_ok=False):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(Path, "unlink", refuse)
    with pytest.raises(CheckpointWriteError, match=r"^checkpoint: writing .* failed \(Read-only"):
        save_checkpoint(_FailingTrainer(), tmp_path / "last.ckpt")


def test_a_failure_record_that_cannot_be_written_does_not_hide_the_error(
    tmp_path, monkeypatch, capsys
):
    def full(path, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("lengen.rundir.atomic_write", full)
    RunDirectory(tmp_path).record_failure(RuntimeError("boom"))
    assert f"{tmp_path / FAILED} could not be written (No space left" in capsys.readouterr().err
