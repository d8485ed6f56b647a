"""lengen.estimate with a damaged calibration file: NaN, inf, negative or absurd entries are
left out, the line says so once, and the estimate comes from the rest (the hostile trial's
ES09, ES09b: "estimate: none (OverflowError …)")."""

from __future__ import annotations

import json
import math

import pytest

from lengen.estimate import FORMAT, Estimate
from lengen.estimate_entries import sound_entries

GOOD_STEP = [1e9, 0.1, 1.0]  # (FLOPs, seconds, contention)
DAMAGED = {
    "nan_and_inf": {"train": [[1e9, math.inf, 1.0]], "start": [[math.nan, 1.0]]},
    "absurd": {"train": [[1e9, 1e300, 1.0]], "start": [[1e300, 1.0]]},
    "negative": {"train": [[-1e9, 0.1, 1.0]], "start": [[-5.0, 1.0]]},
    "instant": {"train": [[1e9, 1e-300, 1.0]], "start": [["x", 1.0]]},
}


def estimate_from(tmp_path, entries: dict) -> Estimate:
    path = tmp_path / "calibration.json"
    # json writes NaN and Infinity, as a damaged file may hold them
    path.write_text(json.dumps({"version": FORMAT, "machines": {"here": entries}}))
    return Estimate(path, "here", "cpu", load=0)


@pytest.mark.parametrize("case", sorted(DAMAGED))
def test_a_damaged_calibration_still_gives_an_estimate(tmp_path, case):
    line = estimate_from(tmp_path, DAMAGED[case]).line(100, 1e9, 1e9, "teacher_forced", 2)
    assert line.startswith("estimate: ≈ ")


@pytest.mark.parametrize("case", sorted(DAMAGED))
def test_the_line_says_how_many_entries_were_left_out(tmp_path, case):
    line = estimate_from(tmp_path, DAMAGED[case]).line(100, 1e9, 1e9, "teacher_forced", 2)
    assert "; 2 damaged calibration entries (NaN, inf, negative or absurd) left out of " in line


def test_the_sound_entries_give_the_estimate(tmp_path):
    entries = {"train": [[1e9, math.inf, 1.0], GOOD_STEP]}
    parts = estimate_from(tmp_path, entries).parts(100, 1e9, 1e9, "teacher_forced", 2)
    assert parts["step"] == pytest.approx(0.1)


def test_sound_entries_are_kept_whole():
    calibration = {"train": [GOOD_STEP], "start": [[2.0, 1.0], 3.0]}
    assert sound_entries(calibration) == (calibration, 0)


def test_recording_drops_the_damaged_entries(tmp_path):
    estimate = estimate_from(tmp_path, {"train": [[1e9, math.inf, 1.0], GOOD_STEP]})
    estimate.record(1e9, 0.2, 1e9, 1.0, "teacher_forced", 1.0, load=0)
    written = json.loads((tmp_path / "calibration.json").read_text())["machines"]["here"]
    assert written["train"] == [GOOD_STEP, [1e9, 0.2, 1.0]]
