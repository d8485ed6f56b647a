"""pe=nope (``lengen.pe.nope``): no positional information, every hook the identity."""

from __future__ import annotations

import pytest
import torch

from lengen.pe import NoPE

pytestmark = pytest.mark.usefixtures("single_thread")


def test_nope_hooks_are_identities():
    pe = NoPE(d_model=32, n_heads=4)
    generator = torch.Generator().manual_seed(12)
    x = torch.randn(2, 6, 32, generator=generator)
    q = torch.randn(2, 4, 6, 8, generator=generator)
    k = torch.randn(2, 4, 9, 8, generator=generator)
    assert torch.equal(pe.embed(x, torch.arange(6) + 100), x)
    rotated_q, rotated_k = pe.rotate(q, k, torch.arange(3, 9), torch.arange(9))
    assert torch.equal(rotated_q, q)
    assert torch.equal(rotated_k, k)
