"""The recipes with a dry run (scripts/reproduce_looped.sh, pilot_state_tracking_depth.sh,
pilot_indirect_indexing_lr.sh; scripts/recipe_sweeps.sh): the jobs each runs, once each, and
DRY=1 printing those commands and their estimate without training anything; and
scripts/sweep_plan.py printing the total the sweeper prints before its first run."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys

import pytest
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.override_parser.overrides_parser import OverridesParser

from helpers import ROOT, compose_train, load_script, run_train

SCRIPTS = ROOT / "scripts"


def _recipes_module():
    """tests/scripts/test_recipes.py, for its one rule of what a job trains (``what_it_trains``)."""
    path = ROOT / "tests" / "scripts" / "test_recipes.py"
    spec = importlib.util.spec_from_file_location("recipes_rule", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


what_it_trains = _recipes_module().what_it_trains


def recorded(
    script: str, tmp_path, **env: str
) -> tuple[list[list[str]], subprocess.CompletedProcess]:
    """(every call of the recipe's python, as argument lists; the recipe's process), with a
    stand-in python that only writes its arguments down (nothing trains)."""
    log, fake = tmp_path / "calls", tmp_path / "python"
    fake.write_text(f'#!/usr/bin/env bash\nprintf "%s\\037" "$@" >> "{log}"\necho >> "{log}"\n')
    fake.chmod(0o755)
    done = subprocess.run(["bash", str(SCRIPTS / script), str(tmp_path / "sweep")],
                          env={**os.environ, "PYTHON": str(fake), **env},
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    lines = log.read_text().splitlines() if log.exists() else []
    return [line.split("\037")[:-1] for line in lines], done


def jobs(calls: list[list[str]]) -> list[frozenset]:
    """The jobs of the ``train.py -m`` calls, expanded as Hydra's sweeper does."""
    found = []
    for arguments in calls:
        if arguments[:2] == ["train.py", "-m"]:
            overrides = OverridesParser.create().parse_overrides(arguments[2:])
            found += [what_it_trains(j) for j in BasicSweeper.split_arguments(overrides, None)[0]]
    return found


def pairs(**values) -> set:
    return {(key.replace("__", "."), value) for key, value in values.items()}


# -- the jobs ------------------------------------------------------------------------------------
def test_the_looped_recipe_runs_27_jobs_once_each(tmp_path):
    found = jobs(recorded("reproduce_looped.sh", tmp_path)[0])
    assert len(found) == len(set(found)) == 27  # 3 tasks x 3 arms x 3 seeds


def test_the_looped_recipes_arms_are_looped_same_depth_and_same_block(tmp_path):
    arms = {job - {pair for pair in job if pair[0] in ("data", "seed")} for job in
            jobs(recorded("reproduce_looped.sh", tmp_path)[0])}  # fmt: skip
    common = pairs(experiment="looped_small")
    assert arms == {
        frozenset(common),
        frozenset(common | pairs(model__loops=1, model__loop_rule="fixed", model__n_layers=8)),
        frozenset(common | pairs(model__loops=1, model__loop_rule="fixed", model__n_layers=1)),
    }


def test_the_depth_arm_has_as_many_layers_as_the_looped_arm_passes_at_the_training_length():
    looped = compose_train("experiment=looped_small", fast=False).model
    depth = compose_train("experiment=looped_small", "model.loops=1", "model.loop_rule=fixed",
                          "model.n_layers=8", fast=False).model  # fmt: skip
    assert looped.loop_rule == "linear"  # K(T_train) = loops
    assert depth.n_layers == looped.loops * looped.n_layers and depth.loops == 1


def test_the_same_parameters_arm_lacks_only_the_step_embedding():
    from lengen.build import build

    def n_params(*overrides):
        cfg = compose_train("experiment=looped_small", *overrides)
        return sum(p.numel() for p in build(cfg, meta=True)[1].parameters())

    d = compose_train("experiment=looped_small").model.d_model
    unlooped = n_params("model.loops=1", "model.loop_rule=fixed", "model.n_layers=1")
    assert n_params() - unlooped == 2 * d * d + 2 * d  # the step MLP (docs/models.md)


def test_the_depth_pilot_runs_every_arm_of_g_at_1_2_and_4_layers(tmp_path):
    found = jobs(recorded("pilot_state_tracking_depth.sh", tmp_path)[0])
    arms = {(dict(job)["pe"], dict(job)["model.n_layers"]) for job in found}
    assert len(found) == len(set(found)) == 9
    assert arms == {(pe, layers) for pe in ("path", "rope", "nope") for layers in (1, 2, 4)}


@pytest.mark.parametrize(
    ("script", "key"),
    [
        ("pilot_state_tracking_depth.sh", "model.n_layers"),
        ("pilot_indirect_indexing_lr.sh", "optim.lr"),
    ],
)
def test_a_pilot_sweeps_each_setting_into_a_folder_of_its_own(script, key, tmp_path):
    # aggregate.py makes one comparison of a folder's task, model and length: a folder per
    # depth (per rate) gives each its own verdict class
    calls, _ = recorded(script, tmp_path)
    folders = {}  # sweep folder -> the values of key its jobs take
    for arguments in calls:
        if arguments[:2] == ["train.py", "-m"]:
            values = dict(a.partition("=")[::2] for a in arguments[2:])
            folders.setdefault(values["hydra.sweep.dir"], set()).add(values[key])
    assert len(folders) >= 2 and all(len(values) == 1 for values in folders.values())
    summarized = {a[1] for a in calls if a[0] == "scripts/aggregate.py"}
    assert summarized == set(folders)


def test_a_depth_that_is_no_positive_integer_is_refused_in_one_line(tmp_path):
    calls, done = recorded("pilot_state_tracking_depth.sh", tmp_path, LAYERS="1,two")
    assert done.returncode == 2 and calls == []
    assert done.stderr.strip().splitlines() == [
        "error: LAYERS: 'two' is not a positive integer; give e.g. LAYERS=1,2,4"
    ]


def test_the_lr_pilot_runs_every_arm_of_h_at_both_rates_for_10000_steps(tmp_path):
    found = jobs(recorded("pilot_indirect_indexing_lr.sh", tmp_path)[0])
    arms = {(dict(job)["pe"], dict(job)["optim.lr"]) for job in found}
    assert len(found) == len(set(found)) == 4
    assert arms == {(pe, lr) for pe in ("pope", "rope") for lr in (1e-3, 3e-3)}
    assert {dict(job)["trainer.max_steps"] for job in found} == {10000}


# -- DRY=1 -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "script",
    [
        "reproduce_looped.sh",
        "pilot_state_tracking_depth.sh",
        "pilot_indirect_indexing_lr.sh",
        "reproduce_encoding_or_recurrence.sh",
    ],
)
def test_a_dry_run_calls_no_train_py(script, tmp_path):
    calls, done = recorded(script, tmp_path, DRY="1")
    assert done.returncode == 0, done.stderr
    assert [call[0] for call in calls] == ["scripts/sweep_plan.py"]


def test_a_dry_run_prints_the_commands_the_recipe_runs(tmp_path):
    _, done = recorded("reproduce_looped.sh", tmp_path, DRY="1")
    printed = [line for line in done.stdout.splitlines() if line.startswith("+ ")]
    sweep = tmp_path / "sweep"
    common = (f"experiment=looped_small data=copy,parity,addition_reversed seed=0,1,2 "
              f"resume=auto hydra.sweep.dir={sweep} hydra/launcher=local")  # fmt: skip
    assert printed == [
        f"+ python train.py -m {common}",
        f"+ python train.py -m {common} model.loops=1 model.loop_rule=fixed model.n_layers=8",
        f"+ python train.py -m {common} model.loops=1 model.loop_rule=fixed model.n_layers=1",
        f"+ bash scripts/summarize_tasks.sh {sweep}",
    ]


def test_a_dry_runs_estimate_covers_every_job_the_recipe_runs(tmp_path):
    dry, real = tmp_path / "dry", tmp_path / "real"
    dry.mkdir(), real.mkdir()
    (plan,), _ = recorded("reproduce_looped.sh", dry, DRY="1")
    assert plan[:2] == ["scripts/sweep_plan.py", "--each"]
    planned = [what_it_trains(job) for job in load_script("sweep_plan").jobs_of(plan[2:])]
    assert planned == jobs(recorded("reproduce_looped.sh", real)[0])


def test_an_unknown_task_is_refused_in_one_line_and_nothing_runs(tmp_path):
    calls, done = recorded("reproduce_looped.sh", tmp_path, TASKS="copy sorting")
    assert done.returncode == 2 and calls == []
    assert done.stderr.strip().splitlines() == [
        "error: TASKS: unknown task 'sorting'; allowed: copy, parity, addition_reversed, addition"
    ]


def test_arms_runs_only_the_arms_named(tmp_path):
    found = jobs(recorded("reproduce_looped.sh", tmp_path, ARMS="looped depth", SEEDS="1,2")[0])
    assert len(found) == len(set(found)) == 12  # 3 tasks x 2 arms x 2 seeds
    assert {dict(job).get("model.n_layers") for job in found} == {None, 8}


def test_an_unknown_arm_is_refused_in_one_line_and_nothing_runs(tmp_path):
    calls, done = recorded("reproduce_looped.sh", tmp_path, ARMS="looped width")
    assert done.returncode == 2 and calls == []
    assert done.stderr.strip().splitlines() == [
        "error: ARMS: unknown arm 'width'; allowed: looped, depth, params"
    ]


def test_a_printed_argument_that_needs_quotes_reads_back_as_it_was(tmp_path):
    argument = "eval.lengths=[8,16] it's"
    done = subprocess.run(["bash", "-c", f'source {SCRIPTS / "recipe_sweeps.sh"}; shown "" "$0"', argument],
                          capture_output=True, text=True)  # fmt: skip
    back = subprocess.run(["bash", "-c", f'printf "%s" {done.stdout.strip()}'],
                          capture_output=True, text=True)  # fmt: skip
    assert back.stdout == argument


# -- scripts/sweep_plan.py -----------------------------------------------------------------------
TINY = ("debug=fast", "data.len=4", "eval.factors=[1]", "logger=none", "eval.diagnostics=false")


def test_the_plan_prints_the_total_the_sweeper_prints_before_its_first_run(tmp_path):
    arguments = [*TINY, "seed=0", f"hydra.sweep.dir={tmp_path / 'sweep'}"]
    plan = subprocess.run([sys.executable, str(SCRIPTS / "sweep_plan.py"), *arguments],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)  # fmt: skip
    assert plan.returncode == 0, plan.stderr
    sweep = run_train("-m", *arguments)
    assert sweep.returncode == 0, sweep.stderr[-2000:]
    total = re.compile(r"^sweep: 1 run, ≈ .* in all .*$", re.M)
    assert total.search(plan.stdout).group() == total.search(sweep.stdout).group()


def test_the_plan_writes_nothing(tmp_path):
    folder = tmp_path / "sweep"
    plan = subprocess.run([sys.executable, str(SCRIPTS / "sweep_plan.py"), *TINY,
                           "seed=0,1", f"hydra.sweep.dir={folder}"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)  # fmt: skip
    assert plan.returncode == 0, plan.stderr
    assert "sweep: 2 runs" in plan.stdout and not folder.exists()


def test_the_plan_refuses_an_unknown_choice_in_one_line(tmp_path):
    plan = subprocess.run([sys.executable, str(SCRIPTS / "sweep_plan.py"), "pe=no_such_encoding"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)  # fmt: skip
    assert plan.returncode == 2
    assert len(plan.stderr.strip().splitlines()) == 1 and "no_such_encoding" in plan.stderr
