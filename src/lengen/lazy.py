"""torch, imported on first use, for the layers a refused command line passes through.

``import torch`` takes 2–3 s on a small machine, longer than a refusal may (docs/benchmarks.md,
"Refused commands"). The data layer (tasks, their formats, curricula) is plain Python around
torch calls: its modules take ``torch`` from here, so building a data source and asking its
checks and sizes (``lengen.preflight.check_components``) imports no torch; the first tensor
operation loads it. The standard library's recipe (``importlib.util.LazyLoader``); once loaded, ``torch`` is the
ordinary module, the same object every ``import torch`` returns. Modules that subclass
``torch.nn.Module`` need torch when they are imported and import it as usual.
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType


def lazy_module(name: str) -> ModuleType:
    """The module ``name``: the loaded one if it is imported already, else a stand-in in
    ``sys.modules`` that imports it when one of its attributes is first read."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    return module


def is_loaded(name: str) -> bool:
    """Whether module ``name`` has really been imported (not only stood in for)."""
    module = sys.modules.get(name)  # type(): reading an attribute would load it
    return module is not None and type(module).__name__ != "_LazyModule"


torch = lazy_module("torch")
