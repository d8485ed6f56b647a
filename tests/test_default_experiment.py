"""The default experiment (``python train.py``) learns its task: the one slow learning check of
the README's first command. A file of its own, so that pytest-xdist's ``--dist loadfile`` runs it
beside the rest of the suite instead of after the other tests of test_train.py."""

from __future__ import annotations

import pytest

from helpers import compose_train
from lengen.train import run


@pytest.mark.slow
def test_default_experiment_learns_in_distribution(tmp_path):
    """The demo's own settings (python train.py) reach accuracy >= 0.9 at the training length
    within their step budget. The run stops at the first validation (every 500 steps) that
    holds 0.95, and evaluates only the training length: what this checks, without the rest of
    the 2,000 steps and the longer lengths. The learning-rate schedule keeps its 2,000-step
    horizon, so the steps it does train are the default run's."""
    cfg = compose_train(
        "logger=none",
        "trainer.enable_progress_bar=false",
        "trainer.criterion_target=0.95",
        "trainer.criterion_metric=accuracy",
        "trainer.criterion_checks=1",
        "eval.factors=[1]",
        "eval.diagnostics=false",  # attention statistics and their figures: no part of learning
        fast=False,
    )
    results = run(cfg, run_dir=tmp_path)
    assert results["criterion"]["reached"]
    assert results["criterion"]["reached_at_step"] <= cfg.trainer.max_steps
    at_train_len = next(r for r in results["eval"] if r["length"] == cfg.data.len)
    assert at_train_len["accuracy"] >= 0.9
