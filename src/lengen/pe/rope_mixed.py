"""RoPE-Mixed: rotary embedding with learnable, mixed-axis frequencies (Heo et al., 2024,
"Rotary Position Embedding for Vision Transformer", ECCV §3.3; reference code naver-ai/rope-vit,
``models/vit_rope.py``: ``init_random_2d_freqs``, ``compute_mixed_cis``).

Axial RoPE turns each rotary pair by one coordinate only, so a head cannot attend along a
diagonal. RoPE-Mixed turns pair i of head h by a learned linear function of *all* coordinates,

    angle(h, i, p) = Σ_a θ_{h,i,a} · p_a,

so q·k still depends on the offset vector only, and the frequency vectors θ_{h,i} ∈ R^A are
trained with the model, one set per layer (as in the reference code).

**Initialisation** (the reference's ``init_random_2d_freqs``, generalised to A axes): the pairs of
a head form A groups of P = head_dim / (2A); pair j of group g gets the frequency vector
mag_j · u_g with mag_j = base^(−2A·j/head_dim) and u_0 … u_{A−1} orthonormal directions,
turned by a random rotation per head and layer. On grids (A = 2) that is the reference exactly:
one angle φ ~ U[0, 2π) per head (``torch.rand(1)``, drawn layer by layer, head by head), group 0
along (cos φ, sin φ) in (x, y) = (column, row), group 1 along φ + π/2; here the axes are ordered
(row, column), so the vector of group 0 is (sin φ, cos φ). On volumes the rotation is a random
orthogonal matrix (QR of a Gaussian, determinant +1). On sequences (A = 1) the only direction is
+1 and the frequencies start as RoPE's θ_i = base^(−2i/head_dim): RoPE with learnable
frequencies per head and layer.

**Base** (``pe.base: null``): the reference's ``rope_theta`` of its mixed models, 10, on grids and
volumes; 10,000 (RoPE's) on sequences, where a base of 10 would leave no slow pairs.

**As in the reference**: interleaved pairs (2i, 2i+1); rows of −1s (a readout slot, the class
token) are not rotated. **Differences**: the frequencies are stored flat (one vector of
n_layers · H · head_dim/2 · A numbers; the optimiser leaves 1-D parameters without weight decay,
as rope-vit's ``no_weight_decay`` does for its ``freqs``); ``pe.per_layer=false`` shares one set
across layers (the reference has one per layer); no partial rotary or context-extension options.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from lengen.pe.base import PositionalEncoding
from lengen.pe.config.base import axis_share
from lengen.pe.config.rope import DEFAULT_BASE
from lengen.pe.config.rope_mixed import RoPEMixedConfig
from lengen.pe.grid import check_grid_positions, has_position
from lengen.pe.rope import rotate_pairs


def random_rotation(axes: int) -> Tensor:
    """A random rotation of R^A -> (A, A) float32, rows orthonormal, determinant +1 (global RNG).

    A = 1: [[1]]; A = 2: rows (cos φ, sin φ), (cos(φ + π/2), sin(φ + π/2)), φ = 2π · rand(1), one
    draw as the reference's ``init_random_2d_freqs``; A ≥ 3: QR of a Gaussian matrix."""
    if axes == 1:
        return torch.ones(1, 1)
    if axes == 2:
        angle = torch.rand(1) * 2 * math.pi  # (1,)
        turned = torch.cat((angle, angle + math.pi / 2))  # (2,): the two groups' angles
        return torch.stack((turned.cos(), turned.sin()), dim=-1)  # (2, 2): rows (x, y)
    q, r = torch.linalg.qr(torch.randn(axes, axes))
    q = q * torch.sign(torch.diagonal(r))  # a unique QR: uniform over orthogonal matrices
    flip = torch.ones(axes)
    flip[0] = torch.sign(torch.det(q))  # no data-dependent branch: builds on the meta device
    return (q * flip).T.contiguous()  # rows orthonormal, determinant +1


def mixed_frequencies(head_dim: int, n_heads: int, axes: int, base: float) -> Tensor:
    """Initial RoPE-Mixed frequencies of one layer -> (H, head_dim/2, A), fp32 (global RNG).

    Pair g·P + j of head h: base^(−2A·j/head_dim) · u_g(h), P = head_dim/(2A), u_g(h) row g of a
    random rotation of R^A per head, written in lengen's axis order (axis 0 = row). On 2 axes the
    reference's (x, y) = (column, row) components are swapped into (row, column)."""
    per_axis = axis_share(head_dim, axes, "pe=rope_mixed: the head dimension") // 2  # P
    exponents = torch.arange(per_axis, dtype=torch.float32) * (2 * axes) / head_dim
    magnitudes = 1.0 / base**exponents  # (P,)
    heads = []
    for _ in range(n_heads):  # one random rotation per head, drawn in head order
        directions = random_rotation(axes)  # (A groups, A components)
        if axes == 2:
            directions = directions.flip(-1)  # (x, y) -> (row, column)
        heads.append((directions[:, None, :] * magnitudes[None, :, None]).flatten(0, 1))
    return torch.stack(heads)  # (H, A·P, A) = (H, head_dim/2, A)


def mixed_angles(positions: Tensor, frequencies: Tensor) -> Tensor:
    """Angles Σ_a θ_{h,i,a} p_a: positions (..., T, A), frequencies (H, P2, A)
    -> (..., H, T, P2), fp32; rows of −1s (no grid position) get 0."""
    positions = positions.to(torch.float32) * has_position(positions)[..., None]  # (T, A)
    return torch.einsum("...ta,hpa->...htp", positions, frequencies.to(torch.float32))


class RoPEMixed(PositionalEncoding):
    """Rotates queries and keys by learned mixed-axis frequencies, one set per layer.

    Args:
        base: magnitude base of the initial frequencies; null: 10 on grids and volumes (the
            reference's), 10,000 on sequences (RoPE's).
        per_layer: one set of frequencies per layer (the reference) or one for all layers.
    """

    Options = RoPEMixedConfig
    DEFAULT_BASE = DEFAULT_BASE  # RoPE's (lengen.pe.config.rope)
    DEFAULT_GRID_BASE = 10.0

    def __init__(self, **keywords) -> None:
        super().__init__(**keywords)
        base = self.cfg.base
        if base is None:
            base = self.DEFAULT_BASE if self.axes == 1 else self.DEFAULT_GRID_BASE
        #: the base as used: ``pe.base``, or the default of sequences or grids where it is null
        self.base = float(base)
        sets = self.n_layers if self.cfg.per_layer else 1
        initial = torch.stack(
            [
                mixed_frequencies(self.head_dim, self.n_heads, self.axes, self.base)
                for _ in range(sets)
            ]
        )  # (sets, H, hd/2, A): drawn layer by layer, head by head, as the reference
        self.frequency_shape = tuple(initial.shape)
        # flat: the optimiser's rule leaves 1-D parameters undecayed (module docstring)
        self.frequencies = nn.Parameter(initial.flatten())
        #: which set this object rotates with (``for_layer`` views set it)
        self.layer = 0

    def frequency_sets(self) -> Tensor:
        """The frequencies as (sets, H, head_dim/2, A): sets = n_layers, or 1 with
        ``per_layer=false``."""
        return self.frequencies.view(self.frequency_shape)

    def for_layer(self, index: int) -> RoPEMixed:
        """A view of this encoding that rotates with layer ``index``'s frequencies (it shares
        the parameters; a shallow copy, made per forward pass)."""
        if not self.cfg.per_layer:
            return super().for_layer(index)  # one set of frequencies; SSMax's s may be per layer
        if index == self.layer:
            return self
        if not 0 <= index < self.frequency_shape[0]:
            raise ValueError(
                f"pe=rope_mixed holds frequencies for {self.frequency_shape[0]} layers, not layer {index}"
            )
        view = object.__new__(type(self))
        view.__dict__ = dict(self.__dict__)  # the same parameter dicts: one set of weights
        view.layer = index
        return view

    def rotate(
        self, q: Tensor, k: Tensor, q_positions: Tensor, k_positions: Tensor
    ) -> tuple[Tensor, Tensor]:
        # q: (B, H, Tq, hd), k: (B, H, Tk, hd); positions (Tq,), (Tk,) or (Tq, A), (Tk, A)
        if self.axes > 1:
            check_grid_positions(q_positions, self.axes)
        else:  # a sequence: one axis
            q_positions, k_positions = q_positions[..., None], k_positions[..., None]
        frequencies = self.frequency_sets()[self.layer if self.cfg.per_layer else 0]  # (H, hd/2, A)
        with torch.autocast(q.device.type, enabled=False):
            q = rotate_pairs(q, mixed_angles(q_positions, frequencies))  # angles (H, Tq, hd/2)
            k = rotate_pairs(k, mixed_angles(k_positions, frequencies))
        return q, k

    def describe(self) -> dict:
        info = {"base": self.base, "per_layer": self.cfg.per_layer}
        if self.axes > 1:
            info["axes"] = self.axes
        return info


__all__ = ["RoPEMixed", "mixed_angles", "mixed_frequencies", "random_rotation"]
