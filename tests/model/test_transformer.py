"""Model invariants for every positional encoding and every model kind (the attention kernels
themselves: test_kernels.py).

Tiny models (d_model 32, 2 layers, 4 heads, d_ff 64), dropout 0, eval mode. For the invariance
checks the weights are redrawn at unit gain (std fan_in^-1/2) so attention is far from uniform
and a leak of information shows up at O(0.1), not at the O(1e-4) of the GPT-2 initialisation.
"""

from __future__ import annotations

import functools
import math

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from helpers import pe_factory
from lengen.data.task_data import TaskData
from lengen.data.tasks import Copy
from lengen.model import DecoderOnly, EncoderDecoder, EncoderOnly
from lengen.model.attention import MultiHeadAttention
from lengen.pe import ALiBi, Learned, NoPE, RoPE, Sinusoidal

VOCAB = 16
SIZES = dict(d_model=32, n_layers=2, n_heads=4, d_ff=64, dropout=0.0)

PES = {
    "nope": NoPE,
    "sinusoidal": Sinusoidal,
    "learned": functools.partial(Learned, train_positions=16, max_positions=128),
    "alibi": ALiBi,
    "rope": RoPE,
}
MODELS = {"decoder": DecoderOnly, "encoder": EncoderOnly, "encoder_decoder": EncoderDecoder}


pytestmark = pytest.mark.usefixtures("single_thread")


#: a logit difference above this is a real change (fp32 noise here is < 1e-6)
CHANGED = 1e-3


def build(model: str, pe: str, *, sharpen: bool = True, seed: int = 0, **kwargs) -> nn.Module:
    torch.manual_seed(seed)
    network = MODELS[model](pe=PES[pe], vocab_size=VOCAB, **{**SIZES, **kwargs}).eval()
    if sharpen:
        generator = torch.Generator().manual_seed(seed + 1)
        with torch.no_grad():
            for module in network.modules():
                if isinstance(module, nn.Linear):
                    std = module.in_features**-0.5
                    module.weight.copy_(torch.randn(module.weight.shape, generator=generator) * std)
    return network


def tokens(batch: int, length: int, seed: int = 0) -> Tensor:
    return torch.randint(0, VOCAB, (batch, length), generator=torch.Generator().manual_seed(seed))


def changed(sequence: Tensor, index: int) -> Tensor:
    """A copy of sequence (B, T) with every row's token at index replaced by another token."""
    out = sequence.clone()
    out[:, index] = (out[:, index] + 1 + torch.arange(len(out)) % (VOCAB - 1)) % VOCAB
    assert (out[:, index] != sequence[:, index]).all()
    return out


def max_difference(a: Tensor, b: Tensor) -> float:
    return (a - b).abs().max().item()


# -- causality and bidirectionality ----------------------------------------------------------
@pytest.mark.parametrize("pe", list(PES))
@pytest.mark.parametrize("index", [0, 4, 9])
@torch.no_grad()
def test_decoder_future_token_never_changes_past(pe, index):
    model = build("decoder", pe)
    sequence = tokens(3, 12)
    before, after = model(sequence), model(changed(sequence, index))
    torch.testing.assert_close(after[:, :index], before[:, :index])
    assert max_difference(after[:, index:], before[:, index:]) > CHANGED
    # the change reaches positions after the changed token, not only the token itself
    assert max_difference(after[:, index + 1 :], before[:, index + 1 :]) > CHANGED


@pytest.mark.parametrize("pe", list(PES))
@torch.no_grad()
def test_encoder_last_token_changes_first_position(pe):
    model = build("encoder", pe)
    sequence = tokens(3, 12)
    before, after = model(sequence), model(changed(sequence, 11))
    assert max_difference(after[:, 0], before[:, 0]) > CHANGED


@pytest.mark.parametrize("pe", list(PES))
@pytest.mark.parametrize("index", [0, 3, 6])
@torch.no_grad()
def test_encoder_decoder_target_is_causal(pe, index):
    model = build("encoder_decoder", pe)
    source, target = tokens(3, 9, seed=1), tokens(3, 8, seed=2)
    before, after = model(source, target), model(source, changed(target, index))
    torch.testing.assert_close(after[:, :index], before[:, :index])
    assert max_difference(after[:, index + 1 :], before[:, index + 1 :]) > CHANGED


@pytest.mark.parametrize("pe", list(PES))
@torch.no_grad()
def test_encoder_decoder_every_source_token_matters(pe):
    model = build("encoder_decoder", pe)
    source, target = tokens(3, 9, seed=1), tokens(3, 8, seed=2)
    before = model(source, target)
    for index in range(source.shape[1]):
        after = model(changed(source, index), target)
        # every decoder position, the first included, reads the whole source
        assert max_difference(after[:, 0], before[:, 0]) > CHANGED, index


@pytest.mark.parametrize("pe", list(PES))
@torch.no_grad()
def test_decoder_reads_encoder_output_at_every_source_position(pe):
    # the encoder mixes all tokens, so perturb its output directly, one position at a time
    model = build("encoder_decoder", pe)
    source, target = tokens(3, 9, seed=1), tokens(3, 8, seed=2)
    before = model(source, target)
    for index in range(source.shape[1]):

        def perturb(module, inputs, output, index=index):
            output = output.clone()
            output[:, index] += 1.0
            return output

        handle = model.encoder.register_forward_hook(perturb)
        try:
            after = model(source, target)
        finally:
            handle.remove()
        assert max_difference(after[:, 0], before[:, 0]) > CHANGED, index


def cross_attention(seed: int = 0) -> MultiHeadAttention:
    torch.manual_seed(seed)
    module = MultiHeadAttention(32, 4, dropout=0.0, causal=False, cross=True).eval()
    with torch.no_grad():
        for linear in (module.query, module.key_value, module.out):
            linear.weight.normal_(std=linear.in_features**-0.5)
    return module


@pytest.mark.parametrize("pe", list(PES))
@torch.no_grad()
def test_cross_attention_is_position_free(pe):
    # permuting the memory leaves cross-attention unchanged, whatever the PE
    module = cross_attention()
    encoding = PES[pe](d_model=32, n_heads=4, causal=True)
    generator = torch.Generator().manual_seed(4)
    x, memory = (
        torch.randn(2, 5, 32, generator=generator),
        torch.randn(2, 9, 32, generator=generator),
    )
    permutation = torch.randperm(9, generator=generator)
    positions = torch.arange(5) + 3
    expected = module(x, encoding, positions, memory)
    torch.testing.assert_close(module(x, encoding, positions, memory[:, permutation]), expected)


@torch.no_grad()
def test_cross_attention_every_query_sees_all_memory():
    module = cross_attention()
    generator = torch.Generator().manual_seed(5)
    x, memory = (
        torch.randn(2, 5, 32, generator=generator),
        torch.randn(2, 9, 32, generator=generator),
    )
    pe = NoPE(d_model=32, n_heads=4)
    before = module(x, pe, torch.arange(5), memory)
    for index in range(9):
        perturbed = memory.clone()
        perturbed[:, index] += 1.0
        after = module(x, pe, torch.arange(5), perturbed)
        difference = (after - before).abs().amax(dim=(0, 2))  # (T,)
        assert (difference > CHANGED).all(), index


def test_model_sets_its_kernel_on_every_self_attention_layer():
    t5 = pe_factory("t5", num_buckets=8, max_distance=6)  # a relative bias: flex can run it
    model = EncoderDecoder(pe=t5, vocab_size=16, d_model=32, n_layers=2, n_heads=4, d_ff=64,
                           attention="flex")  # fmt: skip
    kernels = {m.kernel for m in model.modules() if isinstance(m, MultiHeadAttention)}
    assert kernels == {"flex"}


# -- length extrapolation runs ---------------------------------------------------------------
@pytest.mark.parametrize("pe", list(PES))
@pytest.mark.parametrize("model", list(MODELS))
@torch.no_grad()
def test_runs_at_four_times_training_length(model, pe):
    data = TaskData(task=Copy(n_symbols=8), len=8, min_len=8, batch_size=4, model_kind=model)
    factory = PES[pe]
    if pe == "learned":
        factory = functools.partial(
            Learned, train_positions=data.max_position(8), max_positions=data.max_position(32)
        )
    torch.manual_seed(0)
    network = MODELS[model](pe=factory, vocab_size=data.vocab_size, **SIZES).eval()
    for batch in (data.train_batch(0), next(data.eval_batches(32, samples=4, batch_size=4))):
        logits = network(**batch["inputs"])
        assert logits.shape == (*batch["targets"].shape, data.vocab_size)
        assert torch.isfinite(logits).all()
    assert max(t.shape[1] for t in batch["inputs"].values()) >= 32


# -- positions -------------------------------------------------------------------------------
@pytest.mark.parametrize("pe", list(PES))
@pytest.mark.parametrize("model", list(MODELS))
@torch.no_grad()
def test_explicit_positions_equal_default(model, pe):
    network = build(model, pe)
    if model == "encoder_decoder":
        source, target = tokens(2, 9, seed=1), tokens(2, 7, seed=2)
        default = network(source, target)
        explicit = network(
            source, target, src_positions=torch.arange(9), tgt_positions=torch.arange(7)
        )
    else:
        sequence = tokens(2, 10)
        default, explicit = network(sequence), network(sequence, positions=torch.arange(10))
    torch.testing.assert_close(explicit, default, rtol=0, atol=0)


@pytest.mark.parametrize("pe", list(PES))
@pytest.mark.parametrize("model", ["decoder", "encoder"])
@torch.no_grad()
def test_shifted_positions_change_only_absolute_encodings(model, pe):
    # relative encodings (and NoPE) see only offsets; absolute ones see the positions
    network = build(model, pe)
    sequence = tokens(2, 10)
    default = network(sequence)
    shifted = network(sequence, positions=torch.arange(10) + 50)
    if pe in ("sinusoidal", "learned"):
        assert max_difference(shifted, default) > CHANGED
    else:
        torch.testing.assert_close(shifted, default, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("pe", ["sinusoidal", "learned", "alibi", "rope"])
@torch.no_grad()
def test_positional_encoding_breaks_permutation_symmetry(pe):
    # a bidirectional encoder with positions tells a permuted input from the original
    network = build("encoder", pe)
    sequence = tokens(2, 10)
    permutation = torch.randperm(10, generator=torch.Generator().manual_seed(3))
    permuted_then_run = network(sequence[:, permutation])
    run_then_permuted = network(sequence)[:, permutation]
    assert max_difference(permuted_then_run, run_then_permuted) > CHANGED


@torch.no_grad()
def test_nope_encoder_is_permutation_equivariant():
    network = build("encoder", "nope")
    sequence = tokens(2, 10)
    permutation = torch.randperm(10, generator=torch.Generator().manual_seed(3))
    torch.testing.assert_close(network(sequence[:, permutation]), network(sequence)[:, permutation])


@pytest.mark.parametrize(
    ("model", "pe", "expected"),
    [
        ("encoder", "nope", True),
        ("decoder", "nope", False),
        ("encoder", "rope", False),
        ("encoder", "alibi", False),
        ("encoder", "sinusoidal", False),
        ("encoder_decoder", "nope", True),
        ("encoder_decoder", "rope", False),
    ],
)
def test_position_blind(model, pe, expected):
    assert build(model, pe, sharpen=False).position_blind is expected


# -- embeddings and initial loss -------------------------------------------------------------
def random_batch(model: str) -> tuple[dict, Tensor]:
    if model == "encoder_decoder":
        inputs = {"src": tokens(8, 12, seed=1), "tgt": tokens(8, 10, seed=2)}
        return inputs, tokens(8, 10, seed=3)
    return {"tokens": tokens(8, 12, seed=1)}, tokens(8, 12, seed=3)


@pytest.mark.parametrize("pe", list(PES))
@pytest.mark.parametrize("model", list(MODELS))
@torch.no_grad()
def test_tied_embeddings_share_weight_and_start_near_uniform_loss(model, pe):
    network = build(model, pe, sharpen=False, tie_embeddings=True)
    assert network.head.weight is network.embedding.weight
    inputs, targets = random_batch(model)
    loss = F.cross_entropy(network(**inputs).flatten(0, 1), targets.flatten()).item()
    assert abs(loss - math.log(VOCAB)) < 0.15 * math.log(VOCAB)


@pytest.mark.parametrize("model", list(MODELS))
@torch.no_grad()
def test_untied_embeddings_start_near_uniform_loss(model):
    network = build(model, "rope", sharpen=False)
    assert network.head.weight is not network.embedding.weight
    inputs, targets = random_batch(model)
    loss = F.cross_entropy(network(**inputs).flatten(0, 1), targets.flatten()).item()
    assert abs(loss - math.log(VOCAB)) < 0.15 * math.log(VOCAB)


@pytest.mark.parametrize("model", list(MODELS))
def test_token_embeddings_start_at_unit_scale(model):
    # √d_model · N(0, 1/d_model): tokens enter at the magnitude of the added position signals
    network = build(model, "learned", sharpen=False)
    embedded = network.embed(torch.arange(VOCAB)[None])  # (1, V, D)
    assert 0.7 < embedded.std().item() < 1.3
    learned = next(m for m in network.modules() if isinstance(m, Learned))
    rows = learned.embed(torch.zeros(1, 16, 32), torch.arange(16))
    assert 0.7 < rows.std().item() < 1.3


# -- validation ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("override", "key"),
    [
        ({"d_model": 30}, "model.d_model"),
        ({"dropout": 1.5}, "model.dropout"),
        ({"dropout": -0.1}, "model.dropout"),
        ({"n_layers": 0}, "model.n_layers"),
        ({"n_heads": 0}, "model.n_heads"),
        ({"d_ff": 0}, "model.d_ff"),
    ],
)
@pytest.mark.parametrize("model", list(MODELS))
def test_bad_sizes_raise_naming_the_key(model, override, key):
    with pytest.raises(ValueError, match=key.replace(".", r"\.")):
        MODELS[model](pe=NoPE, vocab_size=VOCAB, **{**SIZES, **override})
