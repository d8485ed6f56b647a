"""A run refused only once built (its model's own check) leaves nothing in a fresh working
directory: not its run folder, and not the results/runs/ Hydra made for it (trial case TK18 left
an empty results/runs/). A results/runs/ that was there before stays."""

from __future__ import annotations

import yaml

from helpers import CONFIG_DIR, run_train
from lengen.preflight.launch import DEFAULT_RUNS_FOLDER

#: refused at build: NoPE reads no positions, so task positions would change nothing
REFUSED_AT_BUILD = ("debug=fast", "eval.lengths=[8,16]", "data=addition",
                    "data.task.positions=coupled", "pe=nope")  # fmt: skip


def test_the_default_folder_is_where_the_hydra_config_puts_single_runs():
    hydra = yaml.safe_load((CONFIG_DIR / "hydra" / "default.yaml").read_text())
    assert hydra["run"]["dir"].startswith(f"{DEFAULT_RUNS_FOLDER.as_posix()}/")


def test_a_refusal_at_build_in_a_fresh_folder_leaves_no_results_folder(tmp_path):
    done = run_train(*REFUSED_AT_BUILD, cwd=tmp_path, one_thread=True)
    assert done.returncode == 2 and "data.task.positions" in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_refusal_at_build_keeps_a_results_folder_that_was_there(tmp_path):
    kept = tmp_path / "results" / "runs" / "earlier"
    kept.mkdir(parents=True)
    done = run_train(*REFUSED_AT_BUILD, cwd=tmp_path, one_thread=True)
    assert done.returncode == 2
    assert [p.name for p in (tmp_path / "results" / "runs").iterdir()] == ["earlier"]
