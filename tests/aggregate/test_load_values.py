"""lengen.aggregate.load: values no run writes (a rate outside [0, 1], a negative loss, a
section that is no object) fail their run with the file and entry named, instead of entering
the statistics or ending the figures in a traceback (issue #51 items 5 and 7: AN03, AN04)."""

from __future__ import annotations

import json
import math

import pytest

from lengen.aggregate.load import load_runs
from sweep_fixture import write_run


def _damage(run_dir, change) -> None:
    path = run_dir / "results.json"
    results = json.loads(path.read_text())
    change(results)
    path.write_text(json.dumps(results))


def _the_run(folder):
    (run,) = load_runs(folder, None, 0.9)
    return run


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        ("exact_match", math.inf, "results.json: eval[1].exact_match=inf is outside [0, 1]"),
        ("accuracy", -5.0, "results.json: eval[1].accuracy=-5.0 is outside [0, 1]"),
        ("loss", -0.5, "results.json: eval[1].loss=-0.5 is outside [0, inf]"),
    ],
)
def test_a_metric_outside_its_range_fails_the_run_naming_it(tmp_path, key, value, reason):
    run_dir = write_run(tmp_path, "r", accuracy={4: 1.0, 8: 0.5})
    _damage(run_dir, lambda results: results["eval"][1].update({key: value}))
    run = _the_run(tmp_path)
    assert (run.status, run.reason) == ("failed", reason)


def test_a_section_that_is_no_object_fails_the_run_naming_it(tmp_path):
    write_run(tmp_path, "r", accuracy={4: 1.0}, extra={"attention_diagnostics": "garbage"})
    run = _the_run(tmp_path)
    assert run.reason == "results.json: attention_diagnostics is str, not an object"


def test_plot_py_lists_a_run_with_a_damaged_section_instead_of_a_traceback(tmp_path):
    import subprocess
    import sys

    from helpers import ROOT

    write_run(tmp_path, "good", accuracy={4: 1.0, 8: 0.5})
    write_run(tmp_path, "bad", accuracy={4: 1.0}, extra={"attention_diagnostics": "garbage"})
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "plot.py"),
            str(tmp_path),
            "--out",
            str(tmp_path / "f"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert "bad" in done.stderr
