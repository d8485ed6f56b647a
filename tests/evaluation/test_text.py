"""Text evaluation (``lengen.evaluation.text``): the windows of the two protocols, what they
score, perplexity, loss by position and the cost of a row."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from helpers import text_data
from lengen.evaluation import evaluate as evaluate_data
from lengen.evaluation.text import window_plan


def scored_targets(n_targets, length, stride):
    starts, first = window_plan(n_targets, length, stride)
    positions = np.arange(length)
    scored = positions[None, :] >= first[:, None]  # (W, L)
    return np.sort((starts[:, None] + 1 + positions[None, :])[scored]), starts, first


@pytest.mark.parametrize(
    ("n_targets", "length", "stride", "windows"),
    [(12, 4, 4, 3), (10, 4, 4, 3), (10, 4, 1, 7), (10, 4, 3, 3), (4, 4, 1, 1)],
)
def test_windows_score_every_target_exactly_once(n_targets, length, stride, windows):
    targets, starts, _ = scored_targets(n_targets, length, stride)
    np.testing.assert_array_equal(targets, np.arange(1, n_targets + 1))
    assert len(starts) == windows
    assert starts.max() + length <= n_targets  # never reads past the stretch


def test_sliding_windows_give_every_scored_token_enough_context():
    starts, first = window_plan(50, 8, 3)
    assert (first[1:] >= 8 - 3).all() and first[0] == 0


class Uniform(torch.nn.Module):
    """Equal logits over the vocabulary: every token costs exactly ln V nats."""

    def __init__(self, vocab_size: int):
        super().__init__()
        self.vocab_size = vocab_size
        self.anchor = torch.nn.Parameter(torch.zeros(1))

    def forward(self, tokens):
        return self.anchor.expand(*tokens.shape, self.vocab_size) * 0


def evaluate(data, model, lengths, tmp_path, **settings):
    eval_settings = {"protocol": "nonoverlap", "stride": None, "max_tokens": None}
    eval_settings.update(settings, max_tokens_per_batch=256)
    return evaluate_data(
        data,
        model,
        lengths,
        settings=OmegaConf.create(eval_settings),
        output_dir=tmp_path,
        progress=False,
    )


def test_protocols_score_the_counted_tokens(tmp_path, corpus, single_thread):
    train, valid = corpus
    data = text_data(
        tmp_path, files={"train": str(train), "validation": str(valid)}, tokenizer="byte"
    )
    model = Uniform(data.vocab_size)
    rows = evaluate(data, model, [8, 16], tmp_path, max_tokens=100)
    assert [(r["n_examples"], r["tokens_scored"]) for r in rows] == [(13, 100), (7, 100)]
    sliding = evaluate(data, model, [16], tmp_path, protocol="sliding", stride=4, max_tokens=100)
    # windows at 0, 4, …, 84 (22 of them): 16 + 21 × 4 = 100 targets
    assert (sliding[0]["n_examples"], sliding[0]["tokens_scored"]) == (22, 100)


def test_uniform_model_has_perplexity_vocab_size(tmp_path, corpus, single_thread):
    train, valid = corpus
    data = text_data(
        tmp_path, files={"train": str(train), "validation": str(valid)}, tokenizer="byte"
    )
    (row,) = evaluate(data, Uniform(256), [32], tmp_path)
    assert row["tokens_scored"] == data.val_ids.shape[0] - 1
    assert row["ppl"] == pytest.approx(256.0)
    # byte tokenizer: one byte per token, so bits per byte = loss / ln 2 = 8
    assert row["bits_per_byte"] == pytest.approx(row["loss"] / math.log(2))
    assert row["accuracy"] is None and row["exact_match"] is None


def test_sliding_with_stride_equal_to_length_equals_nonoverlap(tmp_path, corpus, single_thread):
    from lengen.model import DecoderOnly
    from lengen.pe.alibi import ALiBi

    train, valid = corpus
    data = text_data(tmp_path, files={"train": str(train), "validation": str(valid)})
    torch.manual_seed(0)
    model = DecoderOnly(
        vocab_size=data.vocab_size, d_model=16, n_layers=1, n_heads=2, d_ff=32, pe=ALiBi
    )
    nonoverlap = evaluate(data, model, [16], tmp_path, max_tokens=200)
    sliding = evaluate(data, model, [16], tmp_path, protocol="sliding", stride=16, max_tokens=200)
    assert sliding[0]["loss"] == pytest.approx(nonoverlap[0]["loss"], rel=1e-6)
    assert (sliding[0]["n_examples"], sliding[0]["tokens_scored"]) == (13, 200)
    assert (nonoverlap[0]["n_examples"], nonoverlap[0]["tokens_scored"]) == (13, 200)
    # a smaller stride gives every token more context: a different loss, same tokens
    shorter = evaluate(data, model, [16], tmp_path, protocol="sliding", stride=4, max_tokens=200)
    assert shorter[0]["tokens_scored"] == 200 and shorter[0]["loss"] != nonoverlap[0]["loss"]


def test_loss_by_position_is_written(tmp_path, corpus, single_thread):
    train, valid = corpus
    data = text_data(
        tmp_path, files={"train": str(train), "validation": str(valid)}, tokenizer="byte"
    )
    rows = evaluate(data, Uniform(256), [8, 32], tmp_path, max_tokens=64)
    report = json.loads((tmp_path / "loss_by_position.json").read_text())
    for row in rows:
        counts = report["lengths"][str(row["length"])]["count"]
        assert len(counts) == row["length"] and sum(counts) == row["tokens_scored"]
    assert (tmp_path / "loss_by_position.png").stat().st_size > 0


def test_rows_record_cost_and_windows_per_batch(tmp_path, corpus, single_thread):
    train, valid = corpus
    data = text_data(
        tmp_path, files={"train": str(train), "validation": str(valid)}, tokenizer="byte"
    )
    rows = evaluate(data, Uniform(data.vocab_size), [8, 16], tmp_path, max_tokens=100)
    # the budget of 256 tokens per batch: 32 windows of 8, 16 of 16
    assert [r["batch_size"] for r in rows] == [32, 16]
    assert all(r["seconds"] > 0 and r["peak_mem_mb"] >= 0 for r in rows)
