"""A sweep whose ``hydra.sweep.subdir`` gives two jobs one folder is refused before anything
is written, whichever subdir does it (issue #51 item 1: SW9, SN29, SN32): the second job would
find the first's run, be refused, and the report would count it."""

from __future__ import annotations

import pytest

from helpers import run_train

FAST = ["debug=fast", "eval.lengths=[8]"]


def refusal(tmp_path, *arguments: str):
    """(exit status, stderr lines, whether the sweep folder exists) of a sweep into tmp_path."""
    sweep_dir = tmp_path / "sweep"
    done = run_train("-m", *FAST, *arguments, f"hydra.sweep.dir={sweep_dir}", timeout=120)
    return done.returncode, done.stderr.strip().splitlines(), sweep_dir.exists()


def test_a_fixed_subdir_for_two_seeds_is_refused_naming_the_key(tmp_path):
    status, lines, written = refusal(tmp_path, "seed=0,1", "hydra.sweep.subdir=same")
    assert status == 2 and len(lines) == 1 and not written
    assert lines[0].startswith("error: hydra.sweep.subdir=same: the sweep's jobs seed=0 and seed=1")


def test_a_subdir_that_leaves_a_swept_group_out_is_refused(tmp_path):
    # SN32: s${seed} names the seed, not the encoding; with resume=auto the second job was
    # refused as "another config" and the report said both trained
    status, lines, written = refusal(
        tmp_path, "pe=rope,alibi", "hydra.sweep.subdir=s${seed}", "resume=auto"
    )
    assert status == 2 and not written
    assert "would share one run directory (s0)" in lines[0] and "${pe.name}" in lines[0]


@pytest.mark.parametrize(
    "subdir", ["s${seed}_${pe.name}", "${hydra.job.override_dirname}", "job${hydra.job.num}"]
)
def test_a_subdir_that_differs_for_every_job_passes(subdir):
    from lengen.preflight import check_sweep_subdirs, parse_command_line

    command = parse_command_line(
        ["-m", *FAST, "pe=rope,alibi", "seed=0,1", f"hydra.sweep.subdir={subdir}"]
    )
    assert check_sweep_subdirs(command) is True


def test_the_default_subdir_is_left_to_the_trials_check():
    from lengen.preflight import check_sweep_subdirs, parse_command_line

    assert check_sweep_subdirs(parse_command_line(["-m", *FAST, "seed=0,1"])) is False
