"""DAPE (Zheng et al. 2024) against an independent float64 re-derivation of its formula, and the
properties it must keep: no leak from masked keys, query blocks, the wrapped encoding's options
and positions, refusals in one line."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from lengen.model import DecoderOnly, EncoderOnly
from lengen.model.kernels import attend
from lengen.pe.config import check_encoding
from lengen.pe.dape import DAPE

pytestmark = pytest.mark.usefixtures("single_thread")

HEADS, HEAD_DIM = 2, 8
BIASES = ("alibi", "kerple", "fire")


def make(bias: str = "alibi", seed: int = 0, **options) -> DAPE:
    torch.manual_seed(seed)
    options = {"causal": True, **options}
    return DAPE(d_model=HEADS * HEAD_DIM, n_heads=HEADS, bias=bias, train_positions=8, **options)


def qkv(q_len: int, k_len: int, seed: int = 1):
    generator = torch.Generator().manual_seed(seed)
    return (
        torch.randn(2, HEADS, length, HEAD_DIM, generator=generator)
        for length in (q_len, k_len, k_len)
    )


def reference_bias(pe: DAPE, q_positions, k_positions):
    """B (H, Tq, Tk) in float64 from each paper's formula (causal use): ALiBi −m_h (i − j) with
    m = 2^(−8h/H), h = 1 … H; KERPLE-log −r1 log(1 + r2 |i − j|); FIRE taken from the module
    (its formula is checked in tests/pe/test_fire.py)."""
    offset = (q_positions[:, None] - k_positions[None, :]).double()  # (Tq, Tk)
    wrapped = pe.bias_encoding
    if pe.cfg.bias == "alibi":
        slopes = torch.tensor([2.0 ** (-8 * h / HEADS) for h in range(1, HEADS + 1)])
        return -slopes.double()[:, None, None] * offset
    if pe.cfg.bias == "kerple":
        r1 = wrapped.r1.detach().double()[:, None, None]
        r2 = wrapped.r2.detach().double()[:, None, None]
        return -r1 * torch.log1p(r2 * offset.abs())
    return wrapped.attention_bias(q_positions, k_positions).detach().double()


def reference_attention(pe: DAPE, q, k, v, q_positions, k_positions, causal: bool):
    """softmax(x + B + f([x; B])) v (``form: paper``: without the lone B) in float64, the causal
    mask applied after f, f = W₂ LeakyReLU(W₁ [x; B] + b₁) + b₂ over the heads of each (i, j)."""
    x = q.double() @ k.double().transpose(-1, -2) / math.sqrt(HEAD_DIM)  # (B, H, Tq, Tk)
    bias = reference_bias(pe, q_positions, k_positions).expand_as(x)
    features = torch.cat((x, bias), dim=1).permute(0, 2, 3, 1)  # (B, Tq, Tk, 2H)
    w1, b1 = pe.mlp_in_weight.detach().double(), pe.mlp_in_bias.detach().double()
    w2, b2 = pe.mlp_out_weight.detach().double(), pe.mlp_out_bias.detach().double()
    hidden = F.leaky_relu(features @ w1.T + b1, negative_slope=0.01)
    adapted = (hidden @ w2.T + b2).permute(0, 3, 1, 2)  # (B, H, Tq, Tk)
    logits = x + adapted + (bias if pe.cfg.form == "reference" else 0)
    if causal:
        future = k_positions[None, :] > q_positions[:, None]  # (Tq, Tk)
        logits = logits.masked_fill(future, float("-inf"))
    return (logits.softmax(-1) @ v.double()).float()


@pytest.mark.parametrize(("q_len", "k_len"), [(7, 7), (3, 7)])
@pytest.mark.parametrize("form", ["reference", "paper"])
@pytest.mark.parametrize("bias", BIASES)
def test_causal_attention_equals_the_reference_formula(bias, form, q_len, k_len):
    pe = make(bias, form=form)
    q, k, v = qkv(q_len, k_len)
    q_positions, k_positions = torch.arange(k_len - q_len, k_len), torch.arange(k_len)
    common = dict(pe=pe, q_positions=q_positions, k_positions=k_positions)
    got = attend(q, k, v, causal=True, **common)
    expected = reference_attention(pe, q, k, v, q_positions, k_positions, causal=True)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


def test_bidirectional_attention_equals_the_reference_formula():
    # kerple's kernel is symmetric in i − j, so the reference bias holds both ways
    pe = make("kerple", causal=False)
    q, k, v = qkv(6, 6)
    positions = torch.arange(6)
    got = attend(q, k, v, causal=False, pe=pe, q_positions=positions, k_positions=positions)
    expected = reference_attention(pe, q, k, v, positions, positions, causal=False)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


def test_query_blocks_equal_one_block():
    pe = make("fire")
    q, k, v = qkv(11, 11)
    positions = torch.arange(11)
    common = dict(causal=True, pe=pe, q_positions=positions, k_positions=positions)
    one_block = attend(q, k, v, **common)
    blocks = attend(q, k, v, **common, max_bias_elements=2 * HEADS * 11 * 3)  # 3 queries each
    torch.testing.assert_close(blocks, one_block, rtol=1e-6, atol=1e-6)


def test_masked_keys_do_not_reach_earlier_queries():
    # the MLP reads the scores of masked keys too (the reference masks after it): it must act
    # on each (i, j) alone, so changing the last keys changes nothing before them
    pe = make()
    q, k, v = qkv(8, 8)
    positions = torch.arange(8)
    common = dict(causal=True, pe=pe, q_positions=positions, k_positions=positions)
    changed_k, changed_v = k.clone(), v.clone()
    changed_k[:, :, 5:] += 3.0
    changed_v[:, :, 5:] -= 2.0
    before = attend(q, k, v, **common)[:, :, :5]
    after = attend(q, changed_k, changed_v, **common)[:, :, :5]
    torch.testing.assert_close(after, before, rtol=0, atol=0)


def tiny(bias: str, cls=DecoderOnly, **options):
    torch.manual_seed(0)

    def encoding(**context):
        return DAPE(bias=bias, **context, **options)

    model = cls(pe=encoding, vocab_size=11, d_model=16, n_layers=2, n_heads=2, d_ff=32)
    with torch.no_grad():  # unit-gain projections, so attention shows in the logits
        for module in model.modules():
            if isinstance(module, torch.nn.Linear):
                module.weight.normal_(0, module.in_features**-0.5)
    return model.eval()


@pytest.mark.parametrize("bias", BIASES)
def test_decoder_logits_on_a_prefix_equal_the_prefix_of_longer_logits(bias):
    model = tiny(bias)
    tokens = torch.randint(0, 11, (2, 13), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        full = model(tokens)
        torch.testing.assert_close(model(tokens[:, :8]), full[:, :8], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("bias", BIASES)
def test_cached_decoding_equals_the_full_forward(bias):
    model = tiny(bias)
    tokens = torch.randint(0, 11, (2, 9), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        full = model(tokens)
        cache = model.new_cache(9)
        pieces = [model.decode(tokens[:, a:b], cache) for a, b in ((0, 4), (4, 5), (5, 9))]
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("bias", BIASES)
def test_gradient_reaches_every_parameter_in_an_encoder(bias):
    model = tiny(bias, cls=EncoderOnly).train()
    tokens = torch.randint(0, 11, (2, 9), generator=torch.Generator().manual_seed(4))
    model(tokens).square().mean().backward()
    for name, parameter in model.stack.pe.named_parameters():
        assert parameter.grad is not None and parameter.grad.abs().sum() > 0, name


def test_bias_options_reach_the_wrapped_encoding():
    pe = make("kerple", bias_options={"variant": "power"})
    assert pe.bias_encoding.cfg.variant == "power"


def test_shared_options_are_the_wrapped_encodings():
    pe = make("alibi", randomized=True, max_position=64, randomized_eval=True).eval()
    assert pe.positions(6).tolist() == list(range(6))  # tokens keep their indices
    distances = pe.bias_encoding._distances  # … and the offsets get the drawn distances
    assert distances is not None and distances[0] == 0 and distances[-1] < 64
    bias = pe.attention_bias(torch.arange(6), torch.arange(6))
    torch.testing.assert_close(
        bias, pe.bias_encoding.attention_bias(torch.arange(6), torch.arange(6))
    )


RUN = {"d_model": 16, "n_heads": 2, "causal": True, "train_positions": 8, "max_positions": 32}
NODE = {"_target_": "lengen.pe.dape.DAPE", "bias": "alibi"}


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ({"bias": "t5"}, r"^pe\.bias must be one of alibi, kerple, fire; got 't5'$"),
        (
            {"bias": "kerple", "bias_options": {"variant": "cubic"}},
            r"^pe\.bias_options\.variant must be one of log, power; got 'cubic'$",
        ),
        (
            {"bias_options": {"variant": "log"}},
            r"^pe\.bias_options\.variant: ALiBi takes no such key; allowed: ",
        ),
        (
            {"bias_options": {"randomized": True}},
            r"^pe\.bias_options\.randomized: an option every encoding takes; allowed: "
            r"pe\.randomized$",
        ),
        ({"bias_options": "power"}, r"^pe\.bias_options must be a mapping"),
    ],
)
def test_bad_options_are_refused_in_one_line_before_torch(keys, message):
    with pytest.raises(ValueError, match=message) as error:
        check_encoding({**NODE, **keys}, **RUN)
    assert "\n" not in str(error.value)
