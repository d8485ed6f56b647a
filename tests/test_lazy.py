"""lengen.lazy: torch imported on first use by the data layer, without a stand-in in
``sys.modules`` (the standard library's LazyLoader put one there, and Python 3.11.9 / 3.12.3
broke it: ``'_LazyModule' object has no attribute 'cuda'`` on the first GPU machine)."""

from __future__ import annotations

import subprocess
import sys

import pytest

PROBE = """
import sys
from lengen.lazy import torch, is_loaded
print(is_loaded("torch"), "torch" in sys.modules)
torch.zeros(1)
import torch as real
print(is_loaded("torch"), torch.cuda is real.cuda, type(sys.modules["torch"]).__name__)
"""


@pytest.fixture(scope="module")
def probe() -> list[str]:
    """The probe's two lines, from one fresh interpreter (each torch import costs seconds)."""
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                          timeout=120, check=True)  # fmt: skip
    return done.stdout.split("\n")


def test_taking_torch_from_lazy_imports_nothing_and_puts_no_stand_in_in_sys_modules(probe):
    assert probe[0] == "False False"


def test_the_first_attribute_read_imports_the_real_module_that_import_torch_returns(probe):
    assert probe[1] == "True True module"
