"""A sweep's attention-diagnostics figure names what its lengths count: tokens for language
modelling (it said input symbols for WikiText-2), input symbols for tasks."""

from __future__ import annotations

import lengen.plots.common
from lengen.aggregate.diagnostics import write_sweep_diagnostics
from lengen.aggregate.load import load_runs
from sweep_fixture import write_run


def section() -> dict:
    stats = {"entropy": [1.0], "entropy_normalized": [0.5], "max_weight": [0.4],
             "sink_mass": [0.1], "bucket_mass": [[1.0]]}  # fmt: skip
    lengths = {str(n): {"tokens": n, "layers": {"0": stats}} for n in (4, 8)}
    return {"samples": 4, "layers": ["0"], "train_len": 4, "lengths": lengths,
            "buckets": ["0"], "statistics": list(stats), "skipped": []}  # fmt: skip


def x_label(tmp_path, monkeypatch, **results) -> str:
    figures = []
    monkeypatch.setattr(
        lengen.plots.common, "save_figure", lambda fig, *a, **k: figures.append(fig) or []
    )
    write_run(tmp_path / "sweep", "run", extra={"attention_diagnostics": section()}, **results)
    write_sweep_diagnostics(load_runs(tmp_path / "sweep", None, 0.9), tmp_path / "out")
    (figure,) = figures
    return " ".join(ax.get_xlabel() for ax in figure.axes)


def test_a_text_sweep_counts_tokens(tmp_path, monkeypatch):
    assert "(tokens)" in x_label(tmp_path, monkeypatch, ppl={4: 20.0, 8: 25.0})
