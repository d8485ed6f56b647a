"""The one atomic writer: a reader sees the old file or the new one, never part of either."""

from __future__ import annotations

import os
import stat

import pytest

from lengen.atomic import atomic_write, fsync_directory, replace_durably


def test_text_is_written_as_utf8(tmp_path):
    atomic_write(tmp_path / "card.json", "mean ± CI, é\n")
    assert (tmp_path / "card.json").read_bytes() == "mean ± CI, é\n".encode()


def test_bytes_are_written_unchanged(tmp_path):
    data = bytes(range(256))
    atomic_write(tmp_path / "figure.png", data)
    assert (tmp_path / "figure.png").read_bytes() == data


def test_an_existing_file_is_replaced(tmp_path):
    path = tmp_path / "results.json"
    path.write_text("old\n")
    atomic_write(path, "new\n")
    assert path.read_text() == "new\n"


def test_a_missing_folder_is_created(tmp_path):
    atomic_write(tmp_path / "a" / "b" / "summary.md", "x")
    assert (tmp_path / "a" / "b" / "summary.md").read_text() == "x"


def test_the_file_gets_the_umask_mode_not_mkstemps_0600(tmp_path):
    atomic_write(tmp_path / "config.yaml", "seed: 0\n")
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE((tmp_path / "config.yaml").stat().st_mode) == 0o666 & ~umask


def _no_space(*args, **kwargs):
    raise OSError(28, "No space left on device")


class _FullDiskFile:
    """A file whose writes fail, as on a full disk; closes the real descriptor."""

    def __init__(self, handle):
        self.handle = handle

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.handle.close()

    write = staticmethod(_no_space)


def _fail_at(step: str, monkeypatch) -> None:
    """Make one step of writing fail the way a full disk makes it fail."""
    if step == "write":
        real_fdopen = os.fdopen
        monkeypatch.setattr(os, "fdopen", lambda *a, **k: _FullDiskFile(real_fdopen(*a, **k)))
    else:
        monkeypatch.setattr(os, step, _no_space)


STEPS = ["write", "fsync", "replace"]


@pytest.mark.parametrize("step", STEPS)
def test_a_failure_midway_keeps_the_old_file(tmp_path, monkeypatch, step):
    path = tmp_path / "results.json"
    path.write_text("old\n")
    _fail_at(step, monkeypatch)
    with pytest.raises(OSError, match="No space left"):
        atomic_write(path, "new\n")
    assert path.read_text() == "old\n"


@pytest.mark.parametrize("step", STEPS)
def test_a_failure_midway_leaves_no_temporary_file(tmp_path, monkeypatch, step):
    (tmp_path / "results.json").write_text("old\n")
    _fail_at(step, monkeypatch)
    with pytest.raises(OSError, match="No space left"):
        atomic_write(tmp_path / "results.json", "new\n")
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]


def test_the_data_is_synced_before_the_rename_and_the_rename_after(tmp_path, monkeypatch):
    calls = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(descriptor):
        calls.append("fsync dir" if stat.S_ISDIR(os.fstat(descriptor).st_mode) else "fsync file")
        real_fsync(descriptor)

    def replace(source, target):
        calls.append("replace")
        real_replace(source, target)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    atomic_write(tmp_path / "results.json", "{}\n")
    assert calls == ["fsync file", "replace", "fsync dir"]


def test_replace_durably_moves_a_finished_file_into_place(tmp_path):
    # the checkpoint path: torch.save wrote the temporary file itself
    tmp, path = tmp_path / ".last.ckpt.tmp", tmp_path / "last.ckpt"
    tmp.write_bytes(b"weights")
    replace_durably(tmp, path)
    assert (path.read_bytes(), tmp.exists()) == (b"weights", False)


def test_fsync_directory_of_a_missing_folder_does_nothing(tmp_path):
    fsync_directory(tmp_path / "missing")  # best effort: no error
