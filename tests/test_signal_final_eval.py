"""A SIGTERM during the final evaluation lets the evaluation finish (docs/scaling.md); one line
on stderr now says so, or the user would not know why the run did not stop (issue #51's
remarks: SR7)."""

from __future__ import annotations

import signal

import pytest

from helpers import compose_train
from lengen import process
from lengen.train import run

FAST = ["debug=fast", "eval.factors=[1]", "logger=none", "trainer.max_steps=2"]


@pytest.fixture
def no_signal_left():
    yield
    process.acted_on_signal()  # a later test in this process starts without it


def test_a_sigterm_during_the_final_evaluation_is_named_in_one_line(
    tmp_path, monkeypatch, capsys, no_signal_left
):
    import lengen.train

    real = lengen.train.evaluate_and_write

    def signalled(*args, **kwargs):  # the signal arrives while the evaluation runs
        process._remember(signal.SIGTERM, None)
        return real(*args, **kwargs)

    monkeypatch.setattr(lengen.train, "evaluate_and_write", signalled)
    results = run(compose_train(*FAST), run_dir=tmp_path)
    assert results["eval"] and (tmp_path / "results.json").is_file()
    (line,) = [x for x in capsys.readouterr().err.splitlines() if x.startswith("SIGTERM")]
    assert line.startswith("SIGTERM received after training ended: the final evaluation was")
