"""A -m sweep that skips the combinations that cannot run (hydra.sweeper.skip_invalid=true,
hydra_plugins.lengen_sweeper): the valid ones run, the refused ones are named at the start and
in the report, nothing is written for them, and no launcher is handed them."""

from __future__ import annotations

import functools
import json
import os
from types import SimpleNamespace

import pytest
from omegaconf import OmegaConf

from helpers import run_train
from lengen.checks import ConfigError
from lengen.cli import SweepReport
from lengen.preflight import precheck

#: the smallest sweep with a refused combination: xPos is causal-only, so an encoder refuses it
SWEEP = ("pe=rope,xpos", "model=encoder")
#: a few steps of everything, one evaluation length, nothing optional
FAST = ("debug=fast", "data.len=4", "eval.factors=[1]", "eval.diagnostics=false", "logger=none")
SKIP = "hydra.sweeper.skip_invalid=true"
XPOS_REFUSAL = "pe: XPos is defined for causal attention only"


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """One real sweep through train.py, two seeds so that a run finishes before another starts:
    rope runs (seeds 0, 1), xpos is skipped (seeds 0, 1). -> (result, sweep folder, cache)."""
    folder = tmp_path_factory.mktemp("skip") / "sweep"
    cache = tmp_path_factory.mktemp("cache")
    saved = os.environ.get("LENGEN_CACHE_DIR")
    os.environ["LENGEN_CACHE_DIR"] = str(cache)  # a machine never calibrated: a rough estimate
    try:
        result = run_train(
            "-m", *SWEEP, "seed=0,1", *FAST, SKIP, f"hydra.sweep.dir={folder}", one_thread=True
        )
    finally:
        if saved is None:
            os.environ.pop("LENGEN_CACHE_DIR")
        else:
            os.environ["LENGEN_CACHE_DIR"] = saved
    return result, folder, cache


def test_the_valid_combinations_run_and_the_sweep_succeeds(sweep):
    result, _, _ = sweep
    assert result.returncode == 0, result.stderr[-3000:]
    assert "sweep: 2 runs (2 trained)" in result.stdout


def test_nothing_is_written_for_a_skipped_combination(sweep):
    _, folder, _ = sweep
    runs = sorted(p.name for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
    assert len(runs) == 2 and all("_rope_" in name for name in runs), runs
    assert not any("xpos" in str(path) for path in folder.rglob("*")), "a skipped job wrote"


def test_each_skipped_combination_is_named_at_the_start_with_its_refusal(sweep):
    result, _, _ = sweep
    lines = result.stdout.splitlines()
    skipped = [i for i, line in enumerate(lines) if line.startswith("sweep: skipped ")]
    first_run = next(i for i, line in enumerate(lines) if line.startswith("sweep: run 1 of 2"))
    assert len(skipped) == 2 and max(skipped) < first_run
    assert lines[skipped[0]] == f"sweep: skipped pe=xpos seed=0: {refusal_of_xpos_encoder()}"
    assert "sweep: 2 runs, one after another, into" in lines[min(skipped) - 1]
    assert "2 combinations skipped" in lines[min(skipped) - 1]


def test_the_report_lists_the_skipped_apart_from_the_runs(sweep):
    result, _, _ = sweep
    report = result.stdout[result.stdout.index("sweep: 2 runs (2 trained)") :]
    assert "2 combinations skipped (hydra.sweeper.skip_invalid=true" in report
    assert f"  pe=xpos seed=1: {XPOS_REFUSAL}" in report
    assert "refused or failed" not in result.stderr  # skipped is neither


def test_each_job_says_which_run_of_how_many_and_the_time_left(sweep):
    result, _, _ = sweep
    assert "sweep: run 1 of 2 (copy_encoder_rope_len4_seed0_" in result.stdout
    second = next(line for line in result.stdout.splitlines() if "sweep: run 2 of 2" in line)
    assert "1 finished, ≈ " in second and second.endswith(" left")
    assert "; took " in result.stdout  # the report's total time


def test_each_run_prints_its_estimate_before_training(sweep):
    result, _, cache = sweep
    lines = [line for line in result.stdout.splitlines() if "] estimate: ≈ " in line]
    assert len(lines) == 2
    assert "rough:" in lines[0]  # nothing calibrated in a fresh cache
    # the first one counted: its evaluation (too few steps to time a step: MIN_TIMED_STEPS)
    assert "the rest calibrated by 1 finished run" in lines[1]
    assert (cache / "timings.json").is_file()


@functools.cache
def refusal_of_xpos_encoder() -> str:
    """What the pre-check says of that combination without skip_invalid: the same line."""
    with pytest.raises(ConfigError) as refused:
        precheck(["-m", *SWEEP, *FAST])
    assert str(refused.value).startswith(XPOS_REFUSAL)
    return str(refused.value)


# -- without a training run --------------------------------------------------------------------
def test_without_the_key_the_sweep_is_still_refused_whole():
    assert refusal_of_xpos_encoder().startswith(XPOS_REFUSAL)


def test_the_key_takes_true_or_false_only():
    with pytest.raises(ConfigError, match="hydra.sweeper.skip_invalid=yes: allowed: true, false"):
        precheck(["-m", *SWEEP, *FAST, "hydra.sweeper.skip_invalid=yes"])


def test_a_sweep_whose_every_combination_is_refused_is_refused_whole():
    with pytest.raises(ConfigError, match="every one of the sweep's 2 combinations is refused"):
        precheck(["-m", "pe=xpos", "model=encoder", "seed=0,1", *FAST, SKIP])


def test_a_key_that_does_not_exist_still_refuses_the_whole_sweep():
    with pytest.raises(ConfigError, match="model.d_modle: no such key"):
        precheck(["-m", *SWEEP, "model.d_modle=8,16", *FAST, SKIP])


class Launcher:
    """A launcher that only notes the jobs it is handed."""

    def __init__(self):
        self.batches = []

    def launch(self, job_overrides, initial_job_idx):
        from hydra.core.utils import JobReturn, JobStatus

        self.batches.append((initial_job_idx, [list(job) for job in job_overrides]))
        return [
            JobReturn(status=JobStatus.COMPLETED, _return_value="trained") for _ in job_overrides
        ]


def sweeper_for(tmp_path, *overrides: str, launcher=None):
    """lengen's sweeper as Hydra sets it up for ``overrides`` (a -m command line, checked by
    precheck first as train.py does), handing its jobs to ``launcher``."""
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra._internal.utils import create_config_search_path
    from hydra.core.plugins import Plugins
    from hydra.types import HydraContext, RunMode

    from helpers import CONFIG_DIR
    from hydra_plugins.lengen_sweeper import LengenSweeper

    command = [*overrides, f"hydra.sweep.dir={tmp_path}"]
    assert precheck(["-m", *command]) is None
    loader = ConfigLoaderImpl(config_search_path=create_config_search_path(str(CONFIG_DIR)))
    config = loader.load_configuration("train", command, run_mode=RunMode.MULTIRUN)
    context = HydraContext(config_loader=loader, callbacks=SimpleNamespace())
    # as Hydra makes it (its plugin scan re-imports the plugin modules: the class from there)
    sweeper = Plugins.instance().instantiate_sweeper(
        config=config, hydra_context=context, task_function=lambda cfg: None
    )
    assert type(sweeper).__name__ == LengenSweeper.__name__
    sweeper.launcher = launcher or Launcher()  # instead of the basic launcher it set up
    task = [o for o in overrides if not o.startswith("hydra")]
    return sweeper, task


def test_no_launcher_is_handed_a_skipped_job(tmp_path, capsys):
    sweeper, task = sweeper_for(tmp_path, "pe=rope,xpos", "model=decoder,encoder", *FAST, SKIP)

    def compose_again(*args, **kwargs):
        raise AssertionError("the pre-check composed and checked every job already")

    sweeper.hydra_context.config_loader.load_sweep_config = compose_again
    sweeper.sweep(task)
    [(first, jobs)] = sweeper.launcher.batches
    assert first == 0 and [job[:2] for job in jobs] == [
        ["pe=rope", "model=decoder"], ["pe=rope", "model=encoder"], ["pe=xpos", "model=decoder"]
    ]  # fmt: skip
    plan = SweepReport.read_plan(tmp_path)
    assert plan["runs"] == 3 and plan["workers"] == 1
    assert plan["skipped"] == [
        {"overrides": "pe=xpos model=encoder", "reason": refusal_of_xpos_encoder()}
    ]
    assert "sweep: skipped pe=xpos model=encoder: pe: XPos" in capsys.readouterr().out


def test_the_slurm_launcher_submits_the_sweepers_jobs_only(tmp_path):
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher")
    from hydra.core.utils import JobReturn, JobStatus

    from hydra_plugins.lengen_submitit_launcher import LengenSlurmLauncher

    class Job:
        job_id = "1_0"

        def done(self):
            return True

        def results(self):
            return [JobReturn(status=JobStatus.COMPLETED, _return_value="trained")]

    class Submitting(LengenSlurmLauncher):
        """The real launch (its wait included); the submission only notes the jobs."""

        def __init__(self):
            self.submitted = []

        def _submit(self, job_overrides, initial_job_idx):
            self.submitted += [list(job) for job in job_overrides]
            return [Job() for _ in job_overrides]

    launcher = Submitting()
    sweeper, task = sweeper_for(
        tmp_path, "pe=rope,xpos", "model=encoder", *FAST, SKIP, launcher=launcher
    )
    sweeper.sweep(task)
    assert [job[0] for job in launcher.submitted] == ["pe=rope"]


def test_a_run_that_fails_still_fails_a_sweep_with_skipped_combinations(tmp_path, capsys):
    skipped = [{"overrides": "pe=xpos", "reason": XPOS_REFUSAL}]
    SweepReport.write_plan(tmp_path, runs=1, workers=1, skipped=skipped)
    record = {"run_dir": str(tmp_path / "a"), "outcome": "failed: RuntimeError: boom"}
    (tmp_path / SweepReport.RECORDS / "0.json").write_text(json.dumps(record))
    config = OmegaConf.create({"hydra": {"sweep": {"dir": str(tmp_path)}}})
    with pytest.raises(SystemExit) as stop:
        SweepReport().on_multirun_end(config)
    out, err = capsys.readouterr()
    assert stop.value.code == 1 and "(1 failed)" in out and "1 combination skipped" in out
    assert "1 of 1 runs refused or failed" in err and "xpos" not in err


def test_skipped_combinations_alone_leave_the_exit_status_at_zero(tmp_path, capsys):
    SweepReport.write_plan(tmp_path, runs=1, workers=1, skipped=[{"overrides": "x", "reason": "y"}])
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "results.json").write_text('{"resumed": false}')
    record = {"run_dir": str(tmp_path / "a"), "outcome": "trained"}
    (tmp_path / SweepReport.RECORDS / "0.json").write_text(json.dumps(record))
    config = OmegaConf.create({"hydra": {"sweep": {"dir": str(tmp_path)}}})
    SweepReport().on_multirun_end(config)  # no SystemExit: status 0
    assert "1 combination skipped" in capsys.readouterr().out


def test_the_default_config_selects_lengens_sweeper_without_skipping():
    from hydra import compose, initialize_config_dir

    from helpers import CONFIG_DIR

    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        sweeper = compose("train", return_hydra_config=True).hydra.sweeper
    assert sweeper._target_ == "hydra_plugins.lengen_sweeper.LengenSweeper"
    assert sweeper.skip_invalid is False
