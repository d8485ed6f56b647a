"""PoPE (Gopalakrishnan et al. 2025) against an independent complex-number re-derivation in
float64, and the properties the formula promises."""

from __future__ import annotations

import math

import pytest
import torch

from lengen.model.kernels import attend
from lengen.pe.pope import PoPE, polar_components, pope_frequencies

pytestmark = pytest.mark.usefixtures("single_thread")

HEADS, HEAD_DIM = 2, 8


def make(seed: int = 0, **options) -> PoPE:
    """PoPE with δ drawn over its whole range, so the bias shows in every logit."""
    torch.manual_seed(seed)
    return PoPE(d_model=HEADS * HEAD_DIM, n_heads=HEADS, bias_init="uniform", **options)


def qkv(q_len: int, k_len: int, seed: int = 1):
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(2, HEADS, q_len, HEAD_DIM, generator=generator)
    k = torch.randn(2, HEADS, k_len, HEAD_DIM, generator=generator)
    v = torch.randn(2, HEADS, k_len, HEAD_DIM, generator=generator)
    return q, k, v


def reference_logits(q, k, q_positions, k_positions, phase_bias, base=10000.0):
    """Re Σ_c q̃_c conj(k̃_c) / √hd with complex numbers in float64, written from the formula:
    q̃ = softplus(q) e^{i p θ}, k̃ = softplus(k) e^{i (p θ + δ)}, δ clamped to [−2π, 0]."""
    q, k = q.double(), k.double()
    dim = q.shape[-1]
    theta = base ** -(torch.arange(dim, dtype=torch.float64) / dim)
    delta = phase_bias.double().clamp(-2 * math.pi, 0)[:, None, :]  # (H, 1, hd)
    q_tilde = torch.nn.functional.softplus(q) * torch.exp(
        1j * q_positions.double()[:, None] * theta
    )
    k_phase = k_positions.double()[:, None] * theta + delta
    k_tilde = torch.nn.functional.softplus(k) * torch.exp(1j * k_phase)
    return (q_tilde @ k_tilde.conj().transpose(-1, -2)).real / math.sqrt(dim)  # (B, H, Tq, Tk)


def test_frequencies_are_one_per_component():
    expected = torch.tensor([1.0, 0.5, 0.25, 0.125])  # 16^(−c/4)
    torch.testing.assert_close(pope_frequencies(4, base=16.0), expected)


def test_polar_components_hold_softplus_magnitude_and_phase():
    x, phase = torch.tensor([[0.3, -1.2]]), torch.tensor([[0.7, 2.0]])
    magnitude = torch.log1p(torch.exp(x))
    expected = torch.cat((magnitude * torch.cos(phase), magnitude * torch.sin(phase)), dim=-1)
    torch.testing.assert_close(polar_components(x, phase), expected)


def test_rotate_doubles_the_width_of_queries_and_keys():
    q, k, _ = qkv(3, 5)
    rotated_q, rotated_k = make().rotate(q, k, torch.arange(2, 5), torch.arange(5))
    assert rotated_q.shape == (2, HEADS, 3, 2 * HEAD_DIM)
    assert rotated_k.shape == (2, HEADS, 5, 2 * HEAD_DIM)


def test_dot_product_of_rotated_vectors_is_the_reference_logit():
    pe = make()
    q, k, _ = qkv(4, 6)
    q_positions, k_positions = torch.arange(7, 11), torch.arange(5, 11)
    rotated_q, rotated_k = pe.rotate(q, k, q_positions, k_positions)
    logits = rotated_q @ rotated_k.transpose(-1, -2) / math.sqrt(HEAD_DIM)
    expected = reference_logits(q, k, q_positions, k_positions, pe.phase_bias.detach())
    torch.testing.assert_close(logits, expected.float(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("q_len", "k_len"), [(6, 6), (2, 6)])
@pytest.mark.parametrize("causal", [True, False])
def test_attention_equals_the_reference_softmax(causal, q_len, k_len):
    # the kernel scales by 1/√(2·hd); the temperature √2 makes the net factor 1/√hd
    pe = make(causal=causal)
    q, k, v = qkv(q_len, k_len)
    q_positions, k_positions = torch.arange(k_len - q_len, k_len), torch.arange(k_len)
    rotated_q, rotated_k = pe.rotate(q, k, q_positions, k_positions)
    got = attend(rotated_q, rotated_k, v, causal=causal, pe=pe, q_positions=q_positions,
                 k_positions=k_positions)  # fmt: skip
    logits = reference_logits(q, k, q_positions, k_positions, pe.phase_bias.detach())
    if causal:
        future = k_positions[None, :] > q_positions[:, None]  # (Tq, Tk)
        logits = logits.masked_fill(future, float("-inf"))
    expected = (logits.softmax(-1) @ v.double()).float()
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


def test_logits_depend_on_the_offset_only():
    pe = make()
    q, k, _ = qkv(5, 5)
    positions = torch.arange(5)
    logits = []
    for shifted in (positions, positions + 37):
        rotated_q, rotated_k = pe.rotate(q, k, shifted, shifted)
        logits.append(rotated_q @ rotated_k.transpose(-1, -2))  # (B, H, T, T)
    torch.testing.assert_close(logits[1], logits[0], rtol=1e-4, atol=1e-4)


def test_phase_bias_is_clamped_to_minus_two_pi_zero_where_used():
    pe = make()
    q, k, _ = qkv(3, 3)
    positions = torch.arange(3)
    with torch.no_grad():
        pe.phase_bias.copy_(torch.tensor([1.5, -9.0]).repeat(HEADS, HEAD_DIM // 2))
    clamped = pe.rotate(q, k, positions, positions)[1]
    with torch.no_grad():
        pe.phase_bias.copy_(torch.tensor([0.0, -2 * math.pi]).repeat(HEADS, HEAD_DIM // 2))
    torch.testing.assert_close(clamped, pe.rotate(q, k, positions, positions)[1])


def test_uniform_bias_init_lies_in_the_clamp_range():
    bias = PoPE(d_model=256, n_heads=4, bias_init="uniform").phase_bias  # 256 draws
    assert bias.min() >= -2 * math.pi and bias.max() <= 0 and bias.std() > 1


def test_zero_bias_init_by_default():
    assert PoPE(d_model=16, n_heads=2).phase_bias.abs().sum() == 0


def look_back_loss(pe: PoPE, distance: int = 1):
    """−log attention of the last query on the key ``distance`` tokens back, causal, with
    content-free q = k = 0 (every magnitude softplus(0)): a position-only objective."""
    length = distance + 1
    zeros = torch.zeros(1, pe.n_heads, length, pe.head_dim)
    positions = torch.arange(length)
    rotated_q, rotated_k = pe.rotate(zeros, zeros, positions, positions)
    logits = rotated_q[:, :, -1] @ rotated_k.transpose(-1, -2)  # (1, H, 1, T): last query
    return -logits.log_softmax(-1)[..., 0].sum()  # key 0 = `distance` tokens back


def test_zero_phase_bias_is_pushed_past_its_clamp_by_a_look_back():
    # the references' zero start: at δ = 0 a look-back logit asks for δ > 0 in every component
    # (d·θ_c < π); one descent step takes δ past the clamp's edge at 0, and there the clamp
    # passes no gradient (the trained zero-start run of the default task ended with 97 % of δ > 0)
    pe = PoPE(d_model=HEADS * HEAD_DIM, n_heads=HEADS, causal=True)  # δ = 0, the default
    look_back_loss(pe).backward()
    assert (pe.phase_bias.grad < 0).all()  # descent raises every δ_c
    with torch.no_grad():
        pe.phase_bias -= 0.01 * pe.phase_bias.grad.sign()
    pe.phase_bias.grad = None
    look_back_loss(pe).backward()
    assert (pe.phase_bias > 0).all() and (pe.phase_bias.grad == 0).all()


def test_uniform_phase_bias_gets_gradient_from_a_look_back():
    # drawn over the clamp's range, δ starts inside it: every component gets gradient
    pe = make(causal=True)
    inside = (pe.phase_bias > -2 * math.pi) & (pe.phase_bias < 0)
    look_back_loss(pe).backward()
    assert inside.all() and (pe.phase_bias.grad != 0).all()


def test_gradient_reaches_the_phase_bias():
    pe = make()
    q, k, _ = qkv(4, 4)
    rotated_q, rotated_k = pe.rotate(q, k, torch.arange(4), torch.arange(4))
    (rotated_q @ rotated_k.transpose(-1, -2)).sum().backward()
    assert pe.phase_bias.grad is not None and pe.phase_bias.grad.abs().sum() > 0


def test_polar_components_in_fp32_under_bf16_autocast():
    pe = make()
    q, k, _ = qkv(3, 3)
    positions = torch.arange(3000, 3003)
    expected = pe.rotate(q, k, positions, positions)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = pe.rotate(q, k, positions, positions)
    torch.testing.assert_close(got, expected, rtol=0, atol=0)
