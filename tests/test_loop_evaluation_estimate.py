"""A looped model's evaluation estimate counts its loops (#51 kept-back KB23: with
``model.loop_rule=confidence model.loop_extra=100000000`` the estimate said "evaluation 4s",
the evaluation bound let it through, and the evaluation never ended)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from omegaconf import OmegaConf

from helpers import start_run_timing
from lengen.errors import ConfigError
from lengen.estimate import eval_flops
from lengen.estimate_bound import MAX_EVAL_HOURS_VARIABLE
from lengen.model.looped import Depth, Looped, evaluation_passes


def looped(rule: str, extra: int = 0, loops: int = 2) -> torch.nn.Module:
    return torch.nn.Sequential(Looped(16, lambda tokens: loops, rule, extra))


def test_an_unlooped_stack_costs_one_pass():
    assert evaluation_passes(torch.nn.Sequential(Depth()), 64) == 1


def test_a_fixed_loop_costs_its_count():
    assert evaluation_passes(looped("fixed", loops=3), 64) == 3


def test_the_confidence_rule_costs_every_count_it_tries_and_the_one_it_keeps():
    # K_max = 2 + 3 = 5: passes of 1 … 5 loops (15), then the length at the count kept (≤ 5)
    assert evaluation_passes(looped("confidence", extra=3), 64) == 15 + 5


def test_the_evaluation_flops_scale_with_the_passes():
    one = eval_flops(1000, 2, 16, 4, [9, 17])
    assert eval_flops(1000, 2, 16, 4, [9, 17], passes=lambda t: 20) == pytest.approx(20 * one)


def start(model, tmp_path):
    model_cfg = {"n_layers": 2, "d_model": 16, "loop_rule": "confidence"}
    return start_run_timing(model, tmp_path, model_cfg=model_cfg, samples=1, lengths=[8, 16])


def test_a_confidence_loop_of_10_to_the_8_extra_counts_is_refused_before_training(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("LENGEN_CACHE_DIR", str(tmp_path))  # nothing measured: a rough estimate
    monkeypatch.delenv(MAX_EVAL_HOURS_VARIABLE, raising=False)
    with pytest.raises(ConfigError, match=r"^eval.lengths: the evaluation is estimated at "):
        start(looped("confidence", extra=10**8), tmp_path)


def test_the_shipped_confidence_loop_is_not_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("LENGEN_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv(MAX_EVAL_HOURS_VARIABLE, raising=False)
    assert start(looped("confidence", extra=20), tmp_path) is not None


def test_eval_py_refuses_a_confidence_loop_of_10_to_the_8_extra_counts(tmp_path, monkeypatch):
    from lengen.estimate_bound import check_reevaluation_time

    monkeypatch.setenv("LENGEN_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv(MAX_EVAL_HOURS_VARIABLE, raising=False)
    cfg = OmegaConf.create(
        {
            "model": {"n_layers": 2, "d_model": 16},
            "eval": {"samples": 1, "decoding": "teacher_forced", "lengths": [8, 16]},
        }
    )
    data = SimpleNamespace(sequence_length=lambda n: 2 * n + 1)
    model = looped("confidence", extra=10**8)
    assert check_reevaluation_time(cfg, model, data, [8, 16], "cpu").startswith("estimate: ≈ ")
    with pytest.raises(ConfigError, match=r"^eval.lengths: the evaluation is estimated at "):
        check_reevaluation_time(
            cfg, model, data, [8, 16], "cpu", passes=lambda t: evaluation_passes(model, t)
        )


def test_the_refusal_names_model_loop_extra_first(tmp_path, monkeypatch):
    monkeypatch.setenv("LENGEN_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv(MAX_EVAL_HOURS_VARIABLE, raising=False)
    with pytest.raises(ConfigError, match=r"; allowed: a smaller model.loop_extra, shorter eval"):
        start(looped("confidence", extra=10**8), tmp_path)


def test_a_version_3_calibration_loses_only_its_looped_evaluation_entries():
    from lengen.estimate import FORMAT
    from lengen.estimate_entries import upgraded

    entries = [[1e6, 0.5, 1.0]]
    machine = {
        "eval teacher_forced": entries,
        "eval teacher_forced · RoPE · DecoderOnly": entries,
        "eval teacher_forced · RoPE · DecoderOnly · loops=2 · loop_rule=confidence": entries,
        "eval greedy · RoPE · DecoderOnly · loop_rule=linear": entries,
        "train · RoPE · DecoderOnly · loops=2": entries,
    }
    data = upgraded({"version": 3, "machines": {"here": dict(machine)}})
    assert data["version"] == FORMAT == 4
    assert sorted(data["machines"]["here"]) == [
        "eval teacher_forced",
        "eval teacher_forced · RoPE · DecoderOnly",
        "train · RoPE · DecoderOnly · loops=2",
    ]
