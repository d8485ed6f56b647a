"""RULER's synthetic retrieval tasks, scaled to small vocabularies: multi-key and multi-value
needle in a haystack, and variable tracking.

Hsieh et al. 2024, "RULER: What's the Real Context Size of Your Long-Context Language Models?"
(arXiv 2404.06654); reference code NVIDIA/RULER, ``scripts/data/synthetic/niah.py`` and
``variable_tracking.py``, task settings in ``scripts/synthetic.yaml`` (``niah_multikey_1``: 4
keys, 1 queried; ``niah_multivalue``: 1 key, 4 values; ``vt``: 1 chain, 4 hops), scored by
``string_match_all`` (``scripts/eval/synthetic/constants.py``): per instance, the fraction of
the reference values (or variable names) that occur anywhere in the generated text.

What changes at this scale (docs/tasks.md, "RULER and indexing"):

* **Haystack.** RULER's ``repeat`` haystack (the noise sentences "The grass is green. …", its
  ``niah_single_1`` and variable tracking's noise), as passkey writes it: filler symbols
  ``f0 f1 f2 f3`` repeated by absolute position; needles overwrite the filler where they sit.
  RULER's essay haystack has no small-vocabulary analogue.
* **Needles.** "One of the special magic numbers for {key} is: {value}." becomes ``key v1 … vD``:
  a key symbol (keys occur only in needles and in the query) and a value of ``digits`` symbols
  over ``n_values`` value symbols (RULER: a word, and a 7-digit number). Needles sit at uniformly
  drawn, non-overlapping places (every arrangement of needles and filler equally likely).
* **Scoring.** Answers are written in a canonical order and scored per position (lengen's
  teacher-forced token accuracy and exact match): multi-value answers its values in the order
  they occur in the input (RULER shuffles its needles and accepts any order); variable tracking
  answers the chain's variables in assignment order. Exact match here implies RULER's score 1
  on the instance; RULER's score 1 does not require the order.

Every task exposes ``depth``: where the part of the answer farthest from the query sits, as a
fraction of the haystack (accuracy by depth, ``accuracy_by_depth.json``).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from lengen.data.tasks.base import Task, TaskConfig, gather_shifted
from lengen.lazy import torch
from lengen.schema import integer, option

if TYPE_CHECKING:
    from torch import Tensor

#: filler symbols, repeated by absolute position (passkey's convention)
N_FILLERS = 4
#: training lengths of these tasks' yamls: room for the needles and some haystack
RULER_DATA = {"len": 32}


# -- shared vectorised helpers ---------------------------------------------------------------
def haystack(batch_size: int, length: int, first_filler: int) -> Tensor:
    """Filler ``f0 f1 f2 f3 f0 …`` by absolute position -> (B, length)."""
    return (first_filler + torch.arange(length) % N_FILLERS).repeat(batch_size, 1)


def place(widths: Tensor, span: int, generator: torch.Generator) -> Tensor:
    """Starts of U non-overlapping units of ``widths`` (B, U), kept in their order, inside
    ``span`` symbols -> (B, U). Every row's widths sum to the same total. Each arrangement of
    the units among the free symbols is equally likely: U of the (free + U) slots of a row of
    free filler symbols and U units are the units'."""
    batch_size, units = widths.shape
    free = span - int(widths[0].sum())
    order = torch.rand(batch_size, free + units, generator=generator).argsort(dim=1)
    slots = order[:, :units].sort(dim=1).values  # (B, U) a uniform U-subset, ascending
    earlier = (widths - 1).cumsum(dim=1) - (widths - 1)  # (B, U) extra width of earlier units
    return slots + earlier


def write(inputs: Tensor, starts: Tensor, symbols: Tensor, widths: Tensor) -> Tensor:
    """Overwrite inputs (B, n) with each unit's first ``widths`` (B, U) symbols (B, U, W)
    from ``starts`` (B, U) on -> a new (B, n)."""
    batch_size, length = inputs.shape
    columns = torch.arange(symbols.shape[2])  # (W,)
    positions = starts[:, :, None] + columns  # (B, U, W)
    # a unit's padding goes to a scratch column past the end, dropped below
    positions = torch.where(columns < widths[:, :, None], positions, length)
    scratch = torch.cat([inputs, inputs[:, :1]], dim=1)  # (B, n+1)
    scratch.scatter_(1, positions.flatten(1), symbols.flatten(1))
    return scratch[:, :length]


def first_match(inputs: Tensor, symbol: Tensor) -> Tensor:
    """Index of the first position of each row of inputs (B, n) holding ``symbol`` (B,) -> (B,)."""
    return (inputs == symbol[:, None]).long().argmax(dim=1)


def distinct_values(
    batch_size: int, count: int, n_values: int, digits: int, generator: torch.Generator
) -> Tensor:
    """``count`` distinct values per row, each ``digits`` symbols over ``n_values``, uniform
    among distinct tuples -> (B, count, digits). A small value space is shuffled whole (no
    rejection however full it is); a large one is drawn and the rows with a repeat redrawn,
    which is rare there (callers check count <= n_values ** digits)."""
    space = n_values**digits
    if space <= 1024:
        codes = torch.rand(batch_size, space, generator=generator).argsort(dim=1)[:, :count]
        powers = n_values ** torch.arange(digits - 1, -1, -1)  # (D,) most significant first
        return codes[:, :, None] // powers % n_values  # (B, count, D)
    shape = (batch_size, count, digits)
    values = torch.randint(0, n_values, shape, generator=generator)
    while True:
        equal = (values[:, :, None, :] == values[:, None, :, :]).all(dim=-1)  # (B, K, K)
        repeated = equal.sum(dim=(1, 2)) > count  # (B,) a match off the diagonal
        if not repeated.any():
            return values
        redraw = (int(repeated.sum()), count, digits)
        values[repeated] = torch.randint(0, n_values, redraw, generator=generator)


def check_at_least(key: str, value: int, needed: int, why: str) -> None:
    """Refuse ``data.task.<key>`` below ``needed`` (a bound that reads other options)."""
    if value < needed:
        raise ValueError(f"data.task.{key} must be >= {needed} ({why}), got {value}")


# -- multi-key needle in a haystack ----------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class NeedleConfig(TaskConfig):
    data_defaults = RULER_DATA
    #: needles in the haystack (multi-key: keys, one queried; multi-value: values of the key)
    n_needles: int = option(4, integer())
    #: key alphabet
    n_keys: int = option(16, integer())
    #: value alphabet (symbols of a value)
    n_values: int = option(10, integer(minimum=2))
    #: symbols of a value
    digits: int = option(2, integer())


@dataclasses.dataclass(frozen=True)
class MultiKeyNeedleConfig(NeedleConfig):
    def check(self) -> None:
        check_at_least("n_keys", self.n_keys, self.n_needles, "a distinct key per needle")


class NeedleTask(Task):
    """Shared by the two needle tasks: vocabulary (values, keys, fillers) and needle layout."""

    Options = NeedleConfig
    source = "Hsieh et al. 2024, RULER (arXiv 2404.06654); NVIDIA/RULER niah.py"

    def __init__(self, **options) -> None:
        super().__init__(**options)
        cfg = self.cfg
        self.n_needles, self.n_keys, self.n_values = cfg.n_needles, cfg.n_keys, cfg.n_values
        self.digits = cfg.digits
        self.vocab = [str(i) for i in range(cfg.n_values)]
        self.vocab += [f"k{i}" for i in range(cfg.n_keys)]
        self.vocab += [f"f{i}" for i in range(N_FILLERS)]
        self.answer_symbols = list(range(cfg.n_values))
        self.first_key = cfg.n_values
        self.first_filler = cfg.n_values + cfg.n_keys

    @property
    def width(self) -> int:
        """Symbols of a needle: its key and its value."""
        return 1 + self.digits

    @property
    def min_length(self) -> int:  # the needles and the query must fit
        return self.n_needles * self.width + 1

    def needles(self, keys: Tensor, length: int, generator: torch.Generator) -> Tensor:
        """Haystack of n − 1 symbols holding the needles ``key value`` of keys (B, N), in this
        order, values uniform -> (B, n − 1)."""
        batch_size, count = keys.shape
        values = torch.randint(
            0, self.n_values, (batch_size, count, self.digits), generator=generator
        )
        symbols = torch.cat([self.first_key + keys[:, :, None], values], dim=2)  # (B, N, 1+D)
        widths = torch.full((batch_size, count), self.width)
        starts = place(widths, length - 1, generator)  # (B, N)
        filler = haystack(batch_size, length - 1, self.first_filler)
        return write(filler, starts, symbols, widths)


class MultiKeyNeedle(NeedleTask):
    """Needles ``key value`` with distinct keys in a repeated-filler haystack, then one of the
    keys; answer its value. ``f0 k3 4 1 f0 k9 0 7 f0 f1 k3`` -> ``4 1``.

    The haystack is the first n − 1 symbols: ``f0 f1 f2 f3`` by absolute position, overwritten
    by ``n_needles`` needles of 1 + ``digits`` symbols at uniformly drawn, non-overlapping places;
    the keys are distinct (the others are distractors), values uniform. The last symbol is the
    key of a uniformly chosen needle. ``depth`` = the queried needle's start / (n − 2 − digits).
    RULER ``niah_multikey_1`` (4 keys, repeat haystack here, essay there).

    Options (``MultiKeyNeedleConfig``): ``n_needles`` (keys in the haystack, one queried),
    ``n_keys`` (key alphabet, >= n_needles), ``n_values`` (value alphabet), ``digits``
    (symbols of a value); lengths start at n_needles · (1 + digits) + 1.
    """

    Options = MultiKeyNeedleConfig
    name = "niah_multikey"
    answer_format = "the queried key's value (digits symbols)"

    def __init__(self, **options) -> None:
        super().__init__(**options)
        self.cfg.check()

    def answer_length(self, length: int) -> int:
        return self.digits

    def sample_inputs(self, length: int, batch_size: int, generator: torch.Generator) -> Tensor:
        order = torch.rand(batch_size, self.n_keys, generator=generator).argsort(dim=1)
        keys = order[:, : self.n_needles]  # (B, N) distinct keys
        chosen = torch.randint(0, self.n_needles, (batch_size, 1), generator=generator)
        query = self.first_key + keys.gather(1, chosen)  # (B, 1)
        return torch.cat([self.needles(keys, length, generator), query], dim=1)

    def _needle(self, inputs: Tensor) -> Tensor:
        """Start of the queried needle -> (B,)."""
        return first_match(inputs[:, :-1], inputs[:, -1])

    def solve(self, inputs: Tensor) -> Tensor:
        return gather_shifted(inputs, self._needle(inputs) + 1, self.digits)

    def depth(self, inputs: Tensor) -> Tensor:
        return self._needle(inputs).double() / max(1, inputs.shape[1] - 1 - self.width)


class MultiValueNeedle(NeedleTask):
    """Needles ``key value`` that all carry one key, in a repeated-filler haystack, then the
    key; answer every value, in the order they occur. ``f0 k3 4 1 f0 k3 0 7 f0 k3`` ->
    ``4 1 0 7``.

    As ``niah_multikey`` with ``n_needles`` needles of one uniformly drawn key (values uniform,
    so two may be equal); the answer is the n_needles values, each of ``digits`` symbols.
    ``depth`` = the first needle's start / (n − 1 − n_needles · (1 + digits)): where the
    answer's part farthest from the query sits. RULER ``niah_multivalue`` (1 key, 4 values).

    Options (``NeedleConfig``): ``n_needles`` (values of the key), ``n_keys``, ``n_values``,
    ``digits``; lengths start at n_needles · (1 + digits) + 1.
    """

    name = "niah_multivalue"
    answer_format = "the key's values in input order (n_needles · digits symbols)"

    def answer_length(self, length: int) -> int:
        return self.n_needles * self.digits

    def sample_inputs(self, length: int, batch_size: int, generator: torch.Generator) -> Tensor:
        key = torch.randint(0, self.n_keys, (batch_size, 1), generator=generator)
        keys = key.expand(batch_size, self.n_needles)  # (B, N) the one key, N times
        return torch.cat([self.needles(keys, length, generator), self.first_key + key], dim=1)

    def _needles(self, inputs: Tensor) -> Tensor:
        """Starts of the key's needles, ascending -> (B, N)."""
        match = inputs[:, :-1] == inputs[:, -1:]  # (B, n-1)
        positions = torch.arange(match.shape[1]).expand_as(match)
        late = torch.where(match, positions, match.shape[1])  # non-matches sort last
        return late.sort(dim=1).values[:, : self.n_needles]

    def solve(self, inputs: Tensor) -> Tensor:
        values = self._needles(inputs)[:, :, None] + 1 + torch.arange(self.digits)  # (B, N, D)
        return inputs.gather(1, values.flatten(1))  # (B, N·D)

    def depth(self, inputs: Tensor) -> Tensor:
        latest = inputs.shape[1] - 1 - self.n_needles * self.width
        return self._needles(inputs)[:, 0].double() / max(1, latest)


# -- variable tracking -----------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class VariableTrackingConfig(TaskConfig):
    data_defaults = RULER_DATA
    #: chains of assignments (the first is queried, the others are distractors)
    chains: int = option(1, integer())
    #: copies per chain: a chain binds hops + 1 variables to its value
    hops: int = option(4, integer())
    #: variable alphabet (>= chains · (hops + 1): every variable is assigned once)
    n_vars: int = option(16, integer())
    #: value alphabet (symbols of a value)
    n_values: int = option(10, integer(minimum=2))
    #: symbols of a value
    digits: int = option(2, integer())

    def check(self) -> None:
        needed = self.chains * (self.hops + 1)
        check_at_least("n_vars", self.n_vars, needed, "distinct variables: chains · (hops + 1)")
        if self.n_values**self.digits < self.chains:
            raise ValueError(
                f"data.task.digits: {self.chains} chains need distinct values; n_values ** "
                f"digits = {self.n_values**self.digits} < {self.chains}"
            )


class VariableTracking(Task):
    """Chains of assignments ``x = 4 7``, ``y = x``, … hidden in filler, then a value; answer
    every variable that holds it, in assignment order. ``x3 = 4 7 f2 x0 = x3 f1 x5 = x0 4 7`` ->
    ``x3 x0 x5``.

    Each of ``chains`` chains is a value statement ``x = v1 … vD`` (2 + digits symbols) and
    ``hops`` copies ``y = x`` (3 symbols), each copying the chain's previous variable. The
    statements of all chains are interleaved at random (each chain's in its order) and placed at
    uniformly drawn, non-overlapping places in the first n − digits symbols, whose filler is
    ``f0 f1 f2 f3`` by absolute position; variables are distinct, the chains' values distinct.
    The last ``digits`` symbols are the first chain's value. ``depth`` = the queried value
    statement's start / (n − digits − (2 + digits + 3 · hops)).

    RULER ``variable_tracking.py`` ("VAR X = 12345", "VAR Y = VAR X"; ``vt``: 1 chain, 4 hops);
    RULER scores the set of names, here they are written in chain order.

    Options (``VariableTrackingConfig``): ``chains``, ``hops``, ``n_vars`` (variable alphabet,
    >= chains · (hops + 1)), ``n_values`` (value alphabet), ``digits`` (symbols of a value);
    lengths start at chains · (2 + digits + 3 · hops) + digits.
    """

    Options = VariableTrackingConfig
    name = "variable_tracking"
    source = "Hsieh et al. 2024, RULER (arXiv 2404.06654); NVIDIA/RULER variable_tracking.py"
    answer_format = "the variables holding the queried value, in assignment order (hops + 1)"

    def __init__(self, **options) -> None:
        super().__init__(**options)
        cfg = self.cfg
        cfg.check()
        self.chains, self.hops, self.digits = cfg.chains, cfg.hops, cfg.digits
        self.n_vars, self.n_values = cfg.n_vars, cfg.n_values
        self.vocab = [f"x{i}" for i in range(cfg.n_vars)] + [str(i) for i in range(cfg.n_values)]
        self.vocab += ["="] + [f"f{i}" for i in range(N_FILLERS)]
        self.answer_symbols = list(range(cfg.n_vars))
        self.first_value = cfg.n_vars
        self.equals = cfg.n_vars + cfg.n_values
        self.first_filler = self.equals + 1

    @property
    def chain_width(self) -> int:
        """Symbols of one chain's statements."""
        return 2 + self.digits + 3 * self.hops

    @property
    def min_length(self) -> int:  # every statement and the query must fit
        return self.chains * self.chain_width + self.digits

    def answer_length(self, length: int) -> int:
        return self.hops + 1

    def sample_inputs(self, length: int, batch_size: int, generator: torch.Generator) -> Tensor:
        chains, links, digits = self.chains, self.hops + 1, self.digits
        statements = chains * links
        order = torch.rand(batch_size, self.n_vars, generator=generator).argsort(dim=1)
        names = order[:, :statements].view(batch_size, chains, links)  # (B, C, h+1) distinct

        values = distinct_values(batch_size, chains, self.n_values, digits, generator)
        values = self.first_value + values  # (B, C, D) a value per chain, distinct
        # statement k of the interleaving: chain[k], its rank[k]-th statement (0: the value)
        shuffle = torch.rand(batch_size, statements, generator=generator).argsort(dim=1)
        chain = shuffle // links  # (B, S) each chain h+1 times, uniformly interleaved
        one_hot = torch.nn.functional.one_hot(chain, chains)  # (B, S, C)
        rank = (one_hot.cumsum(dim=1) * one_hot).sum(dim=2) - 1  # (B, S)
        lhs = names[torch.arange(batch_size)[:, None], chain, rank]  # (B, S)
        rhs = names[torch.arange(batch_size)[:, None], chain, (rank - 1).clamp(min=0)]
        width = max(3, 2 + digits)
        symbols = torch.full((batch_size, statements, width), self.equals)
        symbols[:, :, 0] = lhs
        value = values[torch.arange(batch_size)[:, None], chain]  # (B, S, D)
        is_value = (rank == 0)[:, :, None]
        symbols[:, :, 2 : 2 + digits] = torch.where(is_value, value, symbols[:, :, 2 : 2 + digits])
        symbols[:, :, 2] = torch.where(rank == 0, symbols[:, :, 2], rhs)
        widths = torch.where(rank == 0, 2 + digits, 3)  # (B, S)
        span = length - digits
        starts = place(widths, span, generator)
        body = write(haystack(batch_size, span, self.first_filler), starts, symbols, widths)
        return torch.cat([body, values[:, 0]], dim=1)

    def _value_statement(self, inputs: Tensor) -> Tensor:
        """Start of the statement ``x = v1 … vD`` that assigns the queried value -> (B,)."""
        digits = self.digits
        body, query = inputs[:, :-digits], inputs[:, -digits:]  # (B, n-D), (B, D)
        width = body.shape[1]
        padded = torch.cat([body, torch.full((body.shape[0], digits + 1), -1)], dim=1)
        match = padded[:, 1 : 1 + width] == self.equals  # (B, n-D) "=" after position t
        for i in range(digits):  # one step per value symbol, vectorised over the batch
            match &= padded[:, 2 + i : 2 + i + width] == query[:, i : i + 1]
        return match.long().argmax(dim=1)

    def solve(self, inputs: Tensor) -> Tensor:
        body = inputs[:, : -self.digits]  # (B, n-D)
        width = body.shape[1]
        batch = torch.arange(inputs.shape[0])
        padded = torch.cat([body, torch.full((body.shape[0], 2), -1)], dim=1)
        assigns = padded[:, 1 : 1 + width] == self.equals  # (B, n-D) "=" after position t
        read = padded[:, 2 : 2 + width]  # (B, n-D) what the statement at t reads
        holder = body[batch, self._value_statement(inputs)]  # (B,) the chain's first variable
        answer = [holder]
        for _ in range(self.hops):  # one step per answer symbol: who copies the last holder
            copies = assigns & (read == holder[:, None])  # (B, n-D) "y = holder" starts at t
            holder = body[batch, copies.long().argmax(dim=1)]
            answer.append(holder)
        return torch.stack(answer, dim=1)  # (B, h+1)

    def depth(self, inputs: Tensor) -> Tensor:
        latest = inputs.shape[1] - self.digits - self.chain_width
        return self._value_statement(inputs).double() / max(1, latest)
