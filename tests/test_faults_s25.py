"""Issue #51's leftovers of 2026-12-02 (helper-F's brief): a pack sweep on SLURM bounded by the
pre-check as a local one is, a signal during a pack's final evaluation said as a solo run's, the
failed-runs warning true for each of its callers. One property per test."""

from __future__ import annotations

import pytest

from lengen.errors import ConfigError

#: a pack sweep small enough to build at once (debug=fast: a few steps), as
#: tests/test_faults_round3b.py's local one
PACK = ("-m", "seed=0,1", "hydra.sweeper.pack=2", "debug=fast", "trainer.accelerator=cpu")


def test_a_slurm_pack_whose_evaluation_its_solo_runs_would_refuse_is_refused_by_the_precheck(
    tmp_path, monkeypatch
):
    """hydra/launcher=slurm skipped the pre-check's bound (the pack's job refused it on the
    node, after the sweep folder was written and the jobs submitted; the sweep exited 1)."""
    from lengen.estimate_bound import MAX_EVAL_HOURS_VARIABLE
    from lengen.preflight import precheck

    # SLURM itself is not asked here (no scheduler needed): the launcher's own checks pass
    monkeypatch.setattr("lengen.preflight.launchers.check_launcher", lambda launcher: None)
    monkeypatch.setenv("LENGEN_CACHE_DIR", str(tmp_path / "cache"))  # nothing measured: rough
    monkeypatch.setenv(MAX_EVAL_HOURS_VARIABLE, "1e-9")  # any evaluation longer than training
    sweep = tmp_path / "sweep"
    arguments = [*PACK, "hydra/launcher=slurm", "eval.lengths=[8,64]", f"hydra.sweep.dir={sweep}"]
    with pytest.raises(ConfigError, match=r"^eval.lengths: the evaluation is estimated at "):
        precheck(arguments)
    assert not sweep.exists()


@pytest.fixture
def no_signal_left():
    from lengen import process

    yield
    process.acted_on_signal()  # a later test in this process starts without it


def test_a_sigterm_during_a_packs_final_evaluation_is_named_in_one_line(
    tmp_path, monkeypatch, capsys, single_thread, no_signal_left
):
    """A solo run said so (lengen.train.signal_after_training, SR7); a pack said nothing."""
    import signal

    import lengen.train
    from lengen import process
    from lengen.pack import train_pack
    from test_pack import small

    real = lengen.train.evaluate_and_write

    def signalled(*args, **kwargs):  # the signal arrives while a member is evaluated
        process._remember(signal.SIGTERM, None)
        return real(*args, **kwargs)

    monkeypatch.setattr(lengen.train, "evaluate_and_write", signalled)
    cfgs = [small("trainer.max_steps=2", "logger=none", f"seed={seed}") for seed in (0, 1)]
    dirs = [tmp_path / str(seed) for seed in (0, 1)]
    train_pack(cfgs, dirs)
    assert all((path / "results.json").is_file() for path in dirs)
    (line,) = [x for x in capsys.readouterr().err.splitlines() if x.startswith("SIGTERM")]
    assert line == (
        "SIGTERM received after training ended: the final evaluation of the pack's 2 runs was "
        "finished and their results.json written (the runs are complete; nothing to resume)"
    )


def _a_sweep_with_a_failed_run(folder):
    """A finished run and one whose results.json cannot be read (a failed run)."""
    from sweep_fixture import write_run

    write_run(folder, "good", accuracy={4: 1.0, 8: 0.5})
    write_run(folder, "bad", seed=1, accuracy={4: 1.0, 8: 0.5})
    (folder / "bad" / "results.json").write_text("{cut")


def _failed_line(err: str) -> str:
    (line,) = [x for x in err.splitlines() if "failed or missing run" in x]
    return line


def test_aggregate_py_names_the_files_it_wrote_that_list_the_failed_runs(tmp_path, capsys):
    """With --metric accuracy its summary is summary.accuracy.md: that file is named (the
    line said summary.md, which it had not written)."""
    from lengen.aggregate.command import main

    _a_sweep_with_a_failed_run(tmp_path)
    assert main([str(tmp_path), "--metric", "accuracy"]) == 0
    line = _failed_line(capsys.readouterr().err)
    assert "1 failed or missing run(s), listed in summary.accuracy.md and failed.csv: bad (" in line
    assert (tmp_path / "summary.accuracy.md").is_file() and (tmp_path / "failed.csv").is_file()


def test_plot_py_says_no_file_lists_the_failed_runs(tmp_path, capsys):
    """plot.py writes neither summary.md nor failed.csv; its line said it listed them there."""
    from helpers import load_script

    _a_sweep_with_a_failed_run(tmp_path)
    assert load_script("plot").main([str(tmp_path), "--out", str(tmp_path / "f")]) == 0
    line = _failed_line(capsys.readouterr().err)
    assert line.startswith("warning: 1 failed or missing run(s): bad (")
    assert not list(tmp_path.rglob("failed*.csv")) and not list(tmp_path.rglob("summary*.md"))


def test_two_sweeps_started_in_the_same_second_get_two_default_folders(monkeypatch):
    """The default hydra.sweep.dir was to the second: two sweeps started together asked for
    one folder and the second was refused by the sweep lock (the re-run's SN28b)."""
    import datetime

    from hydra import compose, initialize_config_dir

    from helpers import CONFIG_DIR

    class SameSecond(datetime.datetime):
        microsecond_now = 0

        @classmethod
        def now(cls, tz=None):  # Hydra's ${now:} resolver asks this
            return datetime.datetime(2026, 12, 2, 0, 57, 35, cls.microsecond_now)

    monkeypatch.setattr("hydra.core.utils.datetime", SameSecond)
    folders = []
    for microsecond in (1000, 900000):  # each sweep composes its own config, as train.py does
        SameSecond.microsecond_now = microsecond
        with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
            cfg = compose("train", overrides=["seed=0"], return_hydra_config=True)
            folders.append(str(cfg.hydra.sweep.dir))
    assert folders[0] != folders[1]


def test_a_run_started_again_over_an_attempts_logs_gets_no_lightning_warning(
    tmp_path, single_thread
):
    """resume=auto on a run stopped before its first checkpoint starts it again at step 0;
    Lightning's CSV logger warned, a site-packages path as the first stderr line, that the
    attempt's logs would be deleted (the re-run's SN12b, after f3bb831 fixed the resumed case)."""
    import shutil
    import warnings

    from helpers import compose_train, unsaved_figures
    from lengen.train import run

    fast = ("eval.lengths=[8]", "trainer.max_steps=2", "trainer.checkpoint_every_n_steps=null",
            "model.n_layers=1", "model.d_model=16", "model.d_ff=32")  # fmt: skip
    with unsaved_figures():  # the logs are tested, not the figures
        run(compose_train(*fast), run_dir=tmp_path)
    # what an attempt stopped before its first checkpoint leaves: config.yaml and logs/
    (tmp_path / "results.json").unlink()
    shutil.rmtree(tmp_path / "checkpoints", ignore_errors=True)
    with warnings.catch_warnings(record=True) as caught, unsaved_figures():
        warnings.simplefilter("always")
        results = run(compose_train(*fast, "resume=auto"), run_dir=tmp_path)
    assert results["eval"] and not results["resumed"]
    assert not [w for w in caught if "exists and is not empty" in str(w.message)]


@pytest.mark.parametrize("launcher", [[], ["hydra/launcher=slurm"]], ids=["local", "slurm"])
def test_a_sweep_whose_evaluation_a_single_run_would_refuse_is_refused_by_the_precheck(
    tmp_path, monkeypatch, launcher
):
    """A -m sweep without packs passed the pre-check; each job refused it after the sweep
    folder was written (each run 'refused', exit 1; on SLURM after submitting)."""
    from lengen.estimate_bound import MAX_EVAL_HOURS_VARIABLE
    from lengen.preflight import precheck

    monkeypatch.setattr("lengen.preflight.launchers.check_launcher", lambda launcher: None)
    monkeypatch.setenv("LENGEN_CACHE_DIR", str(tmp_path / "cache"))  # nothing measured: rough
    monkeypatch.setenv(MAX_EVAL_HOURS_VARIABLE, "1e-9")  # any evaluation longer than training
    sweep = tmp_path / "sweep"
    arguments = ["-m", "seed=0,1", "debug=fast", "trainer.accelerator=cpu", *launcher]
    with pytest.raises(ConfigError, match=r"^eval.lengths: the evaluation is estimated at "):
        precheck([*arguments, "eval.lengths=[8,64]", f"hydra.sweep.dir={sweep}"])
    assert not sweep.exists()


def test_skip_invalid_skips_a_job_whose_evaluation_a_single_run_would_refuse(tmp_path, monkeypatch):
    """hydra.sweeper.skip_invalid=true checks each job as a single run: the evaluation's bound
    was not among those checks, so the job ran and was refused after the sweep was written."""
    from lengen.estimate_bound import MAX_EVAL_HOURS_VARIABLE
    from lengen.preflight import SKIP_INVALID, precheck, sweeps

    monkeypatch.setattr(sweeps, "_SWEEP_JOBS", {})  # this test's verdicts only, left behind
    monkeypatch.setenv("LENGEN_CACHE_DIR", str(tmp_path / "cache"))  # nothing measured: rough
    monkeypatch.setenv(MAX_EVAL_HOURS_VARIABLE, "0.02")  # 72 s: [8] about 5 s, [8,8192] minutes
    arguments = ["-m", "debug=fast", "trainer.accelerator=cpu", f"{SKIP_INVALID}=true"]
    lengths = "eval.lengths=[8],[8,8192]"
    assert precheck([*arguments, lengths, f"hydra.sweep.dir={tmp_path / 'sweep'}"]) is None
    reasons = {job[-1]: why for job, why in sweeps._SWEEP_JOBS.items()}
    assert reasons["eval.lengths=[8]"] is None
    assert reasons["eval.lengths=[8,8192]"].startswith("eval.lengths: the evaluation is estimated")
