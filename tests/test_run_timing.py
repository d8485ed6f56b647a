"""results.json's ``timing``: what a run's training cost (``lengen.train.timing_entry``), the
figures a pilot sizes a recipe by."""

from __future__ import annotations

import json

import pytest

from helpers import compose_train
from lengen.estimate import MIN_TIMED_STEPS
from lengen.train import run

pytestmark = pytest.mark.usefixtures("single_thread", "unsaved_run_figures")


@pytest.fixture(scope="module")
def twenty(tmp_path_factory):
    """A small solo run of ``MIN_TIMED_STEPS`` steps, the fewest timed: (its results as
    returned, the folder)."""
    folder = tmp_path_factory.mktemp("timed")
    cfg = compose_train(
        f"trainer.max_steps={MIN_TIMED_STEPS}", "trainer.val_check_interval=50", "eval.lengths=[8]",
        "model.d_model=32", "model.n_layers=1", "model.n_heads=2", "data.batch_size=8",
    )  # fmt: skip
    return run(cfg, run_dir=folder), folder


def test_timing_counts_every_step_this_process_trained(twenty):
    results, _ = twenty
    assert results["timing"]["steps"] == results["train_steps"] == MIN_TIMED_STEPS


def test_the_fit_time_covers_the_timed_steps(twenty):
    timing = twenty[0]["timing"]
    assert timing["step_seconds"] > 0
    assert timing["fit_seconds"] >= timing["step_seconds"] * (timing["steps"] - 1)


def test_timing_records_the_load_it_was_measured_under(twenty):
    assert twenty[0]["timing"]["load"] >= 0


def test_results_json_holds_the_timing_returned(twenty):
    results, folder = twenty
    assert json.loads((folder / "results.json").read_text())["timing"] == results["timing"]
