"""Training to a criterion (trainer.criterion_*): stop once validation stays at the target."""

from __future__ import annotations

import pytest

from helpers import compose_train
from lengen.train import run

# its runs are read for numbers and files, never figures: each is built, not rasterised
pytestmark = pytest.mark.usefixtures("single_thread", "unsaved_run_figures")


def criterion_run(tmp_path, *overrides):
    cfg = compose_train(
        "trainer.max_steps=20", "trainer.val_check_interval=2", "eval.lengths=[8]", *overrides
    )
    return run(cfg, run_dir=tmp_path)


def test_training_stops_once_the_criterion_holds_for_enough_checks(tmp_path):
    # per-token accuracy >= 0.01 holds from the first validation: two checks in a row at step 4
    results = criterion_run(
        tmp_path,
        "trainer.criterion_target=0.01",
        "trainer.criterion_metric=accuracy",
        "trainer.criterion_checks=2",
    )
    assert results["train_steps"] == 4
    assert results["criterion"]["reached"] is True
    assert results["criterion"]["reached_at_step"] == 4


def test_an_unreached_criterion_trains_the_whole_budget(tmp_path):
    results = criterion_run(tmp_path, "trainer.criterion_target=1.0")
    assert results["train_steps"] == 20
    assert results["criterion"] == {
        "metric": "val/exact_match",
        "target": 1.0,
        "checks": 3,
        "reached": False,
        "reached_at_step": None,
    }


def test_without_a_criterion_results_say_so(tmp_path):
    assert criterion_run(tmp_path)["criterion"] is None
