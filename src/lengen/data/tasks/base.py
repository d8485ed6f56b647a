"""The task interface and the vectorised helpers several task families share.

A task maps an instance's input symbols to its answer symbols. **Length** is the number of input
symbols (the convention of the Chomsky-hierarchy benchmarks, Delétang et al., 2023); how input
and answer are laid out for a model is decided in ``lengen.data.layout``.

Symbols are integers in [0, n_symbols), named by ``task.vocab``; inputs and answers share this
one symbol space (the formatting layer adds the special tokens in front of it). Every generator
works on whole batches of tensors: no Python loop runs per instance or per token (the few loops
below run per tree level, per carry pass or per answer bit, each step vectorised over the batch).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from lengen.data.layout import format_batch, format_tagged, tagged_tokens, tokens
from lengen.lazy import torch
from lengen.schema import Config, integer, option

if TYPE_CHECKING:
    from torch import Tensor


# -- the typed config of a task --------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class TaskConfig(Config):
    """A task's typed config: its fields are the keys of the ``task:`` node of its yaml
    (``data.task.<key>``), each with its one default and its rule (``lengen.schema``). The
    base has none (parity, counting, … take no options).

    ``data_defaults``: what the task's yaml shows for the data node's keys where it differs
    from ``TaskData``'s defaults (``lengen.data.task_data.TaskDataConfig``): its training
    lengths, where the task's shortest instance or its grid makes 16 and 1 wrong. ``TaskData``
    built without those keys takes them from here, so the yaml and the class agree
    (``tests/data/test_options.py`` compares them).
    """

    prefix: ClassVar[str] = "data.task"
    data_defaults: ClassVar[Mapping[str, Any]] = {}


@dataclasses.dataclass(frozen=True)
class AlphabetConfig(TaskConfig):
    #: letters of the alphabet
    n_symbols: int = option(16, integer(minimum=2))


# -- tasks -----------------------------------------------------------------------------------
class Task:
    """Base class: a vocabulary, an answer length, a sampler of inputs and a pure solver.

    A task is built from its options as keywords (``Copy(n_symbols=8)``; the yaml's ``task:``
    node), checked by its config class ``Options`` into ``self.cfg``. Subclasses set ``vocab``
    (symbol names) and ``answer_symbols`` (the ids answers use) in ``__init__``, after
    ``super().__init__(**options)``, and define ``solve`` (and ``answer_length`` when it is
    not n).
    """

    #: the config class: the task's options, their defaults and rules
    Options: ClassVar[type[TaskConfig]] = TaskConfig
    #: the checked options (this default serves tasks whose own ``__init__`` takes no options)
    cfg: TaskConfig = TaskConfig()

    name = "task"
    #: Paper the task and its format follow.
    source = ""
    #: Shortest length at which an instance exists.
    min_length = 1
    #: What the answer is, in one line (docs and data card).
    answer_format = ""

    #: Axes of an instance's positions: 1 for sequences, 2 for grids, 3 for volumes
    #: (``lengen.data.tasks.grids``); for grid tasks the length is the side.
    axes = 1
    #: The model kinds that can run the task; None: every kind.
    model_kinds: tuple[str, ...] | None = None
    #: Lengths must be multiples of this (the patch size of ``shapes``; 1 elsewhere).
    length_step = 1
    #: What a length counts (data card, docs).
    length_unit = "number of input symbols of an instance"
    #: Tagged layout (``lengen.data.layout.format_tagged``): answer t belongs to input token t,
    #: ``answer_length(n) == n``, and ``solve`` marks the positions that are not scored with −1.
    tagged = False
    #: Why the model kinds outside ``model_kinds`` cannot run the task (TaskData's refusal);
    #: empty: the grid tasks' reason.
    model_kinds_reason = ""
    #: Which answer positions are scored (data card).
    scored = "every answer position (padding END symbols included)"

    vocab: list[str]
    answer_symbols: list[int]

    def __init__(self, **options) -> None:
        self.cfg = self.Options.from_keys(options, owner=type(self).__name__)

    @property
    def n_symbols(self) -> int:
        return len(self.vocab)

    def symbol(self, name: str) -> int:
        return self.vocab.index(name)

    def answer_length(self, length: int) -> int:
        return length

    def input_length(self, length: int) -> int:
        """Input symbols of an instance of this length (grids: the cells, side ** axes)."""
        return length

    def check_length(self, length: int, key: str) -> None:
        """Refuse (ValueError naming ``key``) a length this task cannot be generated at beyond
        ``min_length`` (``shapes``: whole patches)."""

    def grid_shape(self, length: int) -> tuple[int, ...] | None:
        """The token grid of an instance of this length; None for sequences."""
        return None

    def extent(self, length: int, model_kind: str) -> tuple[int, int]:
        """(positions along one axis, tokens) of an instance of this length as ``format``
        lays it out, computed without building one: what encodings and batches are sized
        from."""
        if self.tagged:
            width = tagged_tokens(self.input_length(length), model_kind)
        else:
            width = tokens(self.input_length(length), self.answer_length(length), model_kind)
        return width, width

    def format(self, inputs: Tensor, answers: Tensor, model_kind: str) -> dict:
        """inputs (B, n), answers (B, m) -> the model's batch (``lengen.data.layout``)."""
        if self.tagged:
            return format_tagged(inputs, answers, model_kind)
        return format_batch(inputs, answers, model_kind)

    @property
    def chance_accuracy(self) -> float:
        """Per-token accuracy of uniform guessing over the symbols answers actually use."""
        return 1.0 / len(self.answer_symbols)

    def sample_inputs(self, length: int, batch_size: int, generator: torch.Generator) -> Tensor:
        """Uniform random inputs over the whole vocabulary -> (batch_size, length), int64."""
        return torch.randint(0, self.n_symbols, (batch_size, length), generator=generator)

    def solve(self, inputs: Tensor) -> Tensor:
        """inputs (B, n) -> answers (B, answer_length(n)); a pure function."""
        raise NotImplementedError

    def depth(self, inputs: Tensor) -> Tensor | None:
        """Where the relevant information sits in each input, as a fraction in [0, 1] -> (B,);
        None for tasks without such a notion (only retrieval tasks define it)."""
        return None

    def describe(self) -> dict:
        """The task's parameters (the keys of ``data.task`` besides ``_target_``)."""
        return {key: getattr(self.cfg, key) for key in self.cfg.option_names()}


class AlphabetTask(Task):
    """A task on strings over ``n_symbols`` letters named 0, 1, …; answers use the same letters.

    Options (``AlphabetConfig``): ``n_symbols``, the alphabet size (``data.task.n_symbols``,
    at least 2).
    """

    Options = AlphabetConfig

    def __init__(self, **options) -> None:
        super().__init__(**options)
        self.vocab = [str(i) for i in range(self.cfg.n_symbols)]
        self.answer_symbols = list(range(self.cfg.n_symbols))


# -- shared vectorised helpers ---------------------------------------------------------------


def uniform_ints(low: Tensor | int, high: Tensor | int, generator: torch.Generator, shape=None):
    """Integers uniform in [low, high] (inclusive, elementwise; ``high >= low``) -> int64."""
    low = torch.as_tensor(low, dtype=torch.long)
    high = torch.as_tensor(high, dtype=torch.long)
    shape = (
        (low + high).shape if shape is None else shape
    )  # (torch.broadcast_shapes imports fx: 1 s)
    u = torch.rand(shape, generator=generator, dtype=torch.float64)
    # float64 keeps every integer below 2^53 reachable with equal probability (up to 2^-53)
    return low + (u * (high - low + 1).double()).long().clamp(max=high - low)


def normalise_digits(columns: Tensor, base: int, carry_in: bool = False) -> Tensor:
    """Column sums, least significant first (B, W), non-negative -> digits (B, W) in base.

    Resolves the carries of a long addition (or of a product's column sums) without a loop
    over positions: passes of ``c % base + carry`` shrink every column to at most 2·base − 2,
    then each remaining carry (0 or 1) comes from the last column before it that does not just
    propagate one (a cumulative maximum of indices). ``carry_in`` adds 1 at the lowest column.
    Whatever would carry out of column W − 1 is dropped: callers size W to hold the value.
    """
    columns = columns.long()
    while int(columns.max()) > 2 * base - 2:  # a few passes: log_base of the largest column
        carry = columns // base
        columns = columns % base
        columns[:, 1:] += carry[:, :-1]
    generate = columns >= base  # (B, W) column emits a carry whatever comes in
    propagate = columns == base - 1  # (B, W) column passes an incoming carry on
    positions = torch.arange(columns.shape[1]).expand_as(columns)
    # last column <= k that decides its own carry out (generates or kills); -1: none
    decider = torch.where(propagate, -1, positions).cummax(dim=1).values  # (B, W)
    decided_out = generate.gather(1, decider.clamp(min=0))  # (B, W)
    carry_out = torch.where(decider >= 0, decided_out, carry_in)  # (B, W)
    incoming = torch.zeros_like(columns)
    incoming[:, 0] = int(carry_in)
    incoming[:, 1:] = carry_out[:, :-1]
    return (columns + incoming) % base


def significant_length(digits: Tensor) -> Tensor:
    """Digits, least significant first (B, W) -> number of digits without leading zeros (>= 1,
    so zero is written as one digit) -> (B,)."""
    positions = torch.arange(1, digits.shape[1] + 1)
    return (positions * (digits != 0)).max(dim=1).values.clamp(min=1)


def terminated(digits: Tensor, lengths: Tensor, end: int, width: int) -> Tensor:
    """The first ``lengths`` digits of each row (B, W), then ``end`` up to ``width`` -> (B, width)."""
    batch, available = digits.shape
    out = torch.full((batch, width), end, dtype=torch.long)
    keep = min(available, width)
    written = torch.arange(keep) < lengths[:, None]  # (B, keep)
    out[:, :keep] = torch.where(written, digits[:, :keep], end)
    return out


def gather_shifted(inputs: Tensor, offset: Tensor, width: int, fill: int = 0) -> Tensor:
    """Row b's symbols from ``offset[b]`` on, ``width`` of them; past the end: ``fill``."""
    positions = offset[:, None] + torch.arange(width)  # (B, width)
    inside = positions < inputs.shape[1]
    values = inputs.gather(1, positions.clamp(max=inputs.shape[1] - 1))
    return torch.where(inside, values, fill)
