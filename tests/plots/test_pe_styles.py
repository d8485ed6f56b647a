"""Every shipped encoding (configs/pe/*.yaml, globbed) has its own fixed style, and the recipes
that compare encodings on grids and on addition draw each in its own colour."""

from __future__ import annotations

import pytest

from helpers import ROOT
from lengen.plots import PE_STYLES

SHIPPED = sorted(path.stem for path in (ROOT / "configs" / "pe").glob("*.yaml"))


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_encoding_has_a_fixed_style(name):
    assert name in PE_STYLES  # not a colour from a hash, which may be a compared one's


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
