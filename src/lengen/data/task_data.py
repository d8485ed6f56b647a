"""Batches for tasks, formatted for the model kind, as pure functions of (seed, step).

How inputs and answers become tokens (and, for grid tasks, positions) is
``lengen.data.layout``'s work, called through the task's ``format``.

All instances of a batch share one length, drawn per step by the curriculum
(``lengen.data.curriculum``), so no padding or masks are needed.

Evaluation instances must never appear in training. Every input string is hashed; the strings
whose hash falls in a reserved residue class (1 in ``HELD_OUT_MODULUS``) are held out: training
redraws them and evaluation draws only them. Evaluation therefore uses a fixed seed, is disjoint
from training at every length, and is identical for every PE, model and training seed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, ClassVar

from lengen.data.curriculum import CURRICULA, curriculum_length
from lengen.data.layout import (
    BOS,
    MODEL_KINDS,
    N_SPECIAL,
    PAD,
    SEP,
    SLOT,
    format_batch,
    max_position,
    sequence_length,
)
from lengen.data.source import IGNORE, mix_seed
from lengen.data.tasks import Task
from lengen.lazy import torch
from lengen.schema import Config, integer, one_of, option

if TYPE_CHECKING:
    from torch import Tensor

__all__ = [
    "BOS",
    "IGNORE",
    "N_SPECIAL",
    "PAD",
    "SEP",
    "SLOT",
    "TaskData",
    "TaskDataConfig",
    "format_batch",
    "held_out",
    "max_position",
    "mix_seed",
    "sequence_length",
]

HELD_OUT_MODULUS = 16
_MAX_DRAW_ROUNDS = 64
#: rounds in a row without a new held-out string after which a length's space counts as drawn
STALE_ROUNDS = 4


def held_out(inputs: Tensor) -> Tensor:
    """Which rows of inputs (B, n) are reserved for evaluation -> bool (B,)."""
    length = inputs.shape[1]
    generator = torch.Generator().manual_seed(mix_seed(0x5EED, length))
    weights = torch.randint(1, 2**31 - 1, (length,), generator=generator)  # (n,)
    h = ((inputs.long() + 1) * weights).sum(-1)  # (B,), < 2^63 for any realistic n
    h = h * 0x9E3779B1  # int64 wrap-around mixes the high bits into the low ones
    return ((h >> 17) % HELD_OUT_MODULUS) == 0


def first_unique(rows: Tensor) -> Tensor:
    """The distinct rows of rows (N, n), each at its first occurrence, in order -> (U, n)."""
    if len(rows) < 2:
        return rows
    _, inverse = torch.unique(rows, dim=0, return_inverse=True)  # (N,)
    index = torch.arange(len(rows))
    first = torch.full((int(inverse.max()) + 1,), len(rows)).scatter_reduce(
        0, inverse, index, reduce="amin"
    )  # (U,): first row of each distinct value
    return rows[first.sort().values]


def _curriculum_tau(key: str, value):
    """The rate of ``reverse_exponential``: a number in (0, 1], kept as given (the data card
    records it)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise ValueError(f"{key} must be a number in (0, 1], got {value!r}")
    return value


@dataclasses.dataclass(frozen=True)
class TaskDataConfig(Config):
    """The options of a task's data node (``configs/data/<task>.yaml`` besides ``task:``),
    each with its one default and rule; ``check`` makes the checks that read the task or the
    run. A task's yaml may show other training lengths than these defaults: ``min_len``
    defaults to the task's shortest instance, and the task's config says where it differs
    further (``TaskConfig.data_defaults``; ``defaults_for``)."""

    prefix: ClassVar[str] = "data"

    #: the longest training length (the contract's ``data.len``)
    len: int = option(16, integer())
    #: the shortest training length: at least the task's shortest instance
    min_len: int = option(1, integer())
    #: how each step's length is drawn from min_len … len (``lengen.data.curriculum``)
    curriculum: str = option("uniform", one_of(*CURRICULA))
    #: the rate of ``reverse_exponential``: P(length) ∝ tau^(length − min_len)
    curriculum_tau: float = option(0.9, _curriculum_tau)
    #: training instances per step (the global batch)
    batch_size: int = option(64, integer())
    #: in-distribution validation instances, at length len
    val_samples: int = option(256, integer())

    @classmethod
    def defaults_for(cls, task: Task) -> dict:
        """Every option's default for this task: what its yaml's data node shows."""
        return {
            **cls.defaults(),
            "min_len": task.min_length,
            **task.Options.data_defaults,
        }

    @classmethod
    def for_task(cls, task: Task, keys: Mapping) -> TaskDataConfig:
        """The config from a data node's keys, the missing ones from ``defaults_for(task)``."""
        return cls.from_keys({**cls.defaults_for(task), **keys}, owner="TaskData")

    def check(self, task: Task, max_steps: int | None) -> None:
        """The checks that read the task (its shortest instance, its length step) or the run
        (``trainer.max_steps``, the horizon of ``regular_increase``)."""
        if self.min_len > self.len:
            raise ValueError(f"data.min_len must be <= data.len, got {self.min_len} > {self.len}")
        if self.min_len < task.min_length:
            raise ValueError(
                f"data.min_len must be >= {task.min_length} for task {task.name} (its shortest "
                f"instance), got {self.min_len}"
            )
        task.check_length(self.len, "data.len")
        task.check_length(self.min_len, "data.min_len")
        if self.curriculum == "regular_increase" and (max_steps is None or max_steps < 1):
            raise ValueError(
                "data.curriculum=regular_increase needs the run's trainer.max_steps (TaskData's "
                f"max_steps), got {max_steps!r}"
            )


class TaskData:
    """Training, validation and evaluation batches of one task for one model kind.

    Built from the run's keywords and the data node's options (``TaskDataConfig``: ``len``,
    ``min_len``, ``curriculum``, ``curriculum_tau``, ``batch_size``, ``val_samples``), checked
    into ``self.cfg``; options left out take the task's defaults (``defaults_for``).

    Args:
        task: the generator.
        model_kind: ``decoder``, ``encoder`` or ``encoder_decoder`` (given by the run).
        seed: the training seed.
        eval_seed: the fixed seed of validation and evaluation instances.
        max_steps: the run's ``trainer.max_steps`` (the horizon of ``regular_increase``).
        options: the data node's options, as keywords.
    """

    Options = TaskDataConfig

    cheap_to_build = True
    evaluation_kind = "tasks"  # lengen.evaluation.tasks scores it

    @classmethod
    def validate_config(cls, cfg) -> None:
        """Tasks check their keys when built (``__init__``, ``lengen.data.tasks``)."""

    @classmethod
    def planned_positions(cls, cfg, lengths: list[int]) -> None:
        """Cheap to build: ``lengen.build`` builds it to know its positions."""

    def __init__(
        self,
        *,
        task: Task,
        model_kind: str = "decoder",
        seed: int = 0,
        eval_seed: int = 1234,
        max_steps: int | None = None,
        **options,
    ) -> None:
        if model_kind not in MODEL_KINDS:
            raise ValueError(
                f"model kind must be one of {', '.join(MODEL_KINDS)}; got {model_kind!r}"
            )
        if task.model_kinds is not None and model_kind not in task.model_kinds:
            allowed = ", ".join(f"model={kind}" for kind in task.model_kinds)
            reason = task.model_kinds_reason or (
                f"has positions on {task.axes} axes (a grid task, answers read bidirectionally)"
            )
            raise ValueError(f"model={model_kind}: task {task.name} {reason}; allowed: {allowed}")
        #: the options, checked (``TaskDataConfig``)
        self.cfg = self.Options.for_task(task, options)
        self.cfg.check(task, max_steps)
        self.task = task
        self.train_len = self.cfg.len
        self.min_len = self.cfg.min_len
        self.batch_size = self.cfg.batch_size
        self.val_samples = self.cfg.val_samples
        self.model_kind = model_kind
        self.seed = seed
        self.eval_seed = eval_seed
        self.curriculum = self.cfg.curriculum
        self.curriculum_tau = self.cfg.curriculum_tau
        self.max_steps = max_steps

    def check_eval_lengths(self, lengths: list[int]) -> None:
        for length in lengths:
            self.task.check_length(length, "eval.lengths")
        short = [length for length in lengths if length < self.task.min_length]
        if short:
            raise ValueError(
                f"eval.lengths: task {self.task.name} has no instance of length {short[0]}; "
                f"allowed: lengths >= {self.task.min_length}"
            )

    @property
    def vocab_size(self) -> int:
        return N_SPECIAL + self.task.n_symbols

    @property
    def axes(self) -> int:
        """Axes of the positions: 1 for sequences, 2 for grids, 3 for volumes."""
        return self.task.axes

    def format(self, inputs: Tensor, answers: Tensor) -> dict:
        """inputs (B, n), answers (B, m) as symbols -> the model's batch for this model kind."""
        return self.task.format(inputs, answers, self.model_kind)

    def max_position(self, length: int) -> int:
        """Positions a model of this kind sees for instances of this length; for grid tasks
        the extent along one axis (what encodings are sized from)."""
        return self.task.extent(length, self.model_kind)[0]

    def sequence_length(self, length: int) -> int:
        """Tokens per instance of this length (batch sizes, memory)."""
        return self.task.extent(length, self.model_kind)[1]

    def grid_shape(self, length: int) -> list[int] | None:
        """The token grid of an instance of this length; None for sequence tasks."""
        shape = self.task.grid_shape(length)
        return None if shape is None else list(shape)

    # -- training ---------------------------------------------------------------------------
    def train_length(self, step: int) -> int:
        generator = torch.Generator().manual_seed(mix_seed(self.seed, step, 0))
        step_size = self.task.length_step  # shapes: whole patches; 1 elsewhere (unchanged draws)
        drawn = curriculum_length(
            self.curriculum,
            generator,
            step,
            self.min_len // step_size,
            self.train_len // step_size,
            tau=self.curriculum_tau,
            max_steps=self.max_steps,
        )
        return drawn * step_size

    def train_inputs(self, length: int, samples: int, generator: torch.Generator) -> Tensor:
        """``samples`` training inputs of this length, none of them held out -> (samples, n)."""
        inputs = self.task.sample_inputs(length, samples, generator)
        for _ in range(_MAX_DRAW_ROUNDS):  # redraw the rows reserved for evaluation
            reserved = held_out(inputs)
            if not reserved.any():
                return inputs
            redraw = self.task.sample_inputs(length, int(reserved.sum()), generator)
            inputs[reserved] = redraw
        raise ValueError(
            f"data.min_len={self.min_len}: no training instance of length {length} found for "
            f"task {self.task.name} (its few strings of this length are held out for "
            f"evaluation); allowed: a larger data.min_len"
        )

    def train_batch(self, step: int) -> dict:
        """The training batch of this step: a pure function of (seed, step)."""
        length = self.train_length(step)
        generator = torch.Generator().manual_seed(mix_seed(self.seed, step, 1))
        inputs = self.train_inputs(length, self.batch_size, generator)
        return self.format(inputs, self.task.solve(inputs))

    def check_sampling(self, count: int = 8) -> None:
        """Refuse now, not mid-run, a shortest training length without training strings (tiny
        alphabets: every string of a length may be held out). Draws instances: imports torch."""
        generator = torch.Generator().manual_seed(mix_seed(self.seed, -1))
        step = self.task.length_step
        last = min(self.train_len, self.min_len + step * (count - 1))
        for length in range(self.min_len, last + 1, step):
            self.train_inputs(length, 4, generator)

    def train_batches(self, start_step: int = 0) -> Iterator[dict]:
        step = start_step
        while True:
            yield self.train_batch(step)
            step += 1

    # -- held-out instances -----------------------------------------------------------------
    def held_out_inputs(
        self, length: int, samples: int, seed: int, key: str = "eval.lengths"
    ) -> Tensor:
        """Up to ``samples`` distinct held-out inputs of exactly this length -> (n, width),
        width = ``task.input_length(length)`` (the cells of a grid, flattened).

        Fewer than ``samples`` only where the held-out strings of this length are fewer: draws
        stop once ``STALE_ROUNDS`` rounds in a row find no new one, so a small space is
        enumerated (by sampling). ``key`` names the setting that asked for this length in the
        error raised when none exist."""
        if length < self.task.min_length:
            raise ValueError(
                f"{key}: task {self.task.name} has no instance of length {length}; allowed: "
                f"lengths >= {self.task.min_length}"
            )
        self.task.check_length(length, key)
        generator = torch.Generator().manual_seed(mix_seed(seed, length))
        width = self.task.input_length(length)
        kept = torch.empty(0, width, dtype=torch.long)
        stale = 0
        # candidates per round: enough for all samples at once, capped at ~4M symbols of memory
        draw = max(4 * HELD_OUT_MODULUS, min(4 * HELD_OUT_MODULUS * samples, (1 << 22) // width))
        rounds = _MAX_DRAW_ROUNDS + 4 * (HELD_OUT_MODULUS * samples // draw)
        for _ in range(rounds):
            candidates = self.task.sample_inputs(length, draw, generator)
            found = first_unique(torch.cat([kept, candidates[held_out(candidates)]]))
            stale = stale + 1 if len(found) == len(kept) else 0
            kept = found
            if len(kept) >= samples:
                return kept[:samples]
            if kept.numel() and stale >= STALE_ROUNDS:
                return kept  # every held-out string of this length, as far as draws can tell
        if kept.numel():
            return kept
        raise ValueError(
            f"{key}: cannot draw {samples} held-out instances of length {length} for task "
            f"{self.task.name} (too few distinct strings are held out at this length); allowed: "
            f"a longer length or a larger alphabet"
        )

    def eval_batches(
        self,
        length: int,
        samples: int,
        batch_size: int,
        seed: int | None = None,
        key: str = "eval.lengths",
    ):
        """Formatted evaluation batches at one exact length, from the fixed evaluation seed."""
        seed = self.eval_seed if seed is None else seed
        yield from self.batches_of(self.held_out_inputs(length, samples, seed, key), batch_size)

    def batches_of(self, inputs: Tensor, batch_size: int) -> Iterator[dict]:
        """Formatted batches of these inputs (N, n), ``batch_size`` instances at a time."""
        for chunk in inputs.split(batch_size):
            yield self.format(chunk, self.task.solve(chunk))

    def val_batches(self) -> list[dict]:
        """In-distribution validation at the training length (a seed apart from evaluation)."""
        return list(
            self.eval_batches(
                self.train_len, self.val_samples, self.batch_size, self.eval_seed + 1, "data.len"
            )
        )

    @property
    def locates_answer(self) -> bool:
        """Whether the task says where each instance hides its answer (``task.depth``)."""
        return type(self.task).depth is not Task.depth

    def card(self, eval_lengths: list[int]) -> dict:
        """The run's data card (``data_card.json``): what was trained and evaluated on."""
        task = self.task
        lengths = sorted({self.min_len, self.train_len, *eval_lengths})
        step = task.length_step
        example_length = max(task.min_length, min(self.train_len, 8) // step * step)
        generator = torch.Generator().manual_seed(mix_seed(self.eval_seed, -2))
        example = task.sample_inputs(example_length, 1, generator)
        answer = task.solve(example)
        return {
            "task": task.name,
            "description": (type(task).__doc__ or "").strip().split("\n\n")[0],
            "source": task.source,
            "task_parameters": task.describe(),
            "model_kind": self.model_kind,
            "length": task.length_unit,
            "axes": task.axes,
            "train_lengths": {"min": self.min_len, "max": self.train_len},
            "curriculum": {
                "name": self.curriculum,
                "tau": self.curriculum_tau if self.curriculum == "reverse_exponential" else None,
                "max_steps": self.max_steps,
            },
            "eval_lengths": sorted(set(eval_lengths)),
            "answer_length": {str(n): task.answer_length(n) for n in lengths},
            "max_position": {str(n): self.max_position(n) for n in lengths},
            **(
                {
                    "grid_shape": {str(n): self.grid_shape(n) for n in lengths},
                    "sequence_length": {str(n): self.sequence_length(n) for n in lengths},
                }
                if task.axes > 1
                else {}
            ),
            "vocab_size": self.vocab_size,
            "special_tokens": {"PAD": PAD, "BOS": BOS, "SEP": SEP, "SLOT": SLOT},
            "symbols": {str(N_SPECIAL + i): name for i, name in enumerate(task.vocab)},
            "answer_symbols": [task.vocab[i] for i in task.answer_symbols],
            "answer_format": task.answer_format,
            "scored": task.scored,
            "tagged": task.tagged,
            "chance_accuracy": task.chance_accuracy,
            "example": {
                "input": [task.vocab[i] for i in example[0].tolist()],
                # tagged tasks: None where the position is not scored (−1)
                "answer": [task.vocab[i] if i >= 0 else None for i in answer[0].tolist()],
            },
            "seed": self.seed,
            "eval_seed": self.eval_seed,
            "validation_seed": self.eval_seed + 1,
            "held_out_fraction": 1 / HELD_OUT_MODULUS,
            "batch_size": self.batch_size,
            "val_samples": self.val_samples,
        }

    def training_summary(self) -> str:
        unit = "lengths" if self.axes == 1 else "sides"  # grids: data.len is the side
        return f"trained on {unit} {self.min_len}–{self.train_len}"

    def describe(self) -> dict:
        return {
            "task": self.task.name,
            "train_lengths": [self.min_len, self.train_len],
            "curriculum": self.curriculum,
            "vocab_size": self.vocab_size,
            "held_out_fraction": 1 / HELD_OUT_MODULUS,
            **({"axes": self.task.axes} if self.task.axes > 1 else {}),
            **self.task.describe(),
        }
