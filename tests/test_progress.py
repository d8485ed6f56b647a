"""Progress where nobody watches (lengen.progress): bars on a terminal, a line every N steps in a
log file, and the setting that forces either."""

from __future__ import annotations

import io
from types import SimpleNamespace

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.hydra_config import HydraConfig

from helpers import CONFIG_DIR, compose_train, run_train
from lengen import progress
from lengen.progress import duration, each, every_n_steps, progress_mode, step_line
from lengen.train import run


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def on_terminal():
    return (Terminal(), Terminal())


def in_file():
    return (io.StringIO(), io.StringIO())


def test_a_terminal_gets_bars():
    assert progress_mode(True, on_terminal()) == "bar"


def test_redirected_output_gets_lines():
    assert progress_mode(True, in_file()) == "lines"


def test_one_redirected_stream_is_enough_for_lines():
    # `python train.py > log.txt` from a terminal: Lightning's bars would go into the file
    assert progress_mode(True, (io.StringIO(), Terminal())) == "lines"


@pytest.mark.parametrize(
    ("setting", "streams", "mode"),
    [("bar", in_file, "bar"), ("lines", on_terminal, "lines"), (False, on_terminal, "off")],
)
def test_an_explicit_setting_wins_over_the_output(setting, streams, mode):
    assert progress_mode(setting, streams()) == mode


@pytest.fixture
def hydra_job():
    """set(overrides…): Hydra's runtime config as a job of a sweep sees it; restored after."""
    saved = HydraConfig.instance().cfg

    def set_job(*overrides: str):
        with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
            cfg = compose("train", overrides=list(overrides), return_hydra_config=True)
        HydraConfig.instance().set_config(cfg)

    yield set_job
    HydraConfig.instance().cfg = saved


def test_jobs_of_a_parallel_sweep_get_lines_on_a_terminal(hydra_job):
    pytest.importorskip("hydra_plugins.hydra_joblib_launcher")
    hydra_job("hydra/launcher=joblib", "hydra.mode=MULTIRUN")
    assert progress_mode(True, on_terminal()) == "lines"


def test_jobs_of_a_sequential_sweep_keep_bars_on_a_terminal(hydra_job):
    hydra_job("hydra.mode=MULTIRUN")
    assert progress_mode(True, on_terminal()) == "bar"


@pytest.mark.parametrize(("max_steps", "every"), [(2000, 100), (6000, 300), (30, 2), (4, 1)])
def test_a_run_prints_about_twenty_lines(max_steps, every):
    assert every_n_steps(max_steps) == every


@pytest.mark.parametrize(("seconds", "text"), [(7.4, "7s"), (185, "3m05s"), (7620, "2h07m")])
def test_durations_are_short(seconds, text):
    assert duration(seconds) == text


def test_a_step_line_says_where_how_fast_and_how_long():
    line = step_line("run", 500, 2000, 0.12345, 10.0)
    assert line == "[run] step 500/2000 (25%) · loss 0.1235 · 10 steps/s · 2m30s left"


def test_the_last_step_line_has_no_time_left():
    assert "left" not in step_line("run", 2000, 2000, 0.1, 10.0)


def test_each_prints_a_line_per_item_in_lines_mode(capsys):
    assert list(each([16, 32, 64], desc="evaluate", unit="length", mode="lines")) == [16, 32, 64]
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(" done")[0] for line in lines] == [
        f"evaluate: length {length}" for length in (16, 32, 64)
    ]


def test_each_weighs_the_time_left_by_what_remains(capsys, monkeypatch):
    clock = iter([0.0, 2.0, 8.0])  # the start, then after each item
    monkeypatch.setattr(progress, "time", SimpleNamespace(monotonic=lambda: next(clock)))
    items = each([16, 48], desc="evaluate", unit="length", mode="lines", cost=lambda n: n)
    assert list(items) == [16, 48]
    first = capsys.readouterr().out.splitlines()[0]
    assert first.endswith("in 2s, 6s left")  # 2 s for 16, so 6 s for 48


def test_each_is_silent_when_off(capsys):
    assert list(each([1, 2], desc="evaluate", unit="length", mode="off")) == [1, 2]
    assert capsys.readouterr() == ("", "")


@pytest.fixture(scope="module")
def redirected_run(tmp_path_factory, single_thread, unsaved_run_figures):
    """A run whose stdout and stderr are no terminal (files, as a SLURM log), progress asked
    for -> what it printed (.stdout, .stderr). In this process: progress_mode reads the
    streams, not the process (``python train.py`` itself: the refusal test below)."""
    import contextlib

    # debug=fast turns progress off: true asks for it back; 40 steps -> a line every 2. The
    # attention diagnostics print nothing (lengen.evaluation), nor do the figures (unsaved)
    cfg = compose_train(
        "data.len=4",
        "logger=none",
        "trainer.enable_progress_bar=true",
        "trainer.max_steps=40",
        "eval.factors=[1,2]",
        "eval.diagnostics=false",
    )
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        run(cfg, run_dir=tmp_path_factory.mktemp("progress") / "run")
    return SimpleNamespace(stdout=out.getvalue(), stderr=err.getvalue())


def test_a_redirected_run_logs_lines_every_n_steps(redirected_run):
    lines = redirected_run.stdout.splitlines()
    steps = [line.split()[2] for line in lines if line.startswith("[run] step")]
    assert steps == [f"{step}/40" for step in range(2, 41, 2)]


def test_a_redirected_run_logs_a_line_per_evaluated_length(redirected_run):
    lines = [line for line in redirected_run.stdout.splitlines() if "evaluate:" in line]
    assert [line.split(" left")[0].split(" in ")[0] for line in lines] == [
        "[run] evaluate: length 4 done (1/2)",
        "[run] evaluate: length 8 done (2/2)",
    ]


def test_a_redirected_run_writes_no_carriage_return(redirected_run):
    assert "\r" not in redirected_run.stdout + redirected_run.stderr


def test_bar_forces_lightnings_bars_into_a_file(tmp_path, capsys):
    cfg = compose_train("data.len=4", "eval.factors=[1]", "logger=none", "eval.diagnostics=false")
    cfg.trainer.enable_progress_bar = "bar"
    run(cfg, run_dir=tmp_path)
    assert "\r" in capsys.readouterr().out  # tqdm redraws: what a terminal wants


def test_another_value_is_refused_in_one_line_before_anything_is_written(tmp_path):
    done = run_train("trainer.enable_progress_bar=bars", f"hydra.run.dir={tmp_path / 'run'}")
    assert done.returncode == 2
    assert done.stderr == (
        "error: trainer.enable_progress_bar must be one of true, false, bar, lines; got 'bars'\n"
    )
    assert not (tmp_path / "run").exists()
