"""A new encoding is one file plus one yaml, and so is a new task: no other edit.

Each test writes the new module into a folder on PYTHONPATH and its yaml into a copy of configs/
(``LENGEN_CONFIG_DIR``, which lengen and the glob-driven tests read), then runs, in fresh
processes, the glob-driven tests that pick the new yaml up, a refusal of one of its bad values,
and a short training run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from helpers import ROOT

ENCODING = '''
"""A toy bias: -strength · |i − j| on every head (a test of lengen's extension contract)."""

import dataclasses
from typing import ClassVar

from lengen.pe.base import PositionalEncoding
from lengen.pe.options import EncodingOptions
from lengen.schema import number, option


@dataclasses.dataclass(frozen=True)
class ToyBiasOptions(EncodingOptions):
    bias_of_distance: ClassVar[bool] = False
    strength: float = option(0.5, number(above=0))


class ToyBias(PositionalEncoding):
    Options = ToyBiasOptions
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

from lengen.data.tasks.base import AlphabetOptions, AlphabetTask


@dataclasses.dataclass(frozen=True)
class ShiftOptions(AlphabetOptions):
    data_defaults = {"len": 8}
    n_symbols: int = AlphabetOptions.with_default("n_symbols", 8)


class Shift(AlphabetTask):
    Options = ShiftOptions
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


#: kind -> (module, its code, group, yaml name, its yaml, a bad override and the refusal's
#: start, the results key naming it, the glob-driven test files that pick the yaml up)
COMPONENTS = {
    "encoding": (
        "toy_bias_pe", ENCODING, "pe", "toy_bias", ENCODING_YAML,
        "pe.strength=-1", "error: pe.strength must be a number > 0, got -1", "pe",
        ["tests/test_configs.py", "tests/pe/test_options.py", "tests/pe/test_invariants.py"],
    ),
    "task": (
        "toy_shift_task", TASK, "data", "toy_shift", TASK_YAML,
        "data.task.n_symbols=1", "error: data.task.n_symbols must be an integer >= 2, got 1",
        "task",
        ["tests/test_configs.py", "tests/data/test_tasks.py", "tests/data/test_task_data.py",
         "tests/data/test_options.py"],
    ),
}  # fmt: skip


@pytest.fixture(scope="module", params=sorted(COMPONENTS))
def component(request, tmp_path_factory):
    """(kind, the environment with the new module and yaml, a folder for runs)."""
    module, code, group, name, yaml, *_ = COMPONENTS[request.param]
    tmp_path = tmp_path_factory.mktemp(request.param)
    package = tmp_path / "package"
    package.mkdir()
    (package / f"{module}.py").write_text(textwrap.dedent(code))
    configs = tmp_path / "configs"
    shutil.copytree(ROOT / "configs", configs)
    (configs / group / f"{name}.yaml").write_text(textwrap.dedent(yaml).lstrip())
    path = os.pathsep.join([str(package), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "LENGEN_CONFIG_DIR": str(configs), "PYTHONPATH": path}
    return request.param, env, tmp_path


def run(command: list[str], env: dict, cwd) -> subprocess.CompletedProcess:
    return subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, timeout=600)


def test_the_glob_driven_tests_pick_it_up_and_pass(component):
    kind, env, _ = component
    name, files = COMPONENTS[kind][3], COMPONENTS[kind][8]
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", name]
    done = run([*command, *files], env, ROOT)  # only the cases of the new yaml
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert " passed" in done.stdout


def test_a_bad_value_is_refused_before_a_run_directory_exists(component):
    kind, env, tmp_path = component
    group, name, bad, message = (COMPONENTS[kind][i] for i in (2, 3, 5, 6))
    run_dir = tmp_path / "refused"
    command = [sys.executable, str(ROOT / "train.py"), f"{group}={name}", bad]
    done = run([*command, f"hydra.run.dir={run_dir}"], env, tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(message)
    assert not run_dir.exists()


def test_it_trains_and_writes_its_results(component):
    kind, env, tmp_path = component
    group, name, key = (COMPONENTS[kind][i] for i in (2, 3, 7))
    run_dir = tmp_path / "run"
    command = [sys.executable, str(ROOT / "train.py"), f"{group}={name}", *FAST]
    done = run([*command, f"hydra.run.dir={run_dir}"], env, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads((run_dir / "results.json").read_text())
    assert results[key] == name and [row["length"] for row in results["eval"]] == [4, 8]
