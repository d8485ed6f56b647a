"""Accuracy by answer position (``lengen.evaluation.by_position``): on a constructed batch, its
binning, and its agreement with the rows it is counted beside."""

from __future__ import annotations

import pytest
import torch

from lengen.data.source import IGNORE
from lengen.data.task_data import TaskData
from lengen.data.tasks import Copy
from lengen.evaluation.by_position import (
    MAX_POSITIONS,
    PositionTally,
    position_entry,
    teacher_forced_correct,
)
from lengen.evaluation.tasks import score_lengths
from lengen.model import DecoderOnly
from lengen.pe import NoPE

pytestmark = pytest.mark.usefixtures("single_thread")


def constructed_batch() -> tuple[torch.Tensor, torch.Tensor]:
    """Two instances, prompt of 2 tokens then a 3-token answer; the argmax is right at answer
    positions (0, 2) of the first instance and (0, 1) of the second."""
    targets = torch.tensor([[IGNORE, IGNORE, 3, 4, 5], [IGNORE, IGNORE, 6, 7, 8]])
    predicted = torch.tensor([[0, 0, 3, 9, 5], [0, 0, 6, 7, 9]])
    logits = torch.nn.functional.one_hot(predicted, 10).float()  # (B, T, V)
    return logits, targets


def test_teacher_forced_correctness_is_read_per_answer_position():
    correct, _ = teacher_forced_correct(*constructed_batch())
    assert correct.tolist() == [[True, False, True], [True, True, False]]


def test_tally_gives_accuracy_per_answer_position():
    tally = PositionTally()
    tally.add("teacher_forced", *teacher_forced_correct(*constructed_batch()))
    entry = position_entry(*tally.sums["teacher_forced"])
    assert entry == {"accuracy": [1.0, 0.5, 0.5], "scored": 2, "bin_width": 1}


def test_long_answers_are_kept_in_equal_bins():
    positions = 3 * MAX_POSITIONS  # bins of 3
    correct = (torch.arange(positions) % 3 == 0).double()  # one of each bin's three right
    entry = position_entry(correct, torch.ones(positions, dtype=torch.float64))
    assert (entry["bin_width"], set(entry["accuracy"])) == (3, {round(1 / 3, 4)})


def binary_copy() -> TaskData:
    return TaskData(task=Copy(n_symbols=2), len=8, min_len=8, batch_size=4)


def tiny_decoder(data: TaskData) -> DecoderOnly:
    torch.manual_seed(0)
    return DecoderOnly(pe=NoPE, vocab_size=data.vocab_size, d_model=16, n_layers=1, n_heads=2,
                       d_ff=32)  # fmt: skip


def token_weighted_mean(entry: dict) -> float:
    return sum(entry["accuracy"]) / len(entry["accuracy"])  # every position scored equally


@pytest.mark.parametrize("protocol", ["teacher_forced", "greedy"])
def test_mean_over_positions_is_the_rows_accuracy(protocol):
    data = binary_copy()
    tallies = {}
    (row,) = score_lengths(tiny_decoder(data), data, [12], samples=32, protocol=protocol,
                           progress=False, by_position=tallies)  # fmt: skip
    entry = position_entry(*tallies[12].sums[protocol])
    assert token_weighted_mean(entry) == pytest.approx(row["accuracy"], abs=1e-4)
