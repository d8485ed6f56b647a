"""FoPE: Fourier position embedding (Hua et al., ICML 2025, "Fourier Position Embedding:
Enhancing Attention's Periodic Extension for Length Generalization", arXiv 2412.17739).

RoPE turns pair m of q and k by e^{i ω_m t}. FoPE makes each pair's factor a Fourier series
over several of RoPE's frequencies, z_m(t) = Σ_ω a_{m,ω} e^{iωt} with random coefficients,
and clips the frequencies that complete less than one period in training (ω < 2π / L) to
zero: those pairs carry no position at all. Read for this: the authors' code,
yiju-zhao/Fourier-Position-Embedding ``olmo/model.py`` (``RotaryEmbedding.get_inv_freq``,
``FourierEmbedding``) and its configs (``configs/c4/.../OLMo-60M-ce-fourier-...yaml``), and
the paper. Where they differ lengen follows the code by default (``pe.form=reference``) and
offers the paper's form (``pe.form=paper``):

* **reference** (``fourier_separate_basis``, ``fourier_separate_head``, ``fourier_ignore_zero``,
  ``eye_xavier_norm``, as its configs set them): the D frequencies θ_i = base^(−2i/hd) that
  reach the floor form the basis; pair m < P = min(D, hd/4) gets cos_m(t) = Σ_d C_{d,m}
  cos(θ_d t) and sin_m(t) = Σ_d S_{d,m} sin(θ_d t), with separate cosine and sine
  coefficients per head and per layer, each a step identity (pair m takes frequency
  m·⌈D/P⌉) plus Xavier-normal noise times ``coefficient_gain``; the other hd/2 − P pairs get
  cos = sin = 1 (the reference pads both with ones: a fixed 45° turn and a factor √2 of q
  and of k, the same at every position). Pairs as GPT-NeoX's (i, i + hd/2), the reference's
  ``rotate_half``. The coefficients are fixed (``fourier_learnable`` false), unless
  ``pe.learnable``.
* **paper**: every pair whose own frequency reaches the floor keeps it with coefficient 1 and
  adds the other kept frequencies with random coefficients, one real coefficient per
  frequency for cosine and sine alike (a complex series z_m(t) = e^{iθ_m t} +
  Σ_d a_{d,m} e^{iθ_d t}); the clipped pairs get frequency zero, cos 1 and sin 0 (not
  rotated). At ``coefficient_gain`` 0 and ``floor_ratio`` 0 this is RoPE in the half layout.
  Written from the paper's description; its equations were not in the stored text read for
  this, so this form's coefficient law is lengen's reading, unverified.

**Not exactly relative.** With the series, q·k = Re Σ_m q_m conj(k_m) z_m(i) conj(z_m(j)) and
z_m(i) conj(z_m(j)) holds cross terms e^{i(θ_d i − θ_e j)} of two frequencies, which are not
functions of i − j; nor is a pair with C ≠ S a rotation. Only the noise-free coefficients
(gain 0, the paper's form) are relative. Pairs clipped to zero are position-free exactly.

A floor above every frequency (L < 2π / θ_0 ≈ 6.3 positions at ``floor_ratio`` 1) would
clip them all and leave NoPE; the fastest frequency θ_0 is kept then, and ``pe_info`` says so.

The coefficients are buffers (or parameters), saved in checkpoints, drawn from the global RNG
at construction (the run's seed); the waves are computed in fp32, autocast off.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from lengen.pe.base import PositionalEncoding
from lengen.pe.config.fope import FoPEConfig


def fope_frequencies(head_dim: int, base: float, count: int) -> Tensor:
    """The first ``count`` of RoPE's frequencies θ_i = base^(−2i/hd) (those that reach the
    floor) -> (count,), fp32."""
    exponents = torch.arange(count, dtype=torch.float64) * 2 / head_dim
    return (base**-exponents).float()


def step_identity(frequencies: int, pairs: int) -> Tensor:
    """The reference's ``get_step_eye``: pair m takes frequency m·⌈D/P⌉ -> (D, P)."""
    eye = torch.zeros(frequencies, pairs)
    if pairs == 0:
        return eye
    step = math.ceil(frequencies / pairs)
    for pair in range(pairs):
        if pair * step < frequencies:
            eye[pair * step, pair] = 1.0
    return eye


def coefficient_noise(shape: tuple[int, ...], gain: float) -> Tensor:
    """Xavier-normal noise of a (…, H, D, P) block as ``torch.nn.init.xavier_normal_`` draws it
    for (H, D, P): std = gain · √(2 / (D·P + H·P))."""
    heads, frequencies, pairs = shape[-3:]
    fans = frequencies * pairs + heads * pairs
    std = gain * math.sqrt(2.0 / fans) if fans else 0.0
    return torch.randn(shape) * std


def fope_waves(
    positions: Tensor, frequencies: Tensor, cos_coef: Tensor, sin_coef: Tensor
) -> tuple[Tensor, Tensor]:
    """The mixed pairs' cosine and sine series at the positions: positions (T,), the basis
    θ_d (D,), coefficients (H, D, P) -> cos, sin (H, T, P) each, fp32 (``pad_waves`` adds the
    hd/2 − P unmixed pairs)."""
    angles = positions.float()[:, None] * frequencies.float()  # (T, D)
    cos = torch.einsum("td,hdp->htp", angles.cos(), cos_coef.float())  # (H, T, P)
    sin = torch.einsum("td,hdp->htp", angles.sin(), sin_coef.float())  # (H, T, P)
    return cos, sin


def pad_waves(cos: Tensor, sin: Tensor, half: int, pad_sin: float) -> tuple[Tensor, Tensor]:
    """(H, T, P) waves -> (H, T, hd/2): the unmixed pairs get cos 1 and sin ``pad_sin``."""
    missing = half - cos.shape[-1]
    cos = nn.functional.pad(cos, (0, missing), value=1.0)
    sin = nn.functional.pad(sin, (0, missing), value=pad_sin)
    return cos, sin


def apply_fope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """x (B, H, T, hd) times each pair's (cos + i·sin), pairs (i, i + hd/2) -> (B, H, T, hd)."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]  # (B, H, T, hd/2) each
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


class FoPE(PositionalEncoding):
    """RoPE with a Fourier series per pair and sub-floor frequencies clipped to zero.

    Args:
        base: RoPE's θ base, from which the basis is drawn.
        form: ``reference`` (the authors' code) or ``paper`` (module docstring).
        coefficient_gain: the random part of the coefficients (Xavier-normal times the gain).
        floor_ratio: ω_floor = floor_ratio · 2π / L; 0 keeps every frequency.
        original_max_position: L; null = the positions seen in training (a model built
            without them, by hand, clips nothing; ``describe`` says so).
        learnable: train the coefficients (parameters) instead of fixing them (buffers).

    Every layer has its own coefficients (the reference builds one ``FourierEmbedding`` per
    block); ``for_layer`` gives a view that shares them.
    """

    Options = FoPEConfig

    def __init__(self, **keywords) -> None:
        super().__init__(**keywords)
        sizes = self.derived
        self.floor = sizes.floor
        self.mixed_pairs = sizes.mixed_pairs
        frequencies, pairs = sizes.frequencies, sizes.mixed_pairs
        shape = (self.n_layers, self.n_heads, frequencies, pairs)
        gain = self.cfg.coefficient_gain
        if self.cfg.form == "reference":
            eye = step_identity(frequencies, pairs)  # (D, P)
            cos_coef = coefficient_noise(shape, gain) + eye
            sin_coef = coefficient_noise(shape, gain) + eye
            self.pad_sin = 1.0  # the reference pads sine and cosine with ones
        else:
            cos_coef = coefficient_noise(shape, gain) + torch.eye(frequencies)
            sin_coef = cos_coef  # one real coefficient per frequency: a complex series
            self.pad_sin = 0.0  # clipped pairs: frequency zero, not rotated
        self._register("cos_coefficients", cos_coef)  # (n_layers, H, D, P)
        if self.cfg.form == "reference":
            self._register("sin_coefficients", sin_coef)  # (n_layers, H, D, P)
        # a plain attribute, not a buffer: model.to(bfloat16) must not round the frequencies
        self._frequencies = fope_frequencies(self.head_dim, self.cfg.base, frequencies)

    def _register(self, name: str, value: Tensor) -> None:
        if self.cfg.learnable:
            setattr(self, name, nn.Parameter(value))
        else:
            self.register_buffer(name, value)  # persistent: checkpoints keep the draw

    def coefficients(self) -> tuple[Tensor, Tensor]:
        """This layer's cosine and sine coefficients -> (H, D, P) each."""
        cos = self.cos_coefficients[self.layer]
        sin = self.sin_coefficients[self.layer] if self.cfg.form == "reference" else cos
        return cos, sin

    def waves(self, positions: Tensor) -> tuple[Tensor, Tensor]:
        """positions (T,) -> this layer's cos and sin per pair, (H, T, hd/2) each, fp32."""
        if self._frequencies.device != positions.device:
            self._frequencies = self._frequencies.to(positions.device)
        cos_coef, sin_coef = self.coefficients()
        cos, sin = fope_waves(positions, self._frequencies, cos_coef, sin_coef)
        return pad_waves(cos, sin, self.head_dim // 2, self.pad_sin)

    def rotate(
        self, q: Tensor, k: Tensor, q_positions: Tensor, k_positions: Tensor
    ) -> tuple[Tensor, Tensor]:
        """q (B, H, Tq, hd), k (B, H, Tk, hd); positions (Tq,), (Tk,) -> (q, k)."""
        with torch.autocast(q.device.type, enabled=False):
            q_cos, q_sin = self.waves(q_positions)  # (H, Tq, hd/2)
            k_cos, k_sin = self.waves(k_positions)  # (H, Tk, hd/2)
            q_out = apply_fope(q.float(), q_cos, q_sin)  # (B, H, Tq, hd)
            k_out = apply_fope(k.float(), k_cos, k_sin)  # (B, H, Tk, hd)
        return q_out.to(q.dtype), k_out.to(k.dtype)

    def for_layer(self, index: int) -> FoPE:
        """A view with layer ``index``'s coefficients (shares them; made per forward pass)."""
        if index == self.layer:
            return self
        return self.layer_view(index)

    def describe(self) -> dict:
        info = self.cfg.changed()
        if self.cfg.floor_ratio > 0 and self.floor == 0:
            info["floor"] = "none: built without a training length, so nothing is clipped"
        if self.derived.kept_fastest:
            info["floor"] = (
                "above every frequency (training shorter than 2π positions): the fastest kept"
            )
        info.update(
            floor_frequency=self.floor,
            basis_frequencies=self.derived.frequencies,
            mixed_pairs=self.mixed_pairs,
        )
        return info
