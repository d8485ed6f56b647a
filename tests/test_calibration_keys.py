"""The machine's calibration keyed by what costs (the run's mechanism as well as its FLOPs) and
weighed by the machine's load when a time was measured (lengen.estimate, issue #52 item 2)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from helpers import compose_train
from lengen import estimate as estimate_module
from lengen.estimate import Estimate, machine_load, mechanism_key
from lengen.progress import StepTimer

MACHINE = "cpu · test CPU · 2 threads"
ROPE, PATH, FOX = "RoPE · DecoderOnly", "PaTH · DecoderOnly", "ForgettingAttention · DecoderOnly"


def calibrated(tmp_path, *runs, load=0.0):
    """A calibration file holding ``runs``: (mechanism, step seconds) each, at 1 GFLOP a step."""
    path = tmp_path / "timings.json"
    for mechanism, step in runs:
        Estimate(path, MACHINE, "cpu", mechanism, load=0.0).record(
            1e9, step, 1e9, 4.0, "t", 2.0, load=load
        )
    return path


# -- by mechanism -------------------------------------------------------------------------------
def test_a_mechanism_measured_here_reads_its_own_step_time(tmp_path):
    # FLOPs alone would read RoPE's 0.1 s: the fastest at this size
    path = calibrated(tmp_path, (ROPE, 0.1), (PATH, 0.3))
    line = Estimate(path, MACHINE, "cpu", PATH, load=0.0).line(1000, 1e9, 1e9, "t")
    assert "1,000 steps × 0.3 s" in line


def test_a_mechanism_not_measured_here_falls_back_to_the_flops(tmp_path):
    path = calibrated(tmp_path, (ROPE, 0.1), (PATH, 0.3))
    line = Estimate(path, MACHINE, "cpu", FOX, load=0.0).line(1000, 1e9, 1e9, "t")
    assert "1,000 steps × 0.1 s" in line


def test_the_line_says_it_read_the_flops_alone(tmp_path):
    path = calibrated(tmp_path, (ROPE, 0.1))
    line = Estimate(path, MACHINE, "cpu", FOX, load=0.0).line(1000, 1e9, 1e9, "t")
    assert line.endswith(f"; by FLOPs alone: no {FOX} run measured here yet)")


def test_the_line_says_it_read_its_own_mechanism(tmp_path):
    path = calibrated(tmp_path, (PATH, 0.3))
    line = Estimate(path, MACHINE, "cpu", PATH, load=0.0).line(1000, 1e9, 1e9, "t")
    assert line.endswith(f"; steps and evaluation from {PATH} runs)")


def test_a_run_records_under_its_mechanism_and_the_flops_alone(tmp_path):
    path = calibrated(tmp_path, (PATH, 0.3))
    kinds = json.loads(path.read_text())["machines"][MACHINE]
    assert {"train", f"train · {PATH}", "eval t", f"eval t · {PATH}", "start"} == set(kinds)


def test_the_mechanism_is_the_encodings_class_and_the_models():
    assert mechanism_key(compose_train("pe=fox")) == FOX


def test_a_forced_attention_kernel_is_a_mechanism_of_its_own():
    cfg = compose_train("pe=alibi", "model.attention=flex")
    assert mechanism_key(cfg) == "ALiBi · DecoderOnly · attention=flex"


# -- under load ----------------------------------------------------------------------------------
def test_a_step_timed_under_load_calibrates_its_quiet_time(tmp_path):
    # measured 0.6 s while 3 threads ran per core: a quiet machine's step takes 0.2 s
    path = calibrated(tmp_path, (ROPE, 0.6), load=3.0)
    line = Estimate(path, MACHINE, "cpu", ROPE, load=0.0).line(1000, 1e9, 1e9, "t")
    assert "1,000 steps × 0.2 s" in line


def test_an_estimate_under_load_is_slower_and_says_so(tmp_path):
    path = calibrated(tmp_path, (ROPE, 0.2))
    line = Estimate(path, MACHINE, "cpu", ROPE, load=2.0).line(1000, 1e9, 1e9, "t")
    assert "1,000 steps × 0.4 s" in line and "; × 2 for the load now (2 a core)" in line


def test_a_load_below_one_a_core_slows_nothing(tmp_path):
    path = calibrated(tmp_path, (ROPE, 0.2), load=0.7)
    line = Estimate(path, MACHINE, "cpu", ROPE, load=0.5).line(1000, 1e9, 1e9, "t")
    assert "1,000 steps × 0.2 s" in line and "load now" not in line


def test_the_load_is_the_load_average_per_core(monkeypatch):
    monkeypatch.delenv(estimate_module.LOAD_VARIABLE, raising=False)
    monkeypatch.setattr(estimate_module.os, "getloadavg", lambda: (6.0, 1.0, 1.0))
    monkeypatch.setattr(estimate_module.os, "sched_getaffinity", lambda pid: {0, 1})
    assert machine_load() == pytest.approx(3.0)


def test_the_environment_can_set_the_load(monkeypatch):
    monkeypatch.setenv(estimate_module.LOAD_VARIABLE, "2.5")
    assert machine_load() == pytest.approx(2.5)


def test_the_step_timer_samples_the_load_while_training(monkeypatch):
    loads = iter([1.0, 3.0, 5.0])
    monkeypatch.setattr("lengen.progress.machine_load", lambda: next(loads))
    timer = StepTimer()
    for step in (1, 2):  # the second step within LOAD_EVERY of the first: not sampled
        timer.on_train_batch_end(SimpleNamespace(global_step=step), None, None, None, 0)
    # the sample at the first step (1.0) and one when asked (3.0)
    assert timer.mean_load() == pytest.approx(2.0)
