"""python train.py --help says what lengen does, not Hydra's generic text."""

from __future__ import annotations

import subprocess
import sys

from helpers import CONFIG_DIR, yaml_choices


def test_help_lists_the_groups_their_choices_and_the_docs():
    root = CONFIG_DIR.parent
    shown = subprocess.run(
        [sys.executable, "train.py", "--help"], cwd=root, capture_output=True, text=True, timeout=60
    )
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("lengen: train a small Transformer")
    assert f"pe: {', '.join(yaml_choices('pe'))}" in shown.stdout
    assert "trainer.criterion_target" in shown.stdout
    assert "docs/config.md" in shown.stdout


def test_eval_help_says_how_to_call_it_and_exits_0():
    root = CONFIG_DIR.parent
    done = subprocess.run(
        [sys.executable, "eval.py", "--help"], cwd=root, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and done.stderr == ""
    assert done.stdout.startswith("Re-evaluate a run: ``python eval.py run=<run dir>")
    assert "Exit 0 done, 2 bad input" in done.stdout
