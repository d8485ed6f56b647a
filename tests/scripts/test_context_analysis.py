"""scripts/context_analysis.py: the short-context model's arithmetic and the table it prints."""

from __future__ import annotations

import json
import math

import pytest

from helpers import load_script


@pytest.fixture(scope="module")
def analysis():
    return load_script("context_analysis")


def test_short_context_loss_is_the_prefix_mean_up_to_the_training_length(analysis):
    curve = [4.0, 3.0, 2.0, 1.0]  # loss at positions 0..3 of training-length windows
    assert analysis.short_context_loss(curve, 2) == pytest.approx(3.5)
    assert analysis.short_context_loss(curve, 4) == pytest.approx(2.5)


def test_short_context_loss_past_the_training_length_uses_the_second_half(analysis):
    curve = [4.0, 3.0, 2.0, 1.0]  # second half's mean: 1.5
    assert analysis.short_context_loss(curve, 8) == pytest.approx((10.0 + 4 * 1.5) / 8)


def write_run(folder, pe, seed, losses, tagged=None):
    run = folder / f"{pe}_seed{seed}"
    run.mkdir()
    rows = [{"length": n, "loss": loss} for n, loss in losses.items()]
    (run / "results.json").write_text(json.dumps({"pe": pe, "train_len": 2, "eval": rows}))
    curve = {"2": {"loss": [2.0, 1.0]}}
    (run / "loss_by_position.json").write_text(
        json.dumps({"protocol": "nonoverlap", "lengths": curve})
    )
    if tagged is not None:
        rows = [{"length": n, "loss": loss} for n, loss in tagged.items()]
        (run / "results.sliding32.json").write_text(json.dumps({"eval": rows}))


def test_table_averages_loss_over_seeds_before_exponentiating(analysis, tmp_path, capsys):
    write_run(tmp_path, "alibi", 0, {2: 1.0, 4: 2.0}, tagged={2: 1.0, 4: 1.0})
    write_run(tmp_path, "alibi", 1, {2: 3.0, 4: 2.0}, tagged={2: 3.0, 4: 1.0})
    assert analysis.main([str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    # length 4: short-context model (2 + 1 + 2 · 1) / 4 = 1.25 for both seeds
    assert f"| alibi | 2 | 4 | {math.e**2:.1f} | {math.exp(1.25):.1f} | {math.e:.1f} |" in lines
    assert f"| alibi | 2 | 2 | {math.e**2:.1f} | {math.exp(1.5):.1f} | {math.e**2:.1f} |" in lines


def test_a_missing_tagged_evaluation_shows_a_dash(analysis, tmp_path, capsys):
    write_run(tmp_path, "rope", 0, {2: 1.0})
    assert analysis.main([str(tmp_path)]) == 0
    assert f"| rope | 1 | 2 | {math.e:.1f} | {math.exp(1.5):.1f} | – |" in capsys.readouterr().out


def test_a_folder_without_language_modelling_runs_is_an_error(analysis, tmp_path, capsys):
    (tmp_path / "copy_run").mkdir()
    (tmp_path / "copy_run" / "results.json").write_text(json.dumps({"pe": "rope", "eval": []}))
    assert analysis.main([str(tmp_path)]) == 1
    assert "no language-modelling runs" in capsys.readouterr().out
