"""Accuracy by answer position: where in the answer a model starts to fail, at each length.

The task analogue of text's loss by position. Counted on the same instances and batches as the
results rows (``score_lengths`` tallies it as it scores), so the token-weighted mean over
positions is the row's ``accuracy``:

* ``teacher_forced`` (every protocol): answer token t is right when the argmax at its slot,
  given the true answer prefix, is the answer's token; each position is judged on its own.
* ``greedy`` (``eval.decoding=greedy`` only): token t of the generated answer equals the answer's
  token t. After a first error the model continues its own diverged answer, and later positions
  are still counted, as the row's greedy ``accuracy`` counts them; so a greedy curve that falls
  and stays low says where the first errors happen, while the teacher-forced curve says whether
  each position is solvable given a correct prefix.

Answers longer than ``MAX_POSITIONS`` tokens (grids: every cell) are kept in equal bins of
``bin_width`` positions, so results.json stays compact.
"""

from __future__ import annotations

import torch
from torch import Tensor

from lengen.data.source import IGNORE

#: positions kept per length in results.json; longer answers are binned
MAX_POSITIONS = 256


def teacher_forced_correct(
    logits: Tensor, targets: Tensor, start: int | None = None
) -> tuple[Tensor, Tensor]:
    """logits (B, T, V), targets (B, T) -> (correct, scored), each (B, m) over the answer
    columns (the scored columns of the batch's shared layout; tagged tasks, ``start`` given:
    every column from ``start`` on, where each row scores only some)."""
    if start is None:
        columns = (targets[0] != IGNORE).nonzero().flatten()  # (m,)
    else:
        columns = torch.arange(start, targets.shape[1], device=targets.device)  # (m,)
    scored = (targets != IGNORE)[:, columns]  # (B, m)
    correct = (logits.argmax(-1) == targets)[:, columns] & scored
    return correct, scored


class PositionTally:
    """Summed correct and scored tokens per answer position, per protocol, for one length."""

    def __init__(self):
        self.sums: dict[str, list[Tensor]] = {}

    def add(self, protocol: str, correct: Tensor, scored: Tensor) -> None:
        """correct, scored (B, m) booleans."""
        self._add(protocol, correct.sum(0).double().cpu(), scored.sum(0).double().cpu())

    def merge(self, other: PositionTally) -> None:
        """Add another tally of the same length (another position draw)."""
        for protocol, (correct, scored) in other.sums.items():
            self._add(protocol, correct, scored)

    def _add(self, protocol: str, correct: Tensor, scored: Tensor) -> None:  # (m,) each
        if protocol in self.sums:
            correct, scored = correct + self.sums[protocol][0], scored + self.sums[protocol][1]
        self.sums[protocol] = [correct, scored]


def position_entry(correct: Tensor, scored: Tensor) -> dict:
    """{accuracy per position (or bin), scored tokens per position, bin_width}."""
    width = -(-len(correct) // MAX_POSITIONS)  # ceil
    if width > 1:
        pad = (-len(correct)) % width  # the last bin holds what remains
        correct = torch.nn.functional.pad(correct, (0, pad)).view(-1, width).sum(-1)
        scored = torch.nn.functional.pad(scored, (0, pad)).view(-1, width).sum(-1)
    accuracy = [round(float(c / s), 4) if s else None for c, s in zip(correct, scored, strict=True)]
    counts = [int(s) for s in scored]
    return {
        "accuracy": accuracy,
        "scored": counts[0] if len(set(counts)) == 1 else counts,
        "bin_width": width,
    }


def position_section(tallies: dict[int, PositionTally], train_len: int) -> dict:
    """results.json's ``accuracy_by_answer_position``: per protocol, per length."""
    protocols: dict[str, dict] = {}
    for length in sorted(tallies):
        for protocol, (correct, scored) in tallies[length].sums.items():
            protocols.setdefault(protocol, {})[str(length)] = position_entry(correct, scored)
    return {
        "position": "index of the token in the answer, 0 = first (grids: answer cells in order)",
        "train_len": train_len,
        "protocols": protocols,
    }
