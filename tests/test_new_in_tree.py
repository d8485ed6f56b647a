"""A new encoding and a new task inside lengen, added by following docs/pe.md's and
docs/tasks.md's recipes literally: no edit to an existing file.

The recipe's code blocks are whole files, each with its path on its first line; its ``sh``
block holds the commands to run. A module fixture copies the checkout's package, configs,
tests, scripts and docs to a temporary folder, writes the blocks where they say, runs the
commands there, and runs the glob-driven tests that pick a new yaml up, on the copy, in one
subprocess (the copy's ``src`` first on ``PYTHONPATH``). The tests read what it left: which files
the recipe added or changed, and each glob-driven file's outcome on the new yaml.
"""

from __future__ import annotations

import filecmp
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import NamedTuple

import pytest

from helpers import ROOT

#: what the copy holds: the package, its configs, and what the glob-driven tests read
COPIED = ("src/lengen", "configs", "tests", "scripts", "docs", "train.py", "eval.py",
          "pyproject.toml", "README.md")  # fmt: skip
#: files an in-tree recipe's command may rewrite: generated, never edited by hand
GENERATED = {"docs/config.md"}


class Recipe(NamedTuple):
    doc: str  #: the page, relative to the checkout
    heading: str  #: the section that is the recipe
    name: str  #: the new component's name, as its yaml names it (and test ids show it)
    glob_tests: tuple[str, ...]  #: the glob-driven files that must pick its yaml up
    #: other cases that must run and pass on the copy (``file::test``), beside those named ``name``
    also: tuple[str, ...] = ()


RECIPES = {
    "encoding": Recipe(
        "docs/pe.md", "## Adding an encoding", "my_bias",
        ("tests/test_configs.py", "tests/pe/test_options.py", "tests/pe/test_invariants.py",
         "tests/test_docs.py"),
        ("tests/test_docs.py::test_config_md_pe_options_are_generated_from_the_yamls",),
    ),
    "task": Recipe(
        "docs/tasks.md", "## Adding a task", "my_shift",
        ("tests/test_configs.py", "tests/data/test_tasks.py", "tests/data/test_task_data.py",
         "tests/data/test_options.py", "tests/test_docs.py"),
        ("tests/data/test_tasks.py::test_every_task_has_an_independent_reference",
         "tests/test_config_docs.py::test_config_md_task_options_are_generated_from_the_task_configs"),
    ),
}  # fmt: skip


class Steps(NamedTuple):
    files: dict[str, str]  #: path -> content
    commands: list[str]


def recipe_steps(recipe: Recipe, root: Path = ROOT) -> Steps:
    """The files and commands of a recipe: every fenced block of its section; a ``python`` or
    ``yaml`` block's first line is ``# <path>``, the rest that file; an ``sh`` block's lines are
    commands."""
    text = (root / recipe.doc).read_text()
    section = text[text.index(recipe.heading + "\n") :]
    following = re.search(r"^## ", section[len(recipe.heading) :], re.M)
    section = section[: len(recipe.heading) + following.start()] if following else section
    files, commands = {}, []
    for _indent, language, body in re.findall(r"^( *)```(\w+)\n(.*?)^\1```", section, re.M | re.S):
        body = textwrap.dedent(body)
        if language == "sh":
            commands += [line for line in body.splitlines() if line.strip()]
            continue
        first, _, rest = body.partition("\n")
        match = re.fullmatch(r"# (\S+)", first.strip())
        assert match, f"{recipe.doc}: a {language} block that names no path: {first!r}"
        files[match[1]] = rest
    return Steps(files, commands)


def copy_checkout(target: Path) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", ".pytest_cache")
    for name in COPIED:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, target / name, ignore=ignore)
        else:
            shutil.copy2(source, target / name)


def changed_files(before: Path, after: Path) -> set[str]:
    """Files of ``before`` that differ in ``after`` (relative paths)."""
    changed = set()
    for path in before.rglob("*"):
        if path.is_file() and "__pycache__" not in path.parts:
            relative = path.relative_to(before)
            if not filecmp.cmp(path, after / relative, shallow=False):
                changed.add(str(relative))
    return changed


class Workspace(NamedTuple):
    root: Path  #: the copy with the recipes applied
    added: set[str]  #: files the recipes wrote
    changed: set[str]  #: files of the checkout that differ in the copy afterwards
    env: dict


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Workspace:
    base = tmp_path_factory.mktemp("in-tree")
    pristine, root = base / "pristine", base / "lengen"
    copy_checkout(pristine)
    shutil.copytree(pristine, root)
    env = {key: value for key, value in os.environ.items() if key != "LENGEN_CONFIG_DIR"}
    env["PYTHONPATH"] = os.pathsep.join([str(root / "src"), env.get("PYTHONPATH", "")])
    added = set()
    for recipe in RECIPES.values():
        steps = recipe_steps(recipe)
        for path, content in steps.files.items():
            assert not (root / path).exists(), f"{recipe.doc}: {path} exists already"
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_text(content)
            added.add(path)
        for command in steps.commands:
            words = command.split()
            words[0] = sys.executable if words[0] == "python" else words[0]
            done = subprocess.run(words, cwd=root, env=env, capture_output=True, text=True)
            assert done.returncode == 0, (command, done.stdout[-2000:], done.stderr[-2000:])
    return Workspace(root, added, changed_files(pristine, root), env)


@pytest.fixture(scope="module")
def glob_run(workspace) -> dict[str, str]:
    """One pytest process over every glob-driven file on the copy, only the new components'
    cases (and ``also``'s) -> outcome per test id (PASSED, FAILED, ERROR, SKIPPED …)."""
    also = [case.partition("::") for recipe in RECIPES.values() for case in recipe.also]
    files = {file for recipe in RECIPES.values() for file in recipe.glob_tests}
    files = sorted(files | {file for file, _, _ in also})
    names = [recipe.name for recipe in RECIPES.values()] + [test for _, _, test in also]
    command = [sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", "-n", "0"]
    done = subprocess.run(
        [*command, "-k", " or ".join(names), *files],
        cwd=workspace.root, env=workspace.env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    outcomes = {}
    for line in done.stdout.splitlines():  # -rA's summary: "PASSED tests/x.py::test_y[z]"
        outcome, _, test_id = line.partition(" ")
        if outcome.isupper() and "::" in test_id:
            outcomes[test_id.split(" - ")[0]] = outcome
    assert outcomes, done.stdout[-3000:] + done.stderr[-3000:]
    return outcomes


def test_the_recipes_add_files_and_edit_none(workspace):
    assert workspace.changed <= GENERATED, sorted(workspace.changed)


def test_the_encoding_recipe_adds_its_module_its_config_and_its_yaml():
    assert sorted(recipe_steps(RECIPES["encoding"]).files) == [
        "configs/pe/my_bias.yaml",
        "src/lengen/pe/config/my_bias.py",
        "src/lengen/pe/my_bias.py",
    ]


def test_the_task_recipe_adds_its_module_its_yaml_and_its_reference():
    assert sorted(recipe_steps(RECIPES["task"]).files) == [
        "configs/data/my_shift.yaml",
        "src/lengen/data/tasks/my_shift.py",
        "tests/data/references/my_shift.py",
    ]


def test_the_glob_driven_tests_pass_on_the_copy(glob_run):
    failed = sorted(test_id for test_id, outcome in glob_run.items() if outcome != "PASSED")
    assert failed == []


@pytest.mark.parametrize("case", [c for recipe in RECIPES.values() for c in recipe.also])
def test_the_suites_own_checks_of_the_new_files_ran_and_passed(glob_run, case):
    assert glob_run.get(case) == "PASSED", sorted(glob_run)


@pytest.mark.parametrize("kind", sorted(RECIPES))
def test_each_glob_driven_file_picks_the_new_yaml_up(glob_run, kind):
    recipe = RECIPES[kind]
    picked_up = {
        test_id.partition("::")[0]
        for test_id, outcome in glob_run.items()
        if outcome == "PASSED" and recipe.name in test_id
    }
    assert picked_up == set(recipe.glob_tests), sorted(glob_run)


def test_the_copy_imports_its_own_lengen(workspace):
    done = subprocess.run(
        [sys.executable, "-c", "import lengen.pe.my_bias as m; print(m.__file__)"],
        cwd=workspace.root, env=workspace.env, capture_output=True, text=True,
    )  # fmt: skip
    assert Path(done.stdout.strip()).is_relative_to(workspace.root), done.stderr
