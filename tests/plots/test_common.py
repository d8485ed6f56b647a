"""The shared look of the figures: one style per encoding."""

from __future__ import annotations

from lengen.plots import PE_STYLES, pe_style


def test_pe_colours_are_distinct_for_the_first_slice():
    colours = [PE_STYLES[name][0] for name in ("nope", "sinusoidal", "learned", "alibi", "rope")]
    assert len(set(colours)) == 5


def test_unknown_pe_gets_a_deterministic_style():
    assert pe_style("my_new_pe") == pe_style("my_new_pe")
