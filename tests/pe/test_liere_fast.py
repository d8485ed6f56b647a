"""pe=liere on sequences (``lengen.pe.liere``): positions that run p₀, p₀ + 1, … are turned by
powers of one rotation, R(p₀ + t·u) = R(p₀)·exp(u·A)^t (``run_rotations``,
``power_rotations``), instead of one ``matrix_exp`` per position (half of LieRE's training
step, docs/benchmarks.md). Checked against a float64 re-derivation from the reference's formula
(StanfordMIMI/LieRE, ``models/rope_vit.py``, ``LierePositionEncoder``: upper = triu(raw, 1) −
0.5, A = upper − upperᵀ, ``torch.linalg.matrix_exp`` of p·A per position): values and
gradients, fp32 as close to float64 as the matrix_exp form, which path is taken, the blocks'
budget."""

from __future__ import annotations

import math

import pytest
import torch
from torch.testing import assert_close

import lengen.pe.liere as liere_module
from helpers import counting_rotations, grid_cells
from lengen.pe.liere import (
    ROTATION_ELEMENTS,
    LieRE,
    contiguous_start,
    exponential_vjp,
    power_rotations,
    rotate_in_position_blocks,
    run_rotations,
    skew_from_upper,
)

pytestmark = pytest.mark.usefixtures("single_thread")


def reference_rotations(raw, coordinates):
    """The reference's R(p) on one axis, float64: raw (H, 1, n, b, b), coordinates (T,) ->
    (H, T, n, b, b), one matrix_exp per position."""
    upper = torch.triu(raw.double(), diagonal=1) - 0.5  # the reference's − 0.5 cancels below
    generator = (upper - upper.transpose(-1, -2))[:, 0]  # (H, n, b, b)
    scaled = coordinates.double()[None, :, None, None, None] * generator[:, None]
    return torch.linalg.matrix_exp(scaled)  # (H, T, n, b, b)


def raw_generators(heads=2, blocks=3, size=4, seed=0, dtype=torch.float64):
    """Raw parameters (H, 1, n, b, b) drawn as LieRE draws them, U[0, 2π)."""
    generator = torch.Generator().manual_seed(seed)
    shape = (heads, 1, blocks, size, size)
    return torch.rand(shape, generator=generator, dtype=dtype) * 2 * math.pi


def weights(shape, seed=1):
    """Fixed float64 weights of a loss that reads every element."""
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


UNIT = 0.125  # coordinates p / 8


@pytest.mark.parametrize("count", [1, 2, 11, 16])
def test_powers_of_the_unit_rotation_are_the_exponentials_of_its_multiples(count):
    raw = raw_generators()
    unit = reference_rotations(raw, torch.tensor([UNIT]))[:, 0]  # (H, n, b, b)
    expected = reference_rotations(raw, UNIT * torch.arange(count))
    assert_close(power_rotations(unit, count), expected)


def test_run_rotations_from_an_offset_are_the_exponentials():
    raw = raw_generators()
    first = torch.tensor([5 * UNIT], dtype=torch.float64)
    got = run_rotations(first, torch.tensor([[UNIT]]), 9, skew_from_upper(raw), torch.float64)
    assert_close(got, reference_rotations(raw, UNIT * torch.arange(5, 14)))


@pytest.mark.parametrize("start", [0, 5])
def test_run_rotations_have_the_gradients_of_the_exponentials(start):
    count = 12
    loss_weights = weights((2, count, 3, 4, 4))

    def gradient(rotations_of):
        raw = raw_generators().requires_grad_()
        (grad,) = torch.autograd.grad((rotations_of(raw) * loss_weights).sum(), raw)
        return grad

    first = torch.tensor([start * UNIT], dtype=torch.float64) if start else None  # None: p₀ = 0
    unit = torch.tensor([[UNIT]], dtype=torch.float64)
    got = gradient(lambda raw: run_rotations(first, unit, count, skew_from_upper(raw), raw.dtype))
    coordinates = UNIT * torch.arange(start, start + count)
    assert_close(got, gradient(lambda raw: reference_rotations(raw, coordinates)))


def test_exponential_vjp_is_the_gradient_of_matrix_exp():
    # a large output gradient, as the unit rotation collects from all its powers
    x = skew_from_upper(raw_generators()[:, 0]) * UNIT  # (H, n, b, b)
    grad = 2000 * weights(x.shape)
    leaf = x.clone().requires_grad_()
    (expected,) = torch.autograd.grad(torch.linalg.matrix_exp(leaf), leaf, grad)
    assert_close(exponential_vjp(x, grad), expected)


def turned_by_reference(x, raw, coordinates):
    """x (B, H, T, hd) turned by the reference's block-diagonal R(p), float64."""
    rotations = reference_rotations(raw, coordinates)  # (H, T, n, b, b)
    split = x.double().unflatten(-1, rotations.shape[2:4])  # (B, H, T, n, b)
    return torch.einsum("htnij,bhtnj->bhtni", rotations, split).flatten(-2)


def blocked_sequence(raw, q, k, start, budget):
    """q and k (B, H, T, hd) at positions start … start + T − 1 (coordinates p · UNIT) turned
    by the powers path, blocks of at most ``budget`` rotation elements."""
    positions = torch.arange(start, start + q.shape[2])
    coordinates = (positions.double() * UNIT)[:, None]  # (T, 1)
    unit = torch.tensor([[UNIT]], dtype=torch.float64)
    generators = skew_from_upper(raw)  # (H, 1, n, b, b)
    return rotate_in_position_blocks([q, k], coordinates, generators, budget, unit, start)


def sequence_inputs(length=23, grad=False):
    q, k = weights((2, 1, 2, length, 12), seed=2).unbind(0)  # (B, H, T, hd) each
    return q.requires_grad_(grad), k.requires_grad_(grad)


ELEMENT_BUDGETS = [1 << 30, 5 * 2 * 3 * 16]  # one block; blocks of five positions


@pytest.mark.parametrize("budget", ELEMENT_BUDGETS, ids=["one block", "blocks of five"])
def test_powers_path_turns_queries_and_keys_as_the_reference(budget):
    raw = raw_generators()
    q, k = sequence_inputs()
    got = blocked_sequence(raw, q, k, 3, budget)
    coordinates = UNIT * torch.arange(3, 26)
    expected = [turned_by_reference(x, raw, coordinates) for x in (q, k)]
    assert_close(got, expected)


@pytest.mark.parametrize("budget", ELEMENT_BUDGETS, ids=["one block", "blocks of five"])
def test_powers_path_has_the_gradients_of_the_reference(budget):
    loss_weights = weights((1, 2, 23, 12), seed=3)

    def gradients(turn):
        raw = raw_generators().requires_grad_()
        q, k = sequence_inputs(grad=True)
        turned_q, turned_k = turn(raw, q, k)
        loss = (turned_q * turned_k * loss_weights).sum()  # q'·k' terms, each weighted
        return torch.autograd.grad(loss, [raw, q, k])

    coordinates = UNIT * torch.arange(3, 26)
    expected = gradients(lambda r, q, k: [turned_by_reference(x, r, coordinates) for x in (q, k)])
    assert_close(gradients(lambda r, q, k: blocked_sequence(r, q, k, 3, budget)), expected)


def fp32_errors(rotations_of, raw64, loss_weights):
    """Largest error of fp32 rotations and of their gradient against float64, each relative to
    the largest float64 value -> (value error, gradient error)."""
    results = []
    for dtype in (torch.float64, torch.float32):
        raw = raw64.to(dtype).requires_grad_()
        rotations = rotations_of(skew_from_upper(raw), dtype)
        (grad,) = torch.autograd.grad((rotations.double() * loss_weights).sum(), raw)
        results.append((rotations.detach().double(), grad.double()))
    (value64, grad64), (value32, grad32) = results
    relative = [
        (a - b).abs().max() / b.abs().max() for a, b in ((value32, value64), (grad32, grad64))
    ]
    return tuple(float(error) for error in relative)


def test_fp32_powers_are_as_close_to_float64_as_one_exponential_per_position():
    # the default experiment's size: 4 heads, one 32×32 block, 33 positions, coordinates p / 33
    raw = raw_generators(heads=4, blocks=1, size=32)
    count, unit = 33, 1 / 33
    coordinates = unit * torch.arange(count, dtype=torch.float64)[:, None]  # (T, 1)
    loss_weights = weights((4, count, 1, 32, 32))

    def per_position(generators, dtype):
        return liere_module.generator_rotations(coordinates, generators, dtype)

    def powers(generators, dtype):
        step = torch.tensor([[unit]], dtype=dtype)
        return run_rotations(None, step, count, generators, dtype)  # from p₀ = 0

    value_error, grad_error = fp32_errors(powers, raw, loss_weights)
    reference_value_error, reference_grad_error = fp32_errors(per_position, raw, loss_weights)
    # measured: values 3e-6 against 5e-6, gradients 4e-6 against 5e-6 (torch's own matrix_exp
    # backward for the unit rotation, without exponential_vjp's scaling: 1.7e-4)
    assert value_error <= 2 * reference_value_error
    assert grad_error <= 2 * reference_grad_error


@pytest.mark.parametrize("queries", [slice(None), slice(30, None)], ids=["training", "cached"])
def test_liere_on_a_sequence_forms_no_exponential_per_position(queries, monkeypatch):
    pe = LieRE(d_model=24, n_heads=2, train_positions=33)
    positions = torch.arange(33)
    q, k = torch.randn(2, 1, 2, 33, 12).unbind(0)
    calls = counting_rotations(monkeypatch)
    pe.rotate(q[:, :, queries], k, positions[queries], positions)
    assert max(calls) == 1  # the unit rotation and R(p₀), never one per position


def test_liere_rotate_on_a_sequence_equals_the_reference(monkeypatch):
    torch.manual_seed(0)
    pe = LieRE(d_model=24, n_heads=2, block_size=4, train_positions=8)
    raw = pe.raw_generators.detach().view(pe.generator_shape)[0]  # (H, 1, n, b, b)
    q = weights((1, 2, 29, 12), seed=4)  # float64, past the training extent
    powers_used: list[int] = []
    real = liere_module.power_rotations
    monkeypatch.setattr(
        liere_module, "power_rotations", lambda *a: powers_used.append(1) or real(*a)
    )
    positions = torch.arange(29)
    rotated, _ = pe.rotate(q, q, positions, positions)
    assert powers_used  # the powers path was the one taken
    assert_close(rotated, turned_by_reference(q, raw, torch.arange(29) / 8))


@pytest.mark.parametrize(
    "positions, start",
    [(torch.arange(5), 0), (torch.arange(4, 9), 4), (torch.tensor([7]), 7)],
    ids=["from zero", "from four", "one position"],
)
def test_contiguous_start_is_the_first_of_a_run(positions, start):
    assert contiguous_start(positions) == start


@pytest.mark.parametrize(
    "positions",
    [
        torch.tensor([0, 1, 3]),
        torch.tensor([2, 1, 0]),
        torch.tensor([-1, 0, 1]),
        torch.arange(4.0),
        torch.arange(0),
        grid_cells((2, 2)),
    ],
    ids=["gap", "descending", "negative", "float", "empty", "grid"],
)
def test_contiguous_start_is_none_for_anything_else(positions):
    assert contiguous_start(positions) is None


def test_powers_path_forms_no_block_over_the_budget(monkeypatch):
    # a long evaluation: 2 heads × 16² elements per position, 2,048 positions = 1M elements
    pe = LieRE(d_model=32, n_heads=2, train_positions=33, causal=True)
    counts: list[int] = []
    real = liere_module.run_rotations

    def recording(first, unit, count, *rest):
        counts.append(count)
        return real(first, unit, count, *rest)

    monkeypatch.setattr(liere_module, "run_rotations", recording)
    x = torch.zeros(1, 2, 2048, 16)
    positions = torch.arange(2048)
    with torch.no_grad():
        pe.rotate(x, x, positions, positions)
    assert len(counts) > 1  # blocked
    assert max(counts) * pe.n_heads * pe.blocks * pe.block**2 <= ROTATION_ELEMENTS


def test_liere_decoding_one_token_forms_one_exponential(monkeypatch):
    # one query position: R(p₀) alone, no unit rotation and no powers beside it
    pe = LieRE(d_model=24, n_heads=2, train_positions=33)
    q = torch.randn(1, 2, 1, 12)
    calls = counting_rotations(monkeypatch)
    pe.rotate(q, q, torch.tensor([40]), torch.tensor([40]))
    assert calls == [1]


def test_powers_path_maps_over_pack_members_with_torch_func():
    # a pack (lengen.pack) takes its members' gradients with torch.func.vmap(grad(...))
    stacked = torch.stack([raw_generators(seed=seed) for seed in (0, 1)])  # (M, H, 1, n, b, b)
    first, unit = torch.tensor([UNIT], dtype=torch.float64), torch.tensor([[UNIT]]).double()
    loss_weights = weights((2, 7, 3, 4, 4))

    def loss(raw):
        rotations = run_rotations(first, unit, 7, skew_from_upper(raw), torch.float64)
        return (rotations * loss_weights).sum()

    mapped = torch.func.vmap(torch.func.grad(loss))(stacked)
    leaves = [raw.clone().requires_grad_() for raw in stacked]
    one_by_one = [torch.autograd.grad(loss(leaf), leaf)[0] for leaf in leaves]
    assert_close(mapped, torch.stack(one_by_one))
