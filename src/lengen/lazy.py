"""torch, imported on first use, for the layers a refused command line passes through.

``import torch`` takes 2–3 s on a small machine, longer than a refusal may (docs/benchmarks.md,
"Refused commands"). The data layer (tasks, their formats, curricula) is plain Python around
torch calls: its modules take ``torch`` from here, so building a data source and asking its
checks and sizes (``lengen.preflight.check_components``) imports no torch; the first tensor
operation loads it. Modules that subclass ``torch.nn.Module`` need torch when they are imported
and import it as usual.

The stand-in is a module object of its own, never put in ``sys.modules``: every ``import torch``
elsewhere gets the real module, and the first attribute read here imports it. Not the standard
library's ``importlib.util.LazyLoader``, which puts its stand-in in ``sys.modules``: Python 3.11.9
and 3.12.3 (Ubuntu 24.04's) broke it for packages that import their own submodules while
loading (``'_LazyModule' object has no attribute 'cuda'``, seen on the first GPU machine;
CPython's fix landed in later releases).
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType


class _Deferred(ModuleType):
    """Module ``name`` once one of its attributes is read (``__getattr__`` runs only for names
    the stand-in itself lacks, i.e. all of the module's)."""

    def __getattr__(self, attribute: str):
        module = self.__dict__.get("_module")
        if module is None:
            module = self.__dict__["_module"] = importlib.import_module(self.__name__)
        return getattr(module, attribute)


def lazy_module(name: str) -> ModuleType:
    """The module ``name``: the loaded one if it is imported already, else a stand-in that
    imports it when one of its attributes is first read."""
    return sys.modules.get(name) or _Deferred(name)


def is_loaded(name: str) -> bool:
    """Whether module ``name`` has really been imported."""
    return name in sys.modules


torch = lazy_module("torch")
