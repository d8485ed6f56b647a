"""lengen.load_run: a finished run back in Python, equal to what the run evaluated."""

from __future__ import annotations

import pytest
import torch

import lengen
from helpers import compose_train
from lengen.checks import ConfigError
from lengen.evaluation.tasks import score_lengths
from lengen.train import run

# its runs are read for numbers and files, never figures: each is built, not rasterised
pytestmark = pytest.mark.usefixtures("single_thread", "unsaved_run_figures")


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("run")
    results = run(compose_train("pe=alibi", "eval.lengths=[4,8]"), run_dir=run_dir)
    return run_dir, results


def test_load_run_returns_the_config_and_results(finished):
    run_dir, results = finished
    loaded = lengen.load_run(run_dir)
    assert loaded.config.pe.name == "alibi"
    assert loaded.lengths == [4, 8]
    assert loaded.results == results


def test_loaded_model_reproduces_the_results_rows(finished):
    run_dir, results = finished
    loaded = lengen.load_run(run_dir)
    settings = loaded.config.eval
    rows = score_lengths(
        loaded.model, loaded.data, loaded.lengths, samples=settings.samples, progress=False
    )
    for row, saved in zip(rows, results["eval"], strict=True):
        assert (row["length"], row["accuracy"], row["loss"]) == (
            saved["length"],
            saved["accuracy"],
            pytest.approx(saved["loss"], rel=1e-6),
        )


def test_load_run_applies_overrides(finished):
    run_dir, _ = finished
    assert lengen.load_run(run_dir, ["eval.lengths=[16]"]).lengths == [16]


def test_loaded_weights_are_the_checkpoints(finished):
    run_dir, _ = finished
    state = torch.load(run_dir / "checkpoints" / "last.ckpt", weights_only=False)["state_dict"]
    model = lengen.load_run(run_dir).model
    for name, tensor in model.state_dict().items():
        torch.testing.assert_close(tensor, state[f"model.{name}"])


def test_load_run_refuses_a_directory_without_a_run(tmp_path):
    with pytest.raises(ConfigError, match=r"^run="):
        lengen.load_run(tmp_path)
