"""The attention kernels (``lengen.model.kernels``) agree with the textbook softmax and with each
other: the relative-bias view, bias blocks (chunked within a budget), FlexAttention, and
encodings without a bias; ``choose_kernel`` picks among them. FlexAttention's causal block mask
itself: test_flex.py."""

from __future__ import annotations

import math
from functools import partial

import pytest
import torch
import torch.nn.functional as F

import lengen.model.kernels as kernels
from helpers import pe_factory, relative_bias_yamls, textbook_attention
from lengen.model import DecoderOnly
from lengen.model.kernels import attend, blocked_bias_attention, relative_bias_attention
from lengen.pe import ALiBi, Learned, NoPE, RoPE, Sinusoidal
from lengen.pe.fire import FIRE

pytestmark = pytest.mark.usefixtures("single_thread")

N_HEADS, HEAD_DIM = 4, 8

#: every pe yaml whose bias depends on q − k only, read from configs/pe (a new one is covered
#: with no edit here)
RELATIVE_YAMLS = relative_bias_yamls()
#: options that change such a bias, per yaml: the variants checked besides the yaml defaults
#: (T5 with 8 buckets up to distance 6: at these lengths, ≤ 11, the causal default's 32 buckets
#: are all exact; the small one reaches the log-spaced buckets and the shared last one)
VARIANTS = {
    "alibi": {
        "alibi_asymmetric": {"bidirectional": "asymmetric_offset"},
        "alibi_separate_learnable": {"bidirectional": "separate", "learnable_slopes": True},
    },
    "kerple": {"kerple_power": {"variant": "power"}},
    "t5": {"t5_8_buckets": {"num_buckets": 8, "max_distance": 6}},
    "sandwich": {"sandwich_dim_16": {"dim": 16}},
}
RELATIVE = {name: pe_factory(name) for name in RELATIVE_YAMLS} | {
    variant: pe_factory(name, **options)
    for name, variants in VARIANTS.items()
    for variant, options in variants.items()
}
#: (queries, keys): a full sequence, a block of new queries (cached decoding), one query
LENGTHS = [(11, 11), (5, 11), (1, 11)]


def make_pe(name: str, causal: bool):
    torch.manual_seed(0)
    return RELATIVE[name](d_model=N_HEADS * HEAD_DIM, n_heads=N_HEADS, causal=causal)


def qkv(q_len: int, k_len: int, batch: int = 2, seed: int = 1) -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(seed)
    # scale 2: large scores, a softmax far from uniform, so a wrong bias shows
    q = 2 * torch.randn(batch, N_HEADS, q_len, HEAD_DIM, generator=generator)
    k = 2 * torch.randn(batch, N_HEADS, k_len, HEAD_DIM, generator=generator)
    v = torch.randn(batch, N_HEADS, k_len, HEAD_DIM, generator=generator)
    return q, k, v


def textbook(q, k, v, *, causal, pe, q_positions, k_positions):
    """The textbook reference with the PE's bias block."""
    bias = pe.attention_bias(q_positions, k_positions)  # (H, Tq, Tk)
    return textbook_attention(q, k, v, causal=causal, bias=bias)


def positions_for(q_len: int, k_len: int, start: int = 0):
    # the queries are the last q_len of k_len keys, the sequence starting at position `start`
    return torch.arange(start + k_len - q_len, start + k_len), torch.arange(start, start + k_len)


#: the relative path's two ways to read its table: one gathered mask, or the strided view
MASKS = {"dense": 1 << 30, "view": 0}


def test_relative_yamls_are_found_and_every_variant_extends_one():
    # the filter must still find the known encodings (a renamed attribute would empty it)
    assert {"alibi", "t5", "kerple", "sandwich"} <= set(RELATIVE_YAMLS)
    assert set(VARIANTS) <= set(RELATIVE_YAMLS)


@pytest.mark.parametrize("mask", sorted(MASKS))
@pytest.mark.parametrize(("q_len", "k_len"), LENGTHS)
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("name", sorted(RELATIVE))
def test_relative_path_matches_textbook_attention(monkeypatch, name, causal, q_len, k_len, mask):
    monkeypatch.setattr(kernels, "DENSE_MASK_ELEMENTS", MASKS[mask])
    pe = make_pe(name, causal)
    q, k, v = qkv(q_len, k_len)
    q_positions, k_positions = positions_for(q_len, k_len)
    expected = textbook(
        q, k, v, causal=causal, pe=pe, q_positions=q_positions, k_positions=k_positions
    )
    got = attend(q, k, v, causal=causal, pe=pe, q_positions=q_positions, k_positions=k_positions)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("query_block", [1, 3, 4])
@pytest.mark.parametrize("causal", [True, False])
def test_relative_path_blocks_equal_one_block(causal, query_block):
    pe = make_pe("alibi_asymmetric", causal)
    q, k, v = qkv(11, 11)
    common = dict(
        causal=causal,
        pe=pe,
        position_offset=torch.tensor([0]),
        scale=HEAD_DIM**-0.5,
        dense_mask_elements=0,
    )
    whole = relative_bias_attention(q, k, v, **common, query_block=11)
    blocks = relative_bias_attention(q, k, v, **common, query_block=query_block)
    torch.testing.assert_close(blocks, whole)


@pytest.mark.parametrize("causal", [True, False])
def test_relative_path_depends_on_position_offsets_only(causal):
    # shifting every position by 100 changes nothing for a bias of q − k
    pe = make_pe("t5_8_buckets", causal)
    q, k, v = qkv(5, 11)
    at_zero = attend(
        q,
        k,
        v,
        causal=causal,
        pe=pe,
        **dict(zip(("q_positions", "k_positions"), positions_for(5, 11), strict=True)),
    )
    shifted = attend(
        q,
        k,
        v,
        causal=causal,
        pe=pe,
        **dict(zip(("q_positions", "k_positions"), positions_for(5, 11, start=100), strict=True)),
    )
    torch.testing.assert_close(shifted, at_zero)


@pytest.mark.parametrize("mask", sorted(MASKS))
@pytest.mark.parametrize("name", ["alibi_separate_learnable", "t5_8_buckets", "kerple"])
def test_relative_path_gradients_equal_bias_blocks(name, mask):
    # learnable biases (slopes, T5 table, KERPLE r1 r2) and q, k, v get the same gradients
    grads = []
    for path in ("relative", "blocks"):
        pe = make_pe(name, causal=False)
        q, k, v = (t.requires_grad_() for t in qkv(7, 7))
        positions = torch.arange(7)
        common = dict(causal=False, pe=pe, scale=HEAD_DIM**-0.5)
        if path == "relative":
            out = relative_bias_attention(
                q,
                k,
                v,
                **common,
                position_offset=positions[:1],
                query_block=3,
                dense_mask_elements=MASKS[mask],
            )
        else:
            out = blocked_bias_attention(
                q, k, v, **common, q_positions=positions, k_positions=positions, query_block=3
            )
        (out * torch.linspace(-1, 1, out.numel()).view_as(out)).sum().backward()
        grads.append([q.grad, k.grad, v.grad] + [p.grad for p in pe.parameters()])
    assert len(grads[0]) > 3  # the PE has parameters
    for relative, blocks in zip(*grads, strict=True):
        torch.testing.assert_close(relative, blocks, rtol=1e-5, atol=1e-6)


def spy_on_sdpa(monkeypatch) -> list[torch.Tensor | None]:
    masks = []
    original = F.scaled_dot_product_attention

    def recording(*args, attn_mask=None, **kwargs):
        masks.append(attn_mask)
        return original(*args, attn_mask=attn_mask, **kwargs)

    monkeypatch.setattr(kernels.F, "scaled_dot_product_attention", recording)
    return masks


def test_relative_path_mask_is_a_view_of_one_table_per_offset(monkeypatch):
    # no (H, n, n) tensor: every block's mask lives in the (H, Tq + Tk − 1) table's storage
    masks = spy_on_sdpa(monkeypatch)
    monkeypatch.setattr(kernels, "RELATIVE_QUERY_BLOCK", 16)
    monkeypatch.setattr(kernels, "DENSE_MASK_ELEMENTS", 0)
    pe, length = make_pe("alibi", causal=True), 64
    q, k, v = qkv(length, length, batch=1)
    positions = torch.arange(length)
    attend(q, k, v, causal=True, pe=pe, q_positions=positions, k_positions=positions)
    assert len(masks) == length // 16
    table_bytes = N_HEADS * (2 * length - 1) * 4
    for mask in masks:
        assert mask.untyped_storage().nbytes() == table_bytes
        assert mask.shape[2] == 16


def test_non_contiguous_positions_take_bias_blocks(monkeypatch):
    # randomized positions are not p, p+1, …: the table's offsets would be wrong, so blocks
    masks = spy_on_sdpa(monkeypatch)
    pe = make_pe("alibi", causal=True)
    q, k, v = qkv(6, 6)
    positions = torch.tensor([0, 2, 3, 7, 8, 20])
    got = attend(q, k, v, causal=True, pe=pe, q_positions=positions, k_positions=positions)
    expected = textbook(q, k, v, causal=True, pe=pe, q_positions=positions, k_positions=positions)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
    assert all(mask.is_contiguous() for mask in masks)  # built blocks, not the strided view


def test_fire_takes_bias_blocks_within_the_budget(monkeypatch):
    # FIRE's bias depends on the query position too: dense blocks, each within the budget
    masks = spy_on_sdpa(monkeypatch)
    pe = FIRE(d_model=N_HEADS * HEAD_DIM, n_heads=N_HEADS, causal=True)
    q, k, v = qkv(11, 11)
    positions = torch.arange(11)
    budget = 2 * N_HEADS * 11 * 3  # three query rows of (B, H, ·, Tk)
    got = attend(
        q,
        k,
        v,
        causal=True,
        pe=pe,
        q_positions=positions,
        k_positions=positions,
        max_bias_elements=budget,
    )
    expected = textbook(q, k, v, causal=True, pe=pe, q_positions=positions, k_positions=positions)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
    assert len(masks) == 4  # ceil(11 / 3)
    assert all(q.shape[0] * mask.numel() <= budget for mask in masks)


@pytest.mark.parametrize("pe_name", ["alibi", "t5_8_buckets"])
def test_decoder_logits_equal_across_kernels(monkeypatch, pe_name):
    # the whole model: the relative path in several blocks against the bias-block path
    monkeypatch.setattr(kernels, "RELATIVE_QUERY_BLOCK", 8)
    monkeypatch.setattr(kernels, "DENSE_MASK_ELEMENTS", 0)
    torch.manual_seed(0)
    model = DecoderOnly(
        pe=RELATIVE[pe_name], vocab_size=16, d_model=32, n_layers=2, n_heads=4, d_ff=64
    ).eval()
    tokens = torch.randint(0, 16, (2, 30))
    with torch.no_grad():
        relative = model(tokens)
        model.stack.pe.bias_is_relative = False  # instance attribute: forces the block path
        blocks = model(tokens)
    torch.testing.assert_close(relative, blocks, rtol=1e-5, atol=1e-5)


def test_small_relative_problems_gather_one_dense_mask(monkeypatch):
    # training lengths: one contiguous (1, H, T, T) mask, the keys in their own order
    masks = spy_on_sdpa(monkeypatch)
    pe = make_pe("alibi", causal=True)
    q, k, v = qkv(11, 11)
    positions = torch.arange(11)
    attend(q, k, v, causal=True, pe=pe, q_positions=positions, k_positions=positions)
    assert [tuple(mask.shape) for mask in masks] == [(1, N_HEADS, 11, 11)]
    assert masks[0].is_contiguous()


@pytest.mark.parametrize(("name", "reused"), [("alibi", True), ("t5_8_buckets", False)])
def test_dense_masks_are_reused_only_without_parameters(monkeypatch, name, reused):
    # a fixed bias (ALiBi's slopes) keeps its mask across layers and steps; a learned one
    # (T5's table) is rebuilt, so training sees its current values
    masks = spy_on_sdpa(monkeypatch)
    pe = make_pe(name, causal=True)
    q, k, v = qkv(11, 11)
    positions = torch.arange(11)
    for _ in range(2):
        attend(q, k, v, causal=True, pe=pe, q_positions=positions, k_positions=positions)
    assert (masks[0] is masks[1]) == reused


def test_a_mask_made_under_inference_mode_does_not_reach_training():
    # Lightning validates under inference_mode; the next training step must still backpropagate
    model = DecoderOnly(pe=RELATIVE["alibi"], vocab_size=16, d_model=32, n_layers=1, n_heads=4,
                        d_ff=64)  # fmt: skip
    tokens = torch.randint(0, 16, (2, 12))
    with torch.inference_mode():
        model(tokens)
    model(tokens).sum().backward()
    assert model.embedding.weight.grad is not None


# -- bias blocks within a budget, and encodings without a bias ---------------------------------
#: encodings with no score bias: attention is plain softmax attention whatever the PE
NO_BIAS = {
    "nope": NoPE,
    "sinusoidal": Sinusoidal,
    "learned": partial(Learned, train_positions=16, max_positions=128),
    "rope": RoPE,
}


@pytest.mark.parametrize("chunk_rows", [1, 3])
@pytest.mark.parametrize(("q_len", "k_len"), LENGTHS)
@pytest.mark.parametrize("causal", [True, False])
def test_alibi_chunked_attention_equals_dense(causal, q_len, k_len, chunk_rows):
    pe = ALiBi(d_model=32, n_heads=4, causal=causal)
    q, k, v = qkv(q_len, k_len, seed=0)
    q_positions, k_positions = torch.arange(k_len - q_len, k_len), torch.arange(k_len)
    common = dict(causal=causal, pe=pe, q_positions=q_positions, k_positions=k_positions)
    dense = attend(q, k, v, **common)
    chunked = attend(q, k, v, **common, max_bias_elements=chunk_rows * 4 * k_len)
    torch.testing.assert_close(chunked, dense)


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("max_bias_elements", [4 * 11, 4 * 11 * 3, 100])
def test_alibi_bias_blocks_stay_within_max_bias_elements(causal, max_bias_elements):
    # the chunked path never builds an (H, Tq, Tk) block larger than allowed
    pe = ALiBi(d_model=32, n_heads=4, causal=causal)
    shapes = []
    build_block = pe.attention_bias

    def spy(q_positions, k_positions):
        block = build_block(q_positions, k_positions)
        shapes.append(tuple(block.shape))
        return block

    pe.attention_bias = spy
    q, k, v = qkv(11, 11, seed=0)
    positions = torch.arange(11) * 2  # not contiguous: the blocked path (no relative table)
    attend(
        q,
        k,
        v,
        causal=causal,
        pe=pe,
        q_positions=positions,
        k_positions=positions,
        max_bias_elements=max_bias_elements,
    )
    assert len(shapes) > 1
    assert sum(shape[1] for shape in shapes) == 11
    assert all(math.prod(shape) <= max_bias_elements for shape in shapes)


@pytest.mark.parametrize(("q_len", "k_len"), LENGTHS)
@pytest.mark.parametrize("causal", [True, False])
def test_alibi_attention_matches_reference(causal, q_len, k_len):
    pe = ALiBi(d_model=32, n_heads=4, causal=causal)
    q, k, v = qkv(q_len, k_len, seed=0)
    q_positions, k_positions = torch.arange(k_len - q_len, k_len), torch.arange(k_len)
    slopes = torch.tensor([2.0**-2, 2.0**-4, 2.0**-6, 2.0**-8])
    distance = (q_positions[:, None] - k_positions[None, :]).abs()
    bias = -slopes[:, None, None] * distance  # (H, Tq, Tk)
    expected = textbook_attention(q, k, v, causal=causal, bias=bias)
    common = dict(causal=causal, pe=pe, q_positions=q_positions, k_positions=k_positions)
    torch.testing.assert_close(attend(q, k, v, **common), expected)
    torch.testing.assert_close(attend(q, k, v, **common, max_bias_elements=1), expected)


@pytest.mark.parametrize(("q_len", "k_len"), LENGTHS)
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("pe", [*NO_BIAS, None])
def test_attention_without_bias_matches_reference(pe, causal, q_len, k_len):
    module = None if pe is None else NO_BIAS[pe](d_model=32, n_heads=4, causal=causal)
    q, k, v = qkv(q_len, k_len, seed=1)
    expected = textbook_attention(q, k, v, causal=causal)
    torch.testing.assert_close(attend(q, k, v, causal=causal, pe=module), expected)


def test_bias_blocks_count_the_batch_in_their_budget():
    """Scores are (B, H, block, Tk): a larger batch means smaller query blocks."""
    pe = ALiBi(d_model=16, n_heads=2, causal=False)
    blocks = []
    original = pe.attention_bias

    def recording(q_positions, k_positions):
        blocks.append(len(q_positions))
        return original(q_positions, k_positions)

    pe.attention_bias = recording
    q, k, v = torch.randn(3, 4, 2, 16, 8).unbind(0)
    positions = torch.arange(16) * 2  # not contiguous: the blocked path (no relative table)
    attend(
        q,
        k,
        v,
        causal=False,
        pe=pe,
        q_positions=positions,
        k_positions=positions,
        max_bias_elements=4 * 2 * 4 * 16,
    )
    assert blocks == [4, 4, 4, 4]


# -- FlexAttention (model.attention=flex) -------------------------------------------------------
@pytest.fixture
def eager_flex(monkeypatch):
    # eager flex computes the same function as compiled flex, without a compile per test; the
    # compiled kernel is checked once, through the whole model, below
    from torch.nn.attention.flex_attention import flex_attention

    import lengen.model.flex as flex

    monkeypatch.setattr(flex, "_compiled_flex", flex_attention)


def assert_flex_matches_textbook(pe, causal, q_positions, k_positions):
    q, k, v = qkv(len(q_positions), len(k_positions))
    with torch.no_grad():
        out = attend(q, k, v, causal=causal, pe=pe, q_positions=q_positions,
                     k_positions=k_positions, kernel="flex")  # fmt: skip
    expected = textbook(
        q, k, v, causal=causal, pe=pe, q_positions=q_positions, k_positions=k_positions
    )
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("name", sorted(RELATIVE))
def test_flex_path_matches_textbook_attention(eager_flex, name, causal):
    assert_flex_matches_textbook(make_pe(name, causal), causal, *positions_for(11, 11, start=3))


def test_flex_is_asked_only_for_full_passes(monkeypatch, eager_flex):
    # cached decoding (fewer queries than keys) keeps the SDPA path: flex would compile anew
    # at every step as the keys grow
    import lengen.model.flex as flex

    calls = []
    real = flex.flex_relative_attention
    monkeypatch.setattr(
        flex, "flex_relative_attention", lambda *a, **k: calls.append(1) or real(*a, **k)
    )
    pe = make_pe("alibi", causal=True)
    with torch.no_grad():
        for q_len in (11, 5):
            q, k, v = qkv(q_len, 11)
            q_positions, k_positions = positions_for(q_len, 11)
            attend(q, k, v, causal=True, pe=pe, q_positions=q_positions,
                   k_positions=k_positions, kernel="flex")  # fmt: skip
    assert calls == [1]


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_flex_path_keeps_the_offset_between_query_and_key_positions(eager_flex):
    # queries at 3 … 13 against keys at 0 … 10: the bias is that of δ = i − j + 3
    pe = make_pe("alibi_asymmetric", causal=False)
    assert_flex_matches_textbook(pe, False, torch.arange(3, 14), torch.arange(11))


def test_flex_option_leaves_encodings_without_a_relative_bias_alone():
    from lengen.pe import RoPE

    rope = DecoderOnly(pe=partial(RoPE), vocab_size=16, d_model=32, n_layers=1, n_heads=4,
                       d_ff=64, attention="flex", dropout=0.1)  # fmt: skip
    alibi = DecoderOnly(pe=RELATIVE["alibi"], vocab_size=16, d_model=32, n_layers=1, n_heads=4,
                        d_ff=64, attention="flex")  # fmt: skip
    train_cpu = {"training": False, "device_type": "cpu"}
    assert kernels.choose_kernel(rope.stack.pe, "flex", **train_cpu) == "sdpa"
    assert kernels.choose_kernel(alibi.stack.pe, "flex", **train_cpu) == "flex"


@pytest.mark.parametrize(
    "when, kernel",
    [
        ({"training": False, "device_type": "cuda", "keys": 8192}, "flex"),
        ({"training": False, "device_type": "cuda", "keys": 2047}, "relative"),
        ({"training": True, "device_type": "cuda", "keys": 8192}, "relative"),
        ({"training": False, "device_type": "cpu", "keys": 8192}, "relative"),
        ({"training": False, "device_type": "cuda", "keys": 8192, "square": False}, "relative"),
        ({"training": False, "device_type": "cuda", "keys": 8192, "dropout": 0.1}, "relative"),
    ],
    ids=["cuda-eval-long", "cuda-eval-short", "cuda-train", "cpu-eval", "decoding", "dropout"],
)
def test_auto_takes_flex_only_for_long_evaluation_on_cuda(when, kernel):
    pe = make_pe("alibi", causal=True)
    assert kernels.choose_kernel(pe, "auto", **when) == kernel


@pytest.mark.parametrize("name", ["dape", "fire"])
def test_encodings_that_build_per_score_evaluate_on_cpu_in_smaller_blocks(name):
    from helpers import pe_factory

    pe = pe_factory(name)(d_model=N_HEADS * HEAD_DIM, n_heads=N_HEADS, causal=True)
    q, k, _ = qkv(64, 64, batch=2)  # 2 · 4 · 64 · 64 = 32,768 scores: one block of 1 << 15
    with torch.no_grad():
        assert kernels._block_rows(q, k, 1 << 15, pe) == 64 // pe.score_copies
        assert kernels._block_rows(q, k, 1 << 15, None) == 64


@pytest.mark.parametrize("name", ["dape", "fire"])
def test_encodings_that_build_per_score_train_in_the_blocks_of_the_others(name):
    from helpers import pe_factory

    pe = pe_factory(name)(d_model=N_HEADS * HEAD_DIM, n_heads=N_HEADS, causal=True)
    q, k, _ = qkv(64, 64, batch=2)
    with torch.enable_grad():
        assert kernels._block_rows(q, k, 1 << 15, pe) == 64


def test_smaller_evaluation_blocks_give_the_same_logits_up_to_rounding():
    from helpers import pe_factory

    torch.manual_seed(0)
    model = DecoderOnly(pe=pe_factory("dape"), vocab_size=16, d_model=32, n_layers=2, n_heads=4,
                        d_ff=64).eval()  # fmt: skip
    tokens = torch.randint(0, 16, (4, 40))
    with torch.no_grad():
        small = model(tokens)  # blocks of 40 // score_copies query rows
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(type(model.stack.pe), "score_copies", property(lambda self: 1))
            whole = model(tokens)  # one block
    # fp32 rounding: a block of a few rows may take another matmul kernel (4e-7 measured)
    torch.testing.assert_close(small, whole)


def test_flex_refuses_to_train_on_cpu(eager_flex):
    pe = make_pe("alibi", causal=True)
    q, k, v = (t.requires_grad_() for t in qkv(11, 11))
    positions = torch.arange(11)
    with pytest.raises(ValueError, match=r"model.attention=flex cannot train on cpu"):
        attend(q, k, v, causal=True, pe=pe, q_positions=positions, k_positions=positions,
               kernel="flex")  # fmt: skip


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("pe_name", ["alibi", "t5_8_buckets"])
def test_compiled_flex_decoder_logits_equal_the_default_kernels(pe_name):
    # the real compiled FlexAttention (compiles of ~10 s on CPU), at three lengths: the second
    # one recompiles for dynamic lengths; two are not multiples of the 128-token block
    models = {}
    for kernel in ("auto", "flex"):
        torch.manual_seed(0)  # the same weights
        models[kernel] = DecoderOnly(
            pe=RELATIVE[pe_name], vocab_size=16, d_model=32, n_layers=2, n_heads=4, d_ff=64,
            attention=kernel,
        ).eval()  # fmt: skip
    for length in (130, 256, 300):
        tokens = torch.randint(0, 16, (2, length))
        with torch.no_grad():
            default = models["auto"](tokens)
            flex = models["flex"](tokens)
        torch.testing.assert_close(flex, default, rtol=1e-5, atol=1e-5)


def test_queries_and_keys_wider_than_values_attend_as_the_formula():
    # PoPE's q and k are twice as wide as v: attend pads v so SDPA keeps its fused kernel
    generator = torch.Generator().manual_seed(0)
    q, k = (torch.randn(1, 2, 6, 8, generator=generator, dtype=torch.float64) for _ in range(2))
    v = torch.randn(1, 2, 6, 4, generator=generator, dtype=torch.float64)
    logits = q @ k.transpose(-1, -2) / 8**0.5
    logits = logits.masked_fill(torch.ones(6, 6, dtype=torch.bool).triu(1), float("-inf"))
    expected = torch.softmax(logits, dim=-1) @ v  # (1, 2, 6, 4)
    torch.testing.assert_close(attend(q, k, v, causal=True), expected)
