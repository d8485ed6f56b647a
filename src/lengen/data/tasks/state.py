"""State tracking, scored at every step (tagged tasks, ``lengen.data.layout.format_tagged``):
permutation composition in S5 and A5, and flip-flop language modelling.

Both are tagged: answer t belongs to input token t (``answer_length(n) == n``), and a causal
decoder answers it from the tokens up to t. Flip-flop marks the positions that are not scored
(−1): only its reads are.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from typing import TYPE_CHECKING

from lengen.data.tasks.base import Task, TaskConfig
from lengen.lazy import torch
from lengen.schema import interval, one_of, option

if TYPE_CHECKING:
    from torch import Tensor


# -- permutation composition ------------------------------------------------------------------
def group_elements(group: str) -> list[tuple[int, ...]]:
    """The elements of S5 (all 120 permutations of 0…4, lexicographic) or A5 (its 60 even ones,
    in the same order), each in one-line notation: p[i] is the image of i."""
    elements = list(itertools.permutations(range(5)))
    if group == "a5":
        elements = [p for p in elements if permutation_parity(p) == 0]
    return elements


def permutation_parity(p: tuple[int, ...]) -> int:
    """0 for even permutations, 1 for odd ones (parity of the number of inversions)."""
    return sum(p[i] > p[j] for i in range(len(p)) for j in range(i + 1, len(p))) % 2


def compose(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    """a·b: apply a first, then b ((a·b)[i] = b[a[i]])."""
    return tuple(b[a[i]] for i in range(len(a)))


@dataclasses.dataclass(frozen=True)
class PermutationCompositionConfig(TaskConfig):
    #: the group: s5 (120 elements, not solvable) or a5 (its 60 even permutations, simple)
    group: str = option("s5", one_of("s5", "a5"))


class PermutationComposition(Task):
    """A word of group elements g1 … gn; the answer at step t is the running product
    g1·g2·…·gt (every step scored): the word problem of S5 or A5, the state-tracking task that
    SSMs and Transformers cannot solve in constant depth (Merrill, Petty & Sabharwal 2024).

    Elements are permutations of 0…4 named in one-line notation (``10234`` swaps 0 and 1);
    inputs are uniform over the group. Composition order: ``a·b`` applies a first, then b, and
    the product folds left (s_t = s_(t−1)·g_t), as the reference code's scan
    (``jopetty/word-problem``, ``src/generate_data.py``: ``acc = G.op(acc, x)``). Its element
    order and ``Perm`` product convention are not shown in the stored copy; the other
    convention gives the opposite group, isomorphic through inversion, so only the names of
    the answers would differ.

    Options (``PermutationCompositionConfig``): ``group``, ``s5`` or ``a5``
    (``data.task.group``).
    """

    Options = PermutationCompositionConfig
    name = "s5"
    source = (
        "Merrill, Petty & Sabharwal 2024 (ICML), The Illusion of State in State-Space Models, "
        "arXiv 2404.08819"
    )
    tagged = True
    answer_format = "at every step: the product of the elements so far (tagged)"
    scored = "every step: the running product after it"

    def __init__(self, **options) -> None:
        super().__init__(**options)
        self.name = self.cfg.group
        self.elements = group_elements(self.cfg.group)
        self.vocab = ["".join(map(str, p)) for p in self.elements]
        self.answer_symbols = list(range(len(self.elements)))

    @functools.cached_property
    def table(self) -> Tensor:
        """(G, G) products: table[i, j] = index of elements[i]·elements[j] (built on first use:
        building the task imports no torch)."""
        index = {p: i for i, p in enumerate(self.elements)}
        return torch.tensor([[index[compose(a, b)] for b in self.elements] for a in self.elements])

    def solve(self, inputs: Tensor) -> Tensor:
        # a prefix scan in log2(n) passes (Hillis & Steele): after the pass of width d, state t
        # holds the product of the last 2d elements up to t; the group is associative
        state = inputs.clone()  # (B, n)
        width = 1
        while width < inputs.shape[1]:
            state[:, width:] = self.table[state[:, :-width], state[:, width:]]
            width *= 2
        return state


@dataclasses.dataclass(frozen=True)
class A5CompositionConfig(PermutationCompositionConfig):
    group: str = option("a5", one_of("s5", "a5"))


class A5Composition(PermutationComposition):
    """Permutation composition in A5 (``PermutationComposition`` with ``group: a5``)."""

    Options = A5CompositionConfig
    name = "a5"


# -- flip-flop language modelling ---------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class FlipFlopConfig(TaskConfig):
    #: P(ignore) of each instruction after the first; writes and reads share the rest equally
    #: (Liu et al.: training FFL(0.8); evaluation sparse 0.98 and dense 0.1)
    p_ignore: float = option(0.8, interval(0.0, 1.0, open_high=True))

    data_defaults = {"len": 64}


class FlipFlop(Task):
    """Flip-flop language: instructions ``w`` (write), ``i`` (ignore), ``r`` (read), each
    followed by a bit; a read's bit is the last written one. Scored only at the reads, as a
    language model is scored on the deterministic tokens: the answer is tagged at the ``r``, so
    a decoder predicts the read bit from the tokens before it (the bit itself is the next
    input token: the task runs on decoders only).

    Length n = tokens (instructions and bits: n/2 instructions, n even), as the paper's T. The
    first instruction is a write and the last a read (every instance has a scored position);
    the ones between are i.i.d.: ``i`` with ``p_ignore``, ``w`` and ``r`` with
    (1 − p_ignore)/2 each; written and ignored bits are uniform.

    Options (``FlipFlopConfig``): ``p_ignore`` (``data.task.p_ignore``, in [0, 1)); evaluate
    another distribution with ``python eval.py run=<dir> data.task.p_ignore=0.98 tag=sparse``.
    """

    Options = FlipFlopConfig
    name = "flip_flop"
    source = (
        "Liu, Ash, Goel, Krishnamurthy & Zhang 2023 (NeurIPS), Exposing Attention Glitches "
        "with Flip-Flop Language Modeling, arXiv 2306.00946"
    )
    min_length = 4
    length_step = 2
    length_unit = "number of tokens (instructions and their bits) of an instance"
    tagged = True
    model_kinds = ("decoder",)
    model_kinds_reason = (
        "is scored like a language model (each read's bit is the next input token, which "
        "bidirectional attention would see)"
    )
    answer_format = "at each read r: the last written bit (tagged; other positions unscored)"
    scored = "the reads only: the bit each r returns, predicted at the r"

    WRITE, READ, IGNORE_OP, ZERO, ONE = range(5)

    def __init__(self, **options) -> None:
        super().__init__(**options)
        self.vocab = ["w", "r", "i", "0", "1"]
        self.answer_symbols = [self.ZERO, self.ONE]

    def check_length(self, length: int, key: str) -> None:
        if length % 2:
            raise ValueError(
                f"{key}: task {self.name} has instances of even length only (an instruction "
                f"and its bit), got {length}; allowed: even lengths >= {self.min_length}"
            )

    def sample_inputs(self, length: int, batch_size: int, generator: torch.Generator) -> Tensor:
        steps = length // 2
        p_ignore = self.cfg.p_ignore
        u = torch.rand(batch_size, steps, generator=generator, dtype=torch.float64)
        ops = torch.where(u < p_ignore, self.IGNORE_OP, self.WRITE)  # (B, steps)
        ops = torch.where(u >= p_ignore + (1 - p_ignore) / 2, self.READ, ops)
        ops[:, 0], ops[:, -1] = self.WRITE, self.READ
        bits = torch.randint(0, 2, (batch_size, steps), generator=generator)
        bits = torch.where(ops == self.READ, self._last_written(ops, bits), bits)
        return torch.stack([ops, self.ZERO + bits], dim=2).flatten(1)  # (B, n): op, bit, …

    def _last_written(self, ops: Tensor, bits: Tensor) -> Tensor:
        """The bit of the last write at or before each step -> (B, steps)."""
        steps = torch.arange(ops.shape[1]).expand_as(ops)
        last = torch.where(ops == self.WRITE, steps, 0).cummax(dim=1).values  # step 0 writes
        return bits.gather(1, last)

    def solve(self, inputs: Tensor) -> Tensor:
        ops, bits = inputs[:, 0::2], inputs[:, 1::2] - self.ZERO  # (B, n/2) each
        read = self.ZERO + self._last_written(ops, bits)
        answers = torch.full_like(inputs, -1)
        answers[:, 0::2] = torch.where(ops == self.READ, read, -1)  # tagged at the r
        return answers
