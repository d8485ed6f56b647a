"""``lengen.pe.config.rope``: the dimension rules of the keys, without torch: how many dimensions
partial rotary turns (GPT-NeoX ``rotary_pct``) and how many pairs p-RoPE keeps (Barbero et al.
2025)."""

from __future__ import annotations

import pytest

from lengen.pe.config.rope import p_rope_pairs, rotary_dimension


@pytest.mark.parametrize(
    ("head_dim", "fraction", "expected"),
    [(64, 1.0, 64), (64, 0.5, 32), (64, 0.3, 18), (64, 0.25, 16), (64, 0.01, 2), (10, 0.5, 4)],
)
def test_rotary_dimension_rounds_down_to_even(head_dim, fraction, expected):
    assert rotary_dimension(head_dim, fraction) == expected


@pytest.mark.parametrize(
    ("dim", "p", "expected"),
    [(16, 1.0, 8), (16, 0.5, 4), (16, 0.3, 2), (16, 0.0, 0), (64, 0.75, 24)],
)
def test_p_rope_pair_count_follows_the_paper(dim, p, expected):
    # Barbero et al.: rope_angles = int(rope_percentage * head_dim // 2)
    assert p_rope_pairs(dim, p) == expected
