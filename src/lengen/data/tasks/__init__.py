"""Synthetic algorithmic tasks as pure, vectorised generators (docs/tasks.md).

One module per family; every task is importable from here, as the yamls' ``_target_`` name it
(``lengen.data.tasks.<Class>``).
"""

from lengen.data.tasks.arithmetic import (
    Addition,
    BinaryAddition,
    BinaryMultiplication,
    ComputeSqrt,
    Counting,
    ModularArithmetic,
)
from lengen.data.tasks.base import AlphabetTask, Task
from lengen.data.tasks.formal import (
    BucketSort,
    CycleNavigation,
    EvenPairs,
    ModularArithmeticBrackets,
    Parity,
    StackManipulation,
)
from lengen.data.tasks.grids import GridLocate, GridTranspose, Shapes, VolumeLocate
from lengen.data.tasks.retrieval import AssociativeRecall, Passkey
from lengen.data.tasks.strings import Copy, Duplicate, MissingDuplicate, OddsFirst, Reverse, Sort

__all__ = [
    "Addition",
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
    "GridLocate",
    "GridTranspose",
    "MissingDuplicate",
    "ModularArithmetic",
    "ModularArithmeticBrackets",
    "OddsFirst",
    "Parity",
    "Passkey",
    "Reverse",
    "Shapes",
    "Sort",
    "StackManipulation",
    "Task",
    "VolumeLocate",
]
