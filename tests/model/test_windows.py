"""Local attention by index (``pe.window``, ``pe.chunk``; ``lengen.pe.local``) through every
kernel path, against a float64 softmax masked from the definitions written here: a sliding
window (query i sees keys i − w + 1 … i; |i − j| < w bidirectionally) and Llama 4's chunks
(query i sees the keys of chunk ⌊i/c⌋ up to i; the whole chunk bidirectionally). Cached
decoding equals the full pass with windowed schedules (4 layers, so the NoPE layers act)."""

from __future__ import annotations

import math

import pytest
import torch
from torch.nn.attention.flex_attention import create_block_mask

from helpers import tiny_model
from lengen.model import flex
from lengen.model.kernels import attend, blocked_bias_attention, relative_bias_attention
from lengen.pe import FIRE, ALiBi, CoPE, NoPE
from lengen.pe.local import allowed, key_span, visible_keys

pytestmark = pytest.mark.usefixtures("single_thread")

N_HEADS, HEAD_DIM = 2, 8
#: (causal, window, chunk); chunk 4 splits 11 keys into 4 + 4 + 3
LOCAL = [
    (True, 3, None),
    (True, 1, None),
    (True, None, 4),
    (False, 3, None),
    (False, None, 4),
]
LOCAL_IDS = [f"{'causal' if c else 'bidirectional'}-w{w}-c{ch}" for c, w, ch in LOCAL]


def sees(i: int, j: int, causal: bool, window, chunk) -> bool:
    """The definition, one (query index, key index) pair at a time."""
    if causal and j > i:
        return False
    if window is not None and abs(i - j) >= window:
        return False
    return chunk is None or i // chunk == j // chunk


def reference(q, k, v, causal, window, chunk, bias=None, logit_scale=None):
    """softmax(q·kᵀ/√d · scale + bias) v over the keys each query sees, float64 -> float32;
    the queries are the last Tq of Tk keys."""
    q, k, v = q.double(), k.double(), v.double()
    q_len, k_len = q.shape[2], k.shape[2]
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])  # (B, H, Tq, Tk)
    if logit_scale is not None:
        scores = scores * logit_scale.double()[..., None]
    if bias is not None:
        scores = scores + bias.double()
    mask = torch.tensor(
        [[sees(i + k_len - q_len, j, causal, window, chunk) for j in range(k_len)]
         for i in range(q_len)]
    )  # fmt: skip
    return (scores.masked_fill(~mask, float("-inf")).softmax(-1) @ v).float()


def qkv(q_len: int, k_len: int, seed: int = 1):
    generator = torch.Generator().manual_seed(seed)
    q = 2 * torch.randn(2, N_HEADS, q_len, HEAD_DIM, generator=generator)
    k = 2 * torch.randn(2, N_HEADS, k_len, HEAD_DIM, generator=generator)
    v = torch.randn(2, N_HEADS, k_len, HEAD_DIM, generator=generator)
    return q, k, v


def lengths(causal: bool):
    """A full pass, and in causal attention a block of new queries (cached decoding)."""
    return [(11, 11), (4, 11)] if causal else [(11, 11)]


def run(pe, causal, q_len, k_len, **options):
    q, k, v = qkv(q_len, k_len)
    positions = torch.arange(k_len - q_len, k_len), torch.arange(k_len)
    bias = pe.attention_bias(*positions) if pe.has_bias else None
    out = attend(q, k, v, causal=causal, pe=pe, q_positions=positions[0],
                 k_positions=positions[1], **options)  # fmt: skip
    return out, reference(q, k, v, causal, pe.cfg.window, pe.cfg.chunk, bias)


# -- the mask functions ------------------------------------------------------------------------
@pytest.mark.parametrize(("causal", "window", "chunk"), LOCAL, ids=LOCAL_IDS)
def test_allowed_is_the_definition(causal, window, chunk):
    got = allowed(torch.arange(3, 11), torch.arange(11), causal=causal, window=window, chunk=chunk)
    expected = [[sees(i, j, causal, window, chunk) for j in range(11)] for i in range(3, 11)]
    assert got.tolist() == expected


@pytest.mark.parametrize(("causal", "window", "chunk"), LOCAL, ids=LOCAL_IDS)
def test_key_span_holds_every_key_a_block_sees(causal, window, chunk):
    for first in range(11):
        for last in range(first, 11):
            lo, hi = key_span(first, last, 11, causal=causal, window=window, chunk=chunk)
            seen = [j for i in range(first, last + 1) for j in range(11)
                    if sees(i, j, causal, window, chunk)]  # fmt: skip
            assert lo <= min(seen) and max(seen) < hi


@pytest.mark.parametrize(("causal", "window", "chunk"), LOCAL, ids=LOCAL_IDS)
def test_visible_keys_counts_the_keys_each_query_sees(causal, window, chunk):
    q_len, k_len = (4, 11) if causal else (11, 11)
    expected = [sum(sees(i + k_len - q_len, j, causal, window, chunk) for j in range(k_len))
                for i in range(q_len)]  # fmt: skip
    counts = visible_keys(q_len, k_len, causal=causal, window=window, chunk=chunk)
    assert counts.tolist() == expected


# -- every kernel path against the reference ---------------------------------------------------
@pytest.mark.parametrize(("causal", "window", "chunk"), LOCAL, ids=LOCAL_IDS)
@pytest.mark.parametrize("budget", [1 << 24, 64], ids=["one_block", "key_slices"])
def test_sdpa_path_without_bias_masks_by_index(causal, window, chunk, budget):
    pe = NoPE(d_model=N_HEADS * HEAD_DIM, n_heads=N_HEADS, causal=causal, window=window,
              chunk=chunk)  # fmt: skip
    for q_len, k_len in lengths(causal):
        out, expected = run(pe, causal, q_len, k_len, max_bias_elements=budget)
        torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(("causal", "window"), [(True, 3), (True, 1), (False, 3)])
@pytest.mark.parametrize("dense", [True, False], ids=["dense_mask", "strided_table"])
def test_relative_path_puts_the_window_in_its_table(causal, window, dense):
    pe = ALiBi(d_model=N_HEADS * HEAD_DIM, n_heads=N_HEADS, causal=causal, window=window)
    for q_len, k_len in lengths(causal):
        q, k, v = qkv(q_len, k_len)
        out = relative_bias_attention(
            q, k, v, causal=causal, pe=pe, position_offset=torch.tensor([k_len - q_len]),
            scale=HEAD_DIM**-0.5, query_block=3, dense_mask_elements=1 << 20 if dense else 0,
        )  # fmt: skip
        bias = pe.attention_bias(torch.arange(k_len - q_len, k_len), torch.arange(k_len))
        expected = reference(q, k, v, causal, window, None, bias)
        torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(("causal", "window", "chunk"), LOCAL, ids=LOCAL_IDS)
def test_blocked_bias_path_masks_and_slices_keys(causal, window, chunk):
    torch.manual_seed(0)
    pe = FIRE(d_model=N_HEADS * HEAD_DIM, n_heads=N_HEADS, causal=causal, window=window,
              chunk=chunk)  # fmt: skip
    for q_len, k_len in lengths(causal):
        out, expected = run(pe, causal, q_len, k_len, max_bias_elements=64)
        torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-5)


def test_a_bias_encoding_with_chunks_takes_the_blocked_path():
    # a chunk is not a function of q − k: ALiBi's per-offset table cannot hold it
    pe = ALiBi(d_model=N_HEADS * HEAD_DIM, n_heads=N_HEADS, causal=True, chunk=4)
    out, expected = run(pe, True, 11, 11)
    assert pe.bias_is_relative is False
    torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(("window", "chunk"), [(3, None), (None, 4)])
def test_contextual_path_slicing_keys_equals_masking_them(window, chunk):
    # CoPE's gates of hidden keys are 0 (−inf logits): a block given only its visible keys
    # computes what one block over every key computes
    torch.manual_seed(0)
    pe = CoPE(d_model=N_HEADS * HEAD_DIM, n_heads=N_HEADS, window=window, chunk=chunk)
    with torch.no_grad():
        pe.embeddings.normal_()
    q, k, v = qkv(11, 11)
    positions = torch.arange(11)
    common = dict(causal=True, pe=pe, q_positions=positions, k_positions=positions, scale=0.3)
    sliced = blocked_bias_attention(q, k, v, query_block=2, **common)
    whole = blocked_bias_attention(q, k, v, query_block=11, **common)
    torch.testing.assert_close(sliced, whole, rtol=1e-5, atol=1e-6)


# -- FlexAttention ------------------------------------------------------------------------------
@pytest.mark.parametrize(("causal", "window", "chunk"), LOCAL, ids=LOCAL_IDS)
@pytest.mark.parametrize("length", [5, 200, 384])
def test_flex_block_mask_is_the_mask_of_the_definition(causal, window, chunk, length):
    window, chunk = window and window * 50, chunk and chunk * 40  # reach across blocks
    built = flex.block_mask(length, "cpu", causal=causal, window=window, chunk=chunk)

    def reference_mask(batch, head, i, j):
        seen = (j <= i) if causal else (j >= 0)
        if window is not None:
            seen = seen & ((i - j).abs() < window)
        if chunk is not None:
            seen = seen & (i // chunk == j // chunk)
        return seen

    expected = create_block_mask(reference_mask, None, None, length, length, "cpu")
    assert torch.equal(built.to_dense(), expected.to_dense())


def test_flex_path_with_a_window_matches_the_reference(monkeypatch):
    from torch.nn.attention.flex_attention import flex_attention

    monkeypatch.setattr(flex, "_compiled_flex", flex_attention)  # eager: no compile per test
    pe = ALiBi(d_model=N_HEADS * HEAD_DIM, n_heads=N_HEADS, causal=True, window=3)
    with torch.no_grad():
        out, expected = run(pe, True, 11, 11, kernel="flex")
    torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-5)


# -- models ------------------------------------------------------------------------------------
def test_a_window_longer_than_the_sequence_changes_nothing():
    q, k, v = qkv(11, 11)
    plain = NoPE(d_model=N_HEADS * HEAD_DIM, n_heads=N_HEADS)
    wide = NoPE(d_model=N_HEADS * HEAD_DIM, n_heads=N_HEADS, window=11)
    torch.testing.assert_close(attend(q, k, v, causal=True, pe=wide),
                               attend(q, k, v, causal=True, pe=plain), rtol=1e-6, atol=1e-6)  # fmt: skip


LOCAL_MODELS = [
    ("rnope_swa", ("pe.layers.0.window=3", "pe.layers.1.window=3", "pe.layers.2.window=3")),
    (
        "irope",
        (
            "pe.layers.0.chunk=4",
            "pe.layers.1.chunk=4",
            "pe.layers.2.chunk=4",
            "pe.layers.3.floor_scale=4",
        ),
    ),  # fmt: skip
    ("alibi", ("pe.window=3",)),
    ("rope", ("pe.chunk=4",)),
    ("cope", ("pe.window=3",)),
]


@pytest.mark.parametrize(("pe", "overrides"), LOCAL_MODELS, ids=[m[0] for m in LOCAL_MODELS])
def test_cached_decoding_equals_the_full_pass_with_local_layers(pe, overrides):
    model = tiny_model(pe, "decoder", "model.n_layers=4", *overrides)
    tokens = torch.randint(0, model.embedding.num_embeddings, (2, 17),
                           generator=torch.Generator().manual_seed(1))  # fmt: skip
    with torch.no_grad():
        full = model(tokens)
        cache = model.new_cache(tokens.shape[1])
        pieces = [model.decode(tokens[:, :6], cache)]
        pieces += [model.decode(tokens[:, t : t + 1], cache) for t in range(6, 17)]
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, rtol=1e-4, atol=1e-5)


def test_the_window_hides_what_lies_beyond_it():
    # a causal windowed NoPE model: a token's logits ignore tokens further back than the
    # window in every layer (2 layers of window 3: at most 4 tokens back)
    model = tiny_model("nope", "decoder", "pe.window=3", "model.n_layers=2")
    generator = torch.Generator().manual_seed(2)
    tokens = torch.randint(0, model.embedding.num_embeddings, (1, 12), generator=generator)
    changed = tokens.clone()
    changed[0, :4] = (changed[0, :4] + 1) % model.embedding.num_embeddings
    with torch.no_grad():
        torch.testing.assert_close(model(changed)[:, 9:], model(tokens)[:, 9:])
        assert not torch.allclose(model(changed)[:, 4:7], model(tokens)[:, 4:7])
