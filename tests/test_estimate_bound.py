"""lengen.estimate_bound: an evaluation estimated at hours after seconds of training is refused
before training, unless LENGEN_MAX_EVAL_HOURS allows it (the hostile trial's O15, O15b, O16)."""

from __future__ import annotations

import pytest

from lengen.errors import ConfigError
from lengen.estimate_bound import (
    MAX_EVAL_HOURS_VARIABLE,
    check_evaluation_time,
    long_evaluation_refusal,
)
from lengen.preflight.resources import check_evaluation_bound

HOUR = 3600.0


def parts(evaluate: float, step: float = 0.2, guessed=()) -> dict:
    """Estimate.parts's entries the bound reads."""
    return {"evaluate": evaluate, "step": step, "start": 1.0, "guessed": list(guessed)}


@pytest.fixture(autouse=True)
def default_bound(monkeypatch):
    monkeypatch.delenv(MAX_EVAL_HOURS_VARIABLE, raising=False)


def test_ten_hours_of_evaluation_after_seconds_of_training_is_refused():
    refusal = long_evaluation_refusal(parts(10 * HOUR), steps=4, key="eval.lengths")
    assert refusal.startswith("eval.lengths: the evaluation is estimated at 10h00m, longer ")
    assert f"{MAX_EVAL_HOURS_VARIABLE}=<hours>" in refusal


def test_an_evaluation_shorter_than_its_training_is_not_refused():
    assert long_evaluation_refusal(parts(3 * HOUR, step=1.0), steps=100_000, key="k") is None


def test_an_evaluation_under_the_bound_is_not_refused():
    assert long_evaluation_refusal(parts(0.9 * HOUR), steps=4, key="eval.lengths") is None


def test_the_variable_raises_the_bound(monkeypatch):
    monkeypatch.setenv(MAX_EVAL_HOURS_VARIABLE, "24")
    assert long_evaluation_refusal(parts(10 * HOUR), steps=4, key="eval.lengths") is None


def test_a_rough_estimate_says_so():
    refusal = long_evaluation_refusal(
        parts(10 * HOUR, guessed=["teacher_forced evaluation"]), steps=4, key="eval.lengths"
    )
    assert "(a rough estimate: nothing like it measured here)" in refusal


def test_the_refusal_names_eval_factors_where_they_set_the_lengths():
    from omegaconf import OmegaConf

    cfg = OmegaConf.create({"eval": {"lengths": None, "factors": [1, 1000]}})
    with pytest.raises(ConfigError, match=r"^eval.factors: the evaluation is estimated"):
        check_evaluation_time(cfg, parts(10 * HOUR), steps=4)


@pytest.mark.parametrize("value", ["abc", "0", "-1", "nan"])
def test_a_bound_that_is_no_number_of_hours_is_refused_by_the_pre_check(monkeypatch, value):
    monkeypatch.setenv(MAX_EVAL_HOURS_VARIABLE, value)
    with pytest.raises(ConfigError, match=rf"^{MAX_EVAL_HOURS_VARIABLE}={value}: allowed: a "):
        check_evaluation_bound()


def test_the_run_is_refused_before_training_once_its_estimate_is_made(tmp_path, monkeypatch):
    import torch

    from helpers import start_run_timing

    monkeypatch.setenv("LENGEN_CACHE_DIR", str(tmp_path))  # nothing measured: a rough estimate
    with pytest.raises(ConfigError, match=r"^eval.lengths: the evaluation is estimated at "):
        start_run_timing(
            torch.nn.Linear(16, 16),
            tmp_path,
            model_cfg={"n_layers": 2, "d_model": 16},
            samples=1000,
            lengths=[8, 1_000_000],
        )


def test_eval_py_is_bounded_by_the_hours_alone():
    refusal = long_evaluation_refusal(parts(2 * HOUR), steps=0, key="eval.lengths")
    assert refusal.startswith(
        f"eval.lengths: the evaluation is estimated at 2h00m, longer than {MAX_EVAL_HOURS_VARIABLE}=1 h;"
    )


def reevaluation(tmp_path, monkeypatch, lengths):
    from types import SimpleNamespace

    import torch
    from omegaconf import OmegaConf

    from lengen.estimate_bound import check_reevaluation_time

    monkeypatch.setenv("LENGEN_CACHE_DIR", str(tmp_path))  # nothing measured: a rough estimate
    cfg = OmegaConf.create(
        {
            "model": {"n_layers": 2, "d_model": 16},
            "eval": {"samples": 1000, "decoding": "teacher_forced", "lengths": lengths},
        }
    )
    data = SimpleNamespace(sequence_length=lambda n: 2 * n + 1)
    return check_reevaluation_time(cfg, torch.nn.Linear(16, 16), data, lengths, "cpu")


def test_eval_py_refuses_an_evaluation_of_hours(tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match=r"^eval.lengths: the evaluation is estimated at "):
        reevaluation(tmp_path, monkeypatch, [8, 1_000_000])


def test_eval_py_says_its_estimate(tmp_path, monkeypatch):
    assert reevaluation(tmp_path, monkeypatch, [8, 16]).startswith("estimate: ≈ ")
