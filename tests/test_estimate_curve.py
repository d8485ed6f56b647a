"""A mechanism measured only at small sizes is read along the FLOPs-only curve past them
(``lengen.estimate_curve.beside``), not extrapolated at its own overhead-bound rate."""

from __future__ import annotations

import math

import pytest

from lengen.estimate_curve import beside, interpolate

#: FLOPs-only entries: a small evaluation bound by overheads, large ones near the machine's speed
GENERAL = [[1e8, 1.0], [1e10, 10.0], [1e11, 60.0]]
#: one mechanism measured at the small size only, 1.5x the FLOPs-only time there
OWN = [[1e8, 1.5]]


def test_past_its_largest_size_a_mechanism_keeps_its_cost_relative_to_the_flops_only_curve():
    assert beside(OWN, GENERAL, 1e11) == pytest.approx(1.5 * 60.0 / 1.0)


def test_its_own_rate_alone_would_have_said_hours():
    # the old reading: the largest own time plus the FLOPs beyond at the own (overhead) rate
    assert interpolate(OWN, 1e11) > 10 * beside(OWN, GENERAL, 1e11)


def test_within_its_own_range_the_own_entries_decide():
    assert beside(OWN, GENERAL, 1.05e8) == interpolate(OWN, 1.05e8)


def test_without_flops_only_entries_past_it_the_own_entries_decide():
    assert beside(OWN, [[1e8, 1.0]], 1e11) == interpolate(OWN, 1e11)


#: a mechanism measured at two near sizes only (the 4-layer runs), the FLOPs-only entries
#: reaching far below them (other mechanisms' smaller models)
OWN_LARGE = [[6e9, 0.099], [6.9e9, 0.147]]
GENERAL_WIDE = [[1e9, 0.02], [2e9, 0.035], [4e9, 0.065], [6e9, 0.095], [7e9, 0.11]]


def test_below_its_smallest_size_a_mechanism_keeps_its_cost_relative_to_the_flops_only_curve():
    # own(6e9) x general(1.5e9) / general(6e9), general(1.5e9) read in log-log between 1e9 and 2e9
    general_there = 0.02 * (0.035 / 0.02) ** (math.log(1.5) / math.log(2))
    expected = 0.099 * general_there / 0.095
    assert beside(OWN_LARGE, GENERAL_WIDE, 1.5e9) == pytest.approx(expected)


def test_below_every_measured_size_the_own_entries_decide():
    # the FLOPs-only entries reach no lower than the own ones: nothing to read along
    general = [[6e9, 0.095], [7e9, 0.11]]
    assert beside(OWN_LARGE, general, 1.5e9) == interpolate(OWN_LARGE, 1.5e9)
