"""A full disk inside a pack (issue #51, round 3b item 2): only the member whose own write
fails leaves the pack as a failed run; the other members train on and keep their results."""

from __future__ import annotations

import errno
import json
import os

import pytest

from lengen.pack import train_pack
from test_pack import small

FULL = os.strerror(errno.ENOSPC)
STEPS = (
    "trainer.max_steps=4",
    "trainer.val_check_interval=2",
    "trainer.checkpoint_every_n_steps=2",
)


def full_in(folder, real):
    """``real`` (a writer taking the path first), raising ENOSPC for paths under ``folder``."""

    def write(path, *args, **kwargs):
        if str(folder) in str(path):
            raise OSError(errno.ENOSPC, FULL)
        return real(path, *args, **kwargs)

    return write


@pytest.fixture(scope="module")
def checkpoint_full(tmp_path_factory, single_thread):
    """A pack of two whose second member's checkpoint meets a full disk at step 2."""
    import lengen.pack.member as member

    root = tmp_path_factory.mktemp("ckfull")
    dirs = [root / "pack" / f"seed={seed}" for seed in (0, 1)]
    cfgs = [small(*STEPS, f"seed={seed}") for seed in (0, 1)]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(member, "replace_durably", full_in(dirs[1], member.replace_durably))
        outcomes = train_pack(cfgs, dirs)
    return dirs, outcomes


def test_a_member_whose_checkpoint_meets_a_full_disk_leaves_as_failed(checkpoint_full):
    dirs, outcomes = checkpoint_full
    assert outcomes[1]["type"] == "CheckpointWriteError"
    assert FULL in outcomes[1]["error"]
    assert not (dirs[1] / "results.json").exists()


def test_the_other_members_results_are_kept_when_one_checkpoint_fails(checkpoint_full):
    dirs, outcomes = checkpoint_full
    results = json.loads((dirs[0] / "results.json").read_text())
    assert results["train_steps"] == 4 and outcomes[0]["eval"] == results["eval"]


def test_a_member_whose_results_meet_a_full_disk_leaves_the_others_finished(
    tmp_path, single_thread, monkeypatch
):
    import lengen.results as written

    dirs = [tmp_path / "pack" / f"seed={seed}" for seed in (0, 1)]
    cfgs = [small(*STEPS, f"seed={seed}") for seed in (0, 1)]
    monkeypatch.setattr(written, "atomic_write", full_in(dirs[0], written.atomic_write))
    outcomes = train_pack(cfgs, dirs)
    assert (outcomes[0]["type"], (dirs[1] / "results.json").is_file()) == (
        "ResultsWriteError",
        True,
    )


def test_a_member_whose_checkpoint_meets_torchs_full_disk_error_leaves_as_failed(
    tmp_path, single_thread, monkeypatch
):
    """torch.save raises a RuntimeError, not an OSError, when the disk fills beneath its zip
    writer (a 96 KB tmpfs: every member was failed with that traceback)."""
    import torch

    dirs = [tmp_path / "pack" / f"seed={seed}" for seed in (0, 1)]
    cfgs = [small(*STEPS, f"seed={seed}") for seed in (0, 1)]
    real = torch.save

    def save(state, handle, *args, **kwargs):
        if str(dirs[1]) in str(getattr(handle, "name", handle)):
            raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 1 vs 2")
        return real(state, handle, *args, **kwargs)

    monkeypatch.setattr(torch, "save", save)
    outcomes = train_pack(cfgs, dirs)
    assert (outcomes[1]["type"], (dirs[0] / "results.json").is_file()) == (
        "CheckpointWriteError",
        True,
    )


def test_a_member_whose_folder_is_full_at_the_start_leaves_the_others_training(
    tmp_path, single_thread, monkeypatch
):
    """Its config.yaml cannot be written (a folder on a full disk from the start): it alone
    fails, where the OSError failed every member with a traceback."""
    import lengen.rundir.saved_config as saved

    dirs = [tmp_path / "pack" / f"seed={seed}" for seed in (0, 1)]
    cfgs = [small(*STEPS, f"seed={seed}") for seed in (0, 1)]
    monkeypatch.setattr(saved, "atomic_write", full_in(dirs[1], saved.atomic_write))
    outcomes = train_pack(cfgs, dirs)
    assert (outcomes[1]["type"], (dirs[0] / "results.json").is_file()) == (
        "RunDirectoryWriteError",
        True,
    )


def test_after_a_signal_each_member_is_stated_by_what_became_of_it(tmp_path):
    """A signal stopping a pack said 'interrupted' of every member, also of one that had
    finished and of one that had left the pack on its own (its disk full)."""
    from lengen.rundir import RunDirectory
    from lengen.rundir.outcomes import pack_outcomes

    finished, left, stopped = (RunDirectory(tmp_path / name) for name in ("a", "b", "c"))
    for directory in (finished, left, stopped):
        directory.path.mkdir()
    (finished.path / "results.json").write_text("{}")
    (left.path / "failed.json").write_text(json.dumps({"error": "checkpoint: disk full"}))
    said = "interrupted: by SIGTERM at step 3"
    outcomes = pack_outcomes([finished, left, stopped], [False] * 3, [False, True, False], said)
    assert outcomes == ["trained", "failed: checkpoint: disk full", said]
