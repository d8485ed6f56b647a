"""A mechanism measured only at small sizes is read along the FLOPs-only curve past them
(``lengen.estimate_curve.beside``), not extrapolated at its own overhead-bound rate."""

from __future__ import annotations

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
