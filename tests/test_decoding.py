"""Cached (incremental) decoding and the greedy protocol.

* Cached decoding equals full recomputation: feeding a sequence a few tokens at a time through
  ``decode`` gives the logits of one full forward pass over the whole sequence, for every
  encoding yaml, both causal model kinds, with randomized positions on and off, and for the
  options whose factors depend on the sequence length (log-length temperature, RoPE scalings).
* Greedy evaluation equals a slow reference (no cache, the full pass recomputed for every
  generated token) token for token, and its rows carry the protocol and the chance level.
* An oracle that solves the task scores exact match 1 under greedy decoding (the prompt and the
  answer are aligned right), and ``eval.decoding=greedy`` runs end to end for every model kind.

Models are tiny (d_model 16, 2 layers) with weights redrawn at unit gain, and parameters that
start at zero (CoPE's embeddings) redrawn too, so every hook acts on the logits.
"""

from __future__ import annotations

import json

import pytest
import torch
from torch import Tensor, nn

from helpers import compose_train, pe_supports, yaml_choices
from lengen.data.datamodule import BOS, PAD, SEP, TaskData
from lengen.data.tasks import Copy
from lengen.evaluate import evaluate, greedy_generate
from lengen.model import DecoderOnly, EncoderOnly
from lengen.pe import NoPE
from lengen.train import build, run

pytestmark = pytest.mark.usefixtures("single_thread")

TINY = ("model.d_model=16", "model.n_layers=2", "model.n_heads=2", "model.d_ff=32")
#: train on lengths ≤ 4, decode at 10: past training, so length-dependent factors act
TRAIN_LEN, LENGTH = 4, 10
RANDOMIZED = ("pe.randomized=true", "pe.max_position=64")


def sharpen(model: nn.Module, seed: int = 0) -> nn.Module:
    """Unit-gain linear weights and random values for parameters that start at zero."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.Linear):
                std = module.in_features**-0.5
                module.weight.copy_(torch.randn(module.weight.shape, generator=generator) * std)
        for parameter in model.parameters():
            if not parameter.any():
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.5)
    return model.eval()


def tiny_model(pe: str, model: str, *overrides: str) -> nn.Module:
    cfg = compose_train(
        f"pe={pe}",
        f"model={model}",
        f"data.len={TRAIN_LEN}",
        f"eval.lengths=[{LENGTH}]",
        *TINY,
        *overrides,
    )
    return sharpen(build(cfg)[1])


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
CASES = [
    (pe, model, randomized)
    for pe in yaml_choices("pe")
    for model in ("decoder", "encoder_decoder")
    for randomized in (False, True)
    if pe_supports(pe, model)
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


# -- greedy evaluation against a slow reference ------------------------------------------------
def reference_greedy(model: nn.Module, batch: dict, length: int) -> Tensor:
    """No cache: the full forward pass over the whole (PAD-filled) sequence for every token."""
    answer_length = batch["targets"].shape[1] - (
        length + 1 if model.kind != "encoder_decoder" else 0
    )
    if model.kind == "encoder":
        return model(**batch["inputs"])[:, length + 1 :].argmax(-1)
    if model.kind == "decoder":
        sequence = batch["inputs"]["tokens"].clone()  # BOS x SEP y[:-1]
        first = length + 1  # SEP predicts y1
        sequence[:, first + 1 :] = PAD
        forward = model
    else:
        src = batch["inputs"]["src"]
        sequence = torch.full_like(batch["inputs"]["tgt"], PAD)
        sequence[:, 0] = BOS
        first = 0

        def forward(tgt):
            return model(src, tgt)

    generated = []
    for index in range(answer_length):
        token = forward(sequence)[:, first + index].argmax(-1)
        generated.append(token)
        if first + index + 1 < sequence.shape[1]:
            sequence[:, first + index + 1] = token
    return torch.stack(generated, dim=1)


def copy_data(kind: str, n_symbols: int = 6) -> TaskData:
    return TaskData(task=Copy(n_symbols=n_symbols), len=TRAIN_LEN, model_kind=kind, batch_size=4)


@pytest.mark.parametrize("kind", ["decoder", "encoder", "encoder_decoder"])
@pytest.mark.parametrize("pe", ["rope", "alibi"])
def test_greedy_generation_equals_slow_reference(kind, pe):
    model = tiny_model(pe, kind)
    batch = next(copy_data(kind).eval_batches(LENGTH, 6, 6))
    with torch.no_grad():
        expected = reference_greedy(model, batch, LENGTH)
        got = greedy_generate(model, batch["inputs"], batch["targets"])
    assert got.shape == (6, LENGTH)
    torch.testing.assert_close(got, expected, rtol=0, atol=0)


@pytest.mark.parametrize("kind", ["decoder", "encoder_decoder"])
def test_greedy_rows_score_the_reference_generation(kind):
    model, data = tiny_model("rope", kind), copy_data(kind)
    (row,) = evaluate(model, data, [LENGTH], samples=8, protocol="greedy", progress=False)
    batch = next(data.eval_batches(LENGTH, 8, 8))
    answers = batch["targets"][:, -LENGTH:]
    with torch.no_grad():
        correct = reference_greedy(model, batch, LENGTH) == answers
    assert row["accuracy"] == pytest.approx(correct.float().mean().item())
    assert row["exact_match"] == pytest.approx(correct.all(-1).float().mean().item())


def test_greedy_rows_record_protocol_and_chance():
    model, data = tiny_model("rope", "decoder"), copy_data("decoder", n_symbols=5)
    rows = evaluate(model, data, [LENGTH, 3], samples=4, protocol="greedy", progress=False)
    assert [row["length"] for row in rows] == [3, LENGTH]
    assert {row["protocol"] for row in rows} == {"greedy"}
    assert [row["chance_accuracy"] for row in rows] == [pytest.approx(1 / 5)] * 2


def test_greedy_loss_is_the_teacher_forced_loss():
    model, data = tiny_model("rope", "decoder"), copy_data("decoder")
    rows = {
        protocol: evaluate(model, data, [LENGTH], samples=4, protocol=protocol, progress=False)[0]
        for protocol in ("teacher_forced", "greedy")
    }
    assert rows["greedy"]["loss"] == pytest.approx(rows["teacher_forced"]["loss"])


def test_encoder_greedy_rows_equal_teacher_forced_ones():
    model, data = tiny_model("rope", "encoder"), copy_data("encoder")
    rows = [
        evaluate(model, data, [LENGTH], samples=4, protocol=protocol, progress=False)[0]
        for protocol in ("teacher_forced", "greedy")
    ]
    for key in ("loss", "accuracy", "exact_match"):
        assert rows[0][key] == pytest.approx(rows[1][key])


# -- an oracle checks that prompt and answer are aligned ---------------------------------------
class CopyOracle(nn.Module):
    """Solves copy from the prompt alone: logits of the answer token at every answer position.

    ``decode`` keeps the fed tokens (its cache is the list of them) and reruns ``forward``.
    """

    def __init__(self, kind: str, vocab: int) -> None:
        super().__init__()
        self.kind, self.vocab = kind, vocab
        self.anchor = nn.Parameter(torch.zeros(()))  # evaluate reads the device from it

    def forward(self, tokens: Tensor | None = None, src: Tensor | None = None, tgt=None):
        if self.kind == "encoder_decoder":  # target index j predicts y_(j+1) = x_(j+1)
            return nn.functional.one_hot(src[:, : tgt.shape[1]], self.vocab).float()
        # decoder: SEP at index n+1 predicts x1 (index 1), index n+1+j predicts x_(j+1)
        sep = int((tokens[0] == SEP).nonzero()[0])
        source = torch.zeros_like(tokens)
        answer_positions = torch.arange(sep, tokens.shape[1])
        source[:, answer_positions] = tokens[:, answer_positions - sep + 1]
        return nn.functional.one_hot(source, self.vocab).float()

    def new_cache(self, total_length: int, src: Tensor | None = None) -> dict:
        return {"fed": [], "src": src}

    def decode(self, tokens: Tensor, cache: dict) -> Tensor:
        cache["fed"].append(tokens)
        fed = torch.cat(cache["fed"], dim=1)
        logits = self(fed) if cache["src"] is None else self(src=cache["src"], tgt=fed)
        return logits[:, -tokens.shape[1] :]


@pytest.mark.parametrize("kind", ["decoder", "encoder_decoder"])
def test_greedy_oracle_scores_exact_match_one(kind):
    data = copy_data(kind)
    (row,) = evaluate(
        CopyOracle(kind, data.vocab_size),
        data,
        [LENGTH],
        samples=8,
        protocol="greedy",
        progress=False,
    )
    assert row["exact_match"] == 1.0 and row["accuracy"] == 1.0


# -- end to end --------------------------------------------------------------------------------
@pytest.mark.parametrize("model", ["decoder", "encoder", "encoder_decoder"])
def test_run_with_greedy_decoding_writes_greedy_rows(model, tmp_path):
    cfg = compose_train(
        "eval.decoding=greedy", f"model={model}", "data.len=4", "eval.lengths=[4,8]", *TINY
    )
    results = run(cfg, run_dir=tmp_path)
    written = json.loads((tmp_path / "results.json").read_text())
    assert [row["protocol"] for row in written["eval"]] == ["greedy", "greedy"]
    assert written["eval"] == results["eval"]
    assert all(0.0 <= row["exact_match"] <= row["accuracy"] + 1e-9 for row in written["eval"])
