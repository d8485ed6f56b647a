"""docs/config.md's `experiment` row names every recipe: scripts/gen_config_docs.py writes the
list from configs/experiment/*.yaml (between its recipes markers, inside the table row)."""

from __future__ import annotations

import importlib.util

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


def experiment_row() -> str:
    (row,) = [line for line in DOC.splitlines() if line.startswith("| `experiment` |")]
    return row


@pytest.mark.parametrize("recipe", yaml_choices("experiment"))
def test_the_experiment_row_names_every_recipe(recipe):
    assert f"`{recipe}`" in experiment_row()


def test_the_recipe_list_is_what_the_generator_makes(gen):
    block = gen.render_recipes()
    assert gen.updated(DOC, block, gen.RECIPES_BEGIN, gen.RECIPES_END, inline=True) == DOC, (
        f"docs/config.md's recipe list is out of date with configs/experiment/: run `{gen.COMMAND}`"
    )


def test_an_inline_block_stays_on_its_line(gen):
    doc = "| a | <!-- recipes:begin -->old<!-- recipes:end --> | b |\n"
    new = gen.updated(doc, "`x`, `y`", gen.RECIPES_BEGIN, gen.RECIPES_END, inline=True)
    assert new == "| a | <!-- recipes:begin -->`x`, `y`<!-- recipes:end --> | b |\n"
