"""A fine-tune whose base run moved with it (copied from a scratch folder into results/) keeps
its configuration: its ``init_from`` path is gone, and the folder of the same name above it
stands for the base (``lengen.aggregate.load._base_hash``)."""

from __future__ import annotations

import yaml

from lengen.aggregate.load import config_hash

BASE = {"seed": 0, "pe": {"name": "rope"}, "data": {"name": "passkey", "len": 16}}


def fine_tune(init_from: str) -> dict:
    return {"seed": 0, "pe": {"name": "nope"}, "init_from": init_from}


def sweep(tmp_path, base: dict):
    """<sweep>/<base run>/config.yaml and <sweep>/drope/<run>_drope/ (the fine-tune's folder)."""
    (tmp_path / "base_run").mkdir()
    (tmp_path / "base_run" / "config.yaml").write_text(yaml.safe_dump(base))
    (near := tmp_path / "drope" / "base_run_drope").mkdir(parents=True)
    return near


def test_a_moved_base_counts_as_the_base_it_was(tmp_path):
    near = sweep(tmp_path, BASE)
    gone = fine_tune("/nonexistent/scratch/base_run")
    found = fine_tune(str(tmp_path / "base_run"))
    assert config_hash(gone, near=near) == config_hash(found)


def test_another_base_of_that_name_gives_another_configuration(tmp_path):
    near = sweep(tmp_path, {**BASE, "seed": 1, "pe": {"name": "alibi"}})
    gone = fine_tune("/nonexistent/scratch/base_run")
    assert config_hash(gone, near=near) != config_hash(fine_tune(str(tmp_path / "x")))
    other = tmp_path / "a" / "b" / "c" / "run"  # the base is 4 folders up: not looked for
    assert config_hash(gone, near=near) != config_hash(gone, near=other)
