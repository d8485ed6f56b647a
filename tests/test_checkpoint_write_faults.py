"""A checkpoint that meets a full disk inside torch's zip writer: torch.save raises a
RuntimeError ("unexpected pos …"), not an OSError, so a run on a small full disk ended in a
traceback (exit 1) instead of its one line (exit 4); found on a 96 KB tmpfs (issue #51)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from lengen.checkpoints import save_checkpoint, write_failure
from lengen.errors import CheckpointWriteError

#: what torch 2.13's writer raised on a full tmpfs
TORCH_FULL = "[enforce fail at inline_container.cc:672] . unexpected pos 39104 vs 39056"


def test_torch_writers_error_on_a_full_disk_is_a_failed_write(tmp_path):
    assert write_failure(RuntimeError(TORCH_FULL), tmp_path) is not None


def test_another_runtime_error_is_no_failed_write(tmp_path):
    assert write_failure(RuntimeError("CUDA error: device-side assert"), tmp_path) is None


def test_a_run_whose_checkpoint_meets_torchs_full_disk_error_stops_in_one_line(tmp_path):
    def full(path, weights_only=False):
        raise RuntimeError(TORCH_FULL)

    trainer = SimpleNamespace(save_checkpoint=full, is_global_zero=True)
    path = tmp_path / "checkpoints" / "last.ckpt"
    with pytest.raises(CheckpointWriteError, match=r"^checkpoint: writing .*last.ckpt failed"):
        save_checkpoint(trainer, path)


def test_a_run_directory_whose_config_cannot_be_written_is_refused_in_one_line(
    tmp_path, monkeypatch
):
    """A disk with no room at the start (a 4 KB tmpfs): a 25-line OSError traceback, exit 1;
    now a refusal (exit 2) naming hydra.run.dir, nothing having run."""
    import errno
    import os

    import lengen.rundir.saved_config as saved
    from helpers import compose_train
    from lengen.errors import RunDirectoryWriteError
    from lengen.rundir import RunDirectory

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(saved, "atomic_write", full)
    directory = RunDirectory(tmp_path / "run")
    with pytest.raises(RunDirectoryWriteError, match=r"^hydra.run.dir=.*No space left on device"):
        directory.start(compose_train())
    directory.release()
