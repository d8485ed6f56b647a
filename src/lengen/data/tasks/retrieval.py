"""Retrieval: associative recall (key-value lookup) and passkey retrieval.

Both expose ``depth``: where, as a fraction of the input, the answer is written, so evaluation
can report exactness by depth (``accuracy_by_depth.json``).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from lengen.data.tasks.base import Task, TaskConfig, gather_shifted, uniform_ints
from lengen.lazy import torch
from lengen.schema import integer, option

if TYPE_CHECKING:
    from torch import Tensor


@dataclasses.dataclass(frozen=True)
class AssociativeRecallConfig(TaskConfig):
    #: key alphabet
    n_keys: int = option(26, integer())
    #: value alphabet
    n_values: int = option(10, integer(minimum=2))


class AssociativeRecall(Task):
    """Key-value pairs, then a query key; answer the value bound to it. Keys may repeat: the
    last binding wins. ``k3 v1 k0 v7 k3 v4 k3`` -> ``v4``.

    Length n holds ⌊(n−1)/2⌋ pairs, a blank ``_`` when n is even, and the query (n >= 3). Keys
    and values are uniform; the query is the key of a uniformly chosen pair.

    Options (``AssociativeRecallConfig``): ``n_keys``, the key alphabet
    (``data.task.n_keys``); ``n_values``, the value alphabet (``data.task.n_values``).

    Ba et al. 2016, "Using Fast Weights to Attend to the Recent Past"; Arora et al. 2024,
    "Zoology" (multi-query associative recall).
    """

    Options = AssociativeRecallConfig
    name = "associative_recall"
    source = "Ba et al. 2016 (NeurIPS), Using Fast Weights to Attend to the Recent Past"
    min_length = 3
    answer_format = "1 symbol: the value last bound to the query key"

    def __init__(self, **options) -> None:
        super().__init__(**options)
        n_keys = self.n_keys = self.cfg.n_keys
        n_values = self.n_values = self.cfg.n_values
        self.vocab = [f"k{i}" for i in range(n_keys)] + [f"v{i}" for i in range(n_values)]
        self.vocab.append("_")
        self.answer_symbols = list(range(n_keys, n_keys + n_values))
        self.blank = n_keys + n_values

    def answer_length(self, length: int) -> int:
        return 1

    def sample_inputs(self, length: int, batch_size: int, generator: torch.Generator) -> Tensor:
        pairs = (length - 1) // 2
        keys = torch.randint(0, self.n_keys, (batch_size, pairs), generator=generator)
        values = torch.randint(0, self.n_values, (batch_size, pairs), generator=generator)
        chosen = torch.randint(0, pairs, (batch_size, 1), generator=generator)
        body = torch.stack([keys, self.n_keys + values], dim=2).flatten(1)  # (B, 2·pairs)
        blank = torch.full((batch_size, (length - 1) % 2), self.blank, dtype=torch.long)
        return torch.cat([body, blank, keys.gather(1, chosen)], dim=1)

    def _last_match(self, inputs: Tensor) -> Tensor:
        """Index of the last pair whose key is the query -> (B,)."""
        pairs = (inputs.shape[1] - 1) // 2
        keys = inputs[:, : 2 * pairs : 2]  # (B, pairs)
        match = keys == inputs[:, -1:]
        return (match * torch.arange(1, pairs + 1)).argmax(dim=1)

    def solve(self, inputs: Tensor) -> Tensor:
        return inputs.gather(1, 2 * self._last_match(inputs)[:, None] + 1)

    def depth(self, inputs: Tensor) -> Tensor:
        pairs = (inputs.shape[1] - 1) // 2
        return self._last_match(inputs).double() / max(1, pairs - 1)


@dataclasses.dataclass(frozen=True)
class PasskeyConfig(TaskConfig):
    #: length of the key; lengths start at digits + 1
    digits: int = option(5, integer())


class Passkey(Task):
    """A pass key of ``digits`` digits, announced by ``#``, hidden at a uniform depth in filler;
    answer the key. ``f0 f1 # 7 1 4 3 2 f3 f0`` -> ``7 1 4 3 2``.

    The filler repeats ``f0 f1 f2 f3`` by absolute position (the repeated sentences of the
    original); ``# key`` overwrites digits + 1 of its symbols at a position uniform in
    0 … n − digits − 1. ``depth`` = that position / (n − digits − 1): 0 at the start, 1 at the
    end. Mohtashami & Jaggi 2023, "Landmark Attention" (their key: a number up to 50000).

    Options (``PasskeyConfig``): ``digits``, the length of the key (``data.task.digits``);
    lengths start at digits + 1.
    """

    Options = PasskeyConfig
    name = "passkey"
    source = "Mohtashami & Jaggi 2023, Landmark Attention (NeurIPS)"
    answer_format = "the key's digits"
    n_fillers = 4

    def __init__(self, **options) -> None:
        super().__init__(**options)
        self.digits = self.cfg.digits
        self.vocab = [str(i) for i in range(10)] + ["#"] + [f"f{i}" for i in range(self.n_fillers)]
        self.answer_symbols = list(range(10))
        self.marker = 10

    @property
    def min_length(self) -> int:  # the key and its marker must fit
        return self.digits + 1

    def answer_length(self, length: int) -> int:
        return self.digits

    def sample_inputs(self, length: int, batch_size: int, generator: torch.Generator) -> Tensor:
        filler = 11 + torch.arange(length) % self.n_fillers  # (n,)
        inputs = filler.repeat(batch_size, 1)
        at = uniform_ints(0, length - self.digits - 1, generator, (batch_size, 1))
        key = torch.randint(0, 10, (batch_size, self.digits), generator=generator)
        inputs.scatter_(1, at, self.marker)
        inputs.scatter_(1, at + 1 + torch.arange(self.digits), key)
        return inputs

    def _position(self, inputs: Tensor) -> Tensor:
        return (inputs == self.marker).long().argmax(dim=1)  # (B,)

    def solve(self, inputs: Tensor) -> Tensor:
        return gather_shifted(inputs, self._position(inputs) + 1, self.digits)

    def depth(self, inputs: Tensor) -> Tensor:
        return self._position(inputs).double() / max(1, inputs.shape[1] - self.digits - 1)
