"""Attention maps: the reference attention equals the model's kernels for every PE, and the
mean attention distance has its closed form."""

from __future__ import annotations

import json

import pytest
import torch

from helpers import compose_train, yaml_choices
from lengen.attention_maps import (
    analyse_run,
    grid_attention_distance,
    layer_names,
    mean_attention_distance,
    record_attention,
    recording_attention,
)
from lengen.build import build
from lengen.train import run

PES = yaml_choices("pe")


def _model(pe: str, model: str = "decoder"):
    cfg = compose_train(f"pe={pe}", f"model={model}", "model.d_model=32", "data.len=6")
    data, model, _ = build(cfg)
    return data, model.eval()


@pytest.mark.parametrize("pe", PES)
def test_recorded_forward_equals_the_model(pe, single_thread):
    data, model = _model(pe)
    batch = next(iter(data.eval_batches(12, 4, 4)))
    with torch.no_grad():
        expected = model(**batch["inputs"])
        with recording_attention() as recorded:
            actual = model(**batch["inputs"])
    assert len(recorded) == model.cfg.n_layers
    torch.testing.assert_close(actual, expected, atol=1e-4, rtol=1e-4)


def test_weights_are_causal_distributions(single_thread):
    data, model = _model("alibi")
    batch = next(iter(data.eval_batches(10, 2, 2)))
    for weights in record_attention(model, batch["inputs"]):  # (B, H, T, T)
        torch.testing.assert_close(weights.sum(-1), torch.ones(weights.shape[:-1]))
        assert (weights.triu(diagonal=1) == 0).all()


def test_encoder_decoder_records_self_attention_only(single_thread):
    data, model = _model("rope", "encoder_decoder")
    batch = next(iter(data.eval_batches(8, 2, 2)))
    recorded = record_attention(model, batch["inputs"])
    assert layer_names(model) == ["encoder.0", "encoder.1", "decoder.0", "decoder.1"]
    assert [w.shape[-1] for w in recorded] == [8, 8, 8, 8]  # src 8; tgt = answer length 8


def test_mean_distance_of_uniform_causal_attention_is_n_minus_1_over_4():
    n = 9
    weights = torch.tril(torch.ones(n, n))
    weights = (weights / weights.sum(-1, keepdim=True))[None, None]  # (1, 1, n, n)
    torch.testing.assert_close(mean_attention_distance(weights), torch.tensor([(n - 1) / 4]))


def test_mean_distance_of_previous_token_heads_is_one():
    n = 6
    weights = torch.zeros(1, 2, n, n)
    weights[:, :, 0, 0] = 1.0
    weights[:, :, torch.arange(1, n), torch.arange(n - 1)] = 1.0  # each query on its left neighbour
    expected = torch.full((2,), (n - 1) / n)
    torch.testing.assert_close(mean_attention_distance(weights), expected)


def test_analyse_run_writes_maps_and_distances(tmp_path, single_thread):
    cfg = compose_train("data.len=4", "eval.lengths=[4]", "model.d_model=32", "pe=alibi")
    run(cfg, run_dir=tmp_path)
    report = analyse_run(tmp_path, length=12, samples=3, formats=("png",))
    saved = json.loads((tmp_path / "attention_len12.json").read_text())
    assert saved["length"] == 12 and saved["samples"] == 3
    assert len(saved["mean_attention_distance"]) == 2  # layers
    assert len(saved["mean_attention_distance"][0]) == 4  # heads
    for name in ("attention_maps_len12.png", "attention_distance_len12.png"):
        assert (tmp_path / name).stat().st_size > 0
    assert report["max_position"] == 2 * 12 + 1


def test_grid_distance_is_in_cells_between_cells_only():
    # a 2 × 2 grid and a readout slot (−1): every query attends half to its right neighbour
    # cell (1 cell away) and half to the readout slot, which carries no cell
    positions = torch.tensor([[0, 0], [0, 1], [1, 0], [1, 1], [-1, -1]])
    weights = torch.zeros(1, 1, 5, 5)
    for query, neighbour in ((0, 1), (1, 0), (2, 3), (3, 2), (4, 0)):
        weights[0, 0, query, neighbour] = 0.5
        weights[0, 0, query, 4] = 0.5
    torch.testing.assert_close(grid_attention_distance(weights, positions), torch.tensor([1.0]))


def test_grid_distance_is_euclidean():
    positions = torch.tensor([[0, 0], [1, 1], [2, 2]])
    weights = torch.zeros(1, 1, 3, 3)
    weights[0, 0, :, 0] = 1.0  # every query on the corner cell
    expected = torch.tensor([(0 + 2**0.5 + 8**0.5) / 3])
    torch.testing.assert_close(grid_attention_distance(weights, positions), expected)


def test_analyse_run_of_a_grid_run_draws_maps_on_the_cells(tmp_path, single_thread):
    cfg = compose_train(
        "data=grid_locate", "model=encoder", "pe=rope_mixed", "data.len=4",
        "eval.lengths=[4]", "model.d_model=32",
    )  # fmt: skip
    run(cfg, run_dir=tmp_path)
    report = analyse_run(tmp_path, length=6, samples=2, formats=("png",))
    assert report["distance_unit"] == "cells"
    assert max(max(layer) for layer in report["mean_attention_distance"]) <= 5 * 2**0.5  # 6 × 6
    assert (tmp_path / "attention_maps_len6.png").stat().st_size > 0


def test_attention_command_refuses_a_directory_without_a_run(tmp_path, capsys):
    from helpers import load_script

    main = load_script("plot").main

    assert main(["attention", str(tmp_path), "--length", "8"]) == 2
    assert capsys.readouterr().err.startswith("error: run=")
