"""A pack's attention on a CPU (``lengen.pack.attention``): SDPA under ``vmap`` runs as one
fused-kernel call on the members folded into the batch axis, and equals per-member SDPA."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F
from torch.func import grad_and_value, vmap

from lengen.build import build
from lengen.pack.attention import packed_attention
from lengen.pack.engine import stack_batches
from lengen.pack.stack import StackedModels
from lengen.preflight import validate
from test_pack import small

M, B, H, T, D = 3, 2, 2, 5, 4  # members, batch, heads, length, head width


def _inputs(mask_kind: str):
    """q, k, v, output weights (M, B, H, T, D) float64 and the mask with its vmap in_dim."""
    generator = torch.Generator().manual_seed(0)
    q, k, v, w = (
        torch.randn(M, B, H, T, D, dtype=torch.float64, generator=generator) for _ in "qkvw"
    )
    if mask_kind == "member":  # one additive mask per member, broadcast over the batch
        return (q, k, v, w), torch.randn(M, 1, H, T, T, dtype=torch.float64, generator=generator), 0
    if mask_kind == "shared":  # one additive (T, T) mask for every member (ALiBi's, unbatched)
        return (q, k, v, w), torch.randn(T, T, dtype=torch.float64, generator=generator), None
    if mask_kind == "bool":  # True: attend (the diagonal always, so no row is empty)
        allowed = (torch.rand(T, T, generator=generator) > 0.4) | torch.eye(T, dtype=torch.bool)
        return (q, k, v, w), allowed, None
    return (q, k, v, w), None, None


@pytest.fixture
def no_fallback():
    """vmap's loop over the members (an op without a batching rule) raises instead: what
    passes ran batched."""
    torch._C._functorch._set_vmap_fallback_enabled(False)
    yield
    torch._C._functorch._set_vmap_fallback_enabled(True)


@pytest.mark.parametrize("mask_kind", ["causal", "member", "shared", "bool"])
def test_packed_attention_equals_per_member_sdpa_in_values_and_gradients(mask_kind, no_fallback):
    (q, k, v, w), mask, mask_dim = _inputs(mask_kind)

    def loss(q, k, v, w, mask):  # one member: (B, H, T, D) each
        if mask is None:
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return (out * w).sum()

    step = grad_and_value(loss, argnums=(0, 1, 2))
    expected = [
        step(q[i], k[i], v[i], w[i], mask if mask_dim is None else mask[i]) for i in range(M)
    ]
    with packed_attention():
        grads, values = vmap(step, in_dims=(0, 0, 0, 0, mask_dim))(q, k, v, w, mask)
    torch.testing.assert_close(values, torch.stack([value for _, value in expected]))
    for n, name in enumerate("qkv"):
        torch.testing.assert_close(
            grads[n], torch.stack([g[n] for g, _ in expected]), msg=f"gradient of {name}"
        )


@pytest.fixture
def fallback_warnings():
    """vmap's "no batching rule, looping over the batch" warnings, on while the test runs."""
    torch._C._functorch._set_vmap_fallback_warning_enabled(True)
    yield
    torch._C._functorch._set_vmap_fallback_warning_enabled(False)


def test_the_default_experiments_pack_step_has_no_vmap_fallback(fallback_warnings, single_thread):
    cfgs = [small("pe=rope", f"seed={seed}") for seed in (0, 1)]
    built = [build(cfg) for cfg in cfgs]
    device = torch.device("cpu")
    stacked = StackedModels(
        [model for _, model, _ in built], validate(cfgs[0]).optim, [1e-3] * 2, 3, device
    )
    batches = [data.train_batch(0) for data, _, _ in built]
    inputs, targets, tokens = stack_batches(batches, causal=True, device=device)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        stacked.gradients(inputs, targets, tokens)
    fallbacks = [str(w.message) for w in caught if "batching rule" in str(w.message)]
    assert fallbacks == []
