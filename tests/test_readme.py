"""README.md stays true to configs/: its route "What lengen can compare" names every encoding,
task, model kind and recipe (globbed from configs/, so a new yaml fails here until it is
placed), each recipe with its cost; the route's commands pass lengen's own checks; the task
count is the configs'; the example refusals are the lines lengen prints now; and docs/index.md
links every page of docs/."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from helpers import CONFIG_DIR, ROOT, yaml_choices

README = (ROOT / "README.md").read_text()


def section(text: str, heading: str) -> str:
    """The text under ``## heading`` up to the next ``## `` heading."""
    match = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## )", text, re.S | re.M)
    assert match, f"README.md has no section '## {heading}'"
    return match[1]


ROUTE = section(README, "What lengen can compare")


def part(start: str, end: str | None) -> str:
    """The route's text from the bold label ``start`` to the next label ``end``."""
    begin = ROUTE.index(f"**{start}**")
    return ROUTE[begin : ROUTE.index(f"**{end}**", begin) if end else None]


ENCODINGS = part("Encodings, by family", "Tasks")
TASKS = part("Tasks", "Model kinds")
MODELS = part("Model kinds", "Recipes")
RECIPES = part("Recipes", None)


@pytest.mark.parametrize("pe", yaml_choices("pe"))
def test_the_route_names_every_encoding(pe):
    assert f"`{pe}`" in ENCODINGS


@pytest.mark.parametrize("data", yaml_choices("data"))
def test_the_route_names_every_task(data):
    assert f"`{data}`" in TASKS


@pytest.mark.parametrize("model", yaml_choices("model"))
def test_the_route_names_every_model_kind(model):
    assert f"`{model}`" in MODELS


@pytest.mark.parametrize("recipe", yaml_choices("experiment"))
def test_every_recipe_has_a_row_with_a_command_and_its_cost(recipe):
    rows = [row for row in RECIPES.splitlines() if row.startswith(f"| `experiment={recipe}` |")]
    assert len(rows) == 1, f"README.md's recipe table has no row (or several) for {recipe}"
    cells = [cell.strip() for cell in rows[0].strip("|").split(" | ")]
    assert len(cells) == 3 and all(cells), rows[0]
    assert re.search(r"`(bash scripts/\S+\.sh|python train\.py [^`]+)`", cells[1]), cells[1]


@pytest.mark.parametrize("script", sorted(set(re.findall(r"bash (scripts/\S+\.sh)", ROUTE))))
def test_the_scripts_the_route_names_exist(script):
    assert (ROOT / script).is_file()


#: the route's single-run commands (``python train.py …`` in code spans)
COMMANDS = sorted(set(re.findall(r"`python train\.py ([^`]*)`", ROUTE)))
#: commands that read files a fresh clone may lack or that are for a GPU: not pre-checked here
UNCHECKED = ("data.files.", "experiment=wikitext103_alibi")


@pytest.mark.parametrize("command", COMMANDS)
def test_the_route_commands_pass_the_checks(command, tmp_path):
    if any(mark in command for mark in UNCHECKED):
        pytest.skip("reads local files or needs a GPU")
    from lengen.preflight import precheck

    assert precheck([*command.split(), f"hydra.run.dir={tmp_path / 'run'}"]) is None


def test_the_sequence_task_counts_are_the_configs():
    from hydra.utils import get_class

    tasks = 0
    for path in sorted((CONFIG_DIR / "data").glob("*.yaml")):
        target = re.search(r"^task:\n\s+_target_: (\S+)", path.read_text(), re.M)
        tasks += bool(target) and get_class(target[1]).axes == 1  # not text, not grids
    counts = {int(n) for n in re.findall(r"(\d+) (?:algorithmic )?tasks\b", README)}
    assert counts == {tasks}, f"README.md counts {counts} tasks; configs/data has {tasks}"


#: README's example refusals: ``$ python train.py <overrides>`` then the line lengen prints
EXAMPLES = re.findall(r"^\$ python train\.py (.*)\n(error: .*)$", README, re.M)


@pytest.mark.parametrize("overrides, line", EXAMPLES, ids=[e[0] for e in EXAMPLES])
def test_the_example_refusals_are_what_lengen_prints(overrides, line):
    done = subprocess.run(
        [sys.executable, str(ROOT / "train.py"), *overrides.split()],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 2 and done.stderr.strip() == line, done.stderr


@pytest.mark.parametrize("page", sorted(p.name for p in (ROOT / "docs").glob("*.md")))
def test_the_docs_index_links_every_page(page):
    if page == "index.md":
        pytest.skip("the index itself")
    assert f"]({page}" in (ROOT / "docs" / "index.md").read_text()


def test_the_route_names_the_causal_only_encodings_as_the_configs_do():
    from helpers import pe_supports

    causal_only = {pe for pe in yaml_choices("pe") if not pe_supports(pe, "encoder")}
    sentence = re.search(r"\n([^\n]*\n[^\n]*) serve causal models only", MODELS)[1]
    assert set(re.findall(r"`(\w+)`", sentence)) == causal_only


@pytest.mark.parametrize(
    "mixer", sorted(p.stem for p in (CONFIG_DIR / "model" / "mixer").glob("*.yaml"))
)
def test_the_route_names_every_sequence_mixer(mixer):
    assert f"`{mixer}`" in MODELS
