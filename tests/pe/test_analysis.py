"""PE math checks (``lengen.pe.analysis``): a shift of the sinusoidal table is a rotation of each
frequency's (sin, cos) pair, and the check tells a corrupted table from a true one."""

from __future__ import annotations

import math

import pytest
import torch

from lengen.pe import sinusoidal_table
from lengen.pe.analysis import check_shift_rotation, shift_rotation_matrix

pytestmark = pytest.mark.usefixtures("single_thread")  # tiny tensors: threads only add latency


def test_shift_rotation_holds_for_the_sinusoidal_table():
    assert check_shift_rotation(sinusoidal_table(128, 64), base=10000.0) < 1e-5


def test_shift_rotation_fails_for_a_corrupted_table():
    table = sinusoidal_table(128, 64)
    table[:, [2, 3]] = table[:, [3, 2]]  # sin and cos of one frequency swapped
    assert check_shift_rotation(table, base=10000.0) > 0.5


def test_shift_rotation_fails_for_the_wrong_base():
    assert check_shift_rotation(sinusoidal_table(128, 64, base=100.0), base=10000.0) > 0.5


def test_shift_rotation_matrix_rotates_a_pair_by_hand():
    # one frequency ω = 0.5, shift 2: angle 1, so (sin 0, cos 0) = (0, 1) -> (sin 1, cos 1)
    rotated = shift_rotation_matrix(2, [0.5]) @ torch.tensor([0.0, 1.0], dtype=torch.float64)
    expected = torch.tensor([math.sin(1.0), math.cos(1.0)], dtype=torch.float64)
    torch.testing.assert_close(rotated, expected)
