"""lengen.plots.guard: a figure that cannot be written (a full disk: DF03, UP03) is noted in
results.json's ``warnings`` and costs nothing else, for every figure kind a run draws."""

from __future__ import annotations

import errno
import json
import os

import pytest

from helpers import compose_train
from lengen.plots.guard import draw, figures_noted

FULL = os.strerror(errno.ENOSPC)


def full_disk(*args, **kwargs):
    raise OSError(errno.ENOSPC, FULL)


@pytest.fixture(scope="module")
def full_disk_run(tmp_path_factory, single_thread):
    """A task run (debug=fast) whose every ``savefig`` finds the disk full -> (run dir,
    results.json as written)."""
    from lengen.train import run

    run_dir = tmp_path_factory.mktemp("full_disk") / "run"
    cfg = compose_train("data.len=4", "eval.lengths=[4,8]", "model.d_model=32")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("matplotlib.figure.Figure.savefig", full_disk)
        run(cfg, run_dir=run_dir)
    return run_dir, json.loads((run_dir / "results.json").read_text())


#: the figures a task run draws after training, by the name its note gives
RUN_FIGURES = ("extrapolation.png", "accuracy_by_position", "attention_diagnostics")


def test_a_run_whose_figures_find_the_disk_full_writes_its_results(full_disk_run):
    _, results = full_disk_run
    assert results["eval"] and {row["length"] for row in results["eval"]} == {4, 8}


@pytest.mark.parametrize("figure", RUN_FIGURES)
def test_a_run_figure_that_finds_the_disk_full_is_noted(full_disk_run, figure):
    _, results = full_disk_run
    note = f"figure {figure} not written (OSError: [Errno {errno.ENOSPC}] {FULL})"
    assert note in results["warnings"]


def _depth(tmp_path):
    from lengen.evaluation.by_depth import write_depth_report

    rows = [{"length": 8, "depth_bin": b, "exact_match": 1.0, "accuracy": 1.0} for b in range(2)]
    report = {"task": "passkey", "protocol": "teacher_forced", "bins": 2,
              "train_lengths": [4, 8], "rows": rows}  # fmt: skip
    write_depth_report(report, tmp_path)
    return "accuracy_by_depth.png"


def _loss_by_position(tmp_path):
    from lengen.evaluation.text import write_position_report

    by_position = {8: {"loss": [3.0] * 8, "count": [4] * 8}}
    write_position_report(tmp_path, "", by_position, [{"length": 8, "stride": 8}], 8, "nonoverlap")
    return "loss_by_position.png"


#: the figures other data draw (passkey's depth, text's loss by position), by their writers
WRITERS = {"accuracy_by_depth": _depth, "loss_by_position": _loss_by_position}


@pytest.mark.parametrize("kind", sorted(WRITERS))
def test_a_figure_of_other_data_that_finds_the_disk_full_is_noted(tmp_path, monkeypatch, kind):
    monkeypatch.setattr("matplotlib.figure.Figure.savefig", full_disk)
    with figures_noted() as notes:
        name = WRITERS[kind](tmp_path)
    assert notes == [f"figure {name} not written (OSError: [Errno {errno.ENOSPC}] {FULL})"]


def test_a_figure_outside_a_run_raises_its_failure():
    """scripts/plot.py: the figure is the whole job, so its failure is an error."""
    with pytest.raises(OSError, match=FULL):
        draw("x.png", full_disk)


def test_a_figure_that_failed_is_closed(tmp_path, monkeypatch):
    from lengen.plots.common import pyplot

    monkeypatch.setattr("matplotlib.figure.Figure.savefig", full_disk)
    before = set(pyplot().get_fignums())
    with figures_noted():
        _depth(tmp_path)
    assert set(pyplot().get_fignums()) == before
