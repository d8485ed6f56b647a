"""Positional encodings against the published formulas, computed independently of lengen.

References are written here from the papers (float64 numpy / math), never from lengen's own
helpers: Vaswani et al. 2017 §3.5 (sinusoidal), Press et al. 2022 (ALiBi slopes and bias),
Su et al. 2021 eq. 34 (RoPE).
"""

from __future__ import annotations

import functools
import math

import hydra
import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from torch import Tensor

from helpers import CONFIG_DIR
from lengen.pe import (
    ALiBi,
    Learned,
    NoPE,
    PositionalEncoding,
    RoPE,
    Sinusoidal,
    alibi_slopes,
    apply_rope,
    sinusoidal_table,
)

PE_CONFIGS = sorted((CONFIG_DIR / "pe").glob("*.yaml"))

ALL_PES = {
    "nope": NoPE,
    "sinusoidal": Sinusoidal,
    "learned": functools.partial(Learned, train_positions=10, max_positions=40),
    "alibi": ALiBi,
    "rope": RoPE,
}


pytestmark = pytest.mark.usefixtures("single_thread")


# -- independent references ------------------------------------------------------------------
def reference_sinusoidal_table(length: int, dim: int, base: float, start: int = 0) -> np.ndarray:
    """Vaswani et al. §3.5 with math loops in float64, positions start … start + length − 1:
    (length, dim)."""
    table = np.zeros((length, dim), dtype=np.float64)
    for row in range(length):
        for i in range(dim // 2):
            angle = (start + row) / base ** (2 * i / dim)
            table[row, 2 * i] = math.sin(angle)
            table[row, 2 * i + 1] = math.cos(angle)
    return table


def reference_frequencies(dim: int, base: float) -> np.ndarray:
    """θ_i = base^(−2i/dim), i = 0 … dim/2 − 1, float64."""
    return np.array([base ** (-2 * i / dim) for i in range(dim // 2)], dtype=np.float64)


def reference_alibi_slopes(n_heads: int) -> list[float]:
    """Press et al.: 2^k = the largest power of two <= n gets 2^(−8i/2^k), i = 1 … 2^k; the
    other n − 2^k heads take the odd-exponent slopes of 2^(k+1) heads, 2^(−8j/2^(k+1)) for
    j = 1, 3, 5, …"""
    k = 0
    while 2 ** (k + 1) <= n_heads:
        k += 1
    closest = 2**k
    slopes = [2.0 ** (-8 * i / closest) for i in range(1, closest + 1)]
    odd = [2.0 ** (-8 * j / (2 * closest)) for j in range(1, 2 * closest + 1, 2)]
    return slopes + odd[: n_heads - closest]


def reference_rope(x: Tensor, positions: Tensor, base: float, layout: str) -> Tensor:
    """RoFormer eq. 34 as complex multiplication in float64 numpy.

    Each pair (a, b) is the complex number a + ib turned by e^(i·p·θ_j); ``interleaved`` pairs
    (2j, 2j+1), ``half`` pairs (j, j + d/2).
    """
    values = x.detach().double().numpy()
    dim = values.shape[-1]
    half = dim // 2
    theta = reference_frequencies(dim, base)  # (d/2,)
    angles = positions.double().numpy()[..., None] * theta  # (..., seq, d/2)
    if layout == "interleaved":
        pairs = values[..., 0::2] + 1j * values[..., 1::2]
    else:
        pairs = values[..., :half] + 1j * values[..., half:]
    turned = pairs * np.exp(1j * angles)
    out = np.empty(turned.shape[:-1] + (dim,))
    if layout == "interleaved":
        out[..., 0::2], out[..., 1::2] = turned.real, turned.imag
    else:
        out[..., :half], out[..., half:] = turned.real, turned.imag
    return torch.from_numpy(out)


# -- sinusoidal ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("length", "dim", "base"), [(50, 16, 10000.0), (7, 6, 100.0), (33, 2, 10.0), (64, 32, 500.0)]
)
def test_sinusoidal_table_matches_closed_form(length, dim, base):
    expected = torch.from_numpy(reference_sinusoidal_table(length, dim, base)).float()
    torch.testing.assert_close(sinusoidal_table(length, dim, base), expected, rtol=0, atol=1e-5)


def test_sinusoidal_table_golden_rows_from_design():
    expected = torch.tensor(
        [
            [0.0, 1.0, 0.0, 1.0],
            [0.84147, 0.54030, 0.09983, 0.99500],
            [0.90930, -0.41615, 0.19867, 0.98007],
        ]
    )
    torch.testing.assert_close(sinusoidal_table(3, 4, 100.0), expected, rtol=0, atol=1e-5)


def test_sinusoidal_table_shape_and_dtype():
    table = sinusoidal_table(13, 10)
    assert table.shape == (13, 10)
    assert table.dtype == torch.float32


@pytest.mark.parametrize("position", [0, 3, 17])
@pytest.mark.parametrize("shift", [1, 5, 40])
def test_sinusoidal_shift_is_block_rotation(position, shift):
    # PE(p + k) = T(k) PE(p); per frequency ω the (sin, cos) pair turns by
    # [[cos ωk, sin ωk], [−sin ωk, cos ωk]]
    dim, base = 12, 100.0
    table = sinusoidal_table(position + shift + 1, dim, base).double()
    transform = np.zeros((dim, dim))
    for i, omega in enumerate(reference_frequencies(dim, base)):
        c, s = math.cos(omega * shift), math.sin(omega * shift)
        transform[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = [[c, s], [-s, c]]
    predicted = torch.from_numpy(transform) @ table[position]
    torch.testing.assert_close(table[position + shift], predicted, rtol=0, atol=2e-5)
    # and the shift is not trivially the identity
    assert not torch.allclose(table[position + shift], table[position], atol=1e-2)


# -- ALiBi -----------------------------------------------------------------------------------
# powers of two, one head, counts between powers (the interleaved rule) and a large count
@pytest.mark.parametrize("n_heads", [1, 2, 3, 5, 6, 8, 12, 16, 24, 31, 48, 64])
def test_alibi_slopes_follow_press_rule(n_heads):
    slopes = alibi_slopes(n_heads)
    expected = torch.tensor(reference_alibi_slopes(n_heads), dtype=torch.float64)
    assert slopes.dtype == torch.float32
    assert slopes.shape == (n_heads,)
    torch.testing.assert_close(slopes.double(), expected, rtol=1e-6, atol=0)


def test_alibi_slopes_twelve_heads_from_design():
    exponents = [-1, -2, -3, -4, -5, -6, -7, -8, -0.5, -1.5, -2.5, -3.5]
    expected = torch.tensor([2.0**e for e in exponents])
    torch.testing.assert_close(alibi_slopes(12), expected, rtol=1e-6, atol=0)


def test_alibi_slopes_eight_heads_are_halvings():
    expected = torch.tensor([1 / 2, 1 / 4, 1 / 8, 1 / 16, 1 / 32, 1 / 64, 1 / 128, 1 / 256])
    torch.testing.assert_close(alibi_slopes(8), expected, rtol=0, atol=0)


@pytest.mark.parametrize("causal", [True, False])
def test_alibi_bias_golden_small(causal):
    # 2 heads: slopes 2^-4, 2^-8
    pe = ALiBi(d_model=4, n_heads=2, causal=causal)
    bias = pe.attention_bias(torch.arange(3), torch.arange(3))
    distance = torch.tensor([[0.0, 1.0, 2.0], [1.0, 0.0, 1.0], [2.0, 1.0, 0.0]])
    expected = torch.stack([-distance / 16, -distance / 256])
    torch.testing.assert_close(bias, expected, rtol=0, atol=0)


def test_alibi_bias_equals_minus_slope_times_distance():
    n_heads = 6
    pe = ALiBi(d_model=12, n_heads=n_heads, causal=False)
    q_positions = torch.tensor([0, 4, 9, 30])
    k_positions = torch.arange(12)
    bias = pe.attention_bias(q_positions, k_positions)
    slopes = reference_alibi_slopes(n_heads)
    expected = torch.empty(n_heads, len(q_positions), len(k_positions), dtype=torch.float64)
    for h in range(n_heads):
        for a, i in enumerate(q_positions.tolist()):
            for b, j in enumerate(k_positions.tolist()):
                expected[h, a, b] = -slopes[h] * abs(i - j)
    assert bias.shape == (n_heads, 4, 12)
    torch.testing.assert_close(bias.double(), expected, rtol=1e-6, atol=1e-6)


def test_alibi_bidirectional_bias_is_symmetric():
    pe = ALiBi(d_model=32, n_heads=4, causal=False)
    positions = torch.arange(9)
    bias = pe.attention_bias(positions, positions)
    torch.testing.assert_close(bias, bias.transpose(1, 2), rtol=0, atol=0)
    assert (bias.diagonal(dim1=1, dim2=2) == 0).all()
    assert (bias[:, 0, 1:] < 0).all()


def test_alibi_unknown_bidirectional_raises():
    with pytest.raises(ValueError, match=r"pe\.bidirectional"):
        ALiBi(d_model=32, n_heads=4, causal=False, bidirectional="asymmetric")


# -- RoPE ------------------------------------------------------------------------------------
@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("dim", [2, 8, 16])
def test_apply_rope_matches_complex_reference(layout, dim):
    generator = torch.Generator().manual_seed(dim)
    x = torch.randn(2, 3, 20, dim, generator=generator)
    positions = torch.randint(0, 60, (20,), generator=generator)
    expected = reference_rope(x, positions, 10000.0, layout).float()
    torch.testing.assert_close(apply_rope(x, positions, layout=layout), expected)


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_apply_rope_other_base_matches_reference(layout):
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(4, 12, 8, generator=generator)
    positions = torch.arange(12) * 3
    expected = reference_rope(x, positions, 50.0, layout).float()
    torch.testing.assert_close(apply_rope(x, positions, 50.0, layout=layout), expected)


def test_apply_rope_layouts_differ():
    # the two layouts pair different dimensions, so they are different functions of x
    x = torch.randn(1, 5, 8, generator=torch.Generator().manual_seed(2))
    positions = torch.arange(5)
    interleaved = apply_rope(x, positions, layout="interleaved")
    half = apply_rope(x, positions, layout="half")
    assert not torch.allclose(interleaved, half, atol=1e-3)


def test_apply_rope_default_layout_is_interleaved():
    x = torch.randn(1, 5, 8, generator=torch.Generator().manual_seed(3))
    positions = torch.arange(5)
    torch.testing.assert_close(
        apply_rope(x, positions), apply_rope(x, positions, layout="interleaved")
    )


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_apply_rope_preserves_norms(layout):
    x = torch.randn(2, 4, 30, 16, generator=torch.Generator().manual_seed(4))
    rotated = apply_rope(x, torch.arange(30) * 7, layout=layout)
    torch.testing.assert_close(rotated.norm(dim=-1), x.norm(dim=-1))
    # per pair, too
    if layout == "interleaved":
        pair_norm = lambda t: t[..., 0::2] ** 2 + t[..., 1::2] ** 2  # noqa: E731
    else:
        pair_norm = lambda t: t[..., :8] ** 2 + t[..., 8:] ** 2  # noqa: E731
    torch.testing.assert_close(pair_norm(rotated), pair_norm(x))


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_apply_rope_position_zero_is_identity(layout):
    x = torch.randn(3, 6, 8, generator=torch.Generator().manual_seed(5))
    torch.testing.assert_close(apply_rope(x, torch.zeros(6, dtype=torch.long), layout=layout), x)


@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("shift", [1, 7, 100, 1000])
def test_apply_rope_scores_depend_only_on_offset(layout, shift):
    # the same query and key vectors placed at (m, n) and (m + s, n + s) score the same
    generator = torch.Generator().manual_seed(6)
    q = torch.randn(2, 10, 16, generator=generator)
    k = torch.randn(2, 10, 16, generator=generator)
    positions = torch.arange(10)

    def scores(offset: int) -> Tensor:
        rotated_q = apply_rope(q, positions + offset, layout=layout)
        rotated_k = apply_rope(k, positions + offset, layout=layout)
        return rotated_q @ rotated_k.transpose(-1, -2)  # (2, m, n)

    torch.testing.assert_close(scores(shift), scores(0), rtol=1e-4, atol=1e-4)
    # non-trivial: off the diagonal, rotation changed the scores
    assert not torch.allclose(scores(0), q @ k.transpose(-1, -2), atol=1e-2)


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_apply_rope_broadcasts_positions(layout):
    generator = torch.Generator().manual_seed(7)
    x = torch.randn(2, 3, 5, 8, generator=generator)  # (B, H, seq, d)
    positions = torch.tensor([3, 1, 4, 1, 5])  # (seq,)
    full = apply_rope(x, positions.expand(2, 3, 5), layout=layout)
    torch.testing.assert_close(apply_rope(x, positions, layout=layout), full)
    for b in range(2):
        for h in range(3):
            torch.testing.assert_close(full[b, h], apply_rope(x[b, h], positions, layout=layout))
    # per-batch positions (B, 1, seq)
    per_batch = torch.stack([positions, positions + 10])[:, None, :]
    rotated = apply_rope(x, per_batch, layout=layout)
    torch.testing.assert_close(rotated[1], apply_rope(x[1], positions + 10, layout=layout))


def test_apply_rope_odd_dim_raises():
    with pytest.raises(ValueError):
        apply_rope(torch.randn(2, 4, 3), torch.arange(4))


def test_apply_rope_unknown_layout_raises():
    with pytest.raises(ValueError, match=r"pe\.layout"):
        apply_rope(torch.randn(2, 4, 8), torch.arange(4), layout="neox")


def test_rope_module_unknown_layout_raises():
    with pytest.raises(ValueError, match=r"pe\.layout"):
        RoPE(d_model=32, n_heads=4, layout="neox")


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_rope_module_rotates_queries_and_keys(layout):
    pe = RoPE(d_model=32, n_heads=4, base=500.0, layout=layout)
    generator = torch.Generator().manual_seed(8)
    q = torch.randn(2, 4, 5, 8, generator=generator)
    k = torch.randn(2, 4, 7, 8, generator=generator)
    q_positions, k_positions = torch.arange(2, 7), torch.arange(7)
    rotated_q, rotated_k = pe.rotate(q, k, q_positions, k_positions)
    torch.testing.assert_close(rotated_q, reference_rope(q, q_positions, 500.0, layout).float())
    torch.testing.assert_close(rotated_k, reference_rope(k, k_positions, 500.0, layout).float())


# -- fp32 positional math under bf16 autocast ------------------------------------------------
def test_sinusoidal_table_fp32_under_autocast():
    expected = sinusoidal_table(2048, 64)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        table = sinusoidal_table(2048, 64)
    assert table.dtype == torch.float32
    torch.testing.assert_close(table, expected, rtol=0, atol=0)


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_apply_rope_fp32_input_unchanged_by_autocast(layout):
    x = torch.randn(2, 4, 16, 32, generator=torch.Generator().manual_seed(9))
    positions = torch.arange(10_000, 10_016)
    expected = apply_rope(x, positions, layout=layout)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        rotated = apply_rope(x, positions, layout=layout)
    assert rotated.dtype == torch.float32
    torch.testing.assert_close(rotated, expected, rtol=0, atol=0)


def _bf16_rotation(x: Tensor, positions: Tensor, base: float = 10000.0) -> Tensor:
    """What a careless implementation does: angles, cos/sin and products all in bf16."""
    dim = x.shape[-1]
    inv_freq = (base ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)).bfloat16()
    angles = positions.bfloat16()[..., None] * inv_freq
    cos, sin = angles.cos(), angles.sin()
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)


@pytest.mark.parametrize("autocast", [False, True])
def test_apply_rope_bf16_input_rotates_in_fp32(autocast):
    x = torch.randn(2, 4, 8, 16, generator=torch.Generator().manual_seed(10)).bfloat16()
    positions = torch.arange(10_000, 10_008)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        rotated = apply_rope(x, positions)
    assert rotated.dtype == torch.bfloat16
    # equals the fp32 rotation of the same (bf16) values, rounded once to bf16
    expected = apply_rope(x.float(), positions).bfloat16()
    torch.testing.assert_close(rotated, expected)  # bf16 tolerance
    # and is close to the float64 truth, unlike a rotation computed in bf16
    truth = reference_rope(x, positions, 10000.0, "interleaved")
    error = (rotated.double() - truth).abs().max().item()
    bf16_error = (_bf16_rotation(x, positions).double() - truth).abs().max().item()
    assert error < 0.05
    assert bf16_error > 20 * error


def test_alibi_bias_fp32_under_autocast():
    pe = ALiBi(d_model=48, n_heads=12, causal=True)
    positions = torch.arange(3000, 3040)
    expected = pe.attention_bias(positions, torch.arange(3040))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        bias = pe.attention_bias(positions, torch.arange(3040))
    assert expected.dtype == torch.float32
    assert bias.dtype == torch.float32
    torch.testing.assert_close(bias, expected, rtol=0, atol=0)


def test_sinusoidal_embed_fp32_positions_under_autocast():
    pe = Sinusoidal(d_model=64, n_heads=4)
    x = torch.zeros(1, 16, 64)
    positions = torch.arange(20_000, 20_016)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        embedded = pe.embed(x, positions)
    table = torch.from_numpy(reference_sinusoidal_table(16, 64, 10000.0, start=20_000))
    assert embedded.dtype == torch.float32
    torch.testing.assert_close(embedded[0].double(), table, rtol=0, atol=5e-3)


# -- learned ---------------------------------------------------------------------------------
def test_learned_extend_sizes_table_to_max_positions():
    pe = Learned(d_model=16, n_heads=2, train_positions=10, max_positions=40, policy="extend")
    assert pe.rows == 40
    assert pe.describe() == {
        "policy": "extend",
        "table_size": 40,
        "trained_rows": 10,
        "trained_positions": 10,
    }


def test_learned_default_policy_is_extend():
    pe = Learned(d_model=16, n_heads=2, train_positions=10, max_positions=40)
    assert pe.describe()["policy"] == "extend"
    assert pe.rows == 40


def test_learned_error_policy_refuses_longer_evaluation():
    with pytest.raises(ValueError, match=r"pe\.policy"):
        Learned(d_model=16, n_heads=2, train_positions=10, max_positions=40, policy="error")


def test_learned_error_policy_accepts_evaluation_within_training():
    pe = Learned(d_model=16, n_heads=2, train_positions=10, max_positions=10, policy="error")
    assert pe.describe() == {
        "policy": "error",
        "table_size": 10,
        "trained_rows": 10,
        "trained_positions": 10,
    }


def test_learned_unknown_policy_raises():
    with pytest.raises(ValueError, match=r"pe\.policy"):
        Learned(d_model=16, n_heads=2, train_positions=10, max_positions=40, policy="clamp")


def test_learned_embed_adds_scaled_table_rows():
    pe = Learned(d_model=16, n_heads=2, train_positions=10, max_positions=40)
    x = torch.randn(2, 5, 16, generator=torch.Generator().manual_seed(11))
    positions = torch.tensor([0, 3, 9, 20, 39])
    rows = torch.cat([pe.table.weight.detach(), pe.extension])  # trained rows, then the others
    expected = x + math.sqrt(16) * rows[positions]
    torch.testing.assert_close(pe.embed(x, positions), expected)


def test_learned_embed_past_table_raises():
    pe = Learned(d_model=16, n_heads=2, train_positions=10, max_positions=40)
    with pytest.raises(ValueError):
        pe.embed(torch.zeros(1, 41, 16), torch.arange(41))


# -- interface -------------------------------------------------------------------------------
def test_nope_hooks_are_identities():
    pe = NoPE(d_model=32, n_heads=4)
    generator = torch.Generator().manual_seed(12)
    x = torch.randn(2, 6, 32, generator=generator)
    q = torch.randn(2, 4, 6, 8, generator=generator)
    k = torch.randn(2, 4, 9, 8, generator=generator)
    assert torch.equal(pe.embed(x, torch.arange(6) + 100), x)
    rotated_q, rotated_k = pe.rotate(q, k, torch.arange(3, 9), torch.arange(9))
    assert torch.equal(rotated_q, q)
    assert torch.equal(rotated_k, k)


@pytest.mark.parametrize("name", list(ALL_PES))
def test_has_bias_only_for_alibi(name):
    pe = ALL_PES[name](d_model=32, n_heads=4)
    assert pe.has_bias is (name == "alibi")


@pytest.mark.parametrize("name", list(ALL_PES))
def test_provides_positions_false_only_for_nope(name):
    pe = ALL_PES[name](d_model=32, n_heads=4)
    assert pe.provides_positions is (name != "nope")


def test_rope_odd_head_dim_names_model_keys():
    with pytest.raises(ValueError, match=r"model\.d_model") as error:
        RoPE(d_model=12, n_heads=4)
    assert "model.n_heads" in str(error.value)


@pytest.mark.parametrize("cls", [Sinusoidal, RoPE])
@pytest.mark.parametrize("base", [1.0, 0.5, 0.0, -2.0])
def test_base_at_most_one_raises(cls, base):
    with pytest.raises(ValueError, match=r"pe\.base"):
        cls(d_model=32, n_heads=4, base=base)


@pytest.mark.parametrize("name", list(ALL_PES))
def test_d_model_not_divisible_by_heads_raises(name):
    with pytest.raises(ValueError, match=r"model\.d_model"):
        ALL_PES[name](d_model=30, n_heads=4)


# -- every shipped config --------------------------------------------------------------------
def test_pe_configs_are_found():
    assert {path.stem for path in PE_CONFIGS} >= {"nope", "sinusoidal", "learned", "alibi", "rope"}


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("path", PE_CONFIGS, ids=lambda path: path.stem)
def test_pe_config_builds_and_runs_hooks(path, causal):
    config = OmegaConf.load(path)
    assert config.pop("name") == path.stem
    factory = hydra.utils.instantiate(config)
    assert isinstance(factory, functools.partial)
    if factory.func.causal_only and not causal:
        with pytest.raises(ValueError, match=r"^pe: .*causal"):
            factory(d_model=32, n_heads=4, causal=causal)
        return
    pe = factory(d_model=32, n_heads=4, causal=causal, train_positions=10, max_positions=40)
    assert isinstance(pe, PositionalEncoding)
    generator = torch.Generator().manual_seed(13)
    x = torch.randn(2, 40, 32, generator=generator)
    assert pe.embed(x, torch.arange(40)).shape == (2, 40, 32)
    q = torch.randn(2, 4, 7, 8, generator=generator)
    k = torch.randn(2, 4, 12, 8, generator=generator)
    rotated_q, rotated_k = pe.rotate(q, k, torch.arange(5, 12), torch.arange(12))
    assert rotated_q.shape == q.shape
    assert rotated_k.shape == k.shape
    if pe.has_bias:
        bias = pe.attention_bias(torch.arange(5, 12), torch.arange(12))
        assert bias.shape == (4, 7, 12)
        assert bias.dtype == torch.float32
    if pe.has_contextual:
        logits = torch.randn(2, 4, 7, 12, generator=generator)
        assert pe.contextual_logits(q, logits).shape == (2, 4, 7, 12)


def test_alibi_slopes_stay_fp32_when_the_module_is_cast_to_bf16():
    pe = ALiBi(d_model=48, n_heads=12, causal=True).to(torch.bfloat16)
    positions = torch.tensor([0, 10_000])
    bias = pe.attention_bias(positions, positions)
    torch.testing.assert_close(
        bias[8, 1, 0], torch.tensor(-(2.0**-0.5) * 10_000), rtol=1e-6, atol=0
    )
