"""Length-aware temperatures (``lengen.pe.temperature``): Llama 4's query temperature and
Scalable-Softmax re-derived in float64 from their formulas, SSMax's initialisation and its
per-layer scales, their composition with windows, and their refusals."""

from __future__ import annotations

import math

import pytest
import torch

from helpers import fresh_python, sharpen, tiny_model
from lengen.model.kernels import attend
from lengen.pe import NoPE, RoPE
from lengen.pe.config import EncodingConfig, EncodingContext
from lengen.pe.temperature import llama4_query_temperature, ssmax_initial_scale

pytestmark = pytest.mark.usefixtures("single_thread")

N_HEADS, HEAD_DIM = 2, 8


def qkv(q_len: int, k_len: int):
    generator = torch.Generator().manual_seed(3)
    shape = (2, N_HEADS)
    return (torch.randn(*shape, q_len, HEAD_DIM, generator=generator),
            torch.randn(*shape, k_len, HEAD_DIM, generator=generator),
            torch.randn(*shape, k_len, HEAD_DIM, generator=generator))  # fmt: skip


def masked_softmax_attention(q, k, v, logit_scale, visible):
    """softmax(scale · q·kᵀ/√d) v in float64 over the keys ``visible`` (Tq, Tk) marks;
    logit_scale (..., Tq) per query (and head)."""
    scores = q.double() @ k.double().transpose(-1, -2) / math.sqrt(q.shape[-1])
    scores = scores * logit_scale.double()[..., None]
    scores = scores.masked_fill(~visible, float("-inf"))
    return (scores.softmax(-1) @ v.double()).float()


# -- Llama 4 ---------------------------------------------------------------------------------
def test_llama4_temperature_is_hugging_faces_formula():
    # 1 + 0.1 · log1p(floor((t + 1) / 8192)), the reference's defaults
    index = torch.tensor([0, 8190, 8191, 16383, 100_000])
    expected = [1 + 0.1 * math.log1p(math.floor((t + 1) / 8192)) for t in index.tolist()]
    got = llama4_query_temperature(index, 8192, 0.1)
    torch.testing.assert_close(got, torch.tensor(expected, dtype=torch.float64))


def test_llama4_temperature_multiplies_each_querys_logits_by_its_index():
    # cached decoding: 4 queries, the last of 11 tokens (indices 7 … 10), floor_scale 4
    pe = NoPE(d_model=N_HEADS * HEAD_DIM, n_heads=N_HEADS, attn_temperature_tuning=True,
              floor_scale=4, attn_scale=0.5)  # fmt: skip
    q, k, v = qkv(4, 11)
    scale = torch.tensor([1 + 0.5 * math.log1p((t + 1) // 4) for t in range(7, 11)])
    visible = torch.arange(11)[None, :] <= torch.arange(7, 11)[:, None]
    expected = masked_softmax_attention(q, k, v, scale, visible)
    torch.testing.assert_close(attend(q, k, v, causal=True, pe=pe), expected, rtol=1e-4, atol=1e-5)


# -- SSMax -------------------------------------------------------------------------------------
def ssmax_pe(**options):
    torch.manual_seed(0)
    pe = NoPE(d_model=N_HEADS * HEAD_DIM, n_heads=N_HEADS, ssmax=True, n_layers=3, **options)
    with torch.no_grad():
        pe.ssmax_scales.copy_(torch.tensor([0.3, 0.7, 0.2, 0.9, 1.1, 0.4]))  # (layer, head)
    return pe


def test_ssmax_multiplies_logits_by_s_log_n_per_head():
    pe = ssmax_pe().for_layer(1)  # s = (0.2, 0.9)
    q, k, v = qkv(4, 11)
    n = torch.arange(8, 12, dtype=torch.float64)  # queries 7 … 10 see 8 … 11 keys
    scale = torch.tensor([0.2, 0.9], dtype=torch.float64)[:, None] * n.log()  # (H, Tq)
    visible = torch.arange(11)[None, :] <= torch.arange(7, 11)[:, None]
    expected = masked_softmax_attention(q, k, v, scale, visible)
    torch.testing.assert_close(attend(q, k, v, causal=True, pe=pe), expected, rtol=1e-4, atol=1e-5)


def test_ssmax_counts_only_the_keys_a_window_shows():
    pe = ssmax_pe(window=3)  # layer 0: s = (0.3, 0.7)
    q, k, v = qkv(11, 11)
    n = torch.arange(1, 12, dtype=torch.float64).clamp(max=3)
    scale = torch.tensor([0.3, 0.7], dtype=torch.float64)[:, None] * n.log()
    index = torch.arange(11)
    visible = (index[None, :] <= index[:, None]) & (index[:, None] - index[None, :] < 3)
    expected = masked_softmax_attention(q, k, v, scale, visible)
    torch.testing.assert_close(attend(q, k, v, causal=True, pe=pe), expected, rtol=1e-4, atol=1e-5)


def test_ssmax_bidirectional_n_is_the_sequence():
    pe = ssmax_pe(causal=False)
    q, k, v = qkv(7, 7)
    scale = torch.tensor([0.3, 0.7], dtype=torch.float64)[:, None] * math.log(7) * torch.ones(7)
    expected = masked_softmax_attention(q, k, v, scale, torch.ones(7, 7, dtype=torch.bool))
    torch.testing.assert_close(attend(q, k, v, causal=False, pe=pe), expected, rtol=1e-4, atol=1e-5)


def test_ssmax_initial_s_makes_s_log_n_average_one_over_training():
    pe = NoPE(d_model=16, n_heads=2, ssmax=True, train_positions=32)
    mean_log = sum(math.log(n) for n in range(1, 33)) / 32  # causal: query i sees i + 1 keys
    torch.testing.assert_close(pe.ssmax_scales, torch.full((2,), 1 / mean_log))


def test_ssmax_initial_s_at_the_papers_length_is_its_0_168():
    assert round(ssmax_initial_scale(torch.arange(1, 1025)), 3) == 0.168


def test_ssmax_scales_are_one_per_layer_and_head_and_all_trained():
    pe = ssmax_pe()
    q, k, v = qkv(5, 5)
    total = sum(attend(q, k, v, causal=True, pe=pe.for_layer(i)).square().sum() for i in range(3))
    total.backward()
    assert pe.ssmax_scales.ndim == 1  # flat: the optimiser leaves 1-D parameters undecayed
    assert (pe.ssmax_scales.grad != 0).all()


def test_layer_views_read_their_own_row_of_s():
    pe = ssmax_pe()
    scales = [pe.for_layer(i).query_scale(1, 5, causal=True)[:, 0] for i in range(3)]
    expected = torch.tensor([[0.3, 0.7], [0.2, 0.9], [1.1, 0.4]]) * math.log(5)
    torch.testing.assert_close(torch.stack(scales), expected)


def test_rope_mixed_with_one_frequency_set_still_gives_each_layer_its_s():
    from lengen.pe import RoPEMixed

    pe = RoPEMixed(d_model=16, n_heads=2, n_layers=2, per_layer=False, ssmax=True)
    assert pe.for_layer(1).layer == 1
    q, k = torch.randn(1, 2, 3, 8), torch.randn(1, 2, 3, 8)
    torch.testing.assert_close(pe.for_layer(1).rotate(q, k, torch.arange(3), torch.arange(3)),
                               pe.rotate(q, k, torch.arange(3), torch.arange(3)))  # fmt: skip


# -- models ------------------------------------------------------------------------------------
TEMPERATURES = {
    "ssmax": ("rope", "pe.ssmax=true"),
    "ssmax_window": ("rope", "pe.ssmax=true", "pe.window=3"),
    "llama4": ("nope", "pe.attn_temperature_tuning=true", "pe.floor_scale=4"),
    "loglen_window": ("rope", "pe.log_length_scale=true", "pe.window=3"),
}


@pytest.mark.parametrize("name", list(TEMPERATURES))
def test_cached_decoding_equals_the_full_pass(name):
    pe, *overrides = TEMPERATURES[name]
    model = tiny_model(pe, "decoder", *overrides)
    tokens = torch.randint(0, model.embedding.num_embeddings, (2, 17),
                           generator=torch.Generator().manual_seed(1))  # fmt: skip
    with torch.no_grad():
        full = model(tokens)
        cache = model.new_cache(17)
        pieces = [model.decode(tokens[:, :5], cache)]
        pieces += [model.decode(tokens[:, t : t + 1], cache) for t in range(5, 17)]
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", list(TEMPERATURES))
def test_a_prefix_gets_the_logits_it_gets_in_a_longer_sequence(name):
    pe, *overrides = TEMPERATURES[name]
    model = sharpen(tiny_model(pe, "decoder", *overrides))
    tokens = torch.randint(0, model.embedding.num_embeddings, (2, 21),
                           generator=torch.Generator().manual_seed(4))  # fmt: skip
    with torch.no_grad():
        torch.testing.assert_close(model(tokens[:, :13]), model(tokens)[:, :13],
                                   rtol=1e-4, atol=1e-5)  # fmt: skip


def test_without_the_options_the_scale_is_the_float_it_was():
    pe = RoPE(d_model=16, n_heads=2, train_positions=4)
    assert pe.query_scale(3, 3, causal=True) == 1.0
    assert pe.ssmax_scales is None and not list(pe.parameters())


# -- refusals -----------------------------------------------------------------------------------
REFUSALS = {
    "ssmax_and_log_length": ({"ssmax": True, "log_length_scale": True}, r"^pe.log_length_scale and pe.ssmax both"),
    "window_and_chunk": ({"window": 4, "chunk": 8}, r"^pe.window and pe.chunk are exclusive"),
    "window_zero": ({"window": 0}, r"^pe.window must be"),
    "ssmax_init_negative": ({"ssmax": True, "ssmax_init": -1}, r"^pe.ssmax_init must be a number > 0"),
    "floor_scale_float": ({"floor_scale": 0.5}, r"^pe.floor_scale must be"),
}  # fmt: skip


@pytest.mark.parametrize("name", list(REFUSALS))
def test_bad_options_are_refused_in_one_line(name):
    keys, message = REFUSALS[name]
    with pytest.raises(ValueError, match=message) as error:
        EncodingConfig.from_keys(keys).check(EncodingContext(d_model=16, n_heads=2), "NoPE")
    assert "\n" not in str(error.value)


def test_refusals_come_before_torch_is_imported():
    code = (
        "import sys\nfrom lengen.pe.config import check_encoding\n"
        "try:\n    check_encoding({'_target_': 'lengen.pe.nope.NoPE', 'ssmax': True, "
        "'log_length_scale': True}, d_model=16, n_heads=2)\n"
        "except ValueError as error:\n    print(str(error)[:19], 'torch' in sys.modules)\n"
    )
    assert fresh_python(code) == "pe.log_length_scale False"
