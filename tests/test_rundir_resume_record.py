"""lengen.rundir.rules.resume_refusal: resuming needs the run's config.yaml, the record it is
checked against: a checkpoint without it, or an emptied one, is refused in one short line
(issue #51 item 9: RS06 resumed and finished without config.yaml, which eval.py and
aggregate.py then refused; RS09 listed every key in a 2.4 KB line, from an empty key)."""

from __future__ import annotations

from pathlib import Path

from helpers import compose_train
from lengen.rundir import resume_refusal, save_config

FAST = ("eval.lengths=[8]",)


def interrupted_run(run_dir: Path) -> Path:
    save_config(compose_train(*FAST), run_dir / "config.yaml")
    (run_dir / "checkpoints").mkdir()
    (run_dir / "checkpoints" / "last.ckpt").write_bytes(b"a checkpoint")
    return run_dir


def test_a_checkpoint_without_config_yaml_is_refused(tmp_path):
    (interrupted_run(tmp_path) / "config.yaml").unlink()
    refusal = resume_refusal(compose_train(*FAST, "resume=true"), tmp_path)
    assert refusal.startswith(f"resume=true: {tmp_path} holds a checkpoint but no config.yaml")


def test_an_emptied_config_yaml_is_refused_in_a_short_line(tmp_path):
    (interrupted_run(tmp_path) / "config.yaml").write_text("")
    refusal = resume_refusal(compose_train(*FAST, "resume=true"), tmp_path)
    assert refusal.startswith(f"resume: {tmp_path / 'config.yaml'} cannot be read (empty")
    assert len(refusal) < 300


def test_starting_again_without_a_checkpoint_drops_the_earlier_failure(tmp_path):
    # S08c: resume=auto on a folder with failed.json and no checkpoint finished beside it
    from lengen.rundir import LOCK, RunDirectory

    save_config(compose_train(*FAST), tmp_path / "config.yaml")
    (tmp_path / LOCK).write_text("")
    (tmp_path / "failed.json").write_text('{"error": "KeyboardInterrupt"}')
    try:
        assert RunDirectory(tmp_path).start(compose_train(*FAST, "resume=auto")) is None
    finally:
        RunDirectory.release_all()
    assert not (tmp_path / "failed.json").exists()


def test_a_finished_runs_results_cut_short_are_one_line(tmp_path):
    # SW8: a sweep's job met a corrupt results.json with a JSONDecodeError traceback
    import pytest

    from lengen.errors import ConfigError
    from lengen.rundir import RunDirectory

    save_config(compose_train(*FAST), tmp_path / "config.yaml")
    (tmp_path / "results.json").write_text('{"pe": "ro')
    with pytest.raises(ConfigError, match=r"^hydra\.run\.dir: .*results\.json cannot be read"):
        RunDirectory(tmp_path).finished(compose_train(*FAST, "resume=auto"))
