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

**Context extension** (``pe.scaling`` with factor s = ``pe.scaling_factor`` ≥ 1 and
L = ``pe.original_max_position``, by default the number of positions seen in training):

* ``pi`` — Position Interpolation (Chen et al., 2023, "Extending Context Window of Large
  Language Models via Positional Interpolation"): positions divided by s, implemented as
  θ_i / s (the same angles p · θ_i / s).
* ``ntk`` — "NTK-aware" interpolation (bloc97, 2023; YaRN paper §3.1):
  base' = base · s^(d/(d−2)). The highest frequency θ_0 = 1 is kept, the lowest is divided by
  exactly s.
* ``dynamic_ntk`` — Dynamic NTK (emozilla, 2023; YaRN paper §3.3; Hugging Face ``dynamic``,
  ``_compute_dynamic_ntk_parameters``): for a sequence of ℓ positions (ℓ = largest key
  position + 1, as Hugging Face's max(position_ids) + 1),
  base' = base · (s · ℓ/L − (s − 1))^(d/(d−2)) when ℓ > L, plain RoPE when ℓ ≤ L. At s = 1 this
  is the YaRN paper's Dynamic NTK, s' = max(1, ℓ/L) — **not** a no-op beyond L.
  All positions of a forward pass use the frequencies of that pass's ℓ (a full forward pass,
  no cached keys rotated with a shorter ℓ).
* ``yarn`` — YaRN (Peng et al., 2024, "YaRN: Efficient Context Window Extension of Large
  Language Models", ICLR; §3.2 "NTK-by-parts" interpolation and §3.4 YaRN): with wavelength
  λ_i = 2π/θ_i and r_i = L/λ_i, the ramp γ(r) = 0 for r < α, 1 for r > β, (r − α)/(β − α)
  otherwise (α = ``yarn_alpha`` = 1, β = ``yarn_beta`` = 32, the paper's values for LLaMA), and
  θ'_i = (1 − γ(r_i)) · θ_i/s + γ(r_i) · θ_i: pairs with many rotations inside L (r > β) are
  left as they are (extrapolated), pairs with less than α rotations are interpolated like PI,
  and the ramp is linear in r in between. The attention temperature √(1/t) = 0.1 ln s + 1 scales
  both q and k, i.e. the logits are multiplied by (0.1 ln s + 1)² (``attention_scale``).
  Convention: the ramp is the paper's, linear in r; the authors' code (and Hugging Face) ramps
  linearly in the pair index between floor/ceil of the index where r = β and r = α, which
  differs slightly inside the ramp (the pairs fully kept or fully interpolated are the same).

With s = 1, ``pi``, ``ntk`` and ``yarn`` equal plain RoPE exactly (tested). Scaling is static
(applied at every length, training included) except ``dynamic_ntk``. It is meant for
``eval.py run=… pe.scaling=yarn pe.scaling_factor=4`` re-evaluations of a trained checkpoint:
no option adds parameters, so checkpoints load unchanged.

The frequency math is pure functions at the top of this module (``rope_inverse_frequencies``
and its parts) for tests, notebooks and plots.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from lengen.checks import positive_int
from lengen.pe.base import PositionalEncoding
from lengen.pe.sinusoidal import sinusoid_inverse_frequencies

LAYOUTS = ("interleaved", "half")
SCALINGS = ("none", "pi", "ntk", "dynamic_ntk", "yarn")
#: scalings that need the original (training) context length
NEEDS_ORIGINAL_LENGTH = ("dynamic_ntk", "yarn")


# -- checks shared by the functions and the module ---------------------------------------------
def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_layout(layout: str) -> None:
    if layout not in LAYOUTS:
        raise ValueError(f"pe.layout must be one of {', '.join(LAYOUTS)}; got {layout!r}")


def check_scaling(scaling: str, factor: float) -> None:
    if scaling not in SCALINGS:
        raise ValueError(f"pe.scaling must be one of {', '.join(SCALINGS)}; got {scaling!r}")
    if not _is_number(factor) or not factor >= 1:
        raise ValueError(f"pe.scaling_factor must be a number >= 1, got {factor!r}")


# -- dimensions --------------------------------------------------------------------------------
def rotary_dimension(head_dim: int, fraction: float = 1.0) -> int:
    """Dimensions rotated under partial rotary: int(fraction · head_dim) rounded down to an even
    number, at least 2 (GPT-NeoX ``rotary_ndims = int(head_dim * rotary_pct)``)."""
    if not _is_number(fraction) or not 0 < fraction <= 1:
        raise ValueError(f"pe.fraction must be a number in (0, 1], got {fraction!r}")
    return max(2, int(fraction * head_dim) // 2 * 2)


def p_rope_pairs(dim: int, p: float = 1.0) -> int:
    """Pairs p-RoPE keeps rotating out of dim/2: int(p · dim // 2), Barbero et al.'s
    ``rope_angles``; the others (the lowest frequencies) get θ = 0."""
    if not _is_number(p) or not 0 <= p <= 1:
        raise ValueError(f"pe.p must be a number in [0, 1], got {p!r}")
    return int(p * dim // 2)


# -- frequencies -------------------------------------------------------------------------------
def _theta64(dim: int, base: float | Tensor) -> Tensor:
    """θ_i = base^(−2i/dim), i = 0 … dim/2 − 1, computed in float64."""
    exponents = -torch.arange(0, dim, 2, dtype=torch.float64) / dim
    if isinstance(base, Tensor):
        exponents = exponents.to(base.device)
    return base**exponents


def _plain_theta(dim: int, base: float) -> Tensor:
    """Plain RoPE's θ_i exactly as ``sinusoid_inverse_frequencies`` gives them (power in
    float64, rounded once to fp32), widened to float64: every scaling starts from these, so
    that scaling_factor = 1 reproduces plain RoPE bit for bit."""
    return sinusoid_inverse_frequencies(dim, base).to(torch.float64)


def ntk_scaled_base(base: float, factor: float, dim: int) -> float:
    """NTK-aware base: base · s^(dim/(dim−2)) (YaRN paper §3.1). At dim = 2 the only frequency
    is θ_0 = 1 whatever the base, so the base is returned unchanged."""
    if dim <= 2:
        return float(base)
    return float(base) * float(factor) ** (dim / (dim - 2))


def dynamic_ntk_scaled_base(
    base: float,
    factor: float,
    dim: int,
    sequence_length: int | Tensor,
    original_max_position: int,
) -> Tensor:
    """Dynamic NTK base for a sequence of ℓ positions -> 0-d float64 tensor:
    base · (s · ℓ/L − (s − 1))^(dim/(dim−2)) for ℓ > L, else base (Hugging Face ``dynamic``).

    ``sequence_length`` may be a tensor (on any device) so no host sync is needed."""
    length = torch.as_tensor(sequence_length, dtype=torch.float64)
    stretch = factor * length / original_max_position - (factor - 1)
    # ℓ ≤ L: no scaling (the clamp only guards rounding at ℓ = L)
    stretch = torch.where(length > original_max_position, stretch, torch.ones_like(stretch))
    stretch = stretch.clamp_min(1.0)
    if dim <= 2:
        return torch.full_like(stretch, float(base))
    return float(base) * stretch ** (dim / (dim - 2))


def yarn_ramp(
    dim: int,
    base: float,
    original_max_position: int,
    alpha: float = 1.0,
    beta: float = 32.0,
) -> Tensor:
    """YaRN's γ(r_i) per pair -> Tensor[dim // 2], float64 (1 = keep θ_i, 0 = θ_i / s).

    r_i = L / λ_i, λ_i = 2π / θ_i (the number of full rotations of pair i within L);
    γ(r) = 0 for r < α, 1 for r > β, (r − α)/(β − α) otherwise (YaRN paper, "NTK-by-parts")."""
    wavelengths = 2 * math.pi / _theta64(dim, base)  # λ_i
    rotations = original_max_position / wavelengths  # r_i
    return ((rotations - alpha) / (beta - alpha)).clamp(0.0, 1.0)


def yarn_mscale(factor: float) -> float:
    """YaRN's √(1/t) = 0.1 ln s + 1 (YaRN paper §3.4, fitted on LLaMA), applied to both q and k."""
    return 0.1 * math.log(factor) + 1.0


def yarn_logit_scale(factor: float) -> float:
    """The multiplier YaRN's temperature puts on the q·k logits: (0.1 ln s + 1)²."""
    return yarn_mscale(factor) ** 2


def rope_inverse_frequencies(
    dim: int,
    base: float = 10000.0,
    *,
    scaling: str = "none",
    factor: float = 1.0,
    original_max_position: int | None = None,
    sequence_length: int | Tensor | None = None,
    yarn_alpha: float = 1.0,
    yarn_beta: float = 32.0,
    p: float = 1.0,
    device: torch.device | str | None = None,
) -> Tensor:
    """The rotation frequencies θ'_i of ``dim`` rotated dimensions -> Tensor[dim // 2], fp32.

    Args:
        dim: the rotated dimension r (head_dim, or ``rotary_dimension(head_dim, fraction)``).
        base: θ base.
        scaling: ``none``, ``pi``, ``ntk``, ``dynamic_ntk`` or ``yarn`` (module docstring).
        factor: scale factor s ≥ 1.
        original_max_position: L, the training context; needed by ``dynamic_ntk`` and ``yarn``.
        sequence_length: ℓ for ``dynamic_ntk`` (int or 0-d tensor; None counts as ℓ ≤ L).
        yarn_alpha, yarn_beta: YaRN's α and β.
        p: p-RoPE fraction; the lowest-frequency pairs past int(p · dim // 2) get θ = 0.
        device: where to build the result (default: the device of a tensor
            ``sequence_length``, else CPU).

    Scalings are computed in float64 from plain RoPE's θ, returned in fp32.
    """
    check_scaling(scaling, factor)
    if scaling in NEEDS_ORIGINAL_LENGTH:
        positive_int("pe.original_max_position", original_max_position)
    if isinstance(sequence_length, Tensor) and device is None:
        device = sequence_length.device
    theta = _plain_theta(dim, base)
    if scaling == "pi":
        theta = theta / factor
    elif scaling == "ntk":
        theta = _plain_theta(dim, ntk_scaled_base(base, factor, dim))
    elif scaling == "yarn":
        ramp = yarn_ramp(dim, base, original_max_position, yarn_alpha, yarn_beta)
        interpolated = theta / factor
        # (1 − γ)·θ/s + γ·θ, written so that s = 1 gives θ bit for bit
        theta = interpolated + ramp * (theta - interpolated)
    elif scaling == "dynamic_ntk" and sequence_length is not None:
        length = torch.as_tensor(sequence_length, device=device)
        scaled = _theta64(
            dim, dynamic_ntk_scaled_base(base, factor, dim, length, original_max_position)
        )
        # ℓ ≤ L selects the unscaled θ exactly
        theta = torch.where(length > original_max_position, scaled, theta.to(scaled.device))
    theta = theta.to(device=device, dtype=torch.float32)
    kept = p_rope_pairs(dim, p)
    if kept < theta.shape[-1]:
        theta = torch.cat((theta[:kept], theta.new_zeros(theta.shape[-1] - kept)))
    return theta


# -- rotation ----------------------------------------------------------------------------------
def rope_angles(
    positions: Tensor, dim: int, base: float = 10000.0, *, inv_freq: Tensor | None = None
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


def apply_rope(
    x: Tensor,
    positions: Tensor,
    base: float = 10000.0,
    *,
    layout: str = "interleaved",
    inv_freq: Tensor | None = None,
    fraction: float = 1.0,
) -> Tensor:
    """Rotate the last dimension of x by positions.

    Args:
        x: (..., seq, head_dim), head_dim even.
        positions: integer or float positions broadcastable to ``x.shape[:-1]``, e.g. (seq,).
        base: θ base (10,000 in the paper); unused when ``inv_freq`` is given.
        layout: ``interleaved`` pairs (2i, 2i+1), ``half`` pairs (i, i + r/2).
        inv_freq: (r/2,) frequencies to use instead of base^(−2i/r), e.g. from
            ``rope_inverse_frequencies``; its length fixes the rotated dimension r.
        fraction: partial rotary: rotate only ``rotary_dimension(head_dim, fraction)``
            dimensions (θ_i = base^(−2i/r)), pass the rest.

    Returns:
        Tensor shaped and typed like x; the rotation itself is computed in fp32.
    """
    dim = x.shape[-1]
    if dim % 2:
        raise ValueError(f"RoPE needs an even head dimension, got {dim}")
    check_layout(layout)
    rotated_dim = rotary_dimension(dim, fraction)
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
        base: θ base; must be > 1.
        layout: ``interleaved`` or ``half`` (see module docstring).
        fraction: partial rotary, the fraction of head_dim rotated (0 < fraction ≤ 1).
        p: p-RoPE, the fraction of (highest-frequency) pairs kept rotating (0 ≤ p ≤ 1).
        scaling: ``none``, ``pi``, ``ntk``, ``dynamic_ntk`` or ``yarn``.
        scaling_factor: s ≥ 1 (ignored with ``scaling: none``).
        original_max_position: L for ``dynamic_ntk``/``yarn``; null = the positions seen in
            training (``train_positions``, or ``pe.max_position`` under ``pe.randomized``).
        yarn_alpha, yarn_beta: YaRN's ramp bounds α < β, in rotations per L.
    """

    def __init__(
        self,
        *,
        base: float = 10000.0,
        layout: str = "interleaved",
        fraction: float = 1.0,
        p: float = 1.0,
        scaling: str = "none",
        scaling_factor: float = 1.0,
        original_max_position: int | None = None,
        yarn_alpha: float = 1.0,
        yarn_beta: float = 32.0,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        if not _is_number(base) or not base > 1:
            raise ValueError(f"pe.base must be > 1, got {base}")
        check_layout(layout)
        self.require_even_head_dim("rope")
        self.rotary_dim = rotary_dimension(self.head_dim, fraction)
        self.rotated_pairs = p_rope_pairs(self.rotary_dim, p)
        check_scaling(scaling, scaling_factor)
        if original_max_position is not None:
            positive_int("pe.original_max_position", original_max_position)
        for key, value in (("pe.yarn_alpha", yarn_alpha), ("pe.yarn_beta", yarn_beta)):
            if not _is_number(value) or value < 0:
                raise ValueError(f"{key} must be a number >= 0, got {value!r}")
        if not yarn_beta > yarn_alpha:
            raise ValueError(
                f"pe.yarn_beta must be > pe.yarn_alpha, got {yarn_beta} and {yarn_alpha}"
            )
        if original_max_position is None:
            # the positions training saw: 0 … train_positions − 1, or under randomized
            # positions the whole range they are drawn from
            original_max_position = self.max_position if self.randomized else self.train_positions
        if scaling in NEEDS_ORIGINAL_LENGTH and original_max_position is None:
            raise ValueError(
                f"pe.original_max_position must be set for pe.scaling={scaling}: the training "
                f"length is unknown here"
            )
        self.base = float(base)
        self.layout = layout
        self.fraction = float(fraction)
        self.p = float(p)
        self.scaling = scaling
        self.scaling_factor = float(scaling_factor)
        self.original_max_position = original_max_position
        self.yarn_alpha = float(yarn_alpha)
        self.yarn_beta = float(yarn_beta)
        # static frequencies, cached per device; a plain attribute (not a buffer) so that
        # checkpoints hold no frequencies and module casts (.to(bf16)) never touch them
        self._inv_freq = {"cpu": self._frequencies()}

    def _frequencies(self, sequence_length: int | Tensor | None = None) -> Tensor:
        return rope_inverse_frequencies(
            self.rotary_dim,
            self.base,
            scaling=self.scaling,
            factor=self.scaling_factor,
            original_max_position=self.original_max_position,
            sequence_length=sequence_length,
            yarn_alpha=self.yarn_alpha,
            yarn_beta=self.yarn_beta,
            p=self.p,
        )

    def inverse_frequencies(self, k_positions: Tensor) -> Tensor:
        """θ' for a forward pass whose keys sit at ``k_positions`` -> (rotary_dim/2,), fp32."""
        if self.scaling == "dynamic_ntk":
            # ℓ = largest key position + 1, kept on device (no host sync)
            return self._frequencies(k_positions.max() + 1)
        device = k_positions.device
        key = str(device)
        if key not in self._inv_freq:
            self._inv_freq[key] = self._inv_freq["cpu"].to(device)
        return self._inv_freq[key]

    def attention_scale(self, length: int) -> float:
        """YaRN's temperature on top of the base class's options: logits × (0.1 ln s + 1)²."""
        scale = super().attention_scale(length)
        if self.scaling == "yarn":
            scale *= yarn_logit_scale(self.scaling_factor)
        return scale

    def rotate(
        self, q: Tensor, k: Tensor, q_positions: Tensor, k_positions: Tensor
    ) -> tuple[Tensor, Tensor]:
        # q: (B, H, Tq, hd), k: (B, H, Tk, hd); positions (Tq,), (Tk,)
        inv_freq = self.inverse_frequencies(k_positions)  # (r/2,), shared by q and k
        q = apply_rope(q, q_positions, layout=self.layout, inv_freq=inv_freq)
        k = apply_rope(k, k_positions, layout=self.layout, inv_freq=inv_freq)
        return q, k

    def describe(self) -> dict:
        """The options that differ from the defaults, with what they resolve to."""
        info = {}
        if self.base != 10000.0:
            info["base"] = self.base
        if self.layout != "interleaved":
            info["layout"] = self.layout
        if self.fraction != 1.0:
            info.update(fraction=self.fraction, rotary_dim=self.rotary_dim)
        if self.p != 1.0:
            info.update(p=self.p, rotated_pairs=self.rotated_pairs)
        if self.scaling != "none":
            info.update(scaling=self.scaling, scaling_factor=self.scaling_factor)
            if self.scaling in NEEDS_ORIGINAL_LENGTH:
                info["original_max_position"] = self.original_max_position
            if self.scaling == "yarn":
                info.update(
                    yarn_alpha=self.yarn_alpha,
                    yarn_beta=self.yarn_beta,
                    yarn_logit_scale=yarn_logit_scale(self.scaling_factor),
                )
        return info
