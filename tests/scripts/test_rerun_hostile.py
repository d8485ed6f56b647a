"""scripts/trials/rerun_hostile.py: parsing a hostile trial's record (nothing is run here)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from helpers import ROOT

RECORD = ROOT.parent / "shared" / "trials" / "hostile-2026-11-28.md"
HEADER = (
    "| ID | part | case | command | exit | s | first stderr line | TB | left on disk "
    "| prior data changed? | verdict | note |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n"
)


def load_script(name: str):
    """scripts/<name>.py as a registered module (its dataclasses look their module up)."""
    spec = importlib.util.spec_from_file_location(
        name.replace("/", "_"), ROOT / "scripts" / f"{name}.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def harness():
    return load_script("trials/rerun_hostile")


def row(id_, command, verdict="clean"):
    return (
        f"| {id_} | new | a case | `{command}` | 2 | 1.0 | error: x | no | nothing "
        f"| no (sha256 same) | **{verdict}** | a note |\n"
    )


def test_a_bar_inside_backticks_stays_in_its_cell(harness):
    cells = harness.split_row("| A1 | `plot.py --pe fire|dape` | **clean** |")
    assert cells == ["A1", "`plot.py --pe fire|dape`", "**clean**"]


def test_an_escaped_bar_stays_in_its_cell(harness):
    assert harness.split_row(r"| A1 | coupled\|abacus |") == ["A1", "coupled|abacus"]


def test_rows_of_the_all_cases_table_are_parsed_with_their_verdicts(harness):
    text = "# t\n\n## All cases\n\n" + HEADER + row("A1", "train.py x=1", "rough message")
    (case,) = harness.parse_cases(text)
    assert (case.id, case.command, case.verdict, case.exit) == (
        "A1", "train.py x=1", "rough message", "2",
    )  # fmt: skip


def test_a_command_cut_short_is_marked_truncated(harness):
    text = "## All cases\n" + HEADER + row("A1", "train.py trainer.enable_…")
    assert harness.parse_cases(text)[0].truncated


def test_a_row_with_a_missing_cell_is_refused_naming_it(harness):
    text = "## All cases\n" + HEADER + "| A1 | new | `train.py` | **clean** |\n"
    with pytest.raises(ValueError, match="A1"):
        harness.parse_cases(text)


def test_placeholders_are_substituted(harness):
    out = harness.expand("$P train.py $FAST $REF hydra.run.dir=<tmp>/adv/w/A1", "/s", "/py")
    assert out.startswith("/py train.py debug=fast eval.lengths=[8,16] trainer.max_steps=30 ")
    assert out.endswith("hydra.run.dir=/s/adv/w/A1") and "$" not in out


def test_scripts_run_from_the_repository_with_its_interpreter(harness):
    argv = harness.argv_for(".venv/bin/python scripts/plot.py 'a b'", "/repo", "/py")
    assert argv == ["/py", "/repo/scripts/plot.py", "a b"]


def test_the_first_line_skips_lightning_info_and_progress_bars(harness):
    stderr = "INFO: GPU available: False\nGenerating train split: 0 examples [00:00, ? examples/s]\n\nerror: x\n"
    assert harness.first_line(stderr) == "error: x"


@pytest.mark.skipif(not RECORD.exists(), reason="the shared trial record is not here")
def test_the_trial_record_parses_whole(harness):
    cases = harness.parse_cases(RECORD.read_text())
    ids = [c.id for c in cases]
    assert len(ids) == len(set(ids)) == 414
    assert sum(c.verdict != "clean" for c in cases) == 71


@pytest.mark.skipif(not RECORD.exists(), reason="the shared trial record is not here")
def test_every_setup_names_a_case_of_the_record_and_known_fixtures(harness):
    setups = load_script("trials/hostile_setups")
    ids = {c.id for c in harness.parse_cases(RECORD.read_text())}
    assert set(setups.SETUPS) <= ids
    assert {f for s in setups.SETUPS.values() for f in s.fixtures} <= set(setups.FIXTURES)


def test_a_case_that_cannot_be_rebuilt_is_not_run(harness, tmp_path: Path, monkeypatch):
    monkeypatch.setitem(harness.SETUPS, "A1", harness.Setup(skip="needs a cgroup"))
    case = harness.parse_cases("## All cases\n" + HEADER + row("A1", "train.py"))[0]
    record = harness.run_case(case, str(tmp_path), "/repo", "/py", 10)
    assert record["status"] == "not re-run: needs a cgroup" and not any(tmp_path.iterdir())


def test_exact_words_get_the_interpreter_and_the_checkout_filled_in(harness):
    words = harness.exact_words(
        ("$P", "$REPO/train.py", "a=<tmp>/x", "b=[{pe: rope}]"), "/s", "/r", "/py"
    )
    assert words == ["/py", "/r/train.py", "a=/s/x", "b=[{pe: rope}]"]
