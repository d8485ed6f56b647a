"""Formal-language tasks of the Chomsky-hierarchy benchmark: parity, even pairs, cycle
navigation (regular), modular arithmetic with brackets, stack manipulation (deterministic
context-free), bucket sort (context-sensitive).

Delétang et al. (2023), "Neural Networks and the Chomsky Hierarchy" (ICLR); formats follow their
code, google-deepmind/neural_networks_chomsky_hierarchy (tasks/regular, tasks/dcf, tasks/cs).
Where an answer has variable length (stack manipulation) it is followed by ``END`` symbols up to
the fixed answer length; unlike the reference, which masks everything after the first
terminator, every answer position is scored (``exact_match`` is unaffected).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from lengen.data.tasks.arithmetic import ModulusConfig
from lengen.data.tasks.base import AlphabetConfig, Task, TaskConfig, uniform_ints
from lengen.data.tasks.strings import CHOMSKY, Sort
from lengen.lazy import torch
from lengen.schema import integer, option

if TYPE_CHECKING:
    from torch import Tensor


class _BinaryVerdict(Task):
    """A binary string in, one bit out (0: even, 1: odd)."""

    def __init__(self, **options) -> None:
        super().__init__(**options)
        self.vocab = ["0", "1"]
        self.answer_symbols = [0, 1]

    def answer_length(self, length: int) -> int:
        return 1


class Parity(_BinaryVerdict):
    """Is the number of 1s odd? ``0 1 1 0 1`` -> ``1`` (answer 0: even, 1: odd)."""

    name = "parity"
    source = CHOMSKY + " (parity check, regular)"
    answer_format = "1 symbol: 0 if the number of 1s is even, 1 if odd"

    def solve(self, inputs: Tensor) -> Tensor:
        return inputs.sum(dim=1, keepdim=True) % 2


class EvenPairs(_BinaryVerdict):
    """Is the number of ``01`` and ``10`` pairs odd? ``0 0 1 1 1 0`` -> ``0`` (two pairs).

    The count is odd exactly when the first and last symbols differ (the regular-language
    shortcut); the solver counts pairs directly.
    """

    name = "even_pairs"
    source = CHOMSKY + " (even pairs, regular)"
    answer_format = "1 symbol: 0 if the number of 01 and 10 pairs is even, 1 if odd"

    def solve(self, inputs: Tensor) -> Tensor:
        changes = (inputs[:, 1:] != inputs[:, :-1]).sum(dim=1, keepdim=True)  # (B, 1)
        return changes % 2


@dataclasses.dataclass(frozen=True)
class CycleNavigationConfig(TaskConfig):
    #: number of states (the paper: 5)
    cycle_length: int = option(5, integer(minimum=2))


class CycleNavigation(Task):
    """Walk on a cycle of ``cycle_length`` states from state 0; each input symbol moves one step
    left, stays or moves one step right; answer the final state.
    ``right right left stay right`` -> ``2`` (cycle of 5).

    Options (``CycleNavigationConfig``): ``cycle_length``, the number of states
    (``data.task.cycle_length``, the paper: 5).
    """

    Options = CycleNavigationConfig
    name = "cycle_navigation"
    source = CHOMSKY + " (cycle navigation, regular)"
    answer_format = "1 symbol: the final state"

    def __init__(self, **options) -> None:
        super().__init__(**options)
        cycle_length = self.cycle_length = self.cfg.cycle_length
        self.vocab = ["left", "stay", "right"] + [f"state{i}" for i in range(cycle_length)]
        self.answer_symbols = list(range(3, 3 + cycle_length))

    def answer_length(self, length: int) -> int:
        return 1

    def sample_inputs(self, length: int, batch_size: int, generator: torch.Generator) -> Tensor:
        return torch.randint(0, 3, (batch_size, length), generator=generator)

    def solve(self, inputs: Tensor) -> Tensor:
        position = (inputs - 1).sum(dim=1, keepdim=True) % self.cycle_length  # (B, 1)
        return 3 + position


class ModularArithmeticBrackets(Task):
    """Value modulo ``modulus`` of a random bracketed expression with ``+`` and ``-``:
    ``( ( 3 - 4 ) + - 2 )`` -> ``2`` (mod 5).

    Grammar of the reference generator: length 1: ``d``; 2: ``-d``; 3: ``(d)``; 4: ``(-d)``;
    n >= 5: ``(E op F)`` with |E| uniform in 1 … n−4, |F| = n − 3 − |E|, op uniform in {+, -}.
    Generation expands all instances' trees one level per step (a loop over tree depth, not over
    instances). Binary minus negates its whole right operand, unary minus one digit.

    Options (``ModulusConfig``): ``modulus``, at most 10 so every residue is one symbol (the
    paper: 5).
    """

    Options = ModulusConfig
    name = "modular_arithmetic_brackets"
    source = CHOMSKY + " (modular arithmetic with brackets, DCF)"
    answer_format = "1 symbol: the value of the expression modulo the modulus"

    def __init__(self, **options) -> None:
        super().__init__(**options)
        modulus = self.modulus = self.cfg.modulus
        self.vocab = [str(i) for i in range(modulus)] + ["+", "-", "(", ")"]
        self.answer_symbols = list(range(modulus))
        self.plus, self.minus, self.open, self.close = range(modulus, modulus + 4)

    def answer_length(self, length: int) -> int:
        return 1

    def sample_inputs(self, length: int, batch_size: int, generator: torch.Generator) -> Tensor:
        # numpy for the many small steps of this loop (~1 µs per operation, torch ~10 µs);
        # its generator is seeded from the torch one, so instances stay a function of it.
        # Imported here: a refused command line imports this module and not numpy (0.1 s)
        import numpy as np

        rng = np.random.default_rng(int(torch.randint(0, 2**62, (1,), generator=generator)))
        # 1. tree shapes, one level per iteration: nodes are segments (row, start, size)
        segments = np.zeros((batch_size, 3), dtype=np.int64)  # (S, 3)
        segments[:, 0], segments[:, 2] = np.arange(batch_size), length
        leaves, inner = [], []
        while len(segments):
            is_leaf = segments[:, 2] <= 4
            leaves.append(segments[is_leaf])
            node = segments[~is_leaf]  # (S', 3)
            left = 1 + (rng.random(len(node)) * (node[:, 2] - 4)).astype(np.int64)  # 1 … size − 4
            inner.append(np.column_stack([node, left]))
            first = np.column_stack([node[:, 0], node[:, 1] + 1, left])
            second = np.column_stack([node[:, 0], node[:, 1] + 2 + left, node[:, 2] - 3 - left])
            segments = np.concatenate([first, second])
        # 2. symbols, all at once. Inner nodes: ( E op F ), op uniform in {+, -}
        out = np.empty((batch_size, length), dtype=np.int64)
        rows, starts, sizes, left = np.concatenate(inner).T
        out[rows, starts] = self.open
        out[rows, starts + 1 + left] = self.plus + rng.integers(0, 2, len(rows))
        out[rows, starts + sizes - 1] = self.close
        # leaves of size 1 … 4: d, -d, (d), (-d) as templates over 4 slots
        rows, starts, sizes = np.concatenate(leaves).T
        DIGIT, UNUSED = -2, -1
        templates = np.array(
            [
                [DIGIT, UNUSED, UNUSED, UNUSED],
                [self.minus, DIGIT, UNUSED, UNUSED],
                [self.open, DIGIT, self.close, UNUSED],
                [self.open, self.minus, DIGIT, self.close],
            ]
        )
        codes = templates[sizes - 1]  # (S, 4)
        digits = rng.integers(0, self.modulus, (len(rows), 1))
        codes = np.where(codes == DIGIT, digits, codes)
        slot = codes != UNUSED
        out[
            np.broadcast_to(rows[:, None], codes.shape)[slot],
            (starts[:, None] + np.arange(4))[slot],
        ] = codes[slot]
        return torch.from_numpy(out)

    def solve(self, inputs: Tensor) -> Tensor:
        batch, n = inputs.shape
        opens = (inputs == self.open).long()
        closes = (inputs == self.close).long()
        # depth of each symbol: inside its own brackets for '(' and ')'
        depth = (opens - closes).cumsum(dim=1) + closes  # (B, n)
        previous = torch.cat([torch.full((batch, 1), self.open), inputs[:, :-1]], dim=1)
        after_operand = (previous < self.modulus) | (previous == self.close)
        minus = inputs == self.minus
        binary_minus = (minus & after_operand).long()  # negates the rest of its bracket
        unary_minus = minus & ~after_operand  # negates the next digit only
        # A binary minus counts from its position to the ')' closing its bracket. At each ')',
        # remove the binary minuses of that bracket's own level: sorted by (depth, position),
        # a bracket's own-level symbols are contiguous and start at its '('.
        order = (depth * (n + 1) + torch.arange(n)).argsort(dim=1)  # (B, n)
        minus_sorted = binary_minus.gather(1, order).cumsum(dim=1)  # (B, n)
        rank = torch.arange(n).expand(batch, n)
        open_rank = torch.where(opens.gather(1, order).bool(), rank, 0).cummax(dim=1).values
        inside = minus_sorted - minus_sorted.gather(1, open_rank)  # at each ')' in sorted order
        removed = torch.zeros_like(inputs)
        removed.scatter_(1, order, inside * closes.gather(1, order))
        negations = (binary_minus - removed).cumsum(dim=1)  # (B, n) binary minuses in scope
        negations[:, 1:] += unary_minus[:, :-1].long()
        digits = torch.where(inputs < self.modulus, inputs, 0)
        signed = torch.where(negations % 2 == 1, -digits, digits)
        return (signed.sum(dim=1, keepdim=True) % self.modulus).long()


class StackManipulation(Task):
    """A binary stack (bottom to top) then POP / PUSH 0 / PUSH 1 actions; answer the final stack
    top to bottom, then ``END`` up to n + 1 symbols. POP on an empty stack does nothing.
    ``0 1 1 PUSH1 POP POP`` -> ``1 0 END END END END END``.

    The initial stack has uniform length in 1 … n−1 (n >= 2), actions are uniform.
    """

    name = "stack_manipulation"
    source = CHOMSKY + " (stack manipulation, DCF)"
    answer_format = "final stack top to bottom, then END (n + 1 symbols)"

    def __init__(self, **options) -> None:
        super().__init__(**options)
        self.vocab = ["0", "1", "POP", "PUSH0", "PUSH1", "END"]
        self.answer_symbols = [0, 1, 5]
        self.pop, self.push0, self.push1, self.end = 2, 3, 4, 5

    def answer_length(self, length: int) -> int:
        return length + 1

    def sample_inputs(self, length: int, batch_size: int, generator: torch.Generator) -> Tensor:
        stack_size = uniform_ints(1, max(1, length - 1), generator, (batch_size, 1))
        bits = torch.randint(0, 2, (batch_size, length), generator=generator)
        actions = torch.randint(2, 5, (batch_size, length), generator=generator)
        return torch.where(torch.arange(length) < stack_size, bits, actions)

    def solve(self, inputs: Tensor) -> Tensor:
        batch, n = inputs.shape
        is_pop = inputs == self.pop
        value = torch.where(inputs >= self.push0, inputs - self.push0, inputs)  # pushed bit
        steps = torch.where(is_pop, -1, 1)  # initial symbols are pushes too
        walk = steps.cumsum(dim=1)  # (B, n) height if pops never hit bottom
        floor = walk.cummin(dim=1).values.clamp(max=0)
        height = walk - floor  # (B, n) height after each action: pops on empty do nothing
        # a push survives iff the height never drops below its level afterwards
        later_min = height.flip(1).cummin(dim=1).values.flip(1)  # (B, n)
        survives = ~is_pop & (later_min >= height)
        final = height[:, -1:]  # (B, 1)
        slot = torch.where(survives, final - height, n + 1)  # top of the stack is slot 0
        out = torch.full((batch, n + 2), self.end, dtype=torch.long)
        out.scatter_(1, slot, value)
        out[:, n + 1] = self.end  # the discarded slot
        return out[:, : n + 1]


@dataclasses.dataclass(frozen=True)
class BucketSortConfig(AlphabetConfig):
    n_symbols: int = AlphabetConfig.with_default("n_symbols", 5)


class BucketSort(Sort):
    """Sort a string over 5 symbols: ``1 0 2 0 4 1 1 2`` -> ``0 0 1 1 1 2 2 4``."""

    Options = BucketSortConfig
    name = "bucket_sort"
    source = CHOMSKY + " (bucket sort, CS)"
