"""lengen.section_shapes: a part of the wrong kind inside a results.json section the sweep
diagnostics read (an answer-position accuracy list that is NaN, a layer that is a string) fails
its run with the part named, as a section that is no object does (AN04), instead of ending
plot.py in a TypeError traceback after some figures were written (issue #51: PL05b)."""

from __future__ import annotations

import math
import subprocess
import sys

from lengen.aggregate.load import load_runs
from sweep_fixture import write_run


def _positions(accuracy) -> dict:
    entry = {"accuracy": accuracy, "scored": 4, "bin_width": 1}
    section = {"train_len": 4, "protocols": {"teacher_forced": {"8": entry}}}
    return {"accuracy_by_answer_position": section}


def test_an_answer_position_accuracy_that_is_nan_fails_the_run_naming_the_part(tmp_path):
    write_run(tmp_path, "r", accuracy={4: 1.0, 8: 0.5}, extra=_positions(math.nan))
    (run,) = load_runs(tmp_path, None, 0.9)
    assert (run.status, run.reason) == (
        "failed",
        'results.json: accuracy_by_answer_position.protocols.teacher_forced["8"].accuracy '
        "is NaN, not a list",
    )


def test_an_attention_layer_that_is_a_string_fails_the_run_naming_the_part(tmp_path):
    section = {"lengths": {"8": {"tokens": 8, "layers": {"0": "garbage"}}}}
    write_run(tmp_path, "r", accuracy={4: 1.0}, extra={"attention_diagnostics": section})
    (run,) = load_runs(tmp_path, None, 0.9)
    assert run.reason == (
        'results.json: attention_diagnostics.lengths["8"].layers.0 is str, not an object'
    )


def test_plot_py_lists_a_run_with_a_nan_accuracy_list_instead_of_a_traceback(tmp_path):
    from helpers import ROOT

    write_run(tmp_path, "good", accuracy={4: 1.0, 8: 0.5}, extra=_positions([1.0, None]))
    write_run(tmp_path, "bad", accuracy={4: 1.0, 8: 0.5}, extra=_positions(math.nan))
    script = str(ROOT / "scripts" / "plot.py")
    command = [sys.executable, script, str(tmp_path), "--out", str(tmp_path / "f")]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert (done.returncode, "Traceback" in done.stderr) == (0, False), done.stderr[-2000:]
    # plot.py writes no failed.csv: its failed-runs line names the run and the damaged part
    (warning,) = [line for line in done.stderr.splitlines() if "failed or missing" in line]
    assert warning.endswith(
        ': bad (results.json: accuracy_by_answer_position.protocols.teacher_forced["8"].accuracy '
        "is NaN, not a list)"
    )


def test_plot_py_runs_leaves_out_only_the_damaged_figure_with_one_warning(tmp_path, capsys):
    from lengen.plots.redraw import redraw_run

    run_dir = write_run(tmp_path, "bad", accuracy={4: 1.0, 8: 0.5}, extra=_positions(math.nan))
    paths = redraw_run(run_dir)
    assert sorted(path.name for path in paths) == ["extrapolation.pdf", "extrapolation.png"]
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line == (
        f"warning: {run_dir / 'results.json'}: accuracy_by_answer_position.protocols."
        'teacher_forced["8"].accuracy is NaN, not a list; its figure is not drawn'
    )
