"""scripts/slurm/stop.sh where no SLURM of start.sh's is present (the trial's SL03): run against
scratch paths (its LENGEN_SLURM_* variables) and a PATH without SLURM's commands, never against
this machine's SLURM, which another session may be using."""

from __future__ import annotations

import os
import shutil
import subprocess

from helpers import ROOT

STOP = ROOT / "scripts" / "slurm" / "stop.sh"
#: the variables that move each path stop.sh touches; without all of them it would touch the
#: machine's own SLURM, so the test stops before running it
PATHS = ("LENGEN_SLURM_CONF", "LENGEN_SLURM_STATE", "LENGEN_MUNGE_PID")


def test_stop_with_no_slurm_present_says_there_is_nothing_to_stop(tmp_path):
    """It printed 'slurm: stopped', exit 0, where nothing had been running (a success for work
    not done)."""
    text = STOP.read_text()
    assert all(name in text for name in PATHS), "stop.sh must honour every scratch path"
    tools = tmp_path / "bin"  # a few tools stop.sh uses, no scancel / slurmd / munged
    tools.mkdir()
    for name in ("grep", "cat", "seq", "rm", "sleep"):
        os.symlink(shutil.which(name), tools / name)
    env = {
        "PATH": str(tools),
        "LENGEN_SLURM_CONF": str(tmp_path / "etc" / "slurm.conf"),
        "LENGEN_SLURM_STATE": str(tmp_path / "spool" / "lengen-slurm"),
        "LENGEN_MUNGE_PID": str(tmp_path / "run" / "munged.pid"),
    }
    done = subprocess.run(
        ["/bin/bash", str(STOP)], env=env, capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.startswith("slurm: nothing to stop (no ")
    assert done.stdout.count("\n") == 1
