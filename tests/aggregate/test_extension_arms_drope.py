"""The arms side by side (issue #48, docs/reproductions.md (j)): DroPE recalibrations, trained
runs of their own (results.json ``init_from.route = "drope"``), join the training-free arms of
the RoPE configuration they start from, as method ``DroPE``, and one figure and table hold
every arm of every task (scripts/plot_extension_arms.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from helpers import ROOT, assert_png
from lengen.aggregate import aggregate
from lengen.aggregate.extension_arms import arms_rows
from sweep_fixture import write_run

SCRIPT = ROOT / "scripts" / "plot_extension_arms.py"


def arms_sweep(folder, drope_exact=0.7, task="copy"):
    """One RoPE seed re-evaluated under YaRN ×4, and its DroPE recalibration under drope/."""
    task = {"data.name": task}
    name = f"{task['data.name']}_rope0"
    base = write_run(folder, name, pe="rope", accuracy={4: 1.0, 8: 0.2}, overrides=task)
    extra = {"overrides": ["pe.scaling=yarn", "pe.scaling_factor=4"], "tag": "yarn4"}
    write_run(folder, name, pe="rope", accuracy={4: 1.0, 8: 0.5},
              results_file="results.yarn4.json", extra=extra, overrides=task)  # fmt: skip
    start = {"path": f"/elsewhere/{base.name}", "route": "drope", "run_id": base.name, "pe": "rope"}
    write_run(folder / "drope", f"{name}_drope", pe="nope", accuracy={4: 1.0, 8: drope_exact},
              overrides={"init_from": str(base), **task}, extra={"init_from": start})  # fmt: skip
    return folder


def test_a_drope_recalibration_is_a_method_of_the_configuration_it_starts_from(tmp_path):
    rows = arms_rows(aggregate(arms_sweep(tmp_path / "s"), metric="accuracy"))
    at_eight = {row["method"]: row for row in rows if row["length"] == 8}
    assert list(at_eight) == ["none", "YaRN ×4", "DroPE"]
    assert at_eight["DroPE"]["base_hash"] == at_eight["none"]["base_hash"]
    assert at_eight["DroPE"]["mean"] == pytest.approx(0.7)


def test_a_fine_tuned_run_is_not_drope(tmp_path):
    folder = arms_sweep(tmp_path / "s")
    write_run(folder / "tuned", "rope0_tuned", pe="rope", accuracy={4: 1.0, 8: 0.9},
              overrides={"init_from": str(folder / "copy_rope0"), "data.len": 8},
              extra={"init_from": {"path": "x", "route": "fine-tune"}})  # fmt: skip
    methods = {row["method"] for row in arms_rows(aggregate(folder, metric="accuracy"))}
    assert methods == {"none", "YaRN ×4", "DroPE"}


def test_one_figure_and_one_table_hold_every_task_of_a_sweep(tmp_path):
    sweep = arms_sweep(tmp_path / "s")
    arms_sweep(sweep, 0.4, "passkey")
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, str(SCRIPT), str(sweep), "--out", str(out),
                           "--metric", "accuracy"], capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert_png(out / "extrapolation_extension_arms.png")
    table = (out / "extension_arms.md").read_text()
    assert "| DroPE | 1 | 1.000 | 0.700 |" in table and "| DroPE | 1 | 1.000 | 0.400 |" in table


def test_a_folder_without_re_evaluations_is_refused_in_one_line_writing_nothing(tmp_path):
    write_run(tmp_path / "s", "copy_rope0", pe="rope", accuracy={4: 1.0, 8: 0.2})
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "s"), "--out", str(out)],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert (done.returncode, done.stderr.count("\n")) == (2, 1), done.stderr
    assert done.stderr.startswith(f"error: {tmp_path / 's'}: no run with eval.py re-evaluations")
    assert not out.exists()


def test_the_figure_names_an_arms_keys_by_its_papers_letters():
    from lengen.plots.extension_arms import short_label

    label = "Self-Extend, pe.self_extend_group=16, pe.self_extend_window=8, pe.x=1"
    assert short_label(label) == "Self-Extend G=16, W=8, pe.x=1"
