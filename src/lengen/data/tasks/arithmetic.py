"""Arithmetic: addition (plain and reversed digits), binary addition and multiplication, modular
arithmetic, integer square root, counting.

Numbers are digit tensors, never Python integers, so lengths of thousands of digits cost no more
than any other string: sums and products are column sums whose carries
``normalise_digits`` resolves in a few vectorised passes.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING

from lengen.data.layout import sequence_positions
from lengen.data.tasks.base import (
    Task,
    TaskConfig,
    gather_shifted,
    normalise_digits,
    significant_length,
    terminated,
    uniform_ints,
)
from lengen.data.tasks.strings import CHOMSKY
from lengen.lazy import torch
from lengen.schema import integer_in, one_of, option

if TYPE_CHECKING:
    from torch import Tensor


def digit_names(base: int) -> list[str]:
    return [str(i) if i < 10 else chr(ord("a") + i - 10) for i in range(base)]


def truth_value(key: str, value):
    """true or false; 0 and 1 are read as false and true, as tasks always have (an override
    ``data.task.reversed=1`` arrives as the integer 1)."""
    if value not in (True, False):
        raise ValueError(f"{key} must be true or false, got {value!r}")
    return bool(value)


#: ``data.task.positions`` of the addition tasks: the token's index (today's behaviour), position
#: coupling (Cho et al. 2024) or Abacus (McLeish et al. 2024)
POSITION_SCHEMES = ("index", "coupled", "abacus")
#: the model kinds task positions are laid out for (``lengen.data.layout.sequence_positions``)
POSITION_MODEL_KINDS = ("decoder", "encoder")


@dataclasses.dataclass(frozen=True)
class AdditionConfig(TaskConfig):
    #: digits per position (2 … 36: one symbol each, 0-9 then a-z)
    base: int = option(10, integer_in(2, 36))
    #: least significant digit first, inputs and answer (addition_reversed.yaml)
    reversed: bool = option(False, truth_value)
    #: the positions the model reads: index (0 … T−1), coupled or abacus (Addition's docstring)
    positions: str = option("index", one_of(*POSITION_SCHEMES))


@dataclasses.dataclass(frozen=True)
class AdditionReversedConfig(AdditionConfig):
    """``configs/data/addition_reversed.yaml``: the same task, digits least significant first."""

    reversed: bool = option(True, truth_value)


class Addition(Task):
    """Sum of two numbers in base ``base``: ``1 2 3 + 4 5 9`` -> ``0 5 8 2``.

    Length n = w1 + 1 + w2 with w1 = ⌈(n−1)/2⌉ and w2 = ⌊(n−1)/2⌋ digits (equal widths at odd
    n, as in Kazemnejad et al.'s "k-by-k" addition); digits are uniform, leading zeros
    included. The answer has the fixed width w1 + 1 (a leading 0 when there is no final
    carry). ``reversed``: operands and answer are written least significant digit first, the
    order in which carries are computed (Lee et al. 2023, "Teaching Arithmetic to Small
    Transformers"; Zhou et al. 2024). n = 1 and n = 2 are ``+`` and ``d +`` (an empty operand
    is 0).

    Options (``AdditionConfig``): ``base``, digits per position (``data.task.base``,
    2 … 36); ``reversed``, least significant digit first, inputs and answer; ``positions``,
    the position of each token the model reads (``inputs["positions"]``, shared by the batch):

    * ``index``: none given, the model's own 0 … T−1 (the default; batches as before);
    * ``coupled`` (position coupling; Cho et al., NeurIPS 2024, arXiv 2405.20671; reference
      ``HanseulJo/position-coupling``, ``src/data/addition.py``
      ``AdditionDatasetWithCoupledPositions`` and ``src/tokenization/tokenization.py``
      ``tokenize_for_decoder``): digits of equal significance in both operands and the answer
      share one position. With start s = 1 and w1 digits in the longer operand, a digit of
      significance i (0: least significant) is at s + w1 − i, so the answer's extra carry digit
      (i = w1) is at s; ``+`` and SEP (the reference's ``=``) are at s + w1 + 1; BOS is at 0.
      Reversed or not, a digit keeps its significance's position. Training shifts every
      position >= 1 by a random start (``pe.start_offset``; the reference draws s from
      1 … max_position − w1 − 1 per instance), evaluation starts at s = 1, as the reference.
    * ``abacus`` (Abacus embeddings; McLeish et al., NeurIPS 2024, arXiv 2405.17399; reference
      ``mcleish7/arithmetic``, ``abacus.py``): a digit's position is 1 + its offset inside its
      number counted from the least significant digit (the reference counts 1, 2, … along each
      run of digits, on numbers written least significant first), non-digits (``+``, SEP, BOS)
      0; training adds one k in 0 … ``pe.start_offset`` (the reference: 0 … max_k = 99) to the
      digits' positions.

    Task positions are laid out for ``model=decoder`` and ``model=encoder`` (the answer's at
    its slots); ``encoder_decoder`` is refused: lengen's cross-attention carries no positions,
    so source and answer positions could not be coupled (the reference's encoder–decoder
    collator passes no position IDs either).
    """

    Options = AdditionConfig
    name = "addition"
    source = "Kazemnejad et al. 2023 (NeurIPS); reversed: Lee et al. 2023 (arXiv:2307.03381)"
    answer_format = "the sum, w1 + 1 digits (fixed width)"

    def __init__(self, **options) -> None:
        super().__init__(**options)
        base = self.base = self.cfg.base
        self.reversed = self.cfg.reversed
        self.vocab = [*digit_names(base), "+"]
        self.answer_symbols = list(range(base))
        self.plus = base
        if self.reversed:
            self.name = "addition_reversed"
            self.answer_format = "the sum, w1 + 1 digits, least significant first"

    @staticmethod
    def widths(length: int) -> tuple[int, int]:
        return length // 2, (length - 1) // 2

    def answer_length(self, length: int) -> int:
        return self.widths(length)[0] + 1

    @property
    def supplies_positions(self) -> bool:
        """Whether batches carry the task's positions (``positions`` coupled or abacus)."""
        return self.cfg.positions != "index"

    def significance(self, length: int) -> tuple[Tensor, Tensor, Tensor]:
        """Each digit's significance (0: least significant) in token order -> first operand
        (w1,), second operand (w2,), answer (w1 + 1,)."""
        widths = (*self.widths(length), self.answer_length(length))
        if self.reversed:
            return tuple(torch.arange(width) for width in widths)
        return tuple(torch.arange(width - 1, -1, -1) for width in widths)

    def digit_positions(self, length: int) -> tuple[Tensor, Tensor, int]:
        """The task's positions at evaluation (no start offset) -> inputs (n,), answer (m,),
        and the position of ``+`` and SEP (Addition's docstring)."""
        first, second, answer = self.significance(length)
        if self.cfg.positions == "coupled":
            start, w1 = 1, len(first)

            def place(significance: Tensor) -> Tensor:
                return start + w1 - significance

            operator = start + w1 + 1
        else:  # abacus: 1 + the offset from the number's least significant digit

            def place(significance: Tensor) -> Tensor:
                return 1 + significance

            operator = 0
        plus = torch.full((1,), operator, dtype=torch.long)
        return torch.cat([place(first), plus, place(second)]), place(answer), operator

    def check_model_kind(self, model_kind: str) -> None:
        if model_kind not in POSITION_MODEL_KINDS:
            raise ValueError(
                f"data.task.positions={self.cfg.positions}: model={model_kind} has no task "
                f"positions (its cross-attention carries none, so source and answer cannot be "
                f"coupled); allowed: model=decoder or model=encoder, or data.task.positions=index"
            )

    def extent(self, length: int, model_kind: str) -> tuple[int, int]:
        """(largest task position + 1 at evaluation, tokens) with task positions (what a
        learned table is sized from); else the index's (tokens, tokens)."""
        width, tokens = super().extent(length, model_kind)
        if not self.supplies_positions:
            return width, tokens
        self.check_model_kind(model_kind)
        return int(self.sequence_positions(length, model_kind).max()) + 1, tokens

    def sequence_positions(self, length: int, model_kind: str) -> Tensor:
        """The positions of an instance of this length as the model kind reads them -> (T,)."""
        input_positions, answer_positions, sep = self.digit_positions(length)
        return sequence_positions(input_positions, answer_positions, sep, model_kind)

    def format(self, inputs: Tensor, answers: Tensor, model_kind: str) -> dict:
        """The batch of ``Task.format``, plus ``inputs["positions"]`` (T,) with task
        positions."""
        batch = super().format(inputs, answers, model_kind)
        if self.supplies_positions:
            self.check_model_kind(model_kind)
            batch["inputs"]["positions"] = self.sequence_positions(inputs.shape[1], model_kind)
        return batch

    def sample_inputs(self, length: int, batch_size: int, generator: torch.Generator) -> Tensor:
        inputs = torch.randint(0, self.base, (batch_size, length), generator=generator)
        inputs[:, self.widths(length)[0]] = self.plus
        return inputs

    def solve(self, inputs: Tensor) -> Tensor:
        w1, w2 = self.widths(inputs.shape[1])
        first, second = inputs[:, :w1], inputs[:, w1 + 1 :]
        if not self.reversed:  # compute least significant first
            first, second = first.flip(1), second.flip(1)
        columns = torch.zeros(inputs.shape[0], w1 + 1, dtype=torch.long)
        columns[:, :w1] += first
        columns[:, :w2] += second
        total = normalise_digits(columns, self.base)  # (B, w1 + 1) least significant first
        return total if self.reversed else total.flip(1)


class AdditionReversed(Addition):
    """Sum of two numbers in base ``base``, each written least significant digit first:
    ``3 2 1 + 9 5 4`` -> ``2 8 5 0``.

    ``Addition`` whose option ``reversed`` defaults to true, so that
    ``configs/data/addition_reversed.yaml`` shows its class's defaults.
    """

    Options = AdditionReversedConfig


class _BinaryOperation(Task):
    """Chomsky-benchmark binary arithmetic: ``a op b``, little-endian, a random split."""

    min_length = 1

    def __init__(self, **options) -> None:
        super().__init__(**options)
        self.vocab = ["0", "1", self.operator, "END"]
        self.answer_symbols = [0, 1, 3]
        self.op, self.end = 2, 3

    def sample_inputs(self, length: int, batch_size: int, generator: torch.Generator) -> Tensor:
        # the operator's position = digits of a: uniform in 1 … n−2 (both operands non-empty);
        # at n <= 2 the instance is "op" or "d op" (an empty operand is 0)
        low, high = (1, length - 2) if length >= 3 else (length - 1, length - 1)
        split = uniform_ints(low, high, generator, (batch_size, 1))
        bits = torch.randint(0, 2, (batch_size, length), generator=generator)
        return torch.where(torch.arange(length) == split, self.op, bits)

    def operands(self, inputs: Tensor) -> tuple[Tensor, Tensor]:
        """inputs (B, n) -> a, b as bits, least significant first, zero padded -> (B, n) each."""
        n = inputs.shape[1]
        split = (inputs == self.op).long().argmax(dim=1)  # (B,)
        a = torch.where(torch.arange(n) < split[:, None], inputs, 0)
        b = gather_shifted(inputs, split + 1, n)  # after the operator; past the end: 0
        return a, b


class BinaryAddition(_BinaryOperation):
    """Sum of two little-endian binary numbers: ``0 0 1 + 0 1 1 0 1`` -> ``0 1 0 1 1 END …``
    (4 + 22 = 26); the sum without leading zeros, then ``END`` up to n + 1 symbols.

    As in the reference, the first operand has uniform width 1 … n−2; unlike it, operands may be
    zero (the reference draws them from 1 … 2^w − 1), so every bit string is possible.
    """

    name = "binary_addition"
    operator = "+"
    source = CHOMSKY + " (binary addition, CS)"
    answer_format = "the sum, least significant bit first, then END (n + 1 symbols)"

    def answer_length(self, length: int) -> int:
        return length + 1

    def solve(self, inputs: Tensor) -> Tensor:
        a, b = self.operands(inputs)
        total = normalise_digits(a + b, 2)  # (B, n) the sum has at most n − 1 bits
        return terminated(total, significant_length(total), self.end, inputs.shape[1] + 1)


class BinaryMultiplication(_BinaryOperation):
    """Product of two little-endian binary numbers: ``0 0 1 * 0 1 1 0 1`` -> ``0 0 0 1 1 0 1 1
    END`` (4 · 22 = 88); the product without leading zeros, then ``END`` up to n symbols."""

    name = "binary_multiplication"
    operator = "*"
    source = CHOMSKY + " (binary multiplication, CS)"
    answer_format = "the product, least significant bit first, then END (n symbols)"

    def solve(self, inputs: Tensor) -> Tensor:
        batch, n = inputs.shape
        a, b = self.operands(inputs)
        # column sums of the long multiplication: a full convolution per row (exact in float64)
        columns = torch.nn.functional.conv1d(
            a.double()[None],  # (1, B, n)
            b.double().flip(1)[:, None],  # (B, 1, n)
            padding=n - 1,
            groups=batch,
        )[0, :, :n]  # (B, n) the product has at most n − 1 bits
        product = normalise_digits(columns.round().long(), 2)
        return terminated(product, significant_length(product), self.end, n)


@dataclasses.dataclass(frozen=True)
class ModulusConfig(TaskConfig):
    #: at most 10, so every residue is one symbol (the paper: 5)
    modulus: int = option(5, integer_in(2, 10))


class ModularArithmetic(Task):
    """Value modulo ``modulus`` of ``d op d op … d`` with op in {+, -, *} and the usual
    precedence: ``1 + 2 * 3 - 4`` -> ``3`` (mod 5). An even length ends with one blank ``_``
    (the reference shortens even lengths by one instead).

    Options (``ModulusConfig``): ``modulus``, at most 10 so every residue is one symbol (the
    paper: 5).
    """

    Options = ModulusConfig
    name = "modular_arithmetic"
    source = CHOMSKY + " (modular arithmetic, regular)"
    answer_format = "1 symbol: the value modulo the modulus"

    def __init__(self, **options) -> None:
        super().__init__(**options)
        modulus = self.modulus = self.cfg.modulus
        self.vocab = [str(i) for i in range(modulus)] + ["+", "-", "*", "_"]
        self.answer_symbols = list(range(modulus))
        self.plus, self.minus, self.times, self.blank = range(modulus, modulus + 4)

    def answer_length(self, length: int) -> int:
        return 1

    def sample_inputs(self, length: int, batch_size: int, generator: torch.Generator) -> Tensor:
        digits = torch.randint(0, self.modulus, (batch_size, length), generator=generator)
        ops = self.plus + torch.randint(0, 3, (batch_size, length), generator=generator)
        inputs = torch.where(torch.arange(length) % 2 == 0, digits, ops)
        if length % 2 == 0:
            inputs[:, -1] = self.blank
        return inputs

    def solve(self, inputs: Tensor) -> Tensor:
        p = self.modulus
        expression = inputs[:, : inputs.shape[1] - (inputs.shape[1] + 1) % 2]  # drop the blank
        values, ops = expression[:, ::2], expression[:, 1::2]  # (B, k), (B, k − 1)
        batch, k = values.shape
        # a term starts at the first digit and after every + or -; a '-' negates its term
        starts = torch.ones(batch, k, dtype=torch.bool)
        starts[:, 1:] = ops != self.times
        negated = torch.zeros(batch, k, dtype=torch.bool)
        negated[:, 1:] = ops == self.minus
        values = torch.where(negated, (p - values) % p, values)
        # segmented running product mod p (Hillis-Steele scan: log2(k) vectorised steps)
        flags, shift = starts.clone(), 1
        while shift < k:
            product = torch.where(
                flags[:, shift:], values[:, shift:], values[:, shift:] * values[:, :-shift] % p
            )
            flags = torch.cat([flags[:, :shift], flags[:, shift:] | flags[:, :-shift]], dim=1)
            values = torch.cat([values[:, :shift], product], dim=1)
            shift *= 2
        ends = torch.ones(batch, k, dtype=torch.bool)  # a term ends before a + or - and at the end
        ends[:, :-1] = starts[:, 1:]
        return (torch.where(ends, values, 0).sum(dim=1, keepdim=True) % p).long()


class ComputeSqrt(Task):
    """Floor of the square root of an n-bit number, big-endian, with a fixed width of ⌈n/2⌉
    bits: ``1 0 0 1 0 1`` (37) -> ``1 1 0`` (6). Inputs are uniform n-bit strings (leading zeros
    and zero included; the reference draws 1 … 2^n − 1).

    The solver is the digit-by-digit (restoring) method: one vectorised step per answer bit.
    """

    name = "compute_sqrt"
    source = CHOMSKY + " (compute sqrt, CS)"
    answer_format = "⌊√x⌋ in ⌈n/2⌉ bits, most significant first"

    def __init__(self, **options) -> None:
        super().__init__(**options)
        self.vocab = ["0", "1"]
        self.answer_symbols = [0, 1]

    def answer_length(self, length: int) -> int:
        return math.ceil(length / 2)

    #: Leading bit pairs whose square root int64 arithmetic computes exactly (value < 2^60).
    int64_pairs = 30

    def solve(self, inputs: Tensor) -> Tensor:
        batch, n = inputs.shape
        half = math.ceil(n / 2)
        bits = torch.nn.functional.pad(inputs, (n % 2, 0))  # (B, 2·half) big-endian, even width
        # the leading 2k bits: exact integer square root in int64 (float guess, then correct)
        k = min(half, self.int64_pairs)
        weights = 2 ** torch.arange(2 * k - 1, -1, -1)  # (2k,) big-endian place values
        top = (bits[:, : 2 * k] * weights).sum(dim=1)  # (B,) < 2^60
        root = top.double().sqrt().floor().long()
        for _ in range(2):  # the float guess is off by at most one
            root = torch.where(root * root > top, root - 1, root)
            root = torch.where((root + 1) * (root + 1) <= top, root + 1, root)
        if k == half:
            return root[:, None] >> torch.arange(half - 1, -1, -1) & 1
        # the other bits: the digit-by-digit (restoring) method, one vectorised step per bit,
        # on bit tensors (least significant first); remainder <= 2·root always
        width = half + 2
        remainder = (top - root * root)[:, None] >> torch.arange(width) & 1  # (B, width)
        root = torch.nn.functional.pad(
            root[:, None] >> torch.arange(k) & 1, (0, half - k)
        )  # (B, half)
        one_zero = torch.tensor([1, 0]).expand(batch, 2)
        positions = torch.arange(width).expand(batch, width)
        for step in range(k, half):
            pair = bits[:, 2 * step : 2 * step + 2].flip(1)  # the next two bits, low bit first
            remainder = torch.cat([pair, remainder[:, :-2]], dim=1)  # 4·remainder + pair
            trial = torch.cat([one_zero, root], dim=1)  # 4·root + 1, (B, width)
            # compare at the most significant differing bit; subtract with borrows: a borrow
            # enters bit j iff trial has the 1 at the last differing bit below j
            differs = remainder != trial
            last_differing = torch.where(differs, positions, -1).cummax(dim=1).values
            borrow_out = (last_differing >= 0) & (trial.gather(1, last_differing.clamp(min=0)) == 1)
            fits = ~borrow_out[:, -1:]  # (B, 1) remainder >= trial
            borrow_in = torch.nn.functional.pad(borrow_out[:, :-1], (1, 0)).long()
            difference = remainder ^ trial ^ borrow_in
            remainder = torch.where(fits, difference, remainder)
            root = torch.cat([fits.long(), root[:, :-1]], dim=1)  # 2·root + fits
        return root.flip(1)


class Counting(Task):
    """How many ``b`` in a string over {a, b}? The count in decimal with the fixed width of n's
    digits, most significant first: ``a b b a b`` -> ``3``; at n = 12: ``0 7``."""

    name = "counting"
    source = "decimal counting; cf. Chang & Bisk 2024, Language Models Need Inductive Biases to Count Inductively"
    answer_format = "the count of b, len(str(n)) decimal digits"

    def __init__(self, **options) -> None:
        super().__init__(**options)
        self.vocab = ["a", "b", *digit_names(10)]
        self.answer_symbols = list(range(2, 12))

    def answer_length(self, length: int) -> int:
        return len(str(length))

    def sample_inputs(self, length: int, batch_size: int, generator: torch.Generator) -> Tensor:
        return torch.randint(0, 2, (batch_size, length), generator=generator)

    def solve(self, inputs: Tensor) -> Tensor:
        count = inputs.sum(dim=1, keepdim=True)  # (B, 1)
        powers = 10 ** torch.arange(self.answer_length(inputs.shape[1]) - 1, -1, -1)
        return 2 + count // powers % 10
