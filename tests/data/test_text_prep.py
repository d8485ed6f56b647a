"""Text data on a fresh clone (issue #52 item 5): a checkout without ../shared/data runs the CPU
text recipe into one line that names the missing key and the docs section saying how to get
the data (lengen.data.text_prep.expand_files), exit 2, nothing written; the section exists."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap

import pytest

from helpers import ROOT

#: train.py as a fresh clone at ``sys.argv[1]`` runs it: ``${lengen_root:}`` (where the recipes
#: look for ../shared/data) points there, so the recipe's own paths are missing
FRESH_CLONE = textwrap.dedent(
    """
    import runpy, sys
    from pathlib import Path
    import lengen.config
    lengen.config.ROOT = Path(sys.argv.pop(1))
    sys.argv[0] = {train!r}
    runpy.run_path({train!r}, run_name="__main__")
    """
).format(train=str(ROOT / "train.py"))


@pytest.fixture(scope="module")
def refused(tmp_path_factory):
    """``python train.py experiment=wikitext2_cpu`` in a clone with no ../shared/data."""
    tmp = tmp_path_factory.mktemp("clone")
    run_dir = tmp / "run"
    done = subprocess.run(
        [sys.executable, "-c", FRESH_CLONE, str(tmp / "lengen"), "experiment=wikitext2_cpu",
         f"hydra.run.dir={run_dir}"],
        capture_output=True, text=True, timeout=120, cwd=tmp,
    )  # fmt: skip
    return done, run_dir


def test_missing_recipe_files_are_one_line_naming_the_key_and_the_docs_section(refused):
    done, _ = refused
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("error: data.files.train: no file matches"), done.stderr
    assert 'docs/data.md, "Getting the text data"' in done.stderr


def test_missing_recipe_files_exit_2_with_nothing_written(refused):
    """(A guard: this held before the line named the docs; it must keep holding.)"""
    done, run_dir = refused
    assert (done.returncode, run_dir.exists()) == (2, False), done.stderr


def test_the_section_the_refusal_names_says_both_ways_to_get_the_data():
    text = (ROOT / "docs" / "data.md").read_text()
    match = re.search(r"^## Getting the text data\n(.*?)^## ", text, re.S | re.M)
    assert match, "docs/data.md has no section 'Getting the text data'"
    section = match[1]
    assert "data.dataset=wikitext" in section and "data.files.train=" in section
