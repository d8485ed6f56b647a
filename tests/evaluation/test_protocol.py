"""Evaluation methodology: distinct instances, the trivial baseline, what rows record."""

from __future__ import annotations

import itertools

import pytest
import torch

from lengen.data.task_data import TaskData, held_out
from lengen.data.tasks import Copy
from lengen.evaluation.tasks import constant_baseline, score_lengths
from lengen.model import DecoderOnly
from lengen.pe import NoPE

pytestmark = pytest.mark.usefixtures("single_thread")


def binary_copy(length: int = 8) -> TaskData:
    return TaskData(task=Copy(n_symbols=2), len=length, min_len=length, batch_size=4)


def tiny_decoder(data: TaskData, pe=NoPE) -> DecoderOnly:
    torch.manual_seed(0)
    return DecoderOnly(pe=pe, vocab_size=data.vocab_size, d_model=16, n_layers=1, n_heads=2,
                       d_ff=32)  # fmt: skip


def all_held_out_strings(length: int) -> set[tuple[int, ...]]:
    every = torch.tensor(list(itertools.product([0, 1], repeat=length)))  # (2^n, n)
    return {tuple(row) for row in every[held_out(every)].tolist()}


def test_held_out_instances_are_distinct():
    inputs = binary_copy().held_out_inputs(10, 512, seed=0)
    assert len({tuple(row) for row in inputs.tolist()}) == len(inputs)


def test_a_small_space_is_enumerated():
    # 2^8 = 256 binary strings, about 1 in 16 held out: fewer than eval.samples exist
    inputs = binary_copy().held_out_inputs(8, 512, seed=0)
    assert {tuple(row) for row in inputs.tolist()} == all_held_out_strings(8)


def test_a_large_space_gives_exactly_the_samples_asked_for():
    assert binary_copy().held_out_inputs(16, 64, seed=0).shape == (64, 16)


def test_rows_record_distinct_instances():
    torch.manual_seed(0)
    data = binary_copy()
    model = tiny_decoder(data)
    (row,) = score_lengths(model, data, [8], samples=512, progress=False)
    assert row["n_examples"] == row["n_unique"] == len(all_held_out_strings(8))


def test_constant_baseline_reference_values():
    answers = torch.tensor([[0, 1], [0, 2], [1, 2]])
    # modes per position: 0 (2 of 3), 2 (2 of 3); only the second instance is [0, 2]
    assert constant_baseline(answers) == pytest.approx((4 / 6, 1 / 3))


def test_rows_carry_the_baseline_of_their_instances():
    torch.manual_seed(0)
    data = binary_copy()
    model = tiny_decoder(data)
    (row,) = score_lengths(model, data, [12], samples=64, progress=False)
    inputs = data.held_out_inputs(12, 64, data.eval_seed)
    expected = constant_baseline(data.task.solve(inputs))
    assert (row["baseline_accuracy"], row["baseline_exact_match"]) == expected


def randomized_model(data: TaskData):
    from functools import partial

    from lengen.pe import RoPE

    model = tiny_decoder(data, partial(RoPE, randomized=True, max_position=256))
    with torch.no_grad():  # sharp attention: at initialisation positions barely matter
        for parameter in model.parameters():
            parameter.mul_(30)
    return model


def test_randomized_models_are_scored_over_several_position_draws():
    data = binary_copy()
    (row,) = score_lengths(randomized_model(data), data, [16], samples=32, position_draws=3,
                           progress=False)  # fmt: skip
    assert row["position_draws"] == 3
    assert row["loss_draw_std"] > 0  # the draws differ, and the row says by how much


def test_position_draws_are_reproducible():
    data = binary_copy()
    model = randomized_model(data)
    first = score_lengths(model, data, [16], samples=32, position_draws=2, progress=False)
    again = score_lengths(model, data, [16], samples=32, position_draws=2, progress=False)
    assert [r["loss"] for r in first] == [r["loss"] for r in again]


def test_models_without_randomized_positions_are_scored_once():
    data = binary_copy()
    model = tiny_decoder(data)
    (row,) = score_lengths(model, data, [16], samples=32, position_draws=5, progress=False)
    assert "position_draws" not in row and "loss_draw_std" not in row


def test_over_draws_reference_values():
    from lengen.evaluation.tasks import over_draws

    summary = over_draws([{"accuracy": 1.0}, {"accuracy": 3.0}])
    assert summary == {"position_draws": 2, "accuracy": 2.0, "accuracy_draw_std": 2**0.5}
