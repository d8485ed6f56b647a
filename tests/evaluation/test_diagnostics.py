"""Attention diagnostics at every evaluation length (``eval.diagnostics``): they change no row
and no random state, and they land in results.json and the run directory."""

from __future__ import annotations

import json

import pytest
import torch
from omegaconf import OmegaConf

from helpers import compose_train
from lengen.build import build
from lengen.evaluation import evaluate
from lengen.evaluation.diagnostics import attention_diagnostics

pytestmark = pytest.mark.usefixtures("single_thread")

#: what a row measures about its own cost: differs between any two evaluations
COST_KEYS = ("seconds", "peak_mem_mb")


def built(*overrides: str):
    cfg = compose_train("data.len=6", "eval.lengths=[6,12]", "model.d_model=32", *overrides)
    data, model, lengths = build(cfg)
    return cfg, data, model, lengths


def scored_rows(diagnostics: bool, tmp_path) -> list[dict]:
    cfg, data, model, lengths = built(f"eval.diagnostics={str(diagnostics).lower()}")
    torch.manual_seed(0)  # the same weights both times
    model.load_state_dict(built()[2].state_dict())
    rows = evaluate(data, model, lengths, settings=cfg.eval, output_dir=tmp_path, progress=False)
    return [{k: v for k, v in row.items() if k not in COST_KEYS} for row in rows]


def test_rows_are_identical_with_and_without_diagnostics(tmp_path):
    assert scored_rows(True, tmp_path / "on") == scored_rows(False, tmp_path / "off")


def test_diagnostics_leave_the_random_state_as_they_found_it():
    _, data, model, lengths = built()
    before = torch.get_rng_state()
    attention_diagnostics(data, model, lengths, samples=2, evaluated=8)
    assert torch.equal(torch.get_rng_state(), before)


def test_every_length_layer_and_head_gets_each_statistic():
    _, data, model, lengths = built()
    section = attention_diagnostics(data, model, lengths, samples=2, evaluated=8)
    shapes = {
        (length, layer, statistic, len(values))
        for length, entry in section["lengths"].items()
        for layer, stats in entry["layers"].items()
        for statistic, values in stats.items()
    }
    expected = {
        (str(length), layer, statistic, 4)  # 4 heads
        for length in lengths
        for layer in ("0", "1")
        for statistic in section["statistics"]
    }
    assert shapes == expected


def test_text_windows_get_diagnostics(corpus):
    train, valid = corpus
    cfg, data, model, _ = built("data=text", f"data.files.train={train}",
                                f"data.files.validation={valid}", "data.tokenizer=byte")  # fmt: skip
    section = attention_diagnostics(data, model, [8, 16], samples=2, evaluated=8)
    assert sorted(section["lengths"]) == ["16", "8"]


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """A debug=fast run of the default experiment at lengths 4 and 8, with the default figure
    formats (debug=fast alone writes PNG only)."""
    from lengen.train import run

    run_dir = tmp_path_factory.mktemp("run")
    overrides = (
        "data.len=4",
        "eval.lengths=[4,8]",
        "model.d_model=32",
        "eval.plot_formats=[png,pdf]",
    )
    run(compose_train(*overrides), run_dir=run_dir)
    return run_dir


SECTIONS = {"attention_diagnostics", "accuracy_by_answer_position"}


def test_a_run_records_diagnostics_and_answer_positions(finished_run):
    results = json.loads((finished_run / "results.json").read_text())
    assert set(results) >= SECTIONS


@pytest.mark.parametrize("stem", ["attention_diagnostics", "attention_diagnostics_distance",
                                  "accuracy_by_position"])  # fmt: skip
def test_a_run_writes_each_figure_as_png_and_pdf(finished_run, stem):
    assert all((finished_run / f"{stem}.{fmt}").stat().st_size > 0 for fmt in ("png", "pdf"))


def test_load_run_gives_the_sections_to_notebooks(finished_run):
    import lengen

    assert set(lengen.load_run(finished_run).diagnostics) == SECTIONS


def test_turning_diagnostics_off_removes_the_section(tmp_path):
    cfg, data, model, lengths = built("eval.diagnostics=false")
    report: dict = {}
    evaluate(data, model, lengths, settings=cfg.eval, report=report, progress=False)
    assert "attention_diagnostics" not in report


def test_the_diagnostics_keys_default_to_on_with_four_instances():
    cfg = compose_train(fast=False)
    assert OmegaConf.to_container(cfg.eval)["diagnostics"] is True
    assert cfg.eval.diagnostics_samples == 4
