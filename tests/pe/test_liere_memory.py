"""LieRE and ComRoPE (``lengen.pe.liere``, ``lengen.pe.comrope``) form their rotation matrices
exp(Σ_a p_a A_a) in blocks of positions (``rotate_in_position_blocks``): every position's at
once was 38x RoPE's peak at 8,192 tokens for LieRE (scripts/bench_options.py
--memory-lengths 8192). Blocked and one-call rotations are the same function: float64 inputs,
a block smaller than the length, positions past the training extent, values and gradients."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

import lengen.pe.liere as liere_module
from helpers import counting_rotations, grid_cells
from lengen.pe.comrope import ComRoPE
from lengen.pe.liere import LieRE

pytestmark = pytest.mark.usefixtures("single_thread")

#: 2 heads of 12 channels
SMALL = dict(d_model=24, n_heads=2, causal=False)


def encodings():
    """(id, encoding, positions): sequences past the training extent (8) and a grid past its
    side (4 → 6, with a readout row), for LieRE and both ComRoPE variants."""
    torch.manual_seed(0)
    grid = grid_cells((6, 6), readout=True)  # (37, 2)
    sequence = torch.arange(29)  # (29,), past train_positions=8
    return [
        ("liere sequence", LieRE(**SMALL, block_size=4, train_positions=8), sequence),
        ("liere grid", LieRE(**SMALL, block_size=4, axes=2, train_positions=4), grid),
        ("comrope ld grid", ComRoPE(**SMALL, axes=2, train_positions=4), grid),
        ("comrope ap grid", ComRoPE(**SMALL, variant="ap", axes=2, train_positions=4), grid),
    ]


CASES = encodings()
IDS = [case[0] for case in CASES]


def per_position(pe) -> int:
    """Rotation-matrix elements of one position: H · n · b²."""
    return pe.n_heads * pe.blocks * pe.block**2


def small_budget(pe) -> int:
    """Seven positions' worth: the lengths here (29, 37) take five or six blocks, the last
    one short."""
    return 7 * per_position(pe)


def inputs(length: int, *, grad: bool = False):
    generator = torch.Generator().manual_seed(1)
    q, k = torch.randn(2, 2, 2, length, 12, generator=generator, dtype=torch.float64).unbind(0)
    return q.requires_grad_(grad), k.requires_grad_(grad)  # (B, H, T, hd) each


def one_call(pe, q, k, positions):
    """The rotation with every position's matrix formed in one call (the training path)."""
    pe.rotation_elements = 1 << 30
    return pe.rotate(q, k, positions, positions)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_blocked_rotation_equals_one_call(case, monkeypatch):
    _, pe, positions = case
    q, k = inputs(positions.shape[0])
    expected = one_call(pe, q, k, positions)
    calls = counting_rotations(monkeypatch)
    pe.rotation_elements = small_budget(pe)
    got = pe.rotate(q, k, positions, positions)
    assert len(calls) > 2  # several blocks were used, not one
    assert_close(got, expected)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_blocked_rotation_has_the_gradients_of_one_call(case, monkeypatch):
    _, pe, positions = case

    def gradients(elements: int):
        q, k = inputs(positions.shape[0], grad=True)
        pe.rotation_elements = elements
        rotated_q, rotated_k = pe.rotate(q, k, positions, positions)
        weights = torch.linspace(-1, 1, rotated_q.numel(), dtype=torch.float64)
        loss = (rotated_q * rotated_k).flatten() @ weights  # q'·k' terms, each weighted
        parameters = [p for p in pe.parameters()]
        return torch.autograd.grad(loss, [q, k, *parameters])

    expected = gradients(1 << 30)
    calls = counting_rotations(monkeypatch)
    got = gradients(small_budget(pe))
    assert len(calls) > 2  # several blocks were used, not one
    assert_close(got, expected)


def test_blocked_rotation_of_cached_queries_equals_one_call(monkeypatch):
    # decoding: queries at the last positions, keys everywhere; each side blocked on its own
    _, pe, positions = CASES[0]
    q, k = inputs(positions.shape[0])
    q, q_positions = q[:, :, -3:], positions[-3:]
    pe.rotation_elements = 1 << 30
    expected = pe.rotate(q, k, q_positions, positions)
    calls = counting_rotations(monkeypatch)
    pe.rotation_elements = small_budget(pe)
    got = pe.rotate(q, k, q_positions, positions)
    assert len(calls) > 2
    assert_close(got, expected)


@pytest.mark.parametrize(
    "cls, d_model, heads, length",
    [(LieRE, 32, 2, 2048), (ComRoPE, 128, 4, 4096)],
    ids=["liere", "comrope"],
)
def test_no_call_forms_more_rotation_elements_than_the_budget(
    cls, d_model, heads, length, monkeypatch
):
    # the default budget at a long evaluation length: LieRE's 2 heads × 16² and ComRoPE's
    # 4 heads × 16 blocks × 2² per position make 1M elements in one call without blocking
    pe = cls(d_model=d_model, n_heads=heads, train_positions=33, causal=True)
    calls = counting_rotations(monkeypatch)
    x = torch.zeros(1, heads, length, d_model // heads)
    positions = torch.arange(length)
    with torch.no_grad():
        pe.rotate(x, x, positions, positions)
    assert max(calls) * per_position(pe) <= liere_module.ROTATION_ELEMENTS
