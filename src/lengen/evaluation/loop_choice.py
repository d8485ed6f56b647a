"""``model.loop_rule=confidence``: each evaluated length's loop count by Fan et al.'s adaptive
stopping (docs/models.md "Looped depth").

Fan et al., "Looped Transformers for Length Generalization" (ICLR 2025, arXiv 2409.15647),
code read: ``truongbuu/looped-tf`` (a fork of ``UW-Madison-Lee-Lab/looped-tf``),
``src/test_func.py`` lines 19–40, ``test_model_adaptive``: run the loop ``n + extra`` steps
(extra = 20), and at each step take the outputs at the answer positions (``mask == 1``),

    acc_loss = loss_func(last[mask == 1].cuda(), results[mask == 1].cuda())

(``results``: ``last``'s argmax, ``one_hot_to_int``) with ``loss_func = nn.CrossEntropyLoss()`` (the mean over every answer token of the test
batch), then ``index = torch.argmin(torch.tensor(cross_entropy_list))``: the step of maximum
confidence. No label enters the choice; the labels only score the count chosen.

Here, for one evaluated length: the model is scored at every fixed count K = 1 … K_max, with
K_max = the linear rule's count at that length's T tokens + ``model.loop_extra``, each K by a
teacher-forced pass over all the length's evaluation instances (the reference's test batch is
one batch of 512 or 6400 at one length: here the whole evaluation set of the length, in as many
batches as memory needs, summed before dividing); c(K) = the mean over every answer token of
−log softmax(logits)[argmax] (the cross-entropy against the logits' own argmax); the count is
argmin c, ties to the smallest K (``torch.argmin`` returns the first minimum too). The length
is then scored as usual (teacher forced or greedy, cached decoding included) at that count.
Cost: K_max extra teacher-forced passes per length, K loops each (the readout stays outside the
stack, so each K is its own pass rather than a read-out of loop K of one K_max pass).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable

import torch
from torch import Tensor

from lengen.data.task_data import IGNORE
from lengen.measure import measured_with_oom_halving
from lengen.model.looped import Looped, looped_depth, loops_forced


def answer_confidence(logits: Tensor, targets: Tensor) -> tuple[float, int]:
    """(summed cross-entropy of the logits against their own argmax, answer tokens) over the
    answer positions (targets != IGNORE) of one batch: logits (B, T, V), targets (B, T)."""
    answers = logits[targets != IGNORE].float()  # (A, V): the answer positions' logits
    own = answers.argmax(-1)  # (A,) the model's own answers, no labels
    summed = torch.nn.functional.cross_entropy(answers, own, reduction="sum")
    return float(summed), int(answers.shape[0])


def confidence_curve(
    model: torch.nn.Module, depth: Looped, batches: Iterable[tuple[dict, Tensor]], k_max: int
) -> list[float]:
    """c(K) for K = 1 … ``k_max``: the mean confidence loss over every answer token of
    ``batches`` ((model inputs, targets) pairs: one length's evaluation set) with the looped
    stack ``depth`` forced to K loops."""
    batches = list(batches)
    curve = []
    for loops in range(1, k_max + 1):
        total, count = 0.0, 0
        with loops_forced(depth, loops):
            for inputs, targets in batches:
                summed, tokens = answer_confidence(model(**inputs), targets)
                total, count = total + summed, count + tokens
        curve.append(total / max(count, 1))
    return curve


def choose_loops(curve: list[float]) -> int:
    """The count of maximum confidence: 1 + argmin of ``curve`` (c(1), c(2), …), ties to the
    smallest count."""
    return 1 + min(range(len(curve)), key=lambda index: (curve[index], index))


class LoopChoice:
    """One length's choice: ``forced()`` scores at the chosen count, ``facts`` go into its row
    (``loops``, the count chosen; ``loop_confidence``, c(1) … c(K_max); ``loop_choice_seconds``,
    the cost of the K_max passes). The empty choice (another rule) forces and adds nothing."""

    def __init__(self, depth: Looped | None = None, curve: list[float] | None = None, seconds=0.0):
        self.depth, self.curve, self.seconds = depth, curve, seconds
        self.loops = choose_loops(curve) if curve else None

    def forced(self):
        if self.depth is None:
            return contextlib.nullcontext()
        return loops_forced(self.depth, self.loops)

    @property
    def facts(self) -> dict:
        if self.depth is None:
            return {}
        return {
            "loops": self.loops,
            "loop_confidence": list(self.curve),  # unrounded: its argmin is ``loops``
            "loop_choice_seconds": self.seconds,
        }


@torch.no_grad()
def choose_at_length(
    model: torch.nn.Module, data, inputs: Tensor, length: int, batch_size: int, device
) -> LoopChoice:
    """The confidence choice at one length for a model under ``loop_rule=confidence``, over its
    evaluation instances ``inputs`` (N, n) formatted by ``data`` (a TaskData); the empty choice
    for every other model."""
    depth = looped_depth(model)
    if depth is None or depth.rule != "confidence":
        return LoopChoice()
    k_max = depth.loop_count(data.sequence_length(length)) + depth.extra  # linear count + extra

    def curve_at(size: int) -> list[float]:
        batches = (
            ({k: v.to(device) for k, v in batch["inputs"].items()}, batch["targets"].to(device))
            for batch in data.batches_of(inputs, size)
        )
        return confidence_curve(model, depth, batches, k_max)

    started = time.perf_counter()
    curve, _ = measured_with_oom_halving(curve_at, batch_size, device)
    return LoopChoice(depth, curve, round(time.perf_counter() - started, 3))
