"""What every data source gives the run: batches, and the facts evaluation and results need.

``data/`` only makes batches; scoring them is ``lengen.evaluation``'s work, chosen by the
source's ``evaluation_kind``. A data source is any class (the ``_target_`` of a
``configs/data`` yaml) with this interface; tasks (``TaskData``) and text (``TextData``) are the
two today.

A batch is ``{"inputs": {name: LongTensor (B, T)}, "targets": LongTensor (B, T)}``: the model is
called as ``model(**batch["inputs"])``; targets hold ``IGNORE`` where nothing is scored. Sources
with positions on several axes (``axes > 1``: grid tasks) also give ``inputs["positions"]``, a
LongTensor (T, A) of each token's grid coordinate (a row of −1s: no grid position), shared by
the batch's rows: not tokens, and not split by rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol, runtime_checkable

#: cross-entropy ``ignore_index``: target positions that are not scored (the one definition)
IGNORE = -100


def mix_seed(*parts: int) -> int:
    """Deterministic 63-bit seed from integers (e.g. seed, step)."""
    state = 0x243F6A8885A308D3
    for part in parts:
        state = (state ^ (int(part) & 0xFFFFFFFFFFFFFFFF)) * 0x9E3779B97F4A7C15
        state = (state ^ (state >> 29)) & 0xFFFFFFFFFFFFFFFF
    return state & 0x7FFFFFFFFFFFFFFF


@runtime_checkable
class DataSource(Protocol):
    """Training, validation and evaluation batches of one dataset for one model kind."""

    train_len: int  #: ``data.len``: the longest training length
    min_len: int  #: the shortest training length
    batch_size: int  #: training instances per step (the global batch)
    vocab_size: int
    model_kind: str  #: ``decoder``, ``encoder`` or ``encoder_decoder``
    axes: int  #: axes of the positions: 1 sequences, 2 grids, 3 volumes (length = the side)
    #: whether building it takes well under a second (the entry point builds it to check a
    #: command line before anything runs); text data reads and tokenises a corpus: False
    cheap_to_build: bool
    #: how ``lengen.evaluation`` scores it: ``"tasks"`` (accuracy and exact match on answers)
    #: or ``"text"`` (perplexity on windows). A name, not a scorer: data stays below evaluation,
    #: and a new source scored like an existing one only names that kind
    evaluation_kind: str

    @classmethod
    def validate_config(cls, cfg) -> None:
        """Check this source's own keys in a whole run config; raise ConfigError naming one."""

    @classmethod
    def planned_positions(cls, cfg, lengths: list[int]) -> dict | None:
        """For sources that are not cheap to build: ``train_positions`` and ``max_positions``
        (``max_position`` of ``data.len`` and of the longest of ``lengths``) from the run
        config alone, so the encoding's checks run before the source is built. None: build
        the source to know them."""

    def check_eval_lengths(self, lengths: list[int]) -> None:
        """Refuse (ValueError naming eval.lengths) lengths this source cannot evaluate: found
        when the run is built, not after training."""

    def check_sampling(self) -> None:
        """Refuse (ValueError naming the key) settings under which training batches cannot be
        drawn, found by drawing a few; the checks above it run without torch, this may not."""

    def max_position(self, length: int) -> int:
        """Positions a model sees for an instance (task) or window (text) of this length; for
        grids the extent along one axis. Encodings are sized from it."""

    def sequence_length(self, length: int) -> int:
        """Tokens per instance or window of this length (batch sizes, memory); equals
        ``max_position`` for 1-D sources."""

    def train_batch(self, step: int) -> dict:
        """The training batch of a step: a pure function of (seed, step)."""

    def train_batches(self, start_step: int = 0) -> Iterator[dict]:
        """``train_batch(start_step)``, ``train_batch(start_step + 1)``, …"""

    def val_batches(self) -> list[dict]:
        """In-distribution validation batches (at ``train_len``)."""

    def describe(self) -> dict:
        """What results.json records about the data."""

    def training_summary(self) -> str:
        """One line for printed headers: what was trained on and what is evaluated."""

    def card(self, eval_lengths: list[int]) -> dict | None:
        """The run's ``data_card.json`` (None: this source writes none)."""
