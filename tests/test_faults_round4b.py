"""Issue #51's leftovers: a bar that says a long length still runs, a pack bounded by
LENGEN_MAX_EVAL_HOURS as its solo runs are, results.json meeting a disk that stays full."""

from __future__ import annotations

import errno
import json
import os
import time

import pytest

from helpers import compose_train
from lengen import heartbeat as beats
from lengen.progress import each


def test_a_long_item_says_it_is_still_running_on_the_bar(capsys, monkeypatch):
    """bar mode (a terminal) showed nothing within a length of hours; lines mode a line."""
    monkeypatch.setattr(beats, "FIRST_SECONDS", 0.05)
    for _ in each([30000], desc="evaluate", unit="length", mode="bar"):
        time.sleep(0.3)
    assert "length 30000 still running after " in capsys.readouterr().err


def test_a_pack_whose_evaluation_its_solo_runs_would_refuse_is_refused_unwritten(
    tmp_path, monkeypatch, single_thread
):
    """lengen.estimate_bound bounded a solo run's evaluation, not a pack's (src/lengen/pack)."""
    from lengen.errors import ConfigError
    from lengen.estimate_bound import MAX_EVAL_HOURS_VARIABLE
    from lengen.pack import train_pack
    from test_pack import small

    monkeypatch.setenv("LENGEN_CACHE_DIR", str(tmp_path / "cache"))  # nothing measured: rough
    monkeypatch.setenv(MAX_EVAL_HOURS_VARIABLE, "1e-9")  # any evaluation longer than training
    cfgs = [small("trainer.max_steps=1", f"seed={seed}") for seed in (0, 1)]
    dirs = [tmp_path / "pack" / str(seed) for seed in (0, 1)]
    with pytest.raises(ConfigError, match=r"^eval.lengths: the evaluation is estimated at "):
        train_pack(cfgs, dirs)
    assert not (tmp_path / "pack").exists()


FULL = os.strerror(errno.ENOSPC)


def full_disk(*args, **kwargs):
    raise OSError(errno.ENOSPC, FULL)


@pytest.fixture(scope="module")
def disk_stays_full(tmp_path_factory, single_thread):
    """A task run (debug=fast, every figure kind of a task run, effective remembrance too)
    whose figures and then results.json find the disk full (DF03, UP03) -> (run dir, the
    results it meant to write, the error it ended with)."""
    from lengen.train import run

    run_dir = tmp_path_factory.mktemp("disk_stays_full") / "run"
    cfg = compose_train("data.len=4", "eval.lengths=[4,8]", "model.d_model=32", "eval.effrem=true")
    meant: dict = {}

    def results_meet_a_full_disk(path, results):
        meant.update(results)
        full_disk()

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("matplotlib.figure.Figure.savefig", full_disk)
        patch.setattr("lengen.results.write_results", results_meet_a_full_disk)
        with pytest.raises(Exception) as raised:
            run(cfg, run_dir=run_dir)
    return run_dir, meant, raised.value


def test_results_that_meet_a_full_disk_end_the_run_with_exit_4(disk_stays_full):
    from lengen.cli import EXIT_STATUS, ONE_LINE

    _, _, error = disk_stays_full
    assert isinstance(error, ONE_LINE) and EXIT_STATUS[type(error)] == 4


def test_results_that_meet_a_full_disk_are_one_line_naming_the_file(disk_stays_full):
    run_dir, _, error = disk_stays_full
    line = str(error)
    assert "\n" not in line
    assert line.startswith(f"{run_dir / 'results.json'} could not be written ({FULL})")
    assert line.endswith("then resume=true with the same hydra.run.dir evaluates it again")


def test_results_that_meet_a_full_disk_keep_the_rows_and_the_checkpoint(disk_stays_full):
    run_dir, _, error = disk_stays_full
    rows = json.loads((run_dir / ".results.partial.json").read_text())["rows"]
    assert {row["length"] for row in rows} == {4, 8}
    assert (run_dir / "checkpoints" / "last.ckpt").is_file()
    assert "kept: the measured rows in .results.partial.json and checkpoints/last.ckpt" in str(
        error
    )


def test_the_remembrance_figure_that_finds_the_disk_full_is_noted(disk_stays_full):
    """tests/plots/test_guard.py covers the other kinds; eval.effrem's figure too."""
    _, meant, _ = disk_stays_full
    note = f"figure effective_remembrance not written (OSError: [Errno {errno.ENOSPC}] {FULL})"
    assert note in meant["warnings"]
