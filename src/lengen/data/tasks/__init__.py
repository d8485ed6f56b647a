"""Synthetic algorithmic tasks as pure, vectorised generators (docs/tasks.md).

One module per family; every task is importable from here, as the yamls' ``_target_`` name it
(``lengen.data.tasks.<Class>``). Each task's typed config (its options, their defaults and
rules: ``<Task>.Options``, a ``TaskConfig``) sits beside it in its module; none of this
imports torch.
"""

from lengen.data.tasks.arithmetic import (
    Addition,
    AdditionReversed,
    BinaryAddition,
    BinaryMultiplication,
    ComputeSqrt,
    Counting,
    ModularArithmetic,
)
from lengen.data.tasks.base import AlphabetConfig, AlphabetTask, Task, TaskConfig
from lengen.data.tasks.formal import (
    BucketSort,
    CycleNavigation,
    EvenPairs,
    ModularArithmeticBrackets,
    Parity,
    StackManipulation,
)
from lengen.data.tasks.grids import GridLocate, GridTranspose, Shapes, VolumeLocate
from lengen.data.tasks.indexing import IndirectIndexing
from lengen.data.tasks.recall import MQAR
from lengen.data.tasks.retrieval import AssociativeRecall, Passkey
from lengen.data.tasks.ruler import MultiKeyNeedle, MultiValueNeedle, VariableTracking
from lengen.data.tasks.state import A5Composition, FlipFlop, PermutationComposition
from lengen.data.tasks.strings import Copy, Duplicate, MissingDuplicate, OddsFirst, Reverse, Sort

__all__ = [
    "A5Composition",
    "Addition",
    "AdditionReversed",
    "AlphabetConfig",
    "AlphabetTask",
    "AssociativeRecall",
    "BinaryAddition",
    "BinaryMultiplication",
    "BucketSort",
    "ComputeSqrt",
    "Copy",
    "Counting",
    "CycleNavigation",
    "Duplicate",
    "EvenPairs",
    "FlipFlop",
    "GridLocate",
    "GridTranspose",
    "MQAR",
    "IndirectIndexing",
    "MissingDuplicate",
    "ModularArithmetic",
    "ModularArithmeticBrackets",
    "MultiKeyNeedle",
    "MultiValueNeedle",
    "OddsFirst",
    "Parity",
    "Passkey",
    "PermutationComposition",
    "Reverse",
    "Shapes",
    "Sort",
    "StackManipulation",
    "Task",
    "TaskConfig",
    "VariableTracking",
    "VolumeLocate",
]
