"""Every data yaml shows its source's typed config: the same options with the same defaults.

Glob-driven over configs/data/*.yaml: the data node (without ``_target_``, ``name`` and a task's
``task:`` node) holds exactly the fields of its source's config class (``<source>.Options``:
``TaskDataConfig``, ``TextDataConfig``) at their defaults, and a task's ``task:`` node holds
exactly the fields of its task's config class (``<Task>.Options``) at theirs.

"The default" is the one a source or task built without that option takes, so a yaml and a
direct construction agree; a yaml is read as a run without ``LENGEN_CACHE_DIR`` resolves it
(text.yaml's ``cache_dir`` falls back to the class's default then). Where a yaml shows other values than the generic ones, the class
says so: a task whose yaml differs in an option has a config class of its own with that
default (``Duplicate``'s binary alphabet, ``AdditionReversed``), and ``TaskData`` takes
``min_len`` from the task's shortest instance and the other lengths from the task's config
(``TaskConfig.data_defaults``: grids train at sides of 8).
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest
from hydra.utils import get_class, instantiate
from omegaconf import OmegaConf

from helpers import CONFIG_DIR, task_data, yaml_choices
from lengen.data.task_data import TaskData, TaskDataConfig
from lengen.data.tasks import ModularArithmetic
from lengen.data.text import TextDataConfig

#: keys of a data node that are not its source's options: Hydra's target, the choice's name, a
#: task's own node, and ``num_workers``, the DataModule's (lengen.lit; never passed to a source)
NOT_OPTIONS = ("_target_", "name", "task", "num_workers")
DATA = yaml_choices("data")
TASKS = [name for name in DATA if "task" in OmegaConf.load(CONFIG_DIR / "data" / f"{name}.yaml")]


@pytest.fixture(autouse=True)
def _no_cache_dir(monkeypatch):
    monkeypatch.delenv("LENGEN_CACHE_DIR", raising=False)


def data_node(name: str) -> dict:
    """configs/data/<name>.yaml, resolved."""
    node = OmegaConf.load(CONFIG_DIR / "data" / f"{name}.yaml")
    return OmegaConf.to_container(node, resolve=True)


def source_options(name: str) -> dict:
    return {k: v for k, v in data_node(name).items() if k not in NOT_OPTIONS}


def source_config(name: str):
    return get_class(data_node(name)["_target_"]).Options


def task_options(name: str) -> dict:
    return {k: v for k, v in data_node(name)["task"].items() if k != "_target_"}


def task_config(name: str):
    return get_class(data_node(name)["task"]["_target_"]).Options


def expected_source_defaults(name: str) -> dict:
    """The defaults the source takes for this yaml (a task's TaskData takes the task's), as a
    yaml writes them (a nested config, text's ``files``, as its keys)."""
    config = source_config(name)
    if name in TASKS:
        defaults = config.defaults_for(instantiate(data_node(name)["task"]))
    else:
        defaults = config.defaults()
    return {
        key: dataclasses.asdict(value) if dataclasses.is_dataclass(value) else value
        for key, value in defaults.items()
    }


@pytest.mark.parametrize("name", DATA)
def test_data_yaml_holds_every_option_of_its_sources_config_and_no_other(name):
    assert sorted(source_options(name)) == sorted(source_config(name).option_names())


@pytest.mark.parametrize("name", DATA)
def test_data_yaml_shows_its_sources_defaults(name):
    assert source_options(name) == expected_source_defaults(name)


@pytest.mark.parametrize("name", TASKS)
def test_task_node_holds_every_option_of_its_tasks_config_and_no_other(name):
    assert sorted(task_options(name)) == sorted(task_config(name).option_names())


@pytest.mark.parametrize("name", TASKS)
def test_task_node_shows_its_tasks_defaults(name):
    assert task_options(name) == task_config(name).defaults()


@pytest.mark.parametrize("name", TASKS)
def test_task_data_built_without_options_is_the_yamls(name):
    task = instantiate(data_node(name)["task"])
    kind = (task.model_kinds or ("decoder",))[0]
    assert TaskData(task=task, model_kind=kind).cfg == task_data(name, model_kind=kind).cfg


def test_a_task_refuses_a_bad_value_with_its_configs_message():
    message = r"^data\.task\.modulus must be in 2 … 10, got 11$"
    with pytest.raises(ValueError, match=message):
        ModularArithmetic.Options.from_keys({"modulus": 11})
    with pytest.raises(ValueError, match=message):
        ModularArithmetic(modulus=11)


def test_unknown_keys_are_refused_with_the_allowed_ones_named():
    with pytest.raises(ValueError, match=r"^data\.task\.base: ModularArithmetic takes no such"):
        ModularArithmetic(base=10)
    with pytest.raises(
        ValueError, match=r"^data\.lenght: TaskData takes no such key; allowed: len"
    ):
        task_data("copy", lenght=8)


def test_task_data_refuses_a_bad_value_with_its_configs_message():
    with pytest.raises(ValueError, match=r"^data\.batch_size must be a positive integer, got 0$"):
        TaskDataConfig.from_keys({"batch_size": 0})
    with pytest.raises(ValueError, match=r"^data\.batch_size must be a positive integer, got 0$"):
        task_data("copy", batch_size=0)


def test_text_data_refuses_a_bad_value_with_its_configs_message():
    message = r"^data\.validation_fraction must be a number in \(0, 0\.5\], got 0\.9$"
    with pytest.raises(ValueError, match=message):
        TextDataConfig.from_keys({"validation_fraction": 0.9})
    with pytest.raises(ValueError, match=r"^data\.files\.train: give exactly one source"):
        TextDataConfig.from_keys({}).check()


def test_data_configs_and_their_refusals_import_no_torch():
    code = (
        "import lengen.data.tasks as tasks, lengen.data.task_data as data, lengen.data.text\n"
        "from lengen.lazy import is_loaded\n"
        "tasks.Copy(n_symbols=8)\n"
        "data.TaskData(task=tasks.Passkey())\n"
        "lengen.data.text.TextDataConfig.from_keys({'tokenizer': 'char'})\n"
        "try:\n"
        "    tasks.Addition(base=40)\n"
        "except ValueError as error:\n"
        "    print(error)\n"
        "print(is_loaded('torch'))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["data.task.base must be in 2 … 36, got 40", "False"]
