"""Cached (incremental) decoding equals full recomputation: feeding a sequence a few tokens at a
time through ``decode`` gives the logits of one full forward pass over the whole sequence, for
every encoding yaml, both causal model kinds, with randomized positions on and off, and for the
options whose factors depend on the sequence length (log-length temperature, RoPE scalings).

Models are tiny (d_model 16, 2 layers) with weights redrawn at unit gain, and parameters that
start at zero (CoPE's embeddings) redrawn too, so every hook acts on the logits (the greedy
protocol that uses the cache: tests/evaluation/test_tasks.py).
"""

from __future__ import annotations

import pytest
import torch
from omegaconf import OmegaConf
from torch import Tensor, nn

from helpers import CONFIG_DIR, pe_supports, tiny_model, yaml_choices
from lengen.model import DecoderOnly, EncoderOnly
from lengen.pe import NoPE

pytestmark = pytest.mark.usefixtures("single_thread")

#: train on lengths ≤ 4, decode at 10: past training, so length-dependent factors act
TRAIN_LEN, LENGTH = 4, 10
RANDOMIZED = ("pe.randomized=true", "pe.max_position=64")


def random_tokens(batch: int, length: int, vocab: int, seed: int) -> Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (batch, length), generator=generator)


def decode_in_pieces(model: nn.Module, tokens: Tensor, cache, prompt: int) -> Tensor:
    """Logits (B, N, V) from feeding ``prompt`` tokens, then 1, then 2 at a time."""
    pieces, start, width = [], 0, prompt
    while start < tokens.shape[1]:
        pieces.append(model.decode(tokens[:, start : start + width], cache))
        start += width
        width = 1 if width != 1 else 2
    return torch.cat(pieces, dim=1)


def assert_cached_equals_full(model: nn.Module) -> None:
    vocab = model.embedding.num_embeddings
    with torch.no_grad():
        if model.kind == "decoder":
            tokens = random_tokens(3, 2 * LENGTH + 1, vocab, seed=1)  # BOS x SEP y[:-1]
            full = model(tokens)
            cached = decode_in_pieces(model, tokens, model.new_cache(tokens.shape[1]), LENGTH + 2)
        else:
            src = random_tokens(3, LENGTH, vocab, seed=2)
            tgt = random_tokens(3, LENGTH, vocab, seed=3)
            full = model(src, tgt)
            cached = decode_in_pieces(model, tgt, model.new_cache(LENGTH, src), 1)
    torch.testing.assert_close(cached, full, rtol=1e-4, atol=1e-5)


# -- cached == full recomputation ------------------------------------------------------------
def takes_randomized(pe: str) -> bool:
    """Whether the encoding takes Ruoss et al.'s draw: those that draw their own training
    positions (Random Float Sampling, Randomized YaRN) refuse pe.randomized=true in one line."""
    from lengen.pe.config import check_encoding

    # the yaml read directly (as helpers.pe_factory does), not the train config composed: this
    # runs at collection, once per encoding, in every xdist worker (~0.25 s a compose)
    node = OmegaConf.merge(
        OmegaConf.load(CONFIG_DIR / "pe" / f"{pe}.yaml"), {"randomized": True, "max_position": 64}
    )
    try:
        check_encoding(node, d_model=32, n_heads=4, train_positions=8, max_positions=64)
    except ValueError as error:
        return not str(error).startswith("pe.randomized=true draws")
    return True


CASES = [
    (pe, model, randomized)
    for pe in yaml_choices("pe")
    for model in ("decoder", "encoder_decoder")
    for randomized in (False, True)
    if pe_supports(pe, model) and (not randomized or takes_randomized(pe))
]


@pytest.mark.parametrize(("pe", "model", "randomized"), CASES)
def test_cached_decoding_equals_full_forward(pe, model, randomized):
    assert_cached_equals_full(tiny_model(pe, model, *(RANDOMIZED if randomized else ())))


#: options whose factors depend on the whole sequence's length (xPos: a strong decay, so a
#: centre that moved between steps would show)
LENGTH_DEPENDENT = {
    "rope-log_length_scale": ("rope", "pe.log_length_scale=true"),
    "cope-log_length_scale": ("cope", "pe.log_length_scale=true"),
    "rope-dynamic_ntk": ("rope", "pe.scaling=dynamic_ntk"),
    "rope-yarn": ("rope", "pe.scaling=yarn", "pe.scaling_factor=4.0"),
    "xpos-scale_base_8": ("xpos", "pe.scale_base=8.0"),
}
LENGTH_DEPENDENT_CASES = [
    pytest.param(options, model, id=f"{name}-{model}")
    for name, options in LENGTH_DEPENDENT.items()
    for model in ("decoder", "encoder_decoder")
    if pe_supports(options[0], model)
]


@pytest.mark.parametrize(("options", "model"), LENGTH_DEPENDENT_CASES)
def test_cached_decoding_equals_full_forward_with_length_dependent_factors(options, model):
    pe, *overrides = options
    assert_cached_equals_full(tiny_model(pe, model, *overrides))


def test_encoder_refuses_a_cache():
    model = EncoderOnly(pe=NoPE, vocab_size=8, d_model=16, n_layers=1, n_heads=2, d_ff=32)
    with pytest.raises(ValueError, match="causal"):
        model.new_cache(8)


def test_cache_refuses_more_tokens_than_its_length():
    model = DecoderOnly(pe=NoPE, vocab_size=8, d_model=16, n_layers=1, n_heads=2, d_ff=32)
    cache = model.new_cache(4)
    model.decode(torch.zeros(1, 4, dtype=torch.long), cache)
    with pytest.raises(ValueError, match="sized for 4"):
        model.decode(torch.zeros(1, 1, dtype=torch.long), cache)
