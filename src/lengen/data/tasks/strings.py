"""String transductions: copy, reverse, duplicate, sort, odds-first, missing duplicate.

Formats follow Delétang et al. (2023), "Neural Networks and the Chomsky Hierarchy" (ICLR), and
their code (google-deepmind/neural_networks_chomsky_hierarchy, tasks/cs and tasks/dcf); copy,
reverse and sort are also tasks of Kazemnejad et al. (2023), "The Impact of Positional Encoding
on Length Generalization in Transformers" (NeurIPS).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from lengen.data.tasks.base import AlphabetConfig, AlphabetTask, Task
from lengen.lazy import torch

if TYPE_CHECKING:
    from torch import Tensor

CHOMSKY = "Delétang et al. 2023, Neural Networks and the Chomsky Hierarchy (ICLR)"


class Copy(AlphabetTask):
    """Output the input unchanged: x1 … xn -> x1 … xn."""

    name = "copy"
    source = "Kazemnejad et al. 2023 (NeurIPS); Ruoss et al. 2023 (ACL)"
    answer_format = "the n input symbols"

    def solve(self, inputs: Tensor) -> Tensor:
        return inputs.clone()


class Reverse(AlphabetTask):
    """Output the input reversed: x1 … xn -> xn … x1."""

    name = "reverse"
    source = CHOMSKY + " (reverse string, DCF)"
    answer_format = "the n input symbols, last first"

    def solve(self, inputs: Tensor) -> Tensor:
        return inputs.flip(-1)


@dataclasses.dataclass(frozen=True)
class BinaryAlphabetConfig(AlphabetConfig):
    """The Chomsky benchmark's string tasks: a binary alphabet."""

    n_symbols: int = AlphabetConfig.with_default("n_symbols", 2)


class Duplicate(AlphabetTask):
    """Output the input twice: w -> ww (the Chomsky benchmark's duplicate string, binary)."""

    Options = BinaryAlphabetConfig
    name = "duplicate"
    source = CHOMSKY + " (duplicate string, CS)"
    answer_format = "the input twice (2n symbols)"

    def answer_length(self, length: int) -> int:
        return 2 * length

    def solve(self, inputs: Tensor) -> Tensor:
        return torch.cat([inputs, inputs], dim=1)


class Sort(AlphabetTask):
    """Output the input's symbols in increasing order: 3 1 2 1 -> 1 1 2 3."""

    name = "sort"
    source = "Kazemnejad et al. 2023 (NeurIPS)"
    answer_format = "the n input symbols, sorted increasingly"

    def solve(self, inputs: Tensor) -> Tensor:
        return inputs.sort(dim=-1).values


class OddsFirst(AlphabetTask):
    """Symbols at odd (1-based) positions first, then the even ones: s1 s2 s3 s4 s5 ->
    s1 s3 s5 s2 s4. This is the order of the paper and of the reference code's docstring; the
    reference code itself puts the 0-based odd positions first."""

    Options = BinaryAlphabetConfig
    name = "odds_first"
    source = CHOMSKY + " (odds first, CS)"
    answer_format = "s1 s3 s5 … then s2 s4 … (n symbols)"

    def solve(self, inputs: Tensor) -> Tensor:
        return torch.cat([inputs[:, ::2], inputs[:, 1::2]], dim=1)


class MissingDuplicate(Task):
    """A string w written twice with one symbol replaced by ``?``; answer the hidden symbol.

    Length n holds ww with |w| = n // 2, then one ``_`` when n is odd (as in the reference).
    Example (binary): ``0 1 1 0 0 ? 1 0`` -> ``1``.

    Options: ``n_symbols``, the size of w's alphabet (``data.task.n_symbols``, the paper: 2).
    """

    Options = BinaryAlphabetConfig
    name = "missing_duplicate"
    source = CHOMSKY + " (missing duplicate, CS)"
    min_length = 2
    answer_format = "the hidden symbol (1 symbol)"

    def __init__(self, **options) -> None:
        super().__init__(**options)
        n_symbols = self.cfg.n_symbols
        self.alphabet = n_symbols
        self.vocab = [str(i) for i in range(n_symbols)] + ["?", "_"]
        self.answer_symbols = list(range(n_symbols))
        self.hidden, self.blank = n_symbols, n_symbols + 1

    def answer_length(self, length: int) -> int:
        return 1

    def sample_inputs(self, length: int, batch_size: int, generator: torch.Generator) -> Tensor:
        half = length // 2
        word = torch.randint(0, self.alphabet, (batch_size, half), generator=generator)
        doubled = torch.cat([word, word], dim=1)  # (B, 2·half)
        hidden_at = torch.randint(0, 2 * half, (batch_size, 1), generator=generator)
        doubled.scatter_(1, hidden_at, self.hidden)
        blank = torch.full((batch_size, length % 2), self.blank, dtype=torch.long)
        return torch.cat([doubled, blank], dim=1)

    def solve(self, inputs: Tensor) -> Tensor:
        half = inputs.shape[1] // 2
        hidden_at = (inputs == self.hidden).long().argmax(dim=1)  # (B,)
        twin = torch.where(hidden_at < half, hidden_at + half, hidden_at - half)
        return inputs.gather(1, twin[:, None])
