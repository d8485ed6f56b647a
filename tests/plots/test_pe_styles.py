"""The recipes that compare encodings on grids and on addition draw each in its own colour
(rope_mixed took learned's colour from the hash before it had a style of its own). A new
encoding needs no entry here: unknown names get a colour from a hash (DESIGN.md: adding a PE
edits no test)."""

from __future__ import annotations

import pytest

from lengen.plots import PE_STYLES


@pytest.mark.parametrize(
    "names",
    [
        ("alibi", "learned", "rope", "rope_mixed", "sinusoidal"),
        ("abacus", "learned", "nope", "rope"),
    ],
    ids=["grids_small", "addition_positions"],
)
def test_a_recipes_encodings_have_distinct_colours(names):
    assert len({PE_STYLES[name][0] for name in names}) == len(names)
