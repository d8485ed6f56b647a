"""scripts/lanes.sh: runs in parallel lanes land where a Hydra sweep puts them, a re-run fills
in only what is missing, and a failing run is reported without stopping the others."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from helpers import CONFIG_DIR

LANES = CONFIG_DIR.parent / "scripts" / "lanes.sh"
COMMON = ("debug=fast", "data.len=4", "eval.factors=[1]", "logger=none")


def lanes(sweep, *lines: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHON": sys.executable, "LANES": "2"}
    return subprocess.run(
        ["bash", str(LANES), str(sweep), *COMMON],
        input="".join(f"{line}\n" for line in lines),
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    folder = tmp_path_factory.mktemp("lanes") / "sweep"
    done = lanes(folder, "pe=rope seed=0", "pe=alibi seed=1")
    assert done.returncode == 0, done.stderr
    return folder


def test_each_line_is_one_run_named_as_a_sweep_names_it(sweep):
    runs = sorted(path.name for path in sweep.glob("copy_*"))
    assert [name.rsplit("_", 1)[0] for name in runs] == [
        "copy_decoder_alibi_len4_seed1",
        "copy_decoder_rope_len4_seed0",
    ]
    assert all((sweep / name / "results.json").is_file() for name in runs)


def test_a_rerun_leaves_finished_runs_alone(sweep):
    before = {path: path.stat().st_mtime_ns for path in sweep.glob("*/results.json")}
    again = lanes(sweep, "pe=rope seed=0", "pe=alibi seed=1")
    assert again.returncode == 0, again.stderr
    assert {path: path.stat().st_mtime_ns for path in sweep.glob("*/results.json")} == before


def test_a_failing_run_is_reported_and_the_others_still_run(tmp_path):
    done = lanes(tmp_path / "sweep", "pe=no_such_pe seed=0", "pe=nope seed=0")
    assert "failed: pe=no_such_pe seed=0" in done.stderr
    assert len(list((tmp_path / "sweep").glob("copy_decoder_nope_len4_seed0_*/results.json"))) == 1
