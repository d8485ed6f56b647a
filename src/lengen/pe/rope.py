"""RoPE: rotary position embedding (Su et al., 2021, "RoFormer", eq. 34), with the partial,
p-RoPE and context-extension variants used in length-extrapolation studies.

Queries and keys are rotated pairwise: pair i of the rotated dimensions turns by the angle
p · θ_i with θ_i = base^(−2i/d), so q·k depends on the positions only through their difference.

**Layout.** Which dimensions form a pair is a convention the paper leaves to the
implementation, selectable as ``pe.layout``:

* ``interleaved`` (default, the paper's formula): pairs (2i, 2i+1);
* ``half`` (GPT-NeoX, Llama): pairs (i, i + d/2).

The two are the same function up to a fixed permutation of the projection weights, so a model
learns equally well with either; the choice matters only when loading weights trained with the
other one.

**Partial rotary** (``pe.fraction``; GPT-NeoX ``rotary_pct``, GPT-J ``rotary_dim``, Hugging Face
``partial_rotary_factor``): only the first r = int(fraction · head_dim) dimensions, rounded
down to an even number and at least 2, are rotated; the other head_dim − r pass through
unchanged. The r rotated dimensions form a RoPE of their own: θ_i = base^(−2i/r) (the
denominator is r, not head_dim, as in GPT-NeoX and Hugging Face), paired by ``layout`` inside
those r dimensions (``half``: (i, i + r/2), GPT-NeoX).

**p-RoPE** (``pe.p``; Barbero et al., 2025, "Round and Round We Go! What makes Rotary
Positional Encodings useful?", ICLR; their pseudocode ``apply_p_rope`` and Gemma's
``rope_proportion``): of the d/2 frequency pairs only the k = int(p · d // 2) highest
frequencies θ_0 … θ_{k−1} keep their RoPE values; the d/2 − k lowest-frequency pairs get θ = 0
(an infinite wavelength) and are not rotated. 0-RoPE is NoPE, 1-RoPE is RoPE. The kept
frequencies are unchanged (truncation, not re-spacing). Combined with ``fraction``, p applies
to the r rotated dimensions (d = r).

**Context extension** (``pe.scaling``: ``pi``, ``ntk``, ``dynamic_ntk``, ``yarn``) changes the
frequencies only; the formulas, their sources and where the reference code differs from the
papers are in ``lengen.pe.rope_frequencies``, with the frequency math itself.

**Training-free arms** (``pe.extension``: ``self_extend``, ``rerope``, ``dual_chunk``) re-map
the relative positions attention reads instead of the frequencies: RoPE then passes q and k
unrotated through ``rotate`` and computes attention itself (``lengen.pe.extension``, one module
per arm).

**Grids and volumes** (positions (T, A) on A axes; Heo et al., 2024, "Rotary Position Embedding
for Vision Transformer", ECCV, RoPE-Axial; naver-ai/rope-vit ``models/vit_rope.py``,
``compute_axial_cis``): the r/2 rotary pairs are split into A blocks, axis a's block being a 1-D
RoPE of dimension r/A of that axis's coordinate, θ_i = base^(−2i/(r/A)). q·k then depends on
the offset vector only. The default base on grids is rope-vit's axial θ = 100 (``pe.base:
null``: 10,000 on sequences, 100 on grids). rope-vit gives the column (x) the first block and
the row (y) the second; here axis 0 (the row) comes first, as in ``sinusoidal_grid`` — a fixed
permutation of the pairs, the same function class. ``pe.scaling`` applies per axis: each
axis's frequencies are the 1-D scaled frequencies of dimension r/A with the axis's training
extent as L (dynamic NTK: ℓ per axis), so ``eval.py run=… pe.scaling=ntk`` extends a finished
grid run's resolution. A row of −1s (a readout slot) is rotated by 0 (rope-vit rotates the
patch tokens only, not the class token).

The frequency math is pure functions in ``lengen.pe.rope_frequencies`` (``rope_inverse_frequencies``
and its parts), the rotation pure functions at the top of this module, for tests, notebooks and
plots.
"""

from __future__ import annotations

import torch
from torch import Tensor

from lengen.pe.base import PositionalEncoding
from lengen.pe.config.base import axis_share
from lengen.pe.config.rope import (
    DEFAULT_BASE,
    DEFAULT_GRID_BASE,
    NEEDS_ORIGINAL_LENGTH,
    SCALINGS,
    YARN_RAMPS,
    RoPEConfig,
    p_rope_pairs,
    rotary_dimension,
)
from lengen.pe.config.rope import ROPE_LAYOUTS as LAYOUTS
from lengen.pe.config.rope import check_rope_layout as check_layout
from lengen.pe.extension import build_arm, extended_attention
from lengen.pe.grid import check_grid_positions, has_position
from lengen.pe.rope_frequencies import rope_inverse_frequencies, yarn_logit_scale, yarn_ramp
from lengen.pe.sinusoidal import sinusoid_inverse_frequencies

#: the frequency math lives in lengen.pe.rope_frequencies; its public names are this module's too
__all__ = [
    "LAYOUTS",
    "NEEDS_ORIGINAL_LENGTH",
    "SCALINGS",
    "YARN_RAMPS",
    "RoPE",
    "apply_rope",
    "check_layout",
    "grid_rope_angles",
    "p_rope_pairs",
    "rope_angles",
    "rope_inverse_frequencies",
    "rotary_dimension",
    "rotate_pairs",
    "yarn_logit_scale",
    "yarn_ramp",
]


# -- rotation ----------------------------------------------------------------------------------
def rope_angles(
    positions: Tensor, dim: int, base: float = DEFAULT_BASE, *, inv_freq: Tensor | None = None
) -> Tensor:
    """positions (...,) -> angles p · θ_i, (..., dim // 2), fp32 (θ from ``inv_freq`` if given)."""
    if inv_freq is None:
        inv_freq = sinusoid_inverse_frequencies(dim, base)
    inv_freq = inv_freq.to(device=positions.device, dtype=torch.float32)
    return positions.to(torch.float32)[..., None] * inv_freq


def rotate_pairs(
    x: Tensor, angles: Tensor, *, layout: str = "interleaved", magnitude: Tensor | None = None
) -> Tensor:
    """Rotate the first r = 2 · angles.shape[-1] dimensions of x pairwise; the rest pass.

    Args:
        x: (..., seq, head_dim).
        angles: (..., seq, r/2), broadcastable against x[..., : r/2].
        layout: ``interleaved`` pairs (2i, 2i+1), ``half`` pairs (i, i + r/2) of the first r.
        magnitude: optional per-pair factor, broadcastable like ``angles`` (xPos).

    Returns:
        Tensor shaped and typed like x; computed in fp32 with autocast off.
    """
    check_layout(layout)
    rotated_dim = 2 * angles.shape[-1]
    if rotated_dim > x.shape[-1]:
        raise ValueError(f"{rotated_dim} rotated dimensions exceed head_dim {x.shape[-1]}")
    with torch.autocast(x.device.type, enabled=False):
        cos, sin = angles.float().cos(), angles.float().sin()
        if magnitude is not None:
            magnitude = magnitude.float()
            cos, sin = cos * magnitude, sin * magnitude
        xf = x.to(torch.float32)
        head = xf[..., :rotated_dim]
        complex_ok = x.device.type in ("cpu", "cuda")  # complex kernels are patchy elsewhere
        if layout == "interleaved" and complex_ok and not torch.compiler.is_compiling():
            # pair (2i, 2i+1) as one complex number times e^(i·angle): one kernel instead of
            # strided slices + stack + flatten, 2.3x faster forward + backward on CPU
            # (docs/benchmarks.md); inductor generates no complex code, so compiled models
            # take the real formula below, which it fuses
            pairs = head.reshape(*head.shape[:-1], -1, 2)  # (..., seq, r/2, 2)
            # contiguous: view_as_complex needs whole complex numbers, and the kernel's
            # rounding would otherwise depend on the memory layout of q and k
            pairs = pairs.contiguous()
            if pairs.storage_offset() % 2:  # a complex number must start at an even float
                pairs = pairs.clone()
            pairs = torch.view_as_complex(pairs)
            turns = torch.complex(cos, sin)  # (..., seq, r/2)
            rotated = torch.view_as_real(pairs * turns).flatten(-2)  # (..., seq, r)
        elif layout == "interleaved":
            x1, x2 = head[..., 0::2], head[..., 1::2]  # (..., seq, r/2) each
            rotated = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)
            rotated = rotated.flatten(-2)  # (..., seq, r)
        else:
            x1, x2 = head[..., : rotated_dim // 2], head[..., rotated_dim // 2 :]
            rotated = torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)
        if rotated_dim < x.shape[-1]:
            rotated = torch.cat((rotated, xf[..., rotated_dim:]), dim=-1)  # (..., seq, hd)
    return rotated.to(x.dtype)


def grid_rope_angles(positions: Tensor, inv_freq: Tensor) -> Tensor:
    """Angles of axial RoPE on A axes: positions (..., A), inv_freq (A, P) (or (P,), shared)
    -> (..., A·P), fp32: axis a's coordinate times its P frequencies, in axis order; rows of
    −1s (no grid position) get angle 0."""
    axes = positions.shape[-1]
    inv_freq = inv_freq.to(device=positions.device, dtype=torch.float32)
    if inv_freq.ndim == 1:
        inv_freq = inv_freq.expand(axes, -1)  # (A, P)
    coordinates = positions.to(torch.float32) * has_position(positions)[..., None]  # (..., A)
    angles = coordinates[..., :, None] * inv_freq  # (..., A, P)
    return angles.flatten(-2)  # (..., A·P): axis 0's pairs first


def _grid_axes(x: Tensor, positions: Tensor, axes: int | None) -> int:
    """How many axes ``positions`` has for ``apply_rope``: 1 for positions broadcastable to
    x.shape[:-1]; A for integer (…, seq, A) positions with A in 2, 3 (inferred when ``axes``
    is None and the shape says so unambiguously)."""
    if axes is not None:
        return axes
    grid_like = (
        positions.ndim >= 2
        and not positions.is_floating_point()
        and positions.shape[-1] in (2, 3)
        and positions.shape[-2] == x.shape[-2]
        and positions.shape[-1] != x.shape[-2]  # else it could be a (…, seq) broadcast
    )
    return positions.shape[-1] if grid_like else 1


def apply_rope(
    x: Tensor,
    positions: Tensor,
    base: float = DEFAULT_BASE,
    *,
    layout: str = "interleaved",
    inv_freq: Tensor | None = None,
    fraction: float = 1.0,
    axes: int | None = None,
) -> Tensor:
    """Rotate the last dimension of x by positions.

    Args:
        x: (..., seq, head_dim), head_dim even.
        positions: integer or float positions broadcastable to ``x.shape[:-1]``, e.g. (seq,);
            or integer positions on A axes, (seq, A) (grids A = 2, volumes A = 3; axial RoPE:
            the rotated pairs are split into A blocks, block a a 1-D RoPE of dimension r/A of
            coordinate a, θ_i = base^(−2i/(r/A)); rows of −1s are not rotated).
        base: θ base (10,000 in the paper); unused when ``inv_freq`` is given.
        layout: ``interleaved`` pairs (2i, 2i+1), ``half`` pairs (i, i + r/2).
        inv_freq: (r/2,) frequencies to use instead of base^(−2i/r), e.g. from
            ``rope_inverse_frequencies``; its length fixes the rotated dimension r. On A axes
            (A, r/(2A)) per axis, or (r/(2A),) shared by the axes.
        fraction: partial rotary: rotate only ``rotary_dimension(head_dim, fraction)``
            dimensions (θ_i = base^(−2i/r)), pass the rest.
        axes: the number of axes of ``positions``; None infers it: (seq, A) integer positions
            with A in 2, 3 are grid positions unless seq == A (then pass ``axes``).

    Returns:
        Tensor shaped and typed like x; the rotation itself is computed in fp32.
    """
    dim = x.shape[-1]
    if dim % 2:
        raise ValueError(f"RoPE needs an even head dimension, got {dim}")
    check_layout(layout)
    rotated_dim = rotary_dimension(dim, fraction)
    grid_axes = _grid_axes(x, positions, axes)
    if grid_axes > 1:
        check_grid_positions(positions, grid_axes)
        if inv_freq is None:
            share = axis_share(rotated_dim, grid_axes, "the rotated head dimension")
            inv_freq = sinusoid_inverse_frequencies(share, base)  # (r/(2A),), every axis
        with torch.autocast(x.device.type, enabled=False):
            angles = grid_rope_angles(positions, inv_freq)  # (..., seq, r/2)
            return rotate_pairs(x, angles, layout=layout)  # (..., seq, head_dim)
    if inv_freq is None:
        inv_freq = sinusoid_inverse_frequencies(rotated_dim, base)
    elif fraction != 1.0 and 2 * inv_freq.shape[-1] != rotated_dim:
        raise ValueError(
            f"inv_freq has {inv_freq.shape[-1]} pairs but fraction={fraction} rotates "
            f"{rotated_dim} of {dim} dimensions"
        )
    with torch.autocast(x.device.type, enabled=False):
        angles = rope_angles(positions, 2 * inv_freq.shape[-1], inv_freq=inv_freq)
        return rotate_pairs(x, angles, layout=layout)  # (..., seq, head_dim)


class RoPE(PositionalEncoding):
    """Rotates queries and keys of every head.

    Args:
        base: θ base; must be > 1; null: 10,000 on sequences, 100 on grids (rope-vit's axial).
        layout: ``interleaved`` or ``half`` (see module docstring).
        fraction: partial rotary, the fraction of head_dim rotated (0 < fraction ≤ 1).
        p: p-RoPE, the fraction of (highest-frequency) pairs kept rotating (0 ≤ p ≤ 1).
        scaling: ``none``, ``pi``, ``ntk``, ``dynamic_ntk`` or ``yarn``.
        scaling_factor: s ≥ 1 (ignored with ``scaling: none``).
        original_max_position: L for ``dynamic_ntk``/``yarn``; null = the positions seen in
            training (``train_positions``, or ``pe.max_position`` under ``pe.randomized``).
        yarn_alpha, yarn_beta: YaRN's ramp bounds α < β (β_slow, β_fast), in rotations per L.
        yarn_ramp: ``dimension`` (default; the authors' code and Hugging Face) or
            ``rotations`` (the paper's formula).
        yarn_truncate: the dimension ramp's bounds rounded out to whole pairs (default, as
            the authors' code and Hugging Face's default); false as Hugging Face's
            ``truncate: false``.

    On A axes (``axes``) the rotated pairs are split between the axes (axial RoPE, module
    docstring); every option applies per axis.
    """

    Options = RoPEConfig
    #: ``pe.base: null`` on sequences (Su et al.) and on grids (rope-vit ``rope_theta`` of its
    #: axial models): lengen.pe.config.rope's
    DEFAULT_BASE = DEFAULT_BASE
    DEFAULT_GRID_BASE = DEFAULT_GRID_BASE

    def __init__(self, **keywords) -> None:
        super().__init__(**keywords)
        cfg, sizes = self.cfg, self.derived
        base = cfg.base
        if base is None:
            base = self.DEFAULT_BASE if self.axes == 1 else self.DEFAULT_GRID_BASE
        self.rotary_dim = sizes.rotary_dim
        #: the rotated dimensions of one axis (r / A; r on sequences)
        self.axis_dim = sizes.axis_dim
        self.rotated_pairs = sizes.rotated_pairs
        #: the base as used: ``pe.base``, or the default of sequences or grids where it is null
        self.base = float(base)
        #: L as used: ``pe.original_max_position``, or the training positions where it is null
        self.original_max_position = sizes.original_max_position
        # static frequencies, cached per device; a plain attribute (not a buffer) so that
        # checkpoints hold no frequencies and module casts (.to(bf16)) never touch them
        self._inv_freq = {"cpu": self._frequencies()}
        #: ``pe.extension``'s arm (``lengen.pe.extension``), or None: RoPE rotates as usual
        self.extension = build_arm(cfg.extension, sizes.extension)
        if self.extension is not None:
            # the hook as an instance attribute, not a method: the class keeps the base's, so
            # its config fact (computes_attention False: plain RoPE takes pe.window and
            # pe.chunk) agrees with the class; an arm refuses local masks in its own check
            self.attention = self._arm_attention

    def _frequencies(self, sequence_length: int | Tensor | None = None) -> Tensor:
        """(r/2,) on sequences; on A axes (A, r/(2A)), row a from axis a's ℓ (dynamic NTK:
        ``sequence_length`` (A,), else None)."""
        if self.axes > 1:
            lengths = [None] * self.axes if sequence_length is None else sequence_length
            return torch.stack([self._axis_frequencies(length) for length in lengths])
        return self._axis_frequencies(sequence_length)

    def _axis_frequencies(self, sequence_length: int | Tensor | None = None) -> Tensor:
        return rope_inverse_frequencies(
            self.axis_dim,
            self.base,
            scaling=self.cfg.scaling,
            factor=self.cfg.scaling_factor,
            original_max_position=self.original_max_position,
            sequence_length=sequence_length,
            yarn_alpha=self.cfg.yarn_alpha,
            yarn_beta=self.cfg.yarn_beta,
            yarn_ramp_kind=self.cfg.yarn_ramp,
            yarn_truncate=self.cfg.yarn_truncate,
            p=self.cfg.p,
        )

    def inverse_frequencies(self, k_positions: Tensor) -> Tensor:
        """θ' for a forward pass whose keys sit at ``k_positions`` -> (rotary_dim/2,), fp32;
        on A axes (A, rotary_dim/(2A))."""
        if self.cfg.scaling == "dynamic_ntk":
            # ℓ = largest key position + 1, kept on device (no host sync); per axis on grids
            if self.axes > 1:
                return self._frequencies(k_positions.reshape(-1, self.axes).amax(0) + 1)
            return self._frequencies(k_positions.max() + 1)
        device = k_positions.device
        key = str(device)
        if key not in self._inv_freq:
            self._inv_freq[key] = self._inv_freq["cpu"].to(device)
        return self._inv_freq[key]

    def logit_temperature(self) -> float:
        """YaRN's temperature, constant per run: logits × (0.1 ln s + 1)²; 1.0 otherwise."""
        return yarn_logit_scale(self.cfg.scaling_factor) if self.cfg.scaling == "yarn" else 1.0

    def length_global(self) -> str | None:
        if self.cfg.scaling == "dynamic_ntk":
            return (
                "dynamic NTK: one forward pass uses the frequencies of its longest position "
                "(ℓ = largest key position + 1), so every token's rotation depends on how many "
                "tokens the pass holds"
            )
        return super().length_global()

    @property
    def has_attention(self) -> bool:
        """An arm of ``pe.extension`` computes attention (``attention``); plain RoPE does not."""
        return getattr(self, "extension", None) is not None

    def _arm_attention(self, q, k, v, q_state, k_state, *, causal, scale, dropout_p) -> Tensor:
        """The ``attention`` hook under an arm (``lengen.pe.extension``): q (B, H, Tq, hd), k and v
        (B, H, Tk, hd), both unrotated (``rotate`` passed them through) -> (B, H, Tq, hd)."""
        if not causal:  # refused by the config; a direct call without the stack's check
            raise ValueError(f"pe.extension={self.cfg.extension} is defined for causal attention")
        inv_freq = self.inverse_frequencies(q.new_zeros(1, dtype=torch.long))

        def rotate(x: Tensor, positions: Tensor) -> Tensor:
            return apply_rope(x, positions, layout=self.cfg.layout, inv_freq=inv_freq)

        return extended_attention(q, k, v, self.extension, rotate, scale=scale, dropout_p=dropout_p)

    def rotate(
        self, q: Tensor, k: Tensor, q_positions: Tensor, k_positions: Tensor
    ) -> tuple[Tensor, Tensor]:
        if self.extension is not None:  # the arm rotates inside ``attention``, per score set
            return q, k
        # q: (B, H, Tq, hd), k: (B, H, Tk, hd); positions (Tq,), (Tk,), or (Tq, A), (Tk, A)
        inv_freq = self.inverse_frequencies(k_positions)  # (r/2,) or (A, r/(2A)), q and k
        axes = self.axes if self.axes > 1 else None  # None: the 1-D path exactly as before
        q = apply_rope(q, q_positions, layout=self.cfg.layout, inv_freq=inv_freq, axes=axes)
        k = apply_rope(k, k_positions, layout=self.cfg.layout, inv_freq=inv_freq, axes=axes)
        return q, k

    def describe(self) -> dict:
        """The options that differ from the defaults, with what they resolve to."""
        cfg, changed, info = self.cfg, self.cfg.changed(), {}
        if self.axes > 1:
            info.update(axes=self.axes, axial_dim=self.axis_dim)
        if self.base != (self.DEFAULT_BASE if self.axes == 1 else self.DEFAULT_GRID_BASE):
            info["base"] = self.base  # as used: a null base resolves per axes
        if "layout" in changed:
            info["layout"] = cfg.layout
        if "fraction" in changed:
            info.update(fraction=cfg.fraction, rotary_dim=self.rotary_dim)
        if "p" in changed:
            info.update(p=cfg.p, rotated_pairs=self.rotated_pairs)
        if "scaling" in changed:
            info.update(scaling=cfg.scaling, scaling_factor=cfg.scaling_factor)
            if cfg.scaling in NEEDS_ORIGINAL_LENGTH:
                info["original_max_position"] = self.original_max_position
            if cfg.scaling == "yarn":
                info.update(
                    yarn_alpha=cfg.yarn_alpha,
                    yarn_beta=cfg.yarn_beta,
                    yarn_ramp=cfg.yarn_ramp,
                    yarn_logit_scale=yarn_logit_scale(cfg.scaling_factor),
                )
                if cfg.yarn_ramp == "dimension":
                    info["yarn_truncate"] = cfg.yarn_truncate
            if cfg.scaling == "dynamic_ntk":
                info["length_global"] = self.length_global()
        if self.extension is not None:
            info.update(extension=cfg.extension, **self.extension.describe())
        return info
