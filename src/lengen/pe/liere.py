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
vector (no weight decay, as for RoPE-Mixed's frequencies). The reference splits R(p) into
per-block ``matrix_exp`` calls in a loop to save memory; here one batched call per block of
positions (``rotate_in_position_blocks``: a training length is one block, a long evaluation
several, so its memory stays within 2x RoPE's at 8,192 tokens), in fp32 at least.

The pure functions at the top (``skew_from_upper``, ``generator_rotations``, ``rotate_blocks``,
``block_coordinates``) are shared with ComRoPE.
"""

from __future__ import annotations

import math

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
    coordinates: Tensor, generators: Tensor, dtype: torch.dtype = torch.float32
) -> Tensor:
    """R(p) = exp(Σ_a p_a A_a) per token: coordinates (T, A), generators (H, A, n, b, b)
    (n blocks of b×b, skew-symmetric) -> (H, T, n, b, b) in ``dtype`` (fp32 by default)."""
    summed = torch.einsum("ta,hanij->htnij", coordinates.to(dtype), generators.to(dtype))
    return torch.linalg.matrix_exp(summed.contiguous())  # (H, T, n, b, b)


def rotate_in_position_blocks(
    tensors: list[Tensor], coordinates: Tensor, generators: Tensor, max_elements: int
) -> list[Tensor]:
    """Tensors (B, H, T, hd) that share coordinates (T, A) turned by R(p), generators
    (H, A, n, b, b): the rotations formed for at most ``max_elements`` / (H·n·b²) positions at
    a time and freed before the next block -> like each tensor.

    Why: R(p) for every position at once is H·T·n·b² floats plus ``matrix_exp``'s
    intermediates (LieRE at 8,192 tokens: 38x RoPE's peak, docs/benchmarks.md); each position's
    R(p) depends on its own coordinates only, so blocks of positions give the same values. A
    length that fits one block (training lengths) takes the single-call path unchanged. The
    rotations are computed in fp32 at least (fp64 for fp64 tensors: tests compare in float64)."""
    heads, _, blocks, size, _ = generators.shape
    count = coordinates.shape[0]
    step = max(1, max_elements // (heads * blocks * size * size))
    work = torch.promote_types(tensors[0].dtype, torch.float32)  # bf16 and fp32: fp32
    if count <= step:
        rotations = generator_rotations(coordinates, generators, work)  # (H, T, n, b, b)
        return [rotate_blocks(x, rotations) for x in tensors]
    # one output per tensor written block by block: a list of per-block outputs concatenated
    # at the end would sit between the freed blocks of rotations and keep them resident
    outputs = [x.new_empty(x.shape) for x in tensors]  # (B, H, T, hd) each
    for start in range(0, count, step):
        stop = min(start + step, count)
        rotations = generator_rotations(coordinates[start:stop], generators, work)
        # rotations: (H, c, n, b, b)
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
        return rotate_in_position_blocks(tensors, coordinates, generators, self.rotation_elements)

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
    "block_coordinates",
    "generator_rotations",
    "rotate_blocks",
    "rotate_in_position_blocks",
    "skew_from_upper",
]
