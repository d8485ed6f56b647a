"""docs/reproductions.md's verdicts agree with the committed sweeps (issue #47): every verdict
names its comparison (`folder/task` under results/reproductions/), and its class is the one
scripts/aggregate.py computed into that folder's verdicts.json: "a test" followed by one of the
outcomes, or "not a test" naming every arm that did not learn with its seeds ("rope 0 of 3").
Reads committed files only (no training)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from lengen.aggregate import aggregate
from lengen.aggregate.verdicts import A_TEST, NOT_A_TEST, verdicts_json

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "reproductions.md"
RESULTS = ROOT / "results" / "reproductions"
#: the outcomes a test may have (docs/analysis.md, *A test or not*)
OUTCOMES = ("reproduced", "not reproduced", "inconclusive (within seed range)")
COMPARISON = re.compile(r"`([\w.-]+)/([\w.-]+)`")
#: a section's verdict: **Verdict** (`folder/task`): text, up to the paragraph's end
VERDICT_LINE = re.compile(r"\*\*Verdict\*\* \(`([\w.-]+)/([\w.-]+)`\): (.+?)(?:\n\n|\Z)", re.S)


def table_verdicts(text: str) -> list[tuple[list[tuple[str, str]], str, str]]:
    """(comparisons, verdict cell, row's first cell) of every table with a comparison and a
    verdict column."""
    found, header = [], None
    for line in text.splitlines():
        if not line.startswith("|"):
            header = None
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if header is None:
            header = cells
        elif set(cells) != {"---"} and {"comparison", "verdict"} <= set(header):
            row = dict(zip(header, cells, strict=True))
            found.append((COMPARISON.findall(row["comparison"]), row["verdict"], cells[0]))
    return found


def all_verdicts() -> list[tuple[list[tuple[str, str]], str, str]]:
    text = DOC.read_text()
    lines = [([(f, t)], " ".join(v.split()), f"{f}/{t}") for f, t, v in VERDICT_LINE.findall(text)]
    return table_verdicts(text) + lines


def committed(folder: str, task: str) -> dict:
    document = json.loads((RESULTS / folder / "verdicts.json").read_text())
    (entry,) = [entry for entry in document["comparisons"] if entry["task"] == task]
    return entry


VERDICTS = all_verdicts()


def test_the_docs_have_their_verdicts_in_the_checked_form():
    """Every **Verdict of the page is a parsed one (none in a form this test cannot read), and
    the at-a-glance table is among them."""
    text = DOC.read_text()
    assert text.count("**Verdict") == len(VERDICT_LINE.findall(text))
    assert len(table_verdicts(text)) >= 20


@pytest.mark.parametrize(("comparisons", "verdict", "row"), VERDICTS, ids=[v[2] for v in VERDICTS])
def test_each_verdict_has_the_committed_class(comparisons, verdict, row):
    assert comparisons, f"{row}: no `folder/task` comparison named"
    entries = [committed(folder, task) for folder, task in comparisons]
    expected = A_TEST if all(entry["class"] == A_TEST for entry in entries) else NOT_A_TEST
    text = verdict.replace("**", "")
    assert text.startswith(f"{expected}: "), f"{row}: {text!r} is not {expected!r}"
    if expected == A_TEST:
        outcome = text[len(A_TEST) + 2 :]
        assert any(outcome == o or outcome.startswith(f"{o};") for o in OUTCOMES), outcome
    failed = [arm for entry in entries for arm in entry["arms"] if not arm["learned"]]
    for arm in failed:  # "nope 0 of 3" must not be read inside "rnope 0 of 3"
        named = rf"(?<![\w]){re.escape(arm['pe'])} {arm['n_reached']} of {arm['n_seeds']}\b"
        assert re.search(named, text), f"{row}: {arm['pe']} {arm['n_reached']} of … not named"


def test_a_committed_verdicts_json_is_what_the_aggregator_computes():
    """The committed classes are the aggregator's, not edited by hand (one recipe, 12 runs)."""
    summary = aggregate(RESULTS / "addition_positions")
    expected = verdicts_json(summary.verdicts, summary.test_rule)
    assert (RESULTS / "addition_positions" / "verdicts.json").read_text() == expected
