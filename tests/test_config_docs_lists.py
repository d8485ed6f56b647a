"""docs/config.md's groups table names every recipe and every data source: scripts/gen_config_docs.py
writes the `experiment` row's list from configs/experiment/*.yaml and the `data` row's task and
grid lists from configs/data/*.yaml (between markers, inside the table rows)."""

from __future__ import annotations

import importlib.util
import re

import pytest

from helpers import ROOT, yaml_choices

DOC = (ROOT / "docs" / "config.md").read_text()


@pytest.fixture(scope="module")
def gen():
    path = ROOT / "scripts" / "gen_config_docs.py"
    spec = importlib.util.spec_from_file_location("gen_config_docs", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def group_row(group: str) -> str:
    (row,) = [line for line in DOC.splitlines() if line.startswith(f"| `{group}` |")]
    return row


@pytest.mark.parametrize("recipe", yaml_choices("experiment"))
def test_the_experiment_row_names_every_recipe(recipe):
    assert f"`{recipe}`" in group_row("experiment")


@pytest.mark.parametrize("data", yaml_choices("data"))
def test_the_data_row_names_every_data_source(data):
    assert re.search(rf"[` ]{data}[` ]", group_row("data"))


def test_the_task_lists_are_what_the_generator_makes(gen):
    doc = gen.updated(DOC, gen.render_task_names(), gen.TASKS_BEGIN, gen.TASKS_END, inline=True)
    grids = gen.render_task_names(grids=True)
    doc = gen.updated(doc, grids, gen.GRIDS_BEGIN, gen.GRIDS_END, inline=True)
    assert doc == DOC, f"docs/config.md's task lists are out of date: run `{gen.COMMAND}`"


def test_the_recipe_list_is_what_the_generator_makes(gen):
    block = gen.render_recipes()
    assert gen.updated(DOC, block, gen.RECIPES_BEGIN, gen.RECIPES_END, inline=True) == DOC, (
        f"docs/config.md's recipe list is out of date with configs/experiment/: run `{gen.COMMAND}`"
    )


def test_an_inline_block_stays_on_its_line(gen):
    doc = "| a | <!-- recipes:begin -->old<!-- recipes:end --> | b |\n"
    new = gen.updated(doc, "`x`, `y`", gen.RECIPES_BEGIN, gen.RECIPES_END, inline=True)
    assert new == "| a | <!-- recipes:begin -->`x`, `y`<!-- recipes:end --> | b |\n"
