"""The default experiment (``python train.py``) learns its task: the one slow learning check of
the README's first command. A file of its own, so that pytest-xdist's ``--dist loadfile`` runs it
beside the rest of the suite instead of after the other tests of test_train.py."""

from __future__ import annotations

import pytest

from helpers import compose_train
from lengen.train import run


@pytest.mark.slow
def test_default_experiment_learns_in_distribution(tmp_path):
    """The demo's own settings (python train.py) reach accuracy >= 0.9 at the training length."""
    cfg = compose_train("logger=none", "trainer.enable_progress_bar=false", fast=False)
    results = run(cfg, run_dir=tmp_path)
    at_train_len = next(r for r in results["eval"] if r["length"] == cfg.data.len)
    assert at_train_len["accuracy"] >= 0.9
