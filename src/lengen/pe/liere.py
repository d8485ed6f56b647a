"""LieRE: rotations exp(Σ_a p_a A_a) with learned, general skew-symmetric generators
(Ostmeier et al., 2024, "LieRE: Generalizing Rotary Position Encodings"; reference code
StanfordMIMI/LieRE, ``models/rope_vit.py``: ``LierePositionEncoder``, ``FlexibleAttention``).

A token at position p ∈ R^A has its query and key turned by R(p) = exp(Σ_a p_a A_a), each
generator A_a block-diagonal with skew-symmetric b×b blocks, learned per axis, head and layer:

    q' = R(p_q) q,  k' = R(p_k) k,  q'·k' = qᵀ R(p_q)ᵀ R(p_k) k.

The generators need not commute, so R(p_q)ᵀ R(p_k) is in general *not* R(p_k − p_q): LieRE
gives up exact relativity for capacity (ComRoPE, ``lengen.pe.comrope``, restores it). On one
axis (sequences) a single generator always commutes with itself, and LieRE is relative.

**As in the reference** (``LierePositionEncoder.__init__`` / ``forward``): the raw parameters
start U[0, 2π) (``torch.rand(...) * 2π``, "RoPE-Mixed drew random angles from zero to 2 pi");
a block is U − Uᵀ with U the strict upper triangle of the raw block (``torch.triu(…,
diagonal=1)``; the reference's ``- 0.5`` cancels in U − Uᵀ); the generator of a token is
Σ_a p_a B_a and its rotation ``torch.matrix_exp`` of it, in fp32; one generator per head and
layer (``rotary_embedding_per_head`` / ``_per_layer``: true in its shipped configs,
``lightning_conf/cifar100.yaml``; but the stored ``models/vit.py`` ``Transformer.forward``
replaces ``positional_transforms`` by layer 0's slice in its first iteration, so every layer
of the reference turns with layer 0's generators: here each layer has its own); the block is the whole head by default (``generator_dim``
64 = ``dim_head``, which its attention asserts); positions normalised by the training grid
(``PositionEncoderBase.forward``: ``linspace(0, steps / expected_steps, steps)`` per axis, so
the training side spans [0, 1] and a larger one reaches past 1). **Differences**: coordinates
here are p / side (the reference's spacing is 1/(side − 1) at the training side and
≈ 1/side beyond it); ``pe.normalize=false`` uses integer coordinates; a readout slot (the −1
row) is rotated by the identity, as the reference's CLS token; the parameters are one flat
vector (no weight decay, as for RoPE-Mixed's frequencies). The stored reference takes one
``torch.matrix_exp`` of every token's generator in fp32 (``exp_method =
ExponentiationMethod.EXPONENTIATE_ONE_SHOT``; its ``EXPONENTIATE_LOOP``, per block of the head,
is commented out: "more memory efficient … but nummerically not the same"); here one batched
call per block of positions (``rotate_in_position_blocks``: a training length is one block, a
long evaluation several, so its memory stays within 2x RoPE's at 8,192 tokens), in fp32 at
least.

**Sequences (one axis), exact and cheaper.** Positions p₀, p₀ + 1, … (training, a long
evaluation, cached queries) have exponents p·A that are multiples of one A, which commute, so
R(p₀ + t) = R(p₀)·E^t with E = exp(u·A), u one step's coordinate: E's powers are formed by
doubling (``power_rotations``: ⌈log₂ T⌉ batched matmuls) and only E and R(p₀) take a
``matrix_exp`` (``run_rotations``), their backward scaled (``exponential_vjp``), where one
exponential per position and head and its backward were half the training step. fp32 values
and gradients are as close to float64 as the per-position form (tests/pe/test_liere_fast.py).
Grids and any other positions keep one ``matrix_exp`` per position; ComRoPE keeps it
everywhere (``powers_on_sequences``).

The pure functions at the top (``skew_from_upper``, ``generator_rotations``, ``rotate_blocks``,
``block_coordinates``) are shared with ComRoPE.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor, nn

from lengen.pe.base import PositionalEncoding
from lengen.pe.config.liere import GeneratorConfig, LieREConfig
from lengen.pe.grid import check_grid_positions, has_position

#: Largest set of rotation matrices formed at once (H × positions × n × b × b): 512K fp32 =
#: 2 MiB, and ``matrix_exp``'s intermediates several times that; LieRE's and ComRoPE's pass
#: at 8,192 tokens stays within 1.3x RoPE's peak (results/bench/cpu_options_memory_s24.json).
#: Training lengths take one block (the default experiment: 4 heads × 33 positions × 32² =
#: 135K for LieRE, 4 × 33 × 16 × 2² = 8K for ComRoPE), so the training path is the single
#: call it was.
ROTATION_ELEMENTS = 1 << 19


def skew_from_upper(raw: Tensor) -> Tensor:
    """(..., b, b) -> (..., b, b) skew-symmetric: U − Uᵀ, U the strict upper triangle."""
    upper = raw.triu(1)
    return upper - upper.transpose(-1, -2)


def block_coordinates(positions: Tensor, axes: int, scale: Tensor | float = 1.0) -> Tensor:
    """Positions (T,) or (T, A) -> (T, A) fp32 coordinates times ``scale`` ((A,) or a float);
    rows of −1s (no grid position) -> 0, so their rotation is the identity."""
    if positions.ndim == 1:
        positions = positions[:, None]  # a sequence: one axis
    else:
        check_grid_positions(positions, axes)
    coordinates = positions.to(torch.float32) * has_position(positions)[..., None]  # (T, A)
    return coordinates * scale


def generator_rotations(
    coordinates: Tensor,
    generators: Tensor,
    dtype: torch.dtype = torch.float32,
    exponential: Callable[[Tensor], Tensor] = torch.linalg.matrix_exp,
) -> Tensor:
    """R(p) = exp(Σ_a p_a A_a) per token: coordinates (T, A), generators (H, A, n, b, b)
    (n blocks of b×b, skew-symmetric) -> (H, T, n, b, b) in ``dtype`` (fp32 by default);
    ``exponential`` ``matrix_exp`` or ``scaled_matrix_exp`` (the same values)."""
    summed = torch.einsum("ta,hanij->htnij", coordinates.to(dtype), generators.to(dtype))
    return exponential(summed.contiguous())  # (H, T, n, b, b)


def exponential_vjp(x: Tensor, grad: Tensor) -> Tensor:
    """The gradient of exp at real x (..., b, b) for the output gradient ``grad`` -> like x: the
    top-right block of exp([[xᵀ, g], [0, xᵀ]]) (the block form of the Fréchet derivative, as
    torch's own backward, ``linalg_matrix_exp_differential``, forms it), with
    g = grad / max|grad| and the result scaled back.

    Why scaled: the block exponential's scaling-and-squaring counts its squarings by the norm
    of the whole block, g included, and every squaring adds rounding. The unit rotation of
    ``run_rotations`` gathers the gradients of all T powers (max|grad| ≈ 2,000 at the default
    experiment against |x| ≈ 2): torch's unscaled backward was 1.7e-4 off float64 (relative
    max) in fp32, this 4e-6, as close as one ``matrix_exp`` per position (5e-6). The block is
    linear in g, so the scaling changes rounding only."""
    size = x.shape[-1]
    scale = grad.abs().amax(dim=(-2, -1), keepdim=True)  # (..., 1, 1)
    scale = scale.clamp_min(torch.finfo(grad.dtype).tiny)  # a zero gradient stays zero
    turned = x.transpose(-1, -2)  # (..., b, b)
    upper = torch.cat([turned, grad / scale], dim=-1)  # (..., b, 2b)
    lower = torch.cat([torch.zeros_like(turned), turned], dim=-1)  # (..., b, 2b)
    block = torch.linalg.matrix_exp(torch.cat([upper, lower], dim=-2))  # (..., 2b, 2b)
    return block[..., :size, size:] * scale  # (..., b, b)


class ScaledMatrixExp(torch.autograd.Function):
    """``torch.linalg.matrix_exp`` of real matrices, its backward ``exponential_vjp``; in the
    ``setup_context`` form with a generated vmap rule, because a pack (``lengen.pack``) maps its
    members' steps with ``torch.func.vmap`` and ``grad_and_value``."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x: Tensor) -> Tensor:  # (..., b, b) -> (..., b, b)
        return torch.linalg.matrix_exp(x)

    @staticmethod
    def setup_context(ctx, inputs: tuple[Tensor], output: Tensor) -> None:
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, grad: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return exponential_vjp(x, grad)


def scaled_matrix_exp(x: Tensor) -> Tensor:
    """exp of real matrices (..., b, b), its gradient accurate when large (``ScaledMatrixExp``)."""
    return ScaledMatrixExp.apply(x)


def contiguous_start(positions: Tensor) -> int | None:
    """The first of 1-D integer positions (T,) that run p0, p0 + 1, …, p0 ≥ 0 -> p0; None for
    anything else (grids, gaps, float positions, negative rows), which takes ``matrix_exp``."""
    if positions.ndim != 1 or positions.is_floating_point() or positions.numel() == 0:
        return None
    run = torch.arange(positions.numel(), device=positions.device).to(positions.dtype)
    if torch.equal(positions, run):
        return 0  # training and full passes: no .item(), so no graph break under torch.compile
    # clamped: a negative first position cannot equal its own run
    if torch.equal(positions.clamp_min(0), positions[:1] + run):
        return int(positions[0])  # cached queries
    return None


def power_rotations(unit: Tensor, count: int) -> Tensor:
    """E⁰, E¹, …, E^(count−1) of unit rotations E (H, n, b, b) -> (H, count, n, b, b), by
    doubling: with E⁰ … E^(k−1) formed, E^k·E^j = E^(k+j) gives the next k in one batched
    matmul and E^k·E^k the next factor, so ⌈log₂ count⌉ rounds of matmuls replace count matrix
    exponentials (and their backward, a 2b×2b exponential each)."""
    heads, blocks, size, _ = unit.shape
    identity = torch.eye(size, dtype=unit.dtype, device=unit.device)
    powers = identity.expand(heads, 1, blocks, size, size)  # (H, 1, n, b, b): E⁰
    factor = unit  # (H, n, b, b): E^k, k the number of powers formed
    while powers.shape[1] < count:
        formed = powers.shape[1]
        more = factor[:, None] @ powers[:, : count - formed]  # (H, ≤k, n, b, b): E^(k+j)
        powers = torch.cat([powers, more], dim=1)
        if powers.shape[1] < count:
            factor = factor @ factor  # E^2k
    return powers


def run_rotations(
    first: Tensor | None, unit: Tensor, count: int, generators: Tensor, dtype: torch.dtype
) -> Tensor:
    """R(p₀ + t·u) for t < count on one axis: first (A,) = p₀'s coordinates (None: p₀ = 0),
    unit (1, A) = u, generators (H, A, n, b, b) -> (H, count, n, b, b) in ``dtype``.

    Exact, not an approximation: on one axis every exponent is a multiple of the same A, and
    exponentials of commuting matrices multiply, exp((p₀ + t·u)A) = exp(p₀A)·exp(uA)^t; what
    differs from one ``matrix_exp`` per position is float rounding only (tests/pe/
    test_liere_fast.py: values and gradients against float64)."""
    if (
        count == 1 and first is not None
    ):  # decoding one token: R(p₀) alone, as one matrix_exp per position
        return generator_rotations(first[None], generators, dtype)  # (H, 1, n, b, b)
    # (H, n, b, b): E = exp(uA); the exponentials here collect the gradients of all count
    # powers, hence the scaled backward (``exponential_vjp``)
    step = generator_rotations(unit, generators, dtype, scaled_matrix_exp)[:, 0]
    powers = power_rotations(step, count)  # (H, c, n, b, b)
    if first is None:
        return powers  # p₀ = 0: R(p₀) is the identity
    origin = generator_rotations(first[None], generators, dtype, scaled_matrix_exp)  # R(p₀)
    # origin: (H, 1, n, b, b)
    return origin @ powers  # (H, c, n, b, b)


def rotate_in_position_blocks(
    tensors: list[Tensor],
    coordinates: Tensor,
    generators: Tensor,
    max_elements: int,
    unit: Tensor | None = None,
    first_position: int = 0,
) -> list[Tensor]:
    """Tensors (B, H, T, hd) that share coordinates (T, A) turned by R(p), generators
    (H, A, n, b, b): the rotations formed for at most ``max_elements`` / (H·n·b²) positions at
    a time and freed before the next block -> like each tensor. ``unit`` (1, A), given for
    positions on one axis that run p₀, p₀ + 1, … (``contiguous_start``): the coordinates of one
    step, and each block's rotations are R(first)·E^t (``run_rotations``) instead of one
    ``matrix_exp`` per position; ``first_position`` p₀ (with ``unit``: R(0) is the identity).

    Why: R(p) for every position at once is H·T·n·b² floats plus ``matrix_exp``'s
    intermediates (LieRE at 8,192 tokens: 38x RoPE's peak, docs/benchmarks.md); each position's
    R(p) depends on its own coordinates only, so blocks of positions give the same values. A
    length that fits one block (training lengths) takes the single-call path unchanged. The
    rotations are computed in fp32 at least (fp64 for fp64 tensors: tests compare in float64)."""
    heads, _, blocks, size, _ = generators.shape
    count = coordinates.shape[0]
    step = max(1, max_elements // (heads * blocks * size * size))
    work = torch.promote_types(tensors[0].dtype, torch.float32)  # bf16 and fp32: fp32

    def rotations_of(start: int, stop: int) -> Tensor:
        """R(p) of positions start … stop − 1 -> (H, stop − start, n, b, b)."""
        if unit is None:
            return generator_rotations(coordinates[start:stop], generators, work)
        first = None if first_position + start == 0 else coordinates[start]  # (A,)
        return run_rotations(first, unit, stop - start, generators, work)

    if count <= step:
        rotations = rotations_of(0, count)  # (H, T, n, b, b)
        return [rotate_blocks(x, rotations) for x in tensors]
    # one output per tensor written block by block: a list of per-block outputs concatenated
    # at the end would sit between the freed blocks of rotations and keep them resident
    outputs = [x.new_empty(x.shape) for x in tensors]  # (B, H, T, hd) each
    for start in range(0, count, step):
        stop = min(start + step, count)
        rotations = rotations_of(start, stop)  # (H, c, n, b, b)
        for x, output in zip(tensors, outputs, strict=True):
            output[:, :, start:stop] = rotate_blocks(x[:, :, start:stop], rotations)
        del rotations  # freed before the next block's are formed
    return outputs


def rotate_blocks(x: Tensor, rotations: Tensor) -> Tensor:
    """x (B, H, T, hd) turned block by block: rotations (H, T, n, b, b), n·b = hd -> like x
    (computed in the rotations' dtype, returned in x's)."""
    heads, tokens, blocks, size, _ = rotations.shape
    split = x.to(rotations.dtype).reshape(*x.shape[:-1], blocks, size)  # (B, H, T, n, b)
    turned = torch.einsum("htnij,bhtnj->bhtni", rotations, split)  # (B, H, T, n, b)
    return turned.flatten(-2).to(x.dtype)  # (B, H, T, hd)


class LearnedGenerators(PositionalEncoding):
    """Queries and keys turned by exp(Σ_a p_a A_a) of learned skew blocks; subclasses say how
    the parameters make the generators (``generators``)."""

    Options = GeneratorConfig
    #: positions on one axis that run p₀, p₀ + 1, … turned by powers of one rotation
    #: (``run_rotations``; exact on one axis) instead of one ``matrix_exp`` per position: LieRE
    #: (its b×b exponentials were half its training step); ComRoPE keeps ``matrix_exp``
    powers_on_sequences = False

    def __init__(self, **keywords) -> None:
        super().__init__(**keywords)
        #: the b of the b×b blocks, as used
        self.block = self.derived
        self.blocks = self.head_dim // self.block
        self.sets = self.n_layers if self.cfg.per_layer else 1
        extent = self.train_positions
        #: what coordinates are multiplied by: 1 / the training extent per axis (normalised,
        #: the references'), or 1 (integer coordinates, or no training extent known)
        self.position_scale = 1.0 / extent if self.cfg.normalize and extent else 1.0
        #: the most rotation-matrix elements formed at once (``rotate_in_position_blocks``)
        self.rotation_elements = ROTATION_ELEMENTS

    def generators(self) -> Tensor:
        """This layer's generators -> (H, A, n, b, b), skew-symmetric."""
        raise NotImplementedError

    def layer_set(self) -> int:
        """Which parameter set this view reads (its layer, or 0 with ``per_layer=false``)."""
        return self.layer if self.cfg.per_layer else 0

    def for_layer(self, index: int) -> PositionalEncoding:
        if not self.cfg.per_layer:
            return super().for_layer(index)  # one set; SSMax's s may still be per layer
        return self if index == self.layer else self.layer_view(index)

    def rotations(self, positions: Tensor) -> Tensor:
        """R(p) of each position (T,) or (T, A) -> (H, T, n, b, b), fp32."""
        coordinates = block_coordinates(positions, self.axes, self.position_scale)
        return generator_rotations(coordinates, self.generators())

    def turned(self, tensors: list[Tensor], positions: Tensor) -> list[Tensor]:
        """Tensors (B, H, T, hd) at positions (T,) or (T, A) turned by R(p), the rotations
        formed in blocks of positions (``rotate_in_position_blocks``) -> like each."""
        coordinates = block_coordinates(positions, self.axes, self.position_scale)  # (T, A)
        generators = self.generators()  # (H, A, n, b, b)
        unit = None  # one matrix_exp per position: grids, gaps, float positions
        start = contiguous_start(positions) if self.powers_on_sequences else None
        if start is not None:
            one = torch.ones(1, device=positions.device)  # a step of one position
            unit = block_coordinates(one, self.axes, self.position_scale)  # (1, 1)
        budget = self.rotation_elements
        return rotate_in_position_blocks(tensors, coordinates, generators, budget, unit, start or 0)

    def rotate(
        self, q: Tensor, k: Tensor, q_positions: Tensor, k_positions: Tensor
    ) -> tuple[Tensor, Tensor]:
        # q: (B, H, Tq, hd), k: (B, H, Tk, hd); positions (Tq,), (Tk,) or (Tq, A), (Tk, A)
        with torch.autocast(q.device.type, enabled=False):
            # self-attention without a cache: the queries sit where the keys do, so the
            # matrix exponentials (the cost of this encoding) are computed once
            same = q_positions is k_positions or (
                q_positions.shape == k_positions.shape and torch.equal(q_positions, k_positions)
            )
            if same:
                q, k = self.turned([q, k], k_positions)
            else:
                (q,), (k,) = self.turned([q], q_positions), self.turned([k], k_positions)
        return q, k

    def describe(self) -> dict:
        info = {**self.cfg.changed(), "block_size": self.block, "per_layer": self.cfg.per_layer}
        info["position_scale"] = self.position_scale
        return info


class LieRE(LearnedGenerators):
    """LieRE: general (non-commuting) learned skew-symmetric generators per axis, head and
    layer (module docstring).

    Args:
        block_size: b of the b×b generator blocks; null = the head dimension (the reference).
        per_layer: one set of generators per layer (the reference's shipped configs).
        normalize: coordinates divided by the training extent per axis (the reference).
    """

    Options = LieREConfig
    powers_on_sequences = True

    def __init__(self, **keywords) -> None:
        super().__init__(**keywords)
        shape = (self.sets, self.n_heads, self.axes, self.blocks, self.block, self.block)
        self.generator_shape = shape
        # U[0, 2π) as the reference (its raw generator parameters); flat: no weight decay
        self.raw_generators = nn.Parameter((torch.rand(shape) * 2 * math.pi).flatten())

    def generators(self) -> Tensor:
        raw = self.raw_generators.view(self.generator_shape)[self.layer_set()]
        return skew_from_upper(raw)  # (H, A, n, b, b)


__all__ = [
    "LearnedGenerators",
    "LieRE",
    "ScaledMatrixExp",
    "block_coordinates",
    "contiguous_start",
    "exponential_vjp",
    "generator_rotations",
    "power_rotations",
    "rotate_blocks",
    "rotate_in_position_blocks",
    "run_rotations",
    "scaled_matrix_exp",
    "skew_from_upper",
]
