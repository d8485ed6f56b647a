"""Synthetic algorithmic tasks as pure, vectorised generators.

A task maps an instance's input symbols to its answer symbols. **Length** is the number of input
symbols (the convention of the Chomsky-hierarchy benchmarks, Delétang et al., 2023); how input
and answer are laid out for a model is decided in ``lengen.data.datamodule``.

Symbols are integers in [0, n_symbols); special tokens are added by the formatting layer.
"""

from __future__ import annotations

import torch
from torch import Tensor

from lengen.checks import positive_int


class Task:
    """Base class. Subclasses define ``solve`` (and ``answer_length`` if it is not n).

    Args:
        n_symbols: alphabet size of inputs and answers.
    """

    name = "task"

    def __init__(self, n_symbols: int = 16) -> None:
        self.n_symbols = positive_int("data.task.n_symbols", n_symbols, minimum=2)

    def answer_length(self, length: int) -> int:
        return length

    @property
    def chance_accuracy(self) -> float:
        """Per-token accuracy of uniform guessing over the answer alphabet."""
        return 1.0 / self.n_symbols

    def sample_inputs(self, length: int, batch_size: int, generator: torch.Generator) -> Tensor:
        """Uniform random inputs -> (batch_size, length), int64."""
        return torch.randint(0, self.n_symbols, (batch_size, length), generator=generator)

    def solve(self, inputs: Tensor) -> Tensor:
        """inputs (B, n) -> answers (B, answer_length(n)); a pure function."""
        raise NotImplementedError

    def describe(self) -> dict:
        return {"n_symbols": self.n_symbols}


class Copy(Task):
    """Output the input unchanged: x1 … xn -> x1 … xn."""

    name = "copy"

    def solve(self, inputs: Tensor) -> Tensor:
        return inputs.clone()


class Reverse(Task):
    """Output the input reversed: x1 … xn -> xn … x1."""

    name = "reverse"

    def solve(self, inputs: Tensor) -> Tensor:
        return inputs.flip(-1)
