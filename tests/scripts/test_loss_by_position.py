"""scripts/loss_by_position.py: bin means over seeds, the unigram baseline and the refusals,
on hand-made loss_by_position.json files (nothing trains)."""

from __future__ import annotations

import csv
import json
import subprocess
import sys

import numpy as np
import pytest

from helpers import ROOT, load_script


@pytest.fixture(scope="module")
def script():
    return load_script("loss_by_position")


def write_run(folder, pe, seed, loss, count=None, cache=None):
    """A finished run evaluated at length len(loss) with non-overlapping windows, trained at 2."""
    length = len(loss)
    count = count or [1] * length
    run = folder / f"{pe}_seed{seed}"
    run.mkdir()
    data = {"vocab_size": 3, "cache": cache} if cache else {}
    row = {"length": length, "loss": 0.0, "tokens_scored": sum(count)}
    (run / "results.json").write_text(
        json.dumps({"pe": pe, "seed": seed, "train_len": 2, "data": data, "eval": [row]})
    )
    curve = {str(length): {"stride": length, "loss": loss, "count": count}}
    (run / "loss_by_position.json").write_text(
        json.dumps({"protocol": "nonoverlap", "train_len": 2, "lengths": curve})
    )


def read_csv(folder, length=4):
    with open(folder / f"loss_by_position_len{length}.csv") as handle:
        return {(row["pe"], row["quantity"], row["bin"]): row for row in csv.DictReader(handle)}


def test_bin_mean_weights_positions_by_their_scored_tokens(script):
    assert script.bin_mean([1.0, 4.0, 9.0], [3, 1, 0], 0, 3) == pytest.approx(7.0 / 4)


def test_bins_average_positions_then_seeds_with_a_t_interval(script, tmp_path):
    write_run(tmp_path, "fox", 0, [4.0, 2.0, 3.0, 5.0])  # bins [0, 2) 3.0, [2, 4) 4.0
    write_run(tmp_path, "fox", 1, [6.0, 4.0, 1.0, 3.0])  # bins [0, 2) 5.0, [2, 4) 2.0
    assert script.main([str(tmp_path), "--length", "4", "--bins", "0,2,4", "--width", "2"]) == 0
    rows = read_csv(tmp_path)
    first, second = rows["fox", "loss", "[0, 2)"], rows["fox", "loss", "[2, 4)"]
    assert float(first["mean"]) == pytest.approx(4.0)
    assert float(second["mean"]) == pytest.approx(3.0)
    # two seeds: std = |a − b| / √2, half-width = t_{0.975, 1} · std / √2 = 12.706 · |a − b| / 2
    assert float(first["ci95_half_width"]) == pytest.approx(12.7062047 * 2.0 / 2)
    assert first["seeds"] == "0:3.0000 1:5.0000"
    assert (tmp_path / "loss_by_position_len4.png").is_file()
    assert (
        "| fox | loss | 2 | 4.000 ± 12.706 | 3.000 ± 12.706 |"
        in (tmp_path / "loss_by_position_len4.md").read_text()
    )


def test_differences_from_the_reference_are_paired_by_seed(script, tmp_path):
    write_run(tmp_path, "rope", 0, [4.0, 4.0, 4.0, 4.0])
    write_run(tmp_path, "rope", 1, [5.0, 5.0, 5.0, 5.0])
    write_run(tmp_path, "fox", 0, [3.0, 3.0, 3.0, 3.0])  # −1 against rope's seed 0
    write_run(tmp_path, "fox", 1, [4.0, 4.0, 4.0, 4.0])  # −1 against rope's seed 1
    assert script.main([str(tmp_path), "--length", "4", "--bins", "0,4"]) == 0
    difference = read_csv(tmp_path)["fox", "minus rope", "[0, 4)"]
    assert float(difference["mean"]) == pytest.approx(-1.0)
    assert float(difference["ci95_half_width"]) == pytest.approx(0.0)


def test_unigram_baseline_is_scored_on_the_same_tokens(script, tmp_path):
    corpus = tmp_path / "cache" / "corpora" / "k"
    corpus.mkdir(parents=True)
    np.save(corpus / "train.npy", np.array([0, 0, 1], dtype=np.int32))  # add-one: 3/6, 2/6, 1/6
    np.save(corpus / "validation.npy", np.array([2, 0, 1, 0, 2], dtype=np.int32))
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    write_run(
        sweep, "fox", 0, [1.0, 1.0, 1.0, 1.0], cache={"dir": str(tmp_path / "cache"), "key": "k"}
    )
    assert script.main([str(sweep), "--length", "4", "--bins", "0,2,4"]) == 0
    rows = read_csv(sweep)
    # one window of 4 predicts validation tokens 1..4: 0, 1, 0, 2
    nll = {0: -np.log(3 / 6), 1: -np.log(2 / 6), 2: -np.log(1 / 6)}
    assert float(rows["unigram", "loss", "[0, 2)"]["mean"]) == pytest.approx((nll[0] + nll[1]) / 2)
    assert float(rows["unigram", "loss", "[2, 4)"]["mean"]) == pytest.approx((nll[0] + nll[2]) / 2)


def test_a_folder_without_runs_is_refused_in_one_line(script, tmp_path, capsys):
    assert script.main([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no runs with a nonoverlap loss_by_position.json" in err


def test_a_missing_folder_is_refused_without_a_traceback(tmp_path):
    script = ROOT / "scripts" / "loss_by_position.py"
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "none")],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"loss_by_position.py: {tmp_path / 'none'}: not a folder"
    ]
