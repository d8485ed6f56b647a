"""A new encoding is one file plus one yaml, and so is a new task: no other edit.

One workspace holds both: the two modules in a folder on PYTHONPATH, the two yamls in a copy of
configs/ (``LENGEN_CONFIG_DIR``, which lengen and the glob-driven tests read). In it, fresh
processes run what a user would: one pytest run of the glob-driven tests that pick the new
yamls up (once for both), a refusal of each one's bad value (no torch: about a second each),
and one short training run that uses both (``pe=toy_bias data=toy_shift``). The pytest run and
the training run are module fixtures; the tests read what they left.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import NamedTuple

import pytest

from helpers import ROOT

ENCODING = '''
"""A toy bias: -strength · |i − j| on every head (a test of lengen's extension contract)."""

import dataclasses
from typing import ClassVar

from lengen.pe.base import PositionalEncoding
from lengen.pe.config import EncodingConfig
from lengen.schema import number, option


@dataclasses.dataclass(frozen=True)
class ToyBiasConfig(EncodingConfig):
    bias_of_distance: ClassVar[bool] = False
    strength: float = option(0.5, number(above=0))


class ToyBias(PositionalEncoding):
    Options = ToyBiasConfig
    bias_is_relative = True

    def score_bias(self, heads, q_positions, k_positions):
        distance = (q_positions - k_positions).abs().float()
        return -self.cfg.strength * distance + 0.0 * heads
'''

ENCODING_YAML = """
# A toy distance bias (tests/test_new_component.py).
_target_: toy_bias_pe.ToyBias
_partial_: true
name: toy_bias
strength: 0.5   # > 0: the bias is -strength * |i - j|
"""

TASK = '''
"""A toy task: output each symbol plus one, modulo the alphabet."""

import dataclasses

from lengen.data.tasks.base import AlphabetConfig, AlphabetTask


@dataclasses.dataclass(frozen=True)
class ShiftConfig(AlphabetConfig):
    data_defaults = {"len": 8}
    n_symbols: int = AlphabetConfig.with_default("n_symbols", 8)


class Shift(AlphabetTask):
    Options = ShiftConfig
    name = "toy_shift"
    source = "tests/test_new_component.py"
    answer_format = "the n input symbols, each plus one"

    def solve(self, inputs):
        return (inputs + 1) % self.n_symbols
'''

TASK_YAML = """
# Shift: x1..xn -> x1+1..xn+1 (mod n_symbols).
_target_: lengen.data.datamodule.TaskData
name: toy_shift
task:
  _target_: toy_shift_task.Shift
  n_symbols: 8
len: 8
min_len: 1
curriculum: uniform
curriculum_tau: 0.9
batch_size: 64
val_samples: 256
"""

#: a few steps of everything, small, as the suite's other training runs
FAST = ["debug=fast", "trainer.max_steps=4", "data.len=4", "eval.factors=[1,2]", "logger=none"]


class Component(NamedTuple):
    module: str  #: the new module's name, on PYTHONPATH
    code: str
    group: str  #: its config group, and its yaml's name there
    name: str
    yaml: str
    bad: str  #: an override its typed config refuses, and the refusal's first words
    refusal: str
    results_key: str  #: the results.json key that names it
    glob_tests: tuple[str, ...]  #: the glob-driven test files that pick its yaml up


COMPONENTS = {
    "encoding": Component(
        "toy_bias_pe", ENCODING, "pe", "toy_bias", ENCODING_YAML,
        "pe.strength=-1", "error: pe.strength must be a number > 0, got -1", "pe",
        ("tests/test_configs.py", "tests/pe/test_options.py", "tests/pe/test_invariants.py"),
    ),
    "task": Component(
        "toy_shift_task", TASK, "data", "toy_shift", TASK_YAML,
        "data.task.n_symbols=1", "error: data.task.n_symbols must be an integer >= 2, got 1",
        "task",
        ("tests/test_configs.py", "tests/data/test_tasks.py", "tests/data/test_task_data.py",
         "tests/data/test_options.py"),
    ),
}  # fmt: skip
KINDS = sorted(COMPONENTS)


class Workspace(NamedTuple):
    env: dict  #: os.environ with the package folder on PYTHONPATH and LENGEN_CONFIG_DIR
    path: Path  #: a folder for the runs' directories


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Workspace:
    """Both new modules and both yamls, in one package folder and one copy of configs/."""
    root = tmp_path_factory.mktemp("new-components")
    package, configs = root / "package", root / "configs"
    package.mkdir()
    shutil.copytree(ROOT / "configs", configs)
    for component in COMPONENTS.values():
        (package / f"{component.module}.py").write_text(textwrap.dedent(component.code))
        yaml_path = configs / component.group / f"{component.name}.yaml"
        yaml_path.write_text(textwrap.dedent(component.yaml).lstrip())
    path = os.pathsep.join([str(package), os.environ.get("PYTHONPATH", "")])
    return Workspace({**os.environ, "LENGEN_CONFIG_DIR": str(configs), "PYTHONPATH": path}, root)


def run(command: list[str], workspace: Workspace, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        command,
        env=workspace.env,
        cwd=cwd or workspace.path,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="module")
def glob_run(workspace) -> tuple[subprocess.CompletedProcess, dict[str, str]]:
    """One pytest process over every glob-driven file, only the cases of the two new yamls ->
    (the process, its outcome per test id: PASSED, FAILED, ERROR, SKIPPED …)."""
    files = sorted({file for component in COMPONENTS.values() for file in component.glob_tests})
    names = " or ".join(component.name for component in COMPONENTS.values())
    command = [sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider"]
    done = run([*command, "-k", names, *files], workspace, cwd=ROOT)
    outcomes = {}
    for line in done.stdout.splitlines():  # -rA's summary: "PASSED tests/x.py::test_y[z]"
        outcome, _, test_id = line.partition(" ")
        if outcome.isupper() and "::" in test_id:
            outcomes[test_id.split(" - ")[0]] = outcome
    return done, outcomes


def test_the_glob_driven_tests_pass_on_both(glob_run):
    done, outcomes = glob_run
    failed = sorted(test_id for test_id, outcome in outcomes.items() if outcome != "PASSED")
    assert done.returncode == 0, (failed, done.stdout[-3000:] + done.stderr[-2000:])


@pytest.mark.parametrize("kind", KINDS)
def test_each_glob_driven_file_picks_it_up(glob_run, kind):
    """Every file the new yaml belongs to has a passing case of it."""
    component = COMPONENTS[kind]
    _, outcomes = glob_run
    picked_up = {
        test_id.partition("::")[0]
        for test_id, outcome in outcomes.items()
        if outcome == "PASSED" and component.name in test_id
    }
    assert picked_up == set(component.glob_tests), sorted(outcomes)


@pytest.mark.parametrize("kind", KINDS)
def test_a_bad_value_is_refused_before_a_run_directory_exists(workspace, kind):
    component = COMPONENTS[kind]
    run_dir = workspace.path / f"refused-{kind}"
    command = [sys.executable, str(ROOT / "train.py"), f"{component.group}={component.name}"]
    done = run([*command, component.bad, f"hydra.run.dir={run_dir}"], workspace)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(component.refusal)
    assert not run_dir.exists()


@pytest.fixture(scope="module")
def trained(workspace) -> tuple[subprocess.CompletedProcess, dict]:
    """One short training run of the new encoding on the new task -> (the process, its
    results.json, or {} where it wrote none)."""
    run_dir = workspace.path / "run"
    choices = [f"{c.group}={c.name}" for c in COMPONENTS.values()]
    command = [sys.executable, str(ROOT / "train.py"), *choices, *FAST]
    done = run([*command, f"hydra.run.dir={run_dir}"], workspace)
    results = run_dir / "results.json"
    return done, json.loads(results.read_text()) if results.is_file() else {}


def test_it_trains_and_writes_its_results(trained):
    done, results = trained
    assert done.returncode == 0, done.stderr[-3000:]
    assert results, "no results.json"


@pytest.mark.parametrize("kind", KINDS)
def test_its_results_name_it(trained, kind):
    component = COMPONENTS[kind]
    done, results = trained
    assert results.get(component.results_key) == component.name, done.stderr[-3000:]


def test_it_is_evaluated_at_the_lengths_asked(trained):
    done, results = trained
    assert [row["length"] for row in results.get("eval", [])] == [4, 8], done.stderr[-3000:]
