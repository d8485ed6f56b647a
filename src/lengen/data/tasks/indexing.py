"""Indirect indexing: find a symbol by its content, then move from it by a signed offset.

The diagnostic task of Gopalakrishnan et al. 2025, "Decoupling the 'What' and 'Where' With
Polar Coordinate Positional Embeddings" (PoPE, arXiv 2509.10534), on which the abstract calls
PoPE "far superior" (a secondary summary's 94.82% against 11.16% is in no stored copy): the model must match one token by content (the
source) and another purely by position relative to it (the target), the decision RoPE's
what-where entanglement is argued to impair. The stored copies of the paper available here show
only its abstract and secondary summaries (an example: "what letter is 3 to the left of Z in
'ABSCOPZG'"), not the task's exact generator; the definition below is lengen's, written from
that description (docs/tasks.md, "RULER and indexing").
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from lengen.data.tasks.base import Task, TaskConfig, uniform_ints
from lengen.lazy import torch
from lengen.schema import integer, option

if TYPE_CHECKING:
    from torch import Tensor


@dataclasses.dataclass(frozen=True)
class IndirectIndexingConfig(TaskConfig):
    #: list alphabet
    n_symbols: int = option(16, integer(minimum=2))
    #: largest |offset|: offsets are −max_offset … −1, +1 … +max_offset
    max_offset: int = option(4, integer())


class IndirectIndexing(Task):
    """A list of n − 2 symbols, a source symbol that occurs exactly once in it, and a signed
    offset; answer the list's symbol at the source's position + offset.
    ``s3 s9 s0 s7 s2 s5 s7 s0 s2 -3`` (n = 10: list of 8, source ``s2``, offset −3) -> ``s9``.

    Drawn per instance: |offset| uniform in 1 … min(max_offset, n − 3) and its sign uniform; the
    source's position uniform among those whose target lies in the list; the source symbol
    uniform; every other list symbol uniform over the other n_symbols − 1 (so the source is
    unique, and content alone finds it). ``depth`` = the target's position / (n − 3): where
    the answer sits, 0 at the start of the list, 1 at its end.

    Options (``IndirectIndexingConfig``): ``n_symbols`` (list alphabet, at least 2),
    ``max_offset`` (largest |offset|); lengths start at 4 (a list of 2).
    """

    Options = IndirectIndexingConfig
    name = "indirect_indexing"
    source = (
        "Gopalakrishnan et al. 2025, PoPE (arXiv 2509.10534), indirect indexing; "
        "the generator is lengen's (the stored paper does not give it)"
    )
    min_length = 4
    answer_format = "1 symbol: the list's symbol at the source's position + offset"

    def __init__(self, **options) -> None:
        super().__init__(**options)
        n_symbols, max_offset = self.cfg.n_symbols, self.cfg.max_offset
        self.max_offset = max_offset
        self.offsets = [d for d in range(-max_offset, max_offset + 1) if d != 0]
        self.vocab = [f"s{i}" for i in range(n_symbols)] + [f"{d:+d}" for d in self.offsets]
        self.answer_symbols = list(range(n_symbols))
        self.first_offset = n_symbols

    def answer_length(self, length: int) -> int:
        return 1

    def sample_inputs(self, length: int, batch_size: int, generator: torch.Generator) -> Tensor:
        items = length - 2
        n_symbols = self.cfg.n_symbols
        shape = (batch_size, 1)
        magnitude = uniform_ints(1, min(self.max_offset, items - 1), generator, shape)
        sign = torch.randint(0, 2, shape, generator=generator) * 2 - 1
        offset = sign * magnitude  # (B, 1)
        at = uniform_ints(offset.clamp(max=0).neg(), items - 1 - offset.clamp(min=0), generator)
        source = torch.randint(0, n_symbols, shape, generator=generator)
        others = torch.randint(0, n_symbols - 1, (batch_size, items), generator=generator)
        items_drawn = others + (others >= source).long()  # (B, n-2) never the source
        items_drawn.scatter_(1, at, source)
        index = offset + self.max_offset - (offset > 0).long()  # into self.offsets
        return torch.cat([items_drawn, source, self.first_offset + index], dim=1)

    def _target(self, inputs: Tensor) -> Tensor:
        """Position of the answer in the list -> (B,)."""
        items = inputs[:, :-2]
        at = (items == inputs[:, -2:-1]).long().argmax(dim=1)  # (B,) the source
        table = torch.tensor(self.offsets)
        return at + table[inputs[:, -1] - self.first_offset]

    def solve(self, inputs: Tensor) -> Tensor:
        return inputs.gather(1, self._target(inputs)[:, None])

    def depth(self, inputs: Tensor) -> Tensor:
        return self._target(inputs).double() / max(1, inputs.shape[1] - 3)
