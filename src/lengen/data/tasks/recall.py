"""Multi-query associative recall (MQAR), scored at each query (a tagged task,
``lengen.data.layout.format_tagged``)."""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING

from lengen.data.tasks.base import Task, TaskConfig
from lengen.lazy import torch
from lengen.schema import flag, integer, interval, option

if TYPE_CHECKING:
    from torch import Tensor


@dataclasses.dataclass(frozen=True)
class MQARConfig(TaskConfig):
    #: symbols: 0 the blank, keys 1 … vocab_size/2 − 1, values vocab_size/2 … vocab_size − 1
    #: (Zoology: 8192; scaled down, as long as the longest length has enough distinct keys)
    vocab_size: int = option(256, integer(minimum=4))
    #: share of the length taken by the key-value pairs: ⌊kv_fraction · n / 2⌋ pairs (Zoology's
    #: 8 pairs at length 64: 0.25; at most 0.5, where the queries just fit behind them)
    kv_fraction: float = option(0.25, interval(0.0, 0.5, open_low=True))
    #: the power law of the query gaps: P(gap g) ∝ (g + 1)^(power_a − 1); 1: uniform
    power_a: float = option(0.01, interval(0.0, 1.0, open_low=True))
    #: fill the positions that hold no query with random symbols (else the blank 0)
    random_non_queries: bool = option(True, flag())

    data_defaults = {"len": 64}


class MQAR(Task):
    """Multi-query associative recall as Zoology generates it: ⌊kv_fraction · n / 2⌋ key-value
    pairs (keys distinct, values distinct), then a query region where every key is asked once,
    at an even offset 2g; the answer is the key's value, scored at the query's own token (as
    Zoology's labels), every other position unscored. ``k3 v1 k5 v0 · k5 · k3`` -> ``v0`` at
    ``k5``, ``v1`` at ``k3``.

    As ``zoology/data/multiquery_ar.py`` (``multiquery_ar``): keys from 1 … V/2 − 1, values
    from V/2 … V − 1; the gaps g are drawn without replacement from 0 … space − 1, space =
    (n − 2·pairs) // 2, with P ∝ power_a · (g + 1)^(power_a − 1) (Zoology's power law, here
    by Gumbel top-k, the same distribution as numpy's sequential ``choice``); the other
    positions are blank, or random symbols with ``random_non_queries``. One deviation: random
    fill never draws one of the instance's own keys (Zoology's may, unscored), so every
    occurrence of a key after the pairs is a query and the answers are a function of the input.

    Options (``MQARConfig``): ``vocab_size``, ``kv_fraction``, ``power_a``,
    ``random_non_queries`` (``data.task.<key>``).

    Arora, Eyuboglu et al. 2024 (ICLR), "Zoology: Measuring and Improving Recall in
    Efficient Language Models", arXiv 2312.04927.
    """

    Options = MQARConfig
    name = "mqar"
    source = (
        "Arora, Eyuboglu et al. 2024 (ICLR), Zoology: Measuring and Improving Recall in "
        "Efficient Language Models, arXiv 2312.04927"
    )
    tagged = True
    model_kinds = ("decoder", "encoder")
    model_kinds_reason = (
        "scores only its queries (tagged), and an encoder-decoder target cannot feed the "
        "unscored positions back"
    )
    answer_format = "at each query: the value bound to its key (tagged; other positions unscored)"
    scored = "the queries only: each key's value, at the key's position after the pairs"

    def __init__(self, **options) -> None:
        super().__init__(**options)
        size = self.cfg.vocab_size
        self.n_keys = size // 2 - 1  # keys 1 … size/2 − 1
        self.first_value = size // 2
        self.vocab = ["_"] + [f"k{i}" for i in range(1, size // 2)]
        self.vocab += [f"v{i}" for i in range(size - size // 2)]
        self.answer_symbols = list(range(self.first_value, size))
        self.min_length = math.ceil(2 / self.cfg.kv_fraction)  # one pair

    def pairs(self, length: int) -> int:
        """Key-value pairs of an instance of this length."""
        return int(self.cfg.kv_fraction * length / 2)

    def check_length(self, length: int, key: str) -> None:
        if self.pairs(length) > self.n_keys:
            raise ValueError(
                f"{key}: length {length} holds {self.pairs(length)} key-value pairs, more than "
                f"the {self.n_keys} distinct keys of data.task.vocab_size="
                f"{self.cfg.vocab_size}; allowed: a larger data.task.vocab_size or shorter "
                f"lengths"
            )

    def sample_inputs(self, length: int, batch_size: int, generator: torch.Generator) -> Tensor:
        pairs, size = self.pairs(length), self.cfg.vocab_size
        keys = 1 + distinct(self.n_keys, pairs, batch_size, generator)  # (B, pairs)
        values = self.first_value + distinct(size - self.first_value, pairs, batch_size, generator)
        space = (length - 2 * pairs) // 2
        gaps = power_law_gaps(space, pairs, self.cfg.power_a, batch_size, generator)
        if self.cfg.random_non_queries:
            region = fill_avoiding(keys, size, (batch_size, length - 2 * pairs), generator)
        else:
            region = torch.zeros(batch_size, length - 2 * pairs, dtype=torch.long)
        region.scatter_(1, 2 * gaps, keys)  # key j asked at offset 2·gap_j
        context = torch.stack([keys, values], dim=2).flatten(1)  # (B, 2·pairs): k v k v …
        return torch.cat([context, region], dim=1)

    def solve(self, inputs: Tensor) -> Tensor:
        pairs = self.pairs(inputs.shape[1])
        keys, values = inputs[:, 0 : 2 * pairs : 2], inputs[:, 1 : 2 * pairs : 2]  # (B, pairs)
        region = inputs[:, 2 * pairs :]  # (B, Q)
        match = region[:, :, None] == keys[:, None, :]  # (B, Q, pairs)
        asked = values.gather(1, match.long().argmax(-1))  # (B, Q): value of the matched key
        answers = torch.full_like(inputs, -1)
        answers[:, 2 * pairs :] = torch.where(match.any(-1), asked, -1)
        return answers


def distinct(population: int, count: int, batch_size: int, generator) -> Tensor:
    """``count`` distinct integers from 0 … population − 1 per row, in random order -> (B,
    count)."""
    scores = torch.rand(batch_size, population, generator=generator)
    return scores.argsort(dim=1)[:, :count]


def power_law_gaps(space: int, count: int, power_a: float, batch_size: int, generator) -> Tensor:
    """``count`` distinct gaps from 0 … space − 1 per row, drawn one after another without
    replacement with P(g) ∝ (g + 1)^(power_a − 1), in draw order -> (B, count). Gumbel top-k:
    the largest log P(g) + Gumbel noise, in decreasing order, are such a draw."""
    log_p = (power_a - 1) * torch.arange(1, space + 1, dtype=torch.float64).log()  # (space,)
    u = torch.rand(batch_size, space, generator=generator, dtype=torch.float64)
    gumbel = -(-u.clamp(min=1e-300).log()).log()
    return (log_p + gumbel).topk(count, dim=1).indices  # (B, count), sorted by score


def fill_avoiding(keys: Tensor, size: int, shape: tuple[int, int], generator) -> Tensor:
    """Uniform symbols from 0 … size − 1 except each row's ``keys`` (B, pairs) -> shape. The
    u-th allowed symbol is u plus the number of excluded symbols at or below it: with the
    excluded sorted, e_j − j <= u counts them (searchsorted)."""
    excluded = keys.sort(dim=1).values  # (B, pairs)
    shifted = excluded - torch.arange(keys.shape[1])  # (B, pairs), non-decreasing
    u = torch.randint(0, size - keys.shape[1], shape, generator=generator)
    return u + torch.searchsorted(shifted, u, right=True)
