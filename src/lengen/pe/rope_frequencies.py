"""RoPE's rotation frequencies: plain, partial (``pe.fraction``), p-RoPE (``pe.p``) and the
context extensions (``pe.scaling``), as pure functions for the module (``lengen.pe.rope``),
tests, notebooks and plots.

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
  Language Models", ICLR; §3.2 "NTK-by-parts" interpolation and §3.4 YaRN): each pair i keeps
  a share γ_i of its frequency, θ'_i = (1 − γ_i) · θ_i/s + γ_i · θ_i, γ_i = 1 for pairs with
  many rotations within L (extrapolated, left as they are), 0 for pairs with few
  (interpolated like PI), a linear ramp in between. Where the ramp is linear
  (``pe.yarn_ramp``):

  - ``dimension`` (default): the authors' code (jquesnelle/yarn,
    ``scaled_rope/LlamaYaRNScaledRotaryEmbedding.py``: ``find_correction_range``,
    ``linear_ramp_mask``) and Hugging Face transformers (``_compute_yarn_parameters`` in
    ``src/transformers/modeling_rope_utils.py``), which practitioners' models use. With
    i(ρ) = d · ln(L / (2π ρ)) / (2 ln base), the real pair index at which a pair makes ρ
    rotations within L, low = ⌊i(β)⌋ and high = ⌈i(α)⌉ (β = β_fast = 32, α = β_slow = 1),
    clamped to [0, d − 1] (high += 0.001 if they meet), γ_i = 1 − clamp((i − low)/(high − low),
    0, 1): linear in the pair index. ``pe.yarn_truncate=false`` drops the floor/ceil (Hugging
    Face's ``truncate: false``).
  - ``rotations``: the paper's formula, linear in r_i = L/λ_i (λ_i = 2π/θ_i), γ = 0 for r < α,
    1 for r > β, (r − α)/(β − α) in between.

  Both keep and both interpolate (almost) the same pairs, but inside the ramp they differ a
  lot: at d = 32, L = 128 the frequencies differ by up to 42% at s = 2 and by up to a factor
  4 at s = 16 (tests/pe/test_rope_frequencies.py; docs/pe.md has the table). The temperature
  √(1/t) = 0.1 ln s + 1 (Hugging Face's default ``attention_factor``; the authors'
  ``get_mscale``, 1 for s ≤ 1) multiplies cos and sin in both implementations, i.e. both q and
  k, so the logits are multiplied by (0.1 ln s + 1)² (``logit_temperature``).

With s = 1, ``pi``, ``ntk`` and ``yarn`` equal plain RoPE exactly (tested). Scaling is static
(applied at every length, training included) except ``dynamic_ntk``. It is meant for
``eval.py run=… pe.scaling=yarn pe.scaling_factor=4`` re-evaluations of a trained checkpoint:
no option adds parameters, so checkpoints load unchanged.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from lengen.checks import positive_int
from lengen.pe.config.rope import (  # the functional API's defaults are the config's
    DEFAULT_BASE,
    NEEDS_ORIGINAL_LENGTH,
    RoPEConfig,
    check_scaling,
    check_yarn_ramp,
    p_rope_pairs,
)
from lengen.pe.sinusoidal import sinusoid_inverse_frequencies

# The checks of the keys (``check_scaling``, ``check_yarn_ramp``, …) and the dimension rules
# (``rotary_dimension``, ``p_rope_pairs``) live in lengen.pe.config.rope, without torch.


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


def yarn_correction_dimension(
    rotations: float, dim: int, base: float, original_max_position: int
) -> float:
    """The real pair index at which a pair makes ``rotations`` full turns within L:
    d · ln(L / (2π ρ)) / (2 ln base) (the authors' and Hugging Face's ``find_correction_dim``)."""
    if not rotations > 0:
        raise ValueError(f"pe.yarn_alpha and pe.yarn_beta must be > 0 here, got {rotations}")
    return dim * math.log(original_max_position / (rotations * 2 * math.pi)) / (2 * math.log(base))


def yarn_ramp(
    dim: int,
    base: float,
    original_max_position: int,
    alpha: float = RoPEConfig.yarn_alpha,
    beta: float = RoPEConfig.yarn_beta,
    *,
    ramp: str = RoPEConfig.yarn_ramp,
    truncate: bool = RoPEConfig.yarn_truncate,
) -> Tensor:
    """YaRN's γ_i per pair -> Tensor[dim // 2], float64 (1 = keep θ_i, 0 = θ_i / s).

    ``ramp="dimension"`` (the authors' code, Hugging Face): linear in the pair index i between
    low = ⌊i(β)⌋ and high = ⌈i(α)⌉ (``yarn_correction_dimension``; no floor/ceil with
    ``truncate=False``), both clamped to [0, dim − 1]; γ_i = 1 − clamp((i − low)/(high − low)).
    ``ramp="rotations"`` (the paper): r_i = L / λ_i, λ_i = 2π / θ_i;
    γ = clamp((r − α)/(β − α), 0, 1)."""
    check_yarn_ramp(ramp)
    if ramp == "rotations":
        wavelengths = 2 * math.pi / _theta64(dim, base)  # λ_i
        rotations = original_max_position / wavelengths  # r_i
        return ((rotations - alpha) / (beta - alpha)).clamp(0.0, 1.0)
    low = yarn_correction_dimension(beta, dim, base, original_max_position)
    high = yarn_correction_dimension(alpha, dim, base, original_max_position)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001  # as the reference code: no division by zero
    index = torch.arange(dim // 2, dtype=torch.float64)
    return 1.0 - ((index - low) / (high - low)).clamp(0.0, 1.0)


def yarn_mscale(factor: float) -> float:
    """YaRN's √(1/t) = 0.1 ln s + 1 (YaRN paper §3.4, fitted on LLaMA), applied to both q and k."""
    return 0.1 * math.log(factor) + 1.0


def yarn_logit_scale(factor: float) -> float:
    """The multiplier YaRN's temperature puts on the q·k logits: (0.1 ln s + 1)²."""
    return yarn_mscale(factor) ** 2


def rope_inverse_frequencies(
    dim: int,
    base: float = DEFAULT_BASE,
    *,
    scaling: str = RoPEConfig.scaling,
    factor: float = RoPEConfig.scaling_factor,
    original_max_position: int | None = None,
    sequence_length: int | Tensor | None = None,
    yarn_alpha: float = RoPEConfig.yarn_alpha,
    yarn_beta: float = RoPEConfig.yarn_beta,
    yarn_ramp_kind: str = RoPEConfig.yarn_ramp,
    yarn_truncate: bool = RoPEConfig.yarn_truncate,
    p: float = RoPEConfig.p,
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
        yarn_alpha, yarn_beta: YaRN's α (β_slow) and β (β_fast).
        yarn_ramp_kind: ``dimension`` (the authors' code, Hugging Face) or ``rotations``
            (the paper); yarn_truncate: floor/ceil the dimension ramp's bounds.
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
        ramp = yarn_ramp(
            dim,
            base,
            original_max_position,
            yarn_alpha,
            yarn_beta,
            ramp=yarn_ramp_kind,
            truncate=yarn_truncate,
        )
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
